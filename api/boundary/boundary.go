// Package boundary holds what every transport does at the edge of a domain operation: reading the bearer
// credential, finding a request's request_id for the error envelope, validating a JSON request strictly
// (syntax, then its JSON Schema) and mapping failures to the documented codes, and answering with the RFC
// §5.2 envelope — a fresh request_id where the call had none, unexpected failures logged. HTTP and MCP both
// use it, so a request is accepted, refused and answered the same way whichever way it arrives.
package boundary

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/internal/codec/strictjson"
	"github.com/waypost/waypost/schemas"
)

// Envelope is the RFC §5.2 result envelope.
type Envelope struct {
	OK        bool              `json:"ok"`
	RequestID string            `json:"request_id"`
	Data      any               `json:"data,omitempty"`
	Error     *domain.WireError `json:"error,omitempty"`
}

// AppendWire appends the envelope of a success as the HTTP API writes it (httpx.WriteJSON: an encoding/json
// Encoder with SetEscapeHTML(false), trailing newline included) when its data is a result
// domain.AppendWireJSON writes directly; it reports false otherwise (then encoding/json writes it).
func (e Envelope) AppendWire(b []byte) ([]byte, bool) {
	if !e.OK || e.Error != nil || e.Data == nil {
		return nil, false
	}
	b = append(b, `{"ok":true,"request_id":`...)
	b = domain.AppendWireString(b, e.RequestID)
	b = append(b, `,"data":`...)
	b, ok := domain.AppendWireJSON(b, e.Data)
	if !ok {
		return nil, false
	}
	return append(b, "}\n"...), true
}

// Failure returns the envelope of an error with the given request_id.
func Failure(requestID string, de *domain.Error) Envelope {
	wire := de.Wire()
	return Envelope{OK: false, RequestID: requestID, Error: &wire}
}

// Answerer builds the envelopes of one transport.
type Answerer struct {
	// Log receives one line per unexpected failure (INTERNAL, STORAGE_UNAVAILABLE); never a token or a body.
	Log *slog.Logger
	// IDs makes the tracking request_id of an answer to a call that carried none.
	IDs port.IDSource
}

// NewID returns a fresh tracking request_id ("rq_…").
func (a Answerer) NewID() string { return a.IDs.NewID("rq") }

// Answer is the envelope of one call of operation op: ok with data, or err as its public error. A call
// without a request_id gets a fresh one. An unexpected failure is logged with the request_id, the
// operation and the cause; the client sees only its code. It also returns the public error (nil on
// success), for the transport's status line and headers.
func (a Answerer) Answer(ctx context.Context, op, requestID string, data any, err error) (Envelope, *domain.Error) {
	if requestID == "" {
		requestID = a.NewID()
	}
	if err == nil {
		return Envelope{OK: true, RequestID: requestID, Data: data}, nil
	}
	de := domain.AsError(err)
	if de.Code == domain.CodeInternal || de.Code == domain.CodeStorageUnavailable {
		level := slog.LevelError
		if errors.Is(err, port.ErrWritesRefused) {
			level = slog.LevelDebug // the store says so itself, once every few seconds, not once per write
		}
		a.Log.LogAttrs(ctx, level, "operation failed", slog.String("operation", op), slog.String("request_id", requestID),
			slog.String("code", string(de.Code)), slog.String("error", err.Error()))
	}
	return Failure(requestID, de), de
}

// RetryAfter is the Retry-After header value (whole seconds, at least 1) of a retryable refusal: its
// details.retry_after_ms rounded up.
func RetryAfter(de *domain.Error) string {
	var ms int64
	switch v := de.Details["retry_after_ms"].(type) {
	case int:
		ms = int64(v)
	case int64:
		ms = v
	case float64:
		ms = int64(v)
	}
	return strconv.FormatInt(max(1, (ms+999)/1000), 10)
}

// Bearer returns the token of an "Authorization: Bearer …" header, or "" when there is none.
func Bearer(h http.Header) string {
	scheme, tok, ok := strings.Cut(h.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(tok)
}

// DecodeRequest does what a transport does with a JSON request, in one pass over its text for the syntax
// check, the request_id and the schema (strictjson.Parse builds the document while it checks the syntax),
// then the strict decoding into v: validate checks the parsed document against the request's schema
// (schemas.Registry.ValidateDoc or schemas.Schema.ValidateDoc). It returns the request's request_id ("" when
// it has no valid one) once the syntax is valid, also with a later error.
func DecodeRequest(raw []byte, validate func(doc any) error, v any) (string, error) {
	doc, err := strictjson.Parse(raw)
	if err != nil {
		return "", Invalid(err)
	}
	rid := ""
	if obj, ok := doc.(map[string]any); ok {
		if s, ok := obj["request_id"].(string); ok && domain.ValidRequestID(s) {
			rid = s
		}
	}
	if err := validate(doc); err != nil {
		return rid, Invalid(err)
	}
	if err := strictjson.DecodeChecked(raw, v); err != nil {
		return rid, Invalid(err)
	}
	return rid, nil
}

// Invalid maps a decoding or validation error to the public code: RESOURCE_LIMIT for a schema bound that
// stands for a published limit, INVALID_REQUEST otherwise (nil stays nil). details.field names the member
// at fault (dotted, e.g. "body.text" or "recipient_ids.0") when the error locates one.
func Invalid(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if len(msg) > 300 {
		msg = strings.ToValidUTF8(msg[:300], "")
	}
	field := ""
	var ve *schemas.ValidationError
	var se *strictjson.Error
	switch {
	case errors.As(err, &ve) && len(ve.Failures) > 0:
		field = fieldName(ve.Failures[0].Field)
		if limit, ok := ve.ResourceLimit(); ok {
			return withField(domain.Errorf(domain.CodeResourceLimit, "%s", msg).WithDetails("limit_name", limit), field)
		}
	case errors.As(err, &se):
		field = fieldName(se.Pointer)
	}
	return withField(domain.Errorf(domain.CodeInvalidRequest, "%s", msg), field)
}

func withField(e *domain.Error, field string) *domain.Error {
	if field == "" {
		return e
	}
	return e.WithDetails("field", field)
}

// fieldName turns a JSON pointer into the dotted member name used in details.field ("" for the whole
// document).
func fieldName(pointer string) string {
	if pointer == "" || pointer == "/" {
		return ""
	}
	toks := strings.Split(strings.TrimPrefix(pointer, "/"), "/")
	for i, t := range toks {
		toks[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return strings.Join(toks, ".")
}
