// Package jcsfp computes request fingerprints: the lowercase hexadecimal
// SHA-256 of the RFC 8785 JSON Canonicalization Scheme (JCS) form of a JSON
// value (RFC-0001 §5.1). Canonicalization is done by github.com/gowebpki/jcs.
//
// Only I-JSON (RFC 7493) is fingerprinted, so that two parties that parse
// the same bytes into IEEE 754 doubles agree on the fingerprint:
//
//   - the input must be one well-formed JSON value, valid UTF-8 (no escaped
//     lone surrogates), without duplicate member names, nested at most
//     [strictjson.MaxDepth] levels;
//   - every number must be finite as a double (no 1e400);
//   - an integer must have magnitude at most 2^53-1 ([MaxSafeInteger]),
//     because larger integers silently lose precision. "Integer" is judged
//     on the text, twice: a number written without fraction or exponent
//     (9007199254740992) is rejected, and so is a number whose JCS form
//     would be written that way (1E20, whose JCS form is
//     100000000000000000000). The second rule makes [Canonical] idempotent:
//     its output is always accepted again. Other finite numbers are
//     canonicalized to the nearest double exactly as RFC 8785 prescribes
//     (1e21 → 1e+21, 333333333.33333329 → 333333333.3333333, 4.50 → 4.5).
//
// Errors caused by the input wrap [ErrNotIJSON], which in turn wraps
// [strictjson.ErrInvalid], so the transport can map them to INVALID_REQUEST.
package jcsfp

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	stdjson "encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/gowebpki/jcs"

	"github.com/waypost/waypost/internal/codec/strictjson"
)

// MaxSafeInteger is the largest integer magnitude accepted: 2^53-1.
const MaxSafeInteger = 1<<53 - 1

// ErrNotIJSON is wrapped by every error caused by the value being outside
// I-JSON (or not JSON at all). It wraps strictjson.ErrInvalid.
var ErrNotIJSON = fmt.Errorf("jcsfp: value is not I-JSON: %w", strictjson.ErrInvalid)

// Fingerprint marshals v with github.com/go-json-experiment/json (default v2
// semantics: nil slices and maps encode as [] and {}, struct tags honoured),
// canonicalizes the result with JCS and returns the lowercase hex SHA-256 of
// the canonical bytes. A jsontext.Value or encoding/json.RawMessage is used
// as the JSON text it holds. Values that cannot be marshaled (NaN, invalid
// UTF-8 strings, channels) return an error; values outside I-JSON return an
// error wrapping [ErrNotIJSON].
func Fingerprint(v any) (string, error) {
	switch raw := v.(type) {
	case jsontext.Value:
		return FingerprintJSON(raw)
	case stdjson.RawMessage:
		return FingerprintJSON(raw)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("jcsfp: marshal %T: %w", v, err)
	}
	return FingerprintJSON(b)
}

// FingerprintJSON returns the lowercase hex SHA-256 of the JCS form of the
// JSON text b. See [Canonical] for the rules.
func FingerprintJSON(b []byte) (string, error) {
	c, err := Canonical(b)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(c)
	return hex.EncodeToString(sum[:]), nil
}

// Canonical returns the RFC 8785 canonical form of the JSON text b: object
// members sorted by the UTF-16 code units of their names, no insignificant
// whitespace, strings with the minimal escaping, and numbers in the
// ECMAScript Number-to-String form. The input must be I-JSON as described in
// the package documentation; otherwise the error wraps [ErrNotIJSON].
func Canonical(b []byte) ([]byte, error) {
	if err := checkIJSON(b); err != nil {
		return nil, err
	}
	out, err := jcs.Transform(b)
	if err != nil {
		// checkIJSON accepts only what JCS can canonicalize; this is a
		// defensive fallback and reports no input text.
		return nil, fmt.Errorf("%w: canonicalization failed", ErrNotIJSON)
	}
	return out, nil
}

// checkIJSON validates b in one pass without building a tree.
func checkIJSON(b []byte) error {
	// strictjson.CheckSyntax covers well-formedness, UTF-8, duplicates,
	// depth, a single value and finite numbers; it never echoes values.
	if err := strictjson.CheckSyntax(b); err != nil {
		var serr *strictjson.Error
		if errors.As(err, &serr) {
			return &Error{Pointer: serr.Pointer, Reason: serr.Reason}
		}
		return &Error{Reason: "malformed JSON"}
	}
	dec := jsontext.NewDecoder(bytes.NewReader(b))
	for {
		tok, err := dec.ReadToken()
		if err == io.EOF {
			return nil
		}
		if err != nil { // unreachable after CheckSyntax
			return &Error{Reason: "malformed JSON"}
		}
		if tok.Kind() != '0' {
			continue
		}
		raw := tok.String() // the raw number text
		if isLexicalInteger(raw) && !safeInteger(raw) {
			return &Error{Pointer: string(dec.StackPointer()),
				Reason: "integer magnitude exceeds 2^53-1"}
		}
		f, err := tok.Float()
		if err != nil || math.IsInf(f, 0) { // unreachable after CheckSyntax
			return &Error{Pointer: string(dec.StackPointer()), Reason: "number is not finite"}
		}
		if canon, err := jcs.NumberToJSON(f); err != nil ||
			(isLexicalInteger(canon) && !safeInteger(canon)) {
			return &Error{Pointer: string(dec.StackPointer()),
				Reason: "integer magnitude exceeds 2^53-1"}
		}
	}
}

// isLexicalInteger reports whether a JSON number token has neither a
// fraction nor an exponent.
func isLexicalInteger(num string) bool {
	return !strings.ContainsAny(num, ".eE")
}

// safeInteger reports whether an integer token is within ±(2^53-1).
func safeInteger(num string) bool {
	digits := strings.TrimPrefix(num, "-")
	if len(digits) > 16 { // 2^53-1 has 16 digits; JSON forbids leading zeros
		return false
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	return err == nil && n <= MaxSafeInteger
}

// Error describes why a value is not I-JSON. It wraps [ErrNotIJSON] and
// never contains values from the input.
type Error struct {
	// Pointer is the RFC 6901 JSON pointer of the offending value.
	Pointer string
	// Reason says what is wrong.
	Reason string
}

// Error implements the error interface.
func (e *Error) Error() string {
	s := ErrNotIJSON.Error()
	if e.Pointer != "" {
		s += " at " + strconv.Quote(e.Pointer)
	}
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	return s
}

// Unwrap returns ErrNotIJSON.
func (e *Error) Unwrap() error { return ErrNotIJSON }
