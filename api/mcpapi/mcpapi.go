// Package mcpapi serves every Waypost data-plane operation as an MCP tool (SUPPLEMENT §11.1) over the
// official Go SDK's Streamable HTTP transport, stateless and in JSON-response mode so it runs unchanged on
// Lambda. Authorization, idempotency and errors are those of the HTTP API: the same domain operations, the
// same JSON Schemas, the same RFC §5.2 envelope. Every tool result carries the envelope twice: as
// structuredContent (described by the tool's outputSchema) and serialized in a text block, for clients of
// protocol versions without structured content and hosts that show the model only the text. Failures are
// tool errors (isError).
package mcpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/waypost/waypost/api/boundary"
	"github.com/waypost/waypost/api/ops"
	"github.com/waypost/waypost/api/transport"
	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/internal/metrics"
	"github.com/waypost/waypost/schemas"
)

// baseURLHeader carries the public base URL from the HTTP layer to tool handlers (set by the handler
// itself; a client-sent value is removed).
const baseURLHeader = "X-Waypost-Internal-Base-Url"

// Options configure the MCP endpoint.
type Options struct {
	Schemas *schemas.Registry
	// Ops are the operations compiled against Schemas (shared with the HTTP API); nil compiles them.
	Ops    *ops.Set
	IDs    port.IDSource
	Logger *slog.Logger
	// Version is published as the MCP server implementation version.
	Version string
	// Metrics records every tool call's latency and outcome by operation; nil records nothing.
	Metrics metrics.Recorder
	// Challenge returns the WWW-Authenticate value of a 401; nil means Bearer realm="waypost".
	Challenge func(r *http.Request) string
}

// Handler is the MCP endpoint.
type Handler struct {
	svc     *domain.Service
	ops     *ops.Set
	answer  boundary.Answerer
	server  *mcp.Server
	http    http.Handler
	maxBody int64 // the largest JSON-RPC message accepted
	metrics metrics.Recorder
	// challenge is the WWW-Authenticate value of a 401 (Options.Challenge).
	challenge func(r *http.Request) string
}

// New builds the MCP endpoint over a domain service.
func New(svc *domain.Service, opts Options) (*Handler, error) {
	if opts.IDs == nil {
		return nil, fmt.Errorf("mcpapi: an ID source is required")
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	set := opts.Ops
	if set == nil {
		reg := opts.Schemas
		if reg == nil {
			var err error
			if reg, err = schemas.New(); err != nil {
				return nil, fmt.Errorf("mcpapi: %w", err)
			}
		}
		var err error
		if set, err = ops.NewSet(reg, ops.DataPlane()); err != nil {
			return nil, fmt.Errorf("mcpapi: %w", err)
		}
	}
	h := &Handler{svc: svc, ops: set, answer: boundary.Answerer{Log: log, IDs: opts.IDs}, maxBody: int64(svc.Limits().MaxRequestBytes) + 4096,
		metrics: opts.Metrics, challenge: opts.Challenge}
	if h.metrics == nil {
		h.metrics = metrics.Nop{}
	}
	version := opts.Version
	if version == "" {
		version = "dev"
	}
	h.server = mcp.NewServer(&mcp.Implementation{Name: "waypost", Title: "Waypost mailbox and memory exchange", Version: version},
		&mcp.ServerOptions{Instructions: instructions})
	for _, o := range h.tools() {
		t := o.Tool
		in, err := set.ToolSchema(o)
		if err != nil {
			return nil, fmt.Errorf("mcpapi: tool %s: %w", t.Name, err)
		}
		out, err := outputSchema(set.Schemas(), o.Response)
		if err != nil {
			return nil, fmt.Errorf("mcpapi: tool %s: %w", t.Name, err)
		}
		h.server.AddTool(&mcp.Tool{Name: t.Name, Title: t.Title, Description: t.Description, InputSchema: in, OutputSchema: out,
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: t.ReadOnly, IdempotentHint: true, OpenWorldHint: ptr(t.OpenWorld)}}, h.handler(o))
	}
	h.http = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return h.server },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true, Logger: log, MaxRequestBodyBytes: h.maxBody})
	return h, nil
}

func ptr[T any](v T) *T { return &v }

const instructions = `Waypost is an asynchronous mailbox and memory exchange. Call waypost_describe first.
Persist the request_id of every write before calling it; after a timeout, call waypost_status with the same
operation and request_id and retry at most twice with the SAME request_id. Say a message is stored only when
submission_state is "committed". Save what waypost_inbox returns before acknowledging it with waypost_ack.`

// ServeHTTP authenticates the bearer token exactly as the HTTP API does (401 without a valid one), checks a
// posted JSON-RPC message as strictly as the HTTP API checks request bodies (see strictRPC), then hands the
// request to the MCP transport. Each tool call re-checks the credential and counts once against its rate
// limit (a limited call's tool result is RATE_LIMITED with its retry time); every other JSON-RPC message of
// the request counts once before the transport sees it, so that a JSON-RPC batch pays for each of its
// messages as the same calls over HTTP would.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	r.Header.Del(baseURLHeader)
	tok := boundary.Bearer(r.Header)
	if tok == "" {
		h.unauthorized(w, r)
		return
	}
	p, err := h.svc.Authenticate(r.Context(), tok)
	if err != nil {
		if domain.CodeOf(err) == domain.CodeUnauthenticated {
			h.unauthorized(w, r)
			return
		}
		http.Error(w, `{"error":"storage unavailable"}`, http.StatusServiceUnavailable)
		return
	}
	r.Header.Set(baseURLHeader, baseURL(r))
	if r.Method != http.MethodPost {
		// A GET (the server-to-client stream) or DELETE counts once against the credential's rate limit,
		// as one HTTP request does.
		if h.admit(w, r, p, 1) {
			h.http.ServeHTTP(w, r)
		}
		return
	}
	h.strictRPC(w, r, p)
}

// admit counts n requests of the principal against its credential's rate limit, answering 429 (or 503
// when the limits cannot be read) and returning false when one is refused. The requests admitted before a
// refusal stay counted, as the same requests sent one by one over HTTP would.
func (h *Handler) admit(w http.ResponseWriter, r *http.Request, p *domain.Principal, n int) bool {
	for range n {
		if err := h.svc.Admit(r.Context(), p); err != nil {
			de := domain.AsError(err)
			if de.Code != domain.CodeRateLimited {
				http.Error(w, `{"error":"storage unavailable"}`, http.StatusServiceUnavailable)
				return false
			}
			h.rateLimited(w, de)
			return false
		}
	}
	return true
}

// rateLimited answers 429 with Retry-After and the error envelope of RATE_LIMITED.
func (h *Handler) rateLimited(w http.ResponseWriter, de *domain.Error) {
	body, _ := json.Marshal(boundary.Failure(h.answer.NewID(), de))
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Retry-After", boundary.RetryAfter(de))
	w.WriteHeader(http.StatusTooManyRequests)
	_, _ = w.Write(body)
}

func (h *Handler) unauthorized(w http.ResponseWriter, r *http.Request) {
	challenge := `Bearer realm="waypost"`
	if h.challenge != nil {
		challenge = h.challenge(r)
	}
	w.Header().Set("WWW-Authenticate", challenge)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusUnauthorized)
	_, _ = w.Write([]byte(`{"error":{"code":"UNAUTHENTICATED","message":"missing, malformed, expired or revoked credential"}}`))
}

func baseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if p := r.Header.Get("X-Forwarded-Proto"); p == "https" || p == "http" {
		scheme = p
	}
	return scheme + "://" + r.Host
}

// handler adapts one tool: authenticate, validate the arguments strictly against the operation's schema,
// run the domain operation, and wrap the envelope.
func (h *Handler) handler(o *ops.Op) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var hdr http.Header
		if req.Extra != nil {
			hdr = req.Extra.Header
		}
		start := time.Now()
		rid, data, err := h.call(ctx, o, hdr, req.Params.Arguments)
		env, de := h.answer.Answer(ctx, o.Name, rid, data, err)
		outcome := metrics.OutcomeOK
		if de != nil {
			outcome = string(de.Code)
		}
		h.metrics.Request(o.Name, outcome, time.Since(start))
		return toolResult(env)
	}
}

// toolResult carries the envelope as structured content and, serialized to the same JSON, as the one text
// block: the MCP specification asks a tool with structured content to do so, clients of protocol versions
// before 2025-06-18 see only content, and many hosts hand the model only the text.
func toolResult(env boundary.Envelope) (*mcp.CallToolResult, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // message text stays readable: "<" rather than "\u003c"
	if err := enc.Encode(env); err != nil {
		return nil, fmt.Errorf("mcpapi: encoding the result: %w", err)
	}
	raw := bytes.TrimSuffix(b.Bytes(), []byte("\n"))
	return &mcp.CallToolResult{IsError: !env.OK, StructuredContent: json.RawMessage(raw),
		Content: []mcp.Content{&mcp.TextContent{Text: string(raw)}}}, nil
}

func (h *Handler) call(ctx context.Context, o *ops.Op, hdr http.Header, args json.RawMessage) (string, any, error) {
	p, err := h.svc.Authenticate(ctx, boundary.Bearer(hdr))
	if err != nil {
		return "", nil, err
	}
	// Every tool call counts against the credential's rate limit, as the same operation over HTTP does,
	// however many calls one JSON-RPC batch carries (ServeHTTP counts the batch's other messages).
	if err := h.svc.Admit(ctx, p); err != nil {
		return "", nil, err
	}
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage(`{}`)
	}
	if len(args) > h.svc.Limits().MaxRequestBytes {
		return "", nil, domain.Errorf(domain.CodePayloadTooLarge, "arguments are larger than %d bytes", h.svc.Limits().MaxRequestBytes)
	}
	req, rid, err := h.ops.Decode(o, args, true, nil)
	if err != nil {
		return rid, nil, err
	}
	data, err := o.Run(ctx, ops.Call{Svc: h.svc, P: p, BaseURL: hdr.Get(baseURLHeader)}, req)
	return rid, data, err
}

// Over is the MCP transport of transport.New: the endpoint over the composed parts.
func Over(p transport.Parts) (http.Handler, error) {
	return New(p.Svc, Options{Schemas: p.Schemas, Ops: p.Ops, IDs: p.IDs, Logger: p.Logger, Version: p.Version, Metrics: p.Metrics, Challenge: p.Challenge})
}
