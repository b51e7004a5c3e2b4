// Package strictjson is the strict JSON request decoder used at the transport
// boundary (HTTP and MCP) of Waypost.
//
// RFC-0001 §5.1 requires that requests are UTF-8 JSON and that the service
// rejects duplicate object keys, non-finite numbers and request fields the
// schema does not declare. This package enforces those rules, plus a few more
// that keep the rest of the service simple:
//
//   - the body is at most maxBytes long (read at most maxBytes+1 bytes);
//   - the body is exactly one JSON value (no trailing data, no empty body);
//   - the input is valid UTF-8 and contains no escaped lone surrogates;
//   - no object, at any depth, repeats a member name;
//   - arrays and objects nest at most [MaxDepth] levels;
//   - every number is finite as an IEEE 754 double (1e400 is rejected);
//   - when decoding into a Go value: every member is declared by the Go
//     struct at that depth, numbers fit the Go type (no overflow, no
//     fraction for integers), JSON types match the Go types, and null is
//     only accepted where the Go type can represent it (see below).
//
// # Null
//
// JSON null is accepted only into Go pointers, interfaces, and types that
// implement their own unmarshaling (for example [jsontext.Value] or
// encoding/json.RawMessage). Declare a field as *string to accept
// "ID|null"; a null sent for a plain string, number, bool, struct, slice or
// map field is a wrong type and is rejected instead of silently becoming the
// zero value (which would make `null` indistinguishable from an omitted
// member).
//
// # Errors
//
// Every rejection of the client's bytes is an [*Error] that wraps either
// [ErrInvalid] (map it to INVALID_REQUEST) or [ErrTooLarge] (map it to
// PAYLOAD_TOO_LARGE). The message says what is wrong and where (a JSON
// pointer), but never quotes string or number values from the input, so a
// secret in a request cannot leak into a log line or an error response.
// Errors that are not the client's fault (an I/O error from the reader, a
// nil or non-pointer decode target) do not wrap either sentinel.
package strictjson

import (
	"bytes"
	"encoding"
	json1 "encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/waypost/waypost/internal/echo"
)

// MaxDepth is the maximum nesting depth of arrays and objects accepted by
// [Decode], [DecodeBytes] and [CheckSyntax]. The top-level object is depth 1.
const MaxDepth = 32

var (
	// ErrInvalid is wrapped by every error that rejects the request bytes
	// for a reason other than their size. It maps to INVALID_REQUEST.
	ErrInvalid = errors.New("invalid JSON request")

	// ErrTooLarge is wrapped by the error returned when the body is larger
	// than the allowed number of bytes. It maps to PAYLOAD_TOO_LARGE.
	ErrTooLarge = errors.New("request body too large")
)

// Error describes why a request body was rejected. It wraps [ErrInvalid] or
// [ErrTooLarge]; use errors.Is to tell them apart and errors.As to read the
// location.
type Error struct {
	// Err is ErrInvalid or ErrTooLarge.
	Err error
	// Pointer is the RFC 6901 JSON pointer of the offending value or member
	// ("" means the whole document). It is clipped to its first echo.MaxBytes bytes.
	Pointer string
	// Offset is the byte offset in the body at or after which the problem
	// was found, or -1 if unknown.
	Offset int64
	// Reason says what is wrong. It never contains values from the input.
	Reason string
}

// Error implements the error interface.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("strictjson: ")
	b.WriteString(e.Err.Error())
	if e.Pointer != "" {
		b.WriteString(" at ")
		b.WriteString(strconv.Quote(e.Pointer))
	}
	if e.Reason != "" {
		b.WriteString(": ")
		b.WriteString(e.Reason)
	}
	if e.Offset >= 0 {
		b.WriteString(" (byte offset ")
		b.WriteString(strconv.FormatInt(e.Offset, 10))
		b.WriteString(")")
	}
	return b.String()
}

// Unwrap returns ErrInvalid or ErrTooLarge.
func (e *Error) Unwrap() error { return e.Err }

func invalid(ptr string, offset int64, reason string) *Error {
	// A JSON pointer holds the caller's member names: it is clipped like any caller's value in a message.
	return &Error{Err: ErrInvalid, Pointer: echo.Clip(ptr), Offset: offset, Reason: reason}
}

// Decode reads a request body from r and decodes it strictly into v, which
// must be a non-nil pointer. It reads at most maxBytes+1 bytes; a body longer
// than maxBytes is rejected with an error wrapping [ErrTooLarge] without
// reading further. Read errors of r are returned wrapped (errors.As finds
// them: a transport maps its own reader's refusals, such as net/http's
// *http.MaxBytesError) and wrap neither ErrInvalid nor ErrTooLarge, so this
// package knows nothing of HTTP. A negative maxBytes is treated as 0.
//
// See the package documentation and [DecodeBytes] for the rules applied.
func Decode(r io.Reader, maxBytes int64, v any) error {
	if err := checkTarget(v); err != nil {
		return err
	}
	if maxBytes < 0 {
		maxBytes = 0
	}
	limit := maxBytes
	if limit < math.MaxInt64 {
		limit++
	}
	b, err := io.ReadAll(io.LimitReader(r, limit))
	if err != nil {
		return fmt.Errorf("strictjson: reading request body: %w", err)
	}
	if int64(len(b)) > maxBytes {
		return &Error{Err: ErrTooLarge, Offset: -1,
			Reason: "body exceeds " + strconv.FormatInt(maxBytes, 10) + " bytes"}
	}
	return DecodeBytes(b, v)
}

// DecodeBytes decodes the complete request body b strictly into v, which must
// be a non-nil pointer. It first applies [CheckSyntax], then unmarshals with
// github.com/go-json-experiment/json rejecting members not declared by the
// Go struct at any depth, numbers that overflow or do not fit the Go type,
// JSON types that do not match the Go type, and null where the Go type cannot
// represent it. On error, v may have been partially written.
func DecodeBytes(b []byte, v any) error {
	if err := checkTarget(v); err != nil {
		return err
	}
	if err := CheckSyntax(b); err != nil {
		return err
	}
	return DecodeChecked(b, v)
}

// DecodeChecked is DecodeBytes for b that already passed [CheckSyntax]: it skips that check.
func DecodeChecked(b []byte, v any) error {
	if err := checkTarget(v); err != nil {
		return err
	}
	opts := guardedOptions
	if !bytes.Contains(b, []byte("null")) {
		opts = unguardedOptions // no null literal anywhere: nullGuard would only be called to decline
	}
	if err := json.Unmarshal(b, v, opts); err != nil {
		return mapUnmarshalError(err)
	}
	return nil
}

func checkTarget(v any) error {
	rv := reflect.ValueOf(v)
	if !rv.IsValid() || rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("strictjson: decode target must be a non-nil pointer, got %T", v)
	}
	return nil
}

// CheckSyntax reports whether b is exactly one well-formed JSON value that is
// valid UTF-8 (no escaped lone surrogates either), repeats no object member
// name at any depth, nests at most [MaxDepth] levels, and contains only
// numbers that are finite as IEEE 754 doubles. Use it before validating raw
// bytes against a JSON Schema, since schema validators usually accept
// duplicate names (last one wins). The error wraps [ErrInvalid].
func CheckSyntax(b []byte) error {
	_, err := scan(b, false)
	return err
}

// Parse applies [CheckSyntax] and, in the same pass, returns the document as
// generic values, the form JSON Schema validators take: objects as
// map[string]any, arrays as []any, numbers as encoding/json.Number (their
// text, unchanged), strings, booleans and nil. It saves a second parse of b
// when the document is both checked and validated against a schema.
func Parse(b []byte) (any, error) {
	return scan(b, true)
}

// frame is an object or array being built by Parse.
type frame struct {
	obj    map[string]any
	arr    []any
	isObj  bool
	key    string
	hasKey bool
}

func scan(b []byte, build bool) (any, error) {
	if len(bytes.TrimLeft(b, " \t\r\n")) == 0 {
		return nil, invalid("", -1, "empty body; expected one JSON value")
	}
	if !utf8.Valid(b) {
		off := int64(0)
		for rest := b; len(rest) > 0; {
			r, n := utf8.DecodeRune(rest)
			if r == utf8.RuneError && n <= 1 {
				break
			}
			rest = rest[n:]
			off += int64(n)
		}
		return nil, invalid("", off, "body is not valid UTF-8")
	}
	// Defaults: duplicate names and invalid UTF-8 (including escaped lone
	// surrogates) are rejected by the decoder.
	// A bytes.Buffer, which the decoder reads in place (a bytes.Reader it would copy into buffers of its own).
	dec := jsontext.NewDecoder(bytes.NewBuffer(b))
	var (
		root  any
		stack []frame
	)
	// put adds a finished value to the container being built (or makes it the root).
	put := func(v any) {
		if len(stack) == 0 {
			root = v
			return
		}
		top := &stack[len(stack)-1]
		if top.isObj {
			top.obj[top.key] = v
			top.hasKey = false
		} else {
			top.arr = append(top.arr, v)
		}
	}
	for {
		tok, err := dec.ReadToken()
		if err != nil {
			if err == io.EOF {
				// Only reachable before the first value; handled above.
				return nil, invalid("", dec.InputOffset(), "empty body; expected one JSON value")
			}
			return nil, mapSyntaxError(err)
		}
		switch k := tok.Kind(); k {
		case '{', '[':
			if dec.StackDepth() > MaxDepth {
				return nil, invalid(string(dec.StackPointer()), dec.InputOffset()-1,
					"nesting deeper than "+strconv.Itoa(MaxDepth)+" levels")
			}
			if build {
				if k == '{' {
					stack = append(stack, frame{obj: map[string]any{}, isObj: true})
				} else {
					stack = append(stack, frame{arr: []any{}})
				}
			}
		case '}', ']':
			if build {
				top := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				if top.isObj {
					put(top.obj)
				} else {
					put(top.arr)
				}
			}
		case '0':
			f, ferr := tok.Float()
			if ferr != nil || math.IsInf(f, 0) || math.IsNaN(f) {
				return nil, invalid(string(dec.StackPointer()), -1,
					"number is not finite as an IEEE 754 double")
			}
			if build {
				put(json1.Number(tok.String()))
			}
		case '"':
			if build {
				if top := len(stack) - 1; top >= 0 && stack[top].isObj && !stack[top].hasKey {
					stack[top].key, stack[top].hasKey = tok.String(), true
				} else {
					put(tok.String())
				}
			}
		case 't', 'f':
			if build {
				put(tok.Bool())
			}
		case 'n':
			if build {
				put(nil)
			}
		}
		if dec.StackDepth() == 0 {
			break
		}
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return nil, invalid("", dec.InputOffset(), "unexpected data after the top-level JSON value")
	}
	return root, nil
}

func mapSyntaxError(err error) error {
	serr, ok := errors.AsType[*jsontext.SyntacticError](err)
	if !ok {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return invalid("", -1, "unexpected end of JSON input")
		}
		return invalid("", -1, "malformed JSON")
	}
	ptr := string(serr.JSONPointer)
	switch {
	case errors.Is(serr.Err, jsontext.ErrDuplicateName):
		return invalid(ptr, -1, "duplicate object member name")
	case errors.Is(serr.Err, io.ErrUnexpectedEOF):
		return invalid(ptr, serr.ByteOffset, "unexpected end of JSON input")
	}
	// The library's messages may quote input text; only their category is
	// used here.
	msg := ""
	if serr.Err != nil {
		msg = serr.Err.Error()
	}
	reason := "malformed JSON"
	switch {
	case strings.Contains(msg, "surrogate pair"):
		reason = "malformed JSON: invalid surrogate pair escape in string"
	case strings.Contains(msg, "escape sequence"):
		reason = "malformed JSON: invalid escape sequence in string"
	case strings.Contains(msg, "UTF-8"):
		reason = "malformed JSON: invalid UTF-8 in string"
	case strings.Contains(msg, "depth"):
		reason = "nesting too deep"
	case strings.Contains(msg, "invalid character"):
		reason = "malformed JSON: unexpected character"
	}
	return invalid(ptr, serr.ByteOffset, reason)
}

// nullError is returned by nullGuard for a null sent where the Go type
// cannot represent it.
type nullError struct{ t reflect.Type }

func (e *nullError) Error() string { return "null not allowed for " + e.t.String() }

var (
	unmarshalerFromType = reflect.TypeFor[json.UnmarshalerFrom]()
	unmarshalerType     = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// guardedOptions are DecodeChecked's options; unguardedOptions leave nullGuard out, for a document without a
// null literal. nullGuard is called for every value of the document, and declining each cost an ack of 50
// items a fifth of its decoding (BenchmarkDecodeAck in api/ops).
var (
	guardedOptions   = json.JoinOptions(json.RejectUnknownMembers(true), json.WithUnmarshalers(nullGuard))
	unguardedOptions = json.RejectUnknownMembers(true)
)

// nullGuard rejects JSON null for Go values that cannot represent it. It is
// stateless, so sharing it across goroutines is safe.
var nullGuard = json.UnmarshalFromFunc(func(dec *jsontext.Decoder, v any) error {
	if dec.PeekKind() != 'n' {
		return errors.ErrUnsupported
	}
	pt := reflect.TypeOf(v) // always a non-nil pointer to the target
	if pt.Implements(unmarshalerFromType) || pt.Implements(unmarshalerType) ||
		pt.Implements(textUnmarshalerType) {
		return errors.ErrUnsupported
	}
	switch pt.Elem().Kind() {
	case reflect.Pointer, reflect.Interface:
		return errors.ErrUnsupported
	}
	return &nullError{t: pt.Elem()}
})

func mapUnmarshalError(err error) error {
	if _, ok := errors.AsType[*jsontext.SyntacticError](err); ok {
		return mapSyntaxError(err)
	}
	serr, ok := errors.AsType[*json.SemanticError](err)
	if !ok {
		return invalid("", -1, "value cannot be decoded")
	}
	ptr := string(serr.JSONPointer)
	off := serr.ByteOffset
	want := jsonTypeOf(serr.GoType)
	switch {
	case errors.Is(serr.Err, json.ErrUnknownName):
		return invalid(ptr, off, "unknown member")
	case isNullError(serr.Err):
		if ne, _ := errors.AsType[*nullError](serr.Err); ne != nil {
			want = jsonTypeOf(ne.t)
		}
		if want != "" {
			return invalid(ptr, off, "null is not allowed; expected "+want)
		}
		return invalid(ptr, off, "null is not allowed here")
	case errors.Is(serr.Err, strconv.ErrRange):
		return invalid(ptr, off, "number out of range for "+orValue(want))
	case errors.Is(serr.Err, strconv.ErrSyntax) && serr.JSONKind == '0' &&
		strings.HasPrefix(want, "unsigned") && bytes.HasPrefix(serr.JSONValue, []byte("-")):
		return invalid(ptr, off, "negative number for "+want)
	case errors.Is(serr.Err, strconv.ErrSyntax) && serr.JSONKind == '0':
		return invalid(ptr, off, "number is not "+article(orValue(want)))
	}
	got := kindName(serr.JSONKind)
	switch {
	case want != "" && got != "":
		return invalid(ptr, off, "expected "+want+", got "+got)
	case want != "":
		return invalid(ptr, off, "expected "+want)
	default:
		return invalid(ptr, off, "value cannot be decoded")
	}
}

func isNullError(err error) bool {
	_, ok := errors.AsType[*nullError](err)
	return ok
}

func orValue(s string) string {
	if s == "" {
		return "the target value"
	}
	return s
}

func article(s string) string {
	switch {
	case s == "the target value":
		return "valid for the target value"
	case strings.ContainsRune("aeiou", rune(s[0])):
		return "an " + s
	default:
		return "a " + s
	}
}

// jsonTypeOf names the JSON type a Go type decodes from.
func jsonTypeOf(t reflect.Type) string {
	if t == nil {
		return ""
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "integer (" + t.Kind().String() + ")"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "unsigned integer (" + t.Kind().String() + ")"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Struct, reflect.Map:
		return "object"
	case reflect.Slice, reflect.Array:
		return "array"
	default:
		return ""
	}
}

func kindName(k jsontext.Kind) string {
	switch k {
	case 'n':
		return "null"
	case 'f', 't':
		return "boolean"
	case '"':
		return "string"
	case '0':
		return "number"
	case '{':
		return "object"
	case '[':
		return "array"
	default:
		return ""
	}
}
