// Package httpapi serves the Waypost domain operations over authenticated HTTP: the data plane under /v0
// and the control plane under /admin/v0 (SUPPLEMENT §11.1, §11.3), with the RFC §5.2 result envelope.
// The same handler runs in `waypost serve` and behind API Gateway in Lambda.
package httpapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/waypost/waypost/api/adminauth"
	"github.com/waypost/waypost/api/boundary"
	"github.com/waypost/waypost/api/openapi"
	"github.com/waypost/waypost/api/ops"
	"github.com/waypost/waypost/api/transport"
	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/internal/echo"
	"github.com/waypost/waypost/internal/httpx"
	"github.com/waypost/waypost/internal/metrics"
	"github.com/waypost/waypost/internal/shedlog"
	"github.com/waypost/waypost/schemas"
)

// Options configure the handler.
type Options struct {
	// AdminSecret authenticates the control plane (Bearer). Empty disables /admin/v0. New refuses a
	// secret weaker than 32 random bytes (adminauth.Check).
	AdminSecret string
	// Schemas validates request bodies; nil means schemas.New().
	Schemas *schemas.Registry
	// Ops are the operations compiled against Schemas (shared with the MCP endpoint); nil compiles them.
	Ops *ops.Set
	// Logger receives one structured line per request; never tokens or bodies.
	Logger *slog.Logger
	// IDs makes tracking request IDs for reads.
	IDs port.IDSource
	// BodyTimeout bounds reading a request body: the whole of a JSON body, and every window of an upload
	// body (see MinUploadRate); 0 means DefaultBodyTimeout. A body not read in time is answered with
	// INVALID_REQUEST and its connection closed.
	BodyTimeout time.Duration
	// MinUploadRate is the least rate (bytes/s over every BodyTimeout window) of an upload body; 0 means
	// DefaultMinUploadRate.
	MinUploadRate int64
	// MaxInflight bounds the requests in progress, feed.wait long polls excepted (they are bounded per
	// space by the live feed); the excess is answered at once with 429 RATE_LIMITED and Retry-After.
	// 0 means no bound (behind API Gateway, where Lambda's concurrency bounds it).
	MaxInflight int
	// Metrics records every request's latency by operation (its route) and outcome; nil records nothing.
	Metrics metrics.Recorder
	// Challenge returns the WWW-Authenticate value of a 401; nil means Bearer realm="waypost".
	Challenge func(r *http.Request) string
	// OpenAPI changes the document served at GET /v0/openapi.json (openapi.Options: an OAuth scheme).
	OpenAPI openapi.Options
}

// API is the HTTP transport over a domain.Service.
type API struct {
	svc           *domain.Service
	bodyTimeout   time.Duration
	minUploadRate int64
	maxInflight   int64
	inflight      atomic.Int64
	shed          *shedlog.Reporter
	admin         *adminauth.Verifier // nil: the control plane is disabled
	ops           *ops.Set
	answer        boundary.Answerer
	log           *slog.Logger
	mux           *http.ServeMux
	metrics       metrics.Recorder
	challenge     func(r *http.Request) string
	opNames       map[string]string // route pattern → operation name
	doc           *openapi.Document // the document of GET /v0/openapi.json, generated on first use
	wire          sync.Pool         // *[]byte: answer buffers of writeWire
}

// New returns the HTTP API handler.
func New(svc *domain.Service, opts Options) (*API, error) {
	reg := opts.Schemas
	if reg == nil {
		var err error
		if reg, err = schemas.New(); err != nil {
			return nil, fmt.Errorf("httpapi: loading schemas: %w", err)
		}
	}
	if opts.IDs == nil {
		return nil, fmt.Errorf("httpapi: an ID source is required")
	}
	set := opts.Ops
	if set == nil {
		var err error
		if set, err = ops.NewSet(reg, ops.List()); err != nil {
			return nil, fmt.Errorf("httpapi: %w", err)
		}
	}
	a := &API{svc: svc, ops: set, log: opts.Logger, mux: http.NewServeMux(),
		bodyTimeout: opts.BodyTimeout, minUploadRate: opts.MinUploadRate, metrics: opts.Metrics, challenge: opts.Challenge,
		doc: openapi.NewDocument(set, opts.OpenAPI)}
	if a.challenge == nil {
		a.challenge = func(*http.Request) string { return `Bearer realm="waypost"` }
	}
	if a.metrics == nil {
		a.metrics = metrics.Nop{}
	}
	if a.bodyTimeout <= 0 {
		a.bodyTimeout = DefaultBodyTimeout
	}
	if a.bodyTimeout < time.Second {
		return nil, fmt.Errorf("httpapi: the body timeout must be at least 1s, not %s", a.bodyTimeout)
	}
	if a.minUploadRate <= 0 {
		a.minUploadRate = DefaultMinUploadRate
	}
	if opts.MaxInflight < 0 {
		return nil, fmt.Errorf("httpapi: negative MaxInflight %d", opts.MaxInflight)
	}
	a.maxInflight = int64(opts.MaxInflight)
	if opts.AdminSecret != "" {
		v, err := adminauth.NewVerifier(opts.AdminSecret)
		if err != nil {
			return nil, fmt.Errorf("httpapi: %w", err)
		}
		a.admin = v
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	a.shed = shedlog.New(a.log, "max_inflight", a.maxInflight)
	a.answer = boundary.Answerer{Log: a.log, IDs: opts.IDs}
	if err := a.routes(); err != nil {
		return nil, err
	}
	a.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		a.fail(w, r, a.readID(), domain.Errorf(domain.CodeNotFound, "no such route: %s %s", echo.Clip(r.Method), echo.Clip(r.URL.Path)))
	})
	return a, nil
}

// ServeHTTP implements http.Handler. A request body is read under a deadline (Options.BodyTimeout); an
// answer given before the body was read to its end (an authentication failure, a refused size, a timeout)
// closes the connection after at most a short, bounded drain of what the client still sends (bodyGuard.finish).
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec := newStatusRecorder(w)
	if r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0 {
		rec.body = newBodyGuard(r.Body, http.NewResponseController(w), a.bodyTimeout)
		r.Body = rec.body
		defer rec.body.finish(w)
	}
	w.Header().Set("Cache-Control", "no-store")
	if a.maxInflight > 0 && !isLongPoll(r) {
		n := a.inflight.Add(1)
		defer a.inflight.Add(-1)
		if n > a.maxInflight {
			a.shed.Shed(r.Context(), n-1)
			a.fail(rec, r, a.readID(), domain.Errorf(domain.CodeRateLimited,
				"the server has %d requests in progress, its limit; retry after Retry-After", a.maxInflight).
				WithDetails("reason", "server_busy", "limit", "max_inflight", "retry_after_ms", 1000))
			a.logRequest(r, rec, start)
			return
		}
	}
	a.mux.ServeHTTP(rec, r)
	a.logRequest(r, rec, start)
	outcome := metrics.OutcomeOK
	if rec.code != "" {
		outcome = rec.code
	}
	// An operation's route is named by the operation (message.send); other routes by their pattern
	// (/mcp, whose tool calls mcpapi records by operation; "/" is the catch-all of unknown routes).
	name := a.opNames[r.Pattern]
	if name == "" {
		name = r.Pattern
	}
	a.metrics.Request(name, outcome, time.Since(start))
}

// Inflight returns how many requests are in progress (feed.wait long polls excepted) and the bound
// (0: none).
func (a *API) Inflight() (current, max int64) { return a.inflight.Load(), a.maxInflight }

// isLongPoll reports whether r is a feed.wait long poll (bounded per space by the live feed instead).
func isLongPoll(r *http.Request) bool {
	return r.Method == http.MethodGet && r.URL.Path == "/v0/feed/wait"
}

func (a *API) logRequest(r *http.Request, rec *statusRecorder, start time.Time) {
	a.log.LogAttrs(r.Context(), slog.LevelInfo, "request",
		slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Int("status", rec.Status),
		slog.String("code", rec.code), slog.String("request_id", rec.requestID), slog.Duration("duration", time.Since(start)))
}

// statusRecorder records what the request log says of an answer: the status, the error code and the
// request_id; an answer given before the body was read to its end closes the connection.
type statusRecorder struct {
	*httpx.Recorder
	code      string
	requestID string
	body      *bodyGuard // nil for a request without a body
}

func newStatusRecorder(w http.ResponseWriter) *statusRecorder {
	s := &statusRecorder{Recorder: httpx.NewRecorder(w)}
	s.BeforeHeader = func(h http.Header) {
		if s.body != nil && !s.body.complete() {
			h.Set("Connection", "close")
		}
	}
	return s
}

// Envelope is the RFC §5.2 result envelope (the one both transports answer with).
type Envelope = boundary.Envelope

func (a *API) readID() string { return a.answer.NewID() }

func writeJSON(w http.ResponseWriter, status int, v any) { _ = httpx.WriteJSON(w, status, v) }

// wireBufMax bounds the answer buffers writeWire keeps for reuse (a 100-item page is about 40 KiB).
const wireBufMax = 256 << 10

// writeWire answers a success whose data the domain writes directly (boundary.Envelope.AppendWire: the
// bytes writeJSON would write, without encoding/json's reflection), with its Content-Length; it reports
// false, having written nothing, for any other data.
func (a *API) writeWire(w http.ResponseWriter, env boundary.Envelope) bool {
	bp, _ := a.wire.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	b, ok := env.AppendWire((*bp)[:0])
	if ok {
		_ = httpx.WriteJSONBytes(w, http.StatusOK, b)
		*bp = b
	}
	if cap(*bp) <= wireBufMax {
		a.wire.Put(bp)
	}
	return ok
}

func (a *API) ok(w http.ResponseWriter, requestID string, data any) {
	a.reply(w, nil, "", requestID, data, nil)
}

// fail writes an error envelope; unexpected errors are logged with the request ID and shown as INTERNAL.
func (a *API) fail(w http.ResponseWriter, r *http.Request, requestID string, err error) {
	a.reply(w, r, "", requestID, nil, err)
}

// reply answers one call of operation op with its envelope (boundary.Answerer): the status of the error
// code, WWW-Authenticate on UNAUTHENTICATED, Retry-After on a retryable refusal.
func (a *API) reply(w http.ResponseWriter, r *http.Request, op, requestID string, data any, err error) {
	if err != nil && r.Context().Err() != nil && !bodyCut(w) {
		// The client went away; nobody reads this answer and nothing failed on our side. (A body cut at
		// its deadline also ends the request's context, but that client is still there to read why.)
		a.log.LogAttrs(r.Context(), slog.LevelDebug, "client went away", slog.String("request_id", requestID))
		return
	}
	ctx := context.Background()
	if r != nil {
		ctx = r.Context()
	}
	env, de := a.answer.Answer(ctx, op, requestID, data, err)
	rec, isRec := w.(*statusRecorder)
	if isRec {
		rec.requestID = env.RequestID
	}
	if de == nil {
		if !a.writeWire(w, env) {
			writeJSON(w, http.StatusOK, env)
		}
		return
	}
	if isRec {
		rec.code = string(de.Code)
	}
	if de.Code == domain.CodeUnauthenticated {
		w.Header().Set("WWW-Authenticate", a.challenge(r))
	}
	if de.Code == domain.CodeRateLimited || de.Code == domain.CodeStorageUnavailable {
		w.Header().Set("Retry-After", boundary.RetryAfter(de))
	}
	writeJSON(w, de.Code.HTTPStatus(), env)
}

func bearer(r *http.Request) (string, bool) {
	tok := boundary.Bearer(r.Header)
	return tok, tok != ""
}

// principal authenticates the data-plane bearer token from the headers (before any body byte is read) and
// counts the request against the credential's rate limit.
func (a *API) principal(r *http.Request) (*domain.Principal, error) {
	tok, ok := bearer(r)
	if !ok {
		return nil, domain.Errorf(domain.CodeUnauthenticated, "missing bearer token")
	}
	p, err := a.svc.Authenticate(r.Context(), tok)
	if err != nil {
		return nil, err
	}
	if err := a.svc.Admit(r.Context(), p); err != nil {
		return nil, err
	}
	return p, nil
}

// Principal authenticates a request for other transports mounted on the same API (e.g. MCP, feed.wait).
func (a *API) Principal(r *http.Request) (*domain.Principal, error) { return a.principal(r) }

// Service returns the domain service behind the API.
func (a *API) Service() *domain.Service { return a.svc }

// Schemas returns the JSON Schemas the API validates with.
func (a *API) Schemas() *schemas.Registry { return a.ops.Schemas() }

// Mount serves h at pattern (a net/http pattern, such as "POST /admin/v0/backup") beside the operations,
// behind the same bounds, logs and metrics. It must be called before the API serves.
func (a *API) Mount(pattern string, h http.Handler) { a.mux.Handle(pattern, h) }

func (a *API) adminOK(r *http.Request) error {
	if a.admin == nil {
		return domain.Errorf(domain.CodeUnauthenticated, "the control plane is disabled")
	}
	tok, ok := bearer(r)
	if !ok || !a.admin.Matches(tok) {
		return domain.Errorf(domain.CodeUnauthenticated, "missing or wrong admin secret")
	}
	return nil
}

// readRaw reads a JSON request body within the published limit (an empty one reads as {}), after checking
// its Content-Type; the operation's schema and strict decoding follow (ops.Set.Decode).
func (a *API) readRaw(r *http.Request) ([]byte, error) {
	if err := checkJSONType(r); err != nil {
		return nil, err
	}
	limit := int64(a.svc.Limits().MaxRequestBytes)
	if r.ContentLength > limit {
		return nil, domain.Errorf(domain.CodePayloadTooLarge, "request body is larger than %d bytes", limit).WithDetails("limit", limit)
	}
	raw, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		var de *domain.Error
		if errors.As(err, &de) { // the body guard's timeout or read failure
			return nil, de
		}
		return nil, domain.Errorf(domain.CodeInvalidRequest, "reading request body failed")
	}
	if int64(len(raw)) > limit {
		return nil, domain.Errorf(domain.CodePayloadTooLarge, "request body is larger than %d bytes", limit).WithDetails("limit", limit)
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = []byte("{}")
	}
	return raw, nil
}

// JSONType is the media type every JSON request body must declare.
const JSONType = "application/json"

// checkJSONType requires Content-Type: application/json (parameters such as charset=utf-8 allowed) on a
// request that has a body, before any of it is read; a PATCH may also declare application/merge-patch+json
// (RFC 7396), which is what every PATCH body is. A request without a body (Content-Length: 0) may omit
// the header: the optional bodies of revoke and rotate calls are then empty.
func checkJSONType(r *http.Request) error {
	ct := r.Header.Get("Content-Type")
	if ct == "" && r.ContentLength == 0 {
		return nil
	}
	if mt, _, err := mime.ParseMediaType(ct); err == nil && (mt == JSONType || mt == openapi.MergePatchType && r.Method == http.MethodPatch) {
		return nil
	}
	got := ct
	if got == "" {
		got = "none"
	}
	return domain.Errorf(domain.CodeInvalidRequest, "Content-Type must be %s (got %s)", JSONType, got).
		WithDetails("field", "Content-Type", "expected", JSONType)
}

// pathIDNames are the route wildcards that carry public IDs.
func pathIDNames() []string {
	return []string{"space_id", "actor_id", "consumer_id", "grant_id", "token_id", "message_id", "blob_id", "upload_id",
		"collection_id", "subscription_id", "delivery_id"}
}

// checkPathIDs refuses a malformed ID in the URL path (too long, a character outside [A-Za-z0-9_-]) as
// INVALID_REQUEST naming the parameter, after authentication and before any lookup: it is a bad request,
// not an ID that happens not to exist (NOT_FOUND).
func checkPathIDs(r *http.Request) error {
	for _, name := range pathIDNames() {
		if v := r.PathValue(name); v != "" && !domain.ValidID(v) {
			return domain.Errorf(domain.CodeInvalidRequest, "%s in the path must match [A-Za-z0-9_-]{1,96}", name).WithDetails("field", name)
		}
	}
	return nil
}

// RefusedRequests returns how many requests were refused for MaxInflight since the start.
func (a *API) RefusedRequests() int64 { return a.shed.Total() }

// BodyTimeout returns the body deadline in force.
func (a *API) BodyTimeout() time.Duration { return a.bodyTimeout }

// MinUploadRate returns the minimum upload rate in force, in bytes/s.
func (a *API) MinUploadRate() int64 { return a.minUploadRate }

// Over is the HTTP transport of transport.New, with opts' bounds (BodyTimeout, MinUploadRate, MaxInflight):
// the HTTP API over the composed parts, with the other transports' handlers mounted at their paths.
func Over(opts Options) func(p transport.Parts, mounts map[string]http.Handler) (http.Handler, error) {
	return func(p transport.Parts, mounts map[string]http.Handler) (http.Handler, error) {
		o := opts
		o.AdminSecret, o.Logger, o.IDs, o.Schemas, o.Ops, o.Metrics, o.Challenge = p.AdminSecret, p.Logger, p.IDs, p.Schemas, p.Ops, p.Metrics, p.Challenge
		a, err := New(p.Svc, o)
		if err != nil {
			return nil, err
		}
		for path, h := range mounts {
			a.Mount(path, h)
		}
		return a, nil
	}
}
