// Package chanservice is the channel service: a small HTTP server that holds
// one [channel.Hub] per Waypost space and exposes an authenticated internal
// API through which committers publish to, close and count channels.
//
// In AWS mode it runs as its own container task and committers reach it with
// package chanclient; in embedded mode the server runs it in-process and uses
// [Service.HubFor] (and chanclient.InProcess) directly.
//
// # Internal API
//
// Every route under /internal/v0/ requires "Authorization: Bearer <secret>".
//
//	POST /internal/v0/spaces/{space_id}/channels/{name}/publish  {"text": "..."}   → 200 {"delivered": n}
//	POST /internal/v0/spaces/{space_id}/channels/{name}/close    {"reason": "..."} → 200 {"closed": n}
//	GET  /internal/v0/spaces/{space_id}/channels/{name}/count                      → 200 {"count": n}
//	GET  /healthz (no authentication)                                              → 200 {"status": "ok"}
//
// Request bodies are strict JSON: valid UTF-8, exactly one object with exactly
// the one documented string member, no duplicate or unknown members, nothing
// after it. Errors use Waypost's standard envelope (RFC §5.2, SUPPLEMENT
// §11.4): {"ok": false, "request_id": "rq_…", "error": {"code", "message",
// "retryable", "details": {"reason": <one of the Code constants>}}} — 400
// INVALID_REQUEST (malformed body, not JSON, a space id, channel name or text
// the channel rules reject), 401 UNAUTHENTICATED (missing or wrong secret),
// 404 NOT_FOUND (no such route, or a wrong method, with Allow), 413
// PAYLOAD_TOO_LARGE, 422 RESOURCE_LIMIT (text or reason over its limit) or
// 500 INTERNAL.
//
// Publishing to, closing or counting a space that has no hub yet returns 0
// and creates nothing; hubs are created by HubFor, i.e. by subscribers.
package chanservice

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/waypost/waypost/channel"
	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/internal/httpx"
	"github.com/waypost/waypost/internal/platform"
)

// MaxSpaceIDBytes is the longest accepted space id.
const MaxSpaceIDBytes = 128

// MinSecretBytes is the shortest accepted internal secret.
const MinSecretBytes = 16

// Reasons of the internal API's errors, in the "details.reason" member of
// error envelopes; the envelope's "code" is the Waypost code each maps to.
const (
	CodeUnauthorized         = "unauthorized"           // 401 UNAUTHENTICATED
	CodeNotFound             = "not_found"              // 404 NOT_FOUND
	CodeMethodNotAllowed     = "method_not_allowed"     // 404 NOT_FOUND, with Allow
	CodeBadRequest           = "bad_request"            // 400 INVALID_REQUEST
	CodeBodyTooLarge         = "body_too_large"         // 413 PAYLOAD_TOO_LARGE
	CodeUnsupportedMediaType = "unsupported_media_type" // 400 INVALID_REQUEST
	CodeInvalidSpaceID       = "invalid_space_id"       // 400 INVALID_REQUEST, ErrInvalidSpaceID
	CodeInvalidChannelName   = "invalid_channel_name"   // 400 INVALID_REQUEST, channel.ErrInvalidName
	CodeTextTooLarge         = "text_too_large"         // 422 RESOURCE_LIMIT, channel.ErrTextTooLarge
	CodeInvalidText          = "invalid_text"           // 400 INVALID_REQUEST, channel.ErrInvalidText
	CodeReasonTooLarge       = "reason_too_large"       // 422 RESOURCE_LIMIT, channel.ErrReasonTooLarge
	CodeInternal             = "internal"               // 500 INTERNAL
)

// wireCode maps a reason to the Waypost error code carried in the envelope
// (its HTTP status is the code's, SUPPLEMENT §11.4).
func wireCode(reason string) domain.Code {
	switch reason {
	case CodeUnauthorized:
		return domain.CodeUnauthenticated
	case CodeNotFound, CodeMethodNotAllowed:
		return domain.CodeNotFound
	case CodeBadRequest, CodeUnsupportedMediaType, CodeInvalidSpaceID, CodeInvalidChannelName, CodeInvalidText:
		return domain.CodeInvalidRequest
	case CodeBodyTooLarge:
		return domain.CodePayloadTooLarge
	case CodeTextTooLarge, CodeReasonTooLarge:
		return domain.CodeResourceLimit
	}
	return domain.CodeInternal
}

var (
	// ErrInvalidSpaceID reports a space id that is empty, longer than
	// MaxSpaceIDBytes, or contains a byte outside A-Z a-z 0-9 . _ : -.
	ErrInvalidSpaceID = errors.New("chanservice: invalid space id")
	// ErrWeakSecret reports an internal secret shorter than MinSecretBytes.
	ErrWeakSecret = errors.New("chanservice: internal secret too short")
)

// Service holds one hub per space and serves the internal API. It is an
// http.Handler. It is safe for concurrent use and starts no goroutines.
type Service struct {
	secret [sha256.Size]byte // digest of the internal secret
	limits channel.Limits
	logger *slog.Logger
	mux    *http.ServeMux
	// empty is a hub that is never subscribed to: operations on spaces
	// without a hub run against it, so they validate their arguments
	// exactly like a real hub and return 0.
	empty *channel.Hub

	mu   sync.Mutex
	hubs map[string]*channel.Hub // by space id; never removed
}

// New returns a service that accepts secret as the bearer token of the
// internal API and creates hubs with limits (zero fields take the
// specification defaults). A nil logger discards logs.
func New(secret string, limits channel.Limits, logger *slog.Logger) (*Service, error) {
	if len(secret) < MinSecretBytes {
		return nil, fmt.Errorf("chanservice: secret is %d bytes, want at least %d: %w", len(secret), MinSecretBytes, ErrWeakSecret)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Service{
		secret: sha256.Sum256([]byte(secret)),
		limits: limits,
		logger: logger,
		hubs:   make(map[string]*channel.Hub),
		empty:  channel.NewHub(limits),
	}
	const base = "/internal/v0/spaces/{space_id}/channels/{name}/"
	mux := http.NewServeMux()
	mux.HandleFunc(base+"publish", s.authed(http.MethodPost, s.handlePublish))
	mux.HandleFunc(base+"close", s.authed(http.MethodPost, s.handleClose))
	mux.HandleFunc(base+"count", s.authed(http.MethodGet, s.handleCount))
	mux.HandleFunc("/internal/", s.authed("", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, CodeNotFound, "no such route")
	}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			writeError(w, CodeMethodNotAllowed, "use GET")
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, CodeNotFound, "no such route")
	})
	s.mux = mux
	return s, nil
}

// BodyTimeout bounds reading a request body of the internal API.
const BodyTimeout = 10 * time.Second

// ServeHTTP serves the internal API. A request body must arrive within BodyTimeout; an answer given before
// it was read to its end (a refused secret, a wrong route) closes the connection instead of draining the
// rest, so a client trickling a body holds nothing for long.
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		s.mux.ServeHTTP(w, r)
		return
	}
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(BodyTimeout))
	b := &eofBody{ReadCloser: r.Body, rc: rc}
	r.Body = b
	rec := httpx.NewRecorder(w)
	rec.BeforeHeader = func(h http.Header) { // an answer before the body's end closes the connection
		if !b.done() {
			h.Set("Connection", "close")
		}
	}
	s.mux.ServeHTTP(rec, r)
	if !b.done() {
		_ = rc.SetReadDeadline(time.Now()) // the server's clean-up read of the rest fails at once
	}
}

// eofBody records whether a request body was read to its end, and then lifts its read deadline.
type eofBody struct {
	io.ReadCloser
	rc  *http.ResponseController
	mu  sync.Mutex
	eof bool
}

func (b *eofBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.mu.Lock()
		b.eof = true
		b.mu.Unlock()
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

func (b *eofBody) done() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.eof
}

// HubFor returns the hub of a space, creating it on first use. The embedded
// server uses it to subscribe and wait in-process. spaceID is trusted (it
// comes from the domain, not from a request) and is not validated; the
// HTTP routes validate theirs. Hubs live as long as the service.
func (s *Service) HubFor(spaceID string) *channel.Hub {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.hubs[spaceID]
	if h == nil {
		h = channel.NewHub(s.limits)
		s.hubs[spaceID] = h
	}
	return h
}

// lookup returns the hub of a space, or the empty hub if it has none.
func (s *Service) lookup(spaceID string) (*channel.Hub, error) {
	if err := validSpaceID(spaceID); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if h := s.hubs[spaceID]; h != nil {
		return h, nil
	}
	return s.empty, nil
}

// Publish publishes text on a space's channel (see [channel.Hub.Publish]).
// It returns 0 without creating anything when the space has no hub.
func (s *Service) Publish(spaceID, name, text string) (int, error) {
	h, err := s.lookup(spaceID)
	if err != nil {
		return 0, err
	}
	return h.Publish(name, text)
}

// Close closes a space's channel (see [channel.Hub.Close]). It returns 0
// without creating anything when the space has no hub.
func (s *Service) Close(spaceID, name, reason string) (int, error) {
	h, err := s.lookup(spaceID)
	if err != nil {
		return 0, err
	}
	return h.Close(name, reason)
}

// Count returns the subscription count of a space's channel (see
// [channel.Hub.Count]), 0 when the space has no hub.
func (s *Service) Count(spaceID, name string) (int, error) {
	h, err := s.lookup(spaceID)
	if err != nil {
		return 0, err
	}
	return h.Count(name)
}

func (s *Service) handlePublish(w http.ResponseWriter, r *http.Request) {
	text, ok := s.readBody(w, r, "text")
	if !ok {
		return
	}
	n, err := s.Publish(r.PathValue("space_id"), r.PathValue("name"), text)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"delivered": n})
}

func (s *Service) handleClose(w http.ResponseWriter, r *http.Request) {
	reason, ok := s.readBody(w, r, "reason")
	if !ok {
		return
	}
	n, err := s.Close(r.PathValue("space_id"), r.PathValue("name"), reason)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.logger.Info("channel closed", "space_id", r.PathValue("space_id"), "channel", r.PathValue("name"), "subscriptions", n)
	writeJSON(w, http.StatusOK, map[string]int{"closed": n})
}

func (s *Service) handleCount(w http.ResponseWriter, r *http.Request) {
	n, err := s.Count(r.PathValue("space_id"), r.PathValue("name"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"count": n})
}

// authed wraps h with bearer authentication and, when method is not empty, a
// method check. Authentication comes first so that unauthenticated callers
// learn nothing about routes.
func (s *Service) authed(method string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.authorized(r) {
			s.logger.Warn("channel service: unauthorized request", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
			w.Header().Set("WWW-Authenticate", `Bearer realm="waypost-channel"`)
			writeError(w, CodeUnauthorized, "missing or invalid bearer token")
			return
		}
		if method != "" && r.Method != method {
			w.Header().Set("Allow", method)
			writeError(w, CodeMethodNotAllowed, "use "+method)
			return
		}
		h(w, r)
	}
}

// authorized compares the bearer token with the secret in constant time
// (digests of equal length, so the length of the secret does not leak).
func (s *Service) authorized(r *http.Request) bool {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(token)))
	return subtle.ConstantTimeCompare(got[:], s.secret[:]) == 1
}

// maxBody bounds request bodies: the largest text or reason with every byte
// JSON-escaped as \u00XX, plus room for the envelope.
func (s *Service) maxBody() int64 {
	l := s.empty.Limits()
	return int64(6*max(l.MaxTextBytes, l.MaxReasonBytes) + 4096)
}

// readBody reads a strict JSON object with exactly one string member named
// field. On failure it writes the error response and returns ok false.
func (s *Service) readBody(w http.ResponseWriter, r *http.Request, field string) (value string, ok bool) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != "application/json" {
			writeError(w, CodeUnsupportedMediaType, "Content-Type must be application/json")
			return "", false
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.maxBody()))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeError(w, CodeBodyTooLarge, fmt.Sprintf("body exceeds %d bytes", tooLarge.Limit))
			return "", false
		}
		writeError(w, CodeBadRequest, "reading body: "+err.Error())
		return "", false
	}
	value, err = decodeSingleString(body, field)
	if err != nil {
		writeError(w, CodeBadRequest, err.Error())
		return "", false
	}
	return value, true
}

// decodeSingleString parses body as {"<field>": "<string>"} and nothing else.
func decodeSingleString(body []byte, field string) (string, error) {
	if !utf8.Valid(body) {
		return "", errors.New("body is not valid UTF-8")
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return "", errors.New("body must be a JSON object")
	}
	var value string
	seen := false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return "", fmt.Errorf("malformed JSON: %w", err)
		}
		key, _ := tok.(string)
		if key != field {
			return "", fmt.Errorf("unknown member %q (want only %q)", key, field)
		}
		if seen {
			return "", fmt.Errorf("duplicate member %q", field)
		}
		seen = true
		tok, err = dec.Token()
		if err != nil {
			return "", fmt.Errorf("malformed JSON: %w", err)
		}
		v, isString := tok.(string)
		if !isString {
			return "", fmt.Errorf("member %q must be a string", field)
		}
		value = v
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return "", errors.New("malformed JSON object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return "", errors.New("unexpected data after the JSON object")
	}
	if !seen {
		return "", fmt.Errorf("missing member %q", field)
	}
	return value, nil
}

// fail writes the error response for an operation error.
func (s *Service) fail(w http.ResponseWriter, r *http.Request, err error) {
	status, code := Classify(err)
	msg := err.Error()
	if status == http.StatusInternalServerError {
		s.logger.Error("channel service: internal error", "path", r.URL.Path, "err", err)
		msg = "internal error"
	}
	writeError(w, code, msg)
}

// Classify maps an error of Service.Publish, Close or Count to the HTTP
// status and the reason (details.reason) of the internal API's answer.
func Classify(err error) (status int, code string) {
	code = CodeInternal
	switch {
	case errors.Is(err, ErrInvalidSpaceID):
		code = CodeInvalidSpaceID
	case errors.Is(err, channel.ErrInvalidName):
		code = CodeInvalidChannelName
	case errors.Is(err, channel.ErrTextTooLarge):
		code = CodeTextTooLarge
	case errors.Is(err, channel.ErrInvalidText):
		code = CodeInvalidText
	case errors.Is(err, channel.ErrReasonTooLarge):
		code = CodeReasonTooLarge
	}
	return wireCode(code).HTTPStatus(), code
}

// SentinelFor returns the sentinel error behind an error code of the
// internal API, or nil when the code has none. Clients use it so that
// errors.Is works the same over HTTP and in-process.
func SentinelFor(code string) error {
	switch code {
	case CodeInvalidSpaceID:
		return ErrInvalidSpaceID
	case CodeInvalidChannelName:
		return channel.ErrInvalidName
	case CodeTextTooLarge:
		return channel.ErrTextTooLarge
	case CodeInvalidText:
		return channel.ErrInvalidText
	case CodeReasonTooLarge:
		return channel.ErrReasonTooLarge
	}
	return nil
}

// validSpaceID checks a space id: 1 to MaxSpaceIDBytes bytes of
// A-Z a-z 0-9 . _ : -.
func validSpaceID(id string) error {
	if len(id) == 0 || len(id) > MaxSpaceIDBytes {
		return fmt.Errorf("chanservice: space id is %d bytes, want 1 to %d: %w", len(id), MaxSpaceIDBytes, ErrInvalidSpaceID)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-') {
			return fmt.Errorf("chanservice: space id has byte 0x%02x at offset %d: %w", c, i, ErrInvalidSpaceID)
		}
	}
	return nil
}

// errorBody is Waypost's error envelope (RFC §5.2).
type errorBody struct {
	OK        bool             `json:"ok"`
	RequestID string           `json:"request_id"`
	Error     domain.WireError `json:"error"`
}

// writeError answers with the error envelope of reason: the Waypost code it
// maps to, that code's HTTP status, and the reason in details.reason. Every
// answer gets a fresh tracking request ID.
func writeError(w http.ResponseWriter, reason, msg string) {
	code := wireCode(reason)
	b := errorBody{RequestID: platform.IDs{}.NewID("rq"), Error: domain.WireError{Code: code, Message: msg,
		Retryable: code.Retryable(), Details: map[string]any{"reason": reason}}}
	writeJSON(w, code.HTTPStatus(), b)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client is gone if this fails
}
