// Package boundary holds what every transport does at the edge before a domain operation runs: reading the
// bearer credential, finding a request's request_id for the error envelope, and validating a JSON request
// strictly (syntax, then its JSON Schema), mapping failures to the documented codes. HTTP and MCP both use it,
// so a request is accepted or refused the same way whichever way it arrives.
package boundary

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/internal/codec/strictjson"
	"github.com/waypost/waypost/schemas"
)

// Bearer returns the token of an "Authorization: Bearer …" header, or "" when there is none.
func Bearer(h http.Header) string {
	scheme, tok, ok := strings.Cut(h.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(tok)
}

// RequestID extracts a syntactically valid top-level request_id from a JSON request, for the error
// envelope only ("" when there is none).
func RequestID(raw []byte) string {
	var probe struct {
		RequestID any `json:"request_id"`
	}
	if json.Unmarshal(raw, &probe) != nil {
		return ""
	}
	if s, ok := probe.RequestID.(string); ok && domain.ValidRequestID(s) {
		return s
	}
	return ""
}

// CheckSyntax refuses duplicate keys, non-finite or non-I-JSON numbers and excessive depth: INVALID_REQUEST.
func CheckSyntax(raw []byte) error {
	if err := strictjson.CheckSyntax(raw); err != nil {
		return Invalid(err)
	}
	return nil
}

// Validate checks raw against the named request schema. A failure on a bound that stands for a published
// limit (x-waypost-limit) is RESOURCE_LIMIT (SUPPLEMENT §5.3); any other failure INVALID_REQUEST.
func Validate(reg *schemas.Registry, schema string, raw []byte) error {
	return Invalid(reg.Validate(schema, raw))
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
