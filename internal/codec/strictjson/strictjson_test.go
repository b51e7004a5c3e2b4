package strictjson

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/waypost/waypost/internal/echo"
)

type testBody struct {
	Text string `json:"text"`
}

type testSource struct {
	NativeThreadID  string `json:"native_thread_id,omitzero"`
	NativeMessageID string `json:"native_message_id,omitzero"`
}

type testItem struct {
	ItemID string `json:"item_id"`
	Stage  string `json:"stage"`
}

// testRequest resembles the request structs of the transport layer.
type testRequest struct {
	RequestID     string         `json:"request_id,omitzero"`
	RecipientIDs  []string       `json:"recipient_ids,omitzero"`
	ThreadID      *string        `json:"thread_id,omitzero"`
	Kind          string         `json:"kind,omitzero"`
	Body          *testBody      `json:"body,omitzero"`
	Source        *testSource    `json:"source,omitzero"`
	Items         []testItem     `json:"items,omitzero"`
	Limit         *int           `json:"limit,omitzero"`
	Small         int8           `json:"small,omitzero"`
	Count         uint32         `json:"count,omitzero"`
	Ratio         float64        `json:"ratio,omitzero"`
	Flag          *bool          `json:"flag,omitzero"`
	Metadata      map[string]any `json:"metadata,omitzero"`
	Raw           jsontext.Value `json:"raw,omitzero"`
	Anything      any            `json:"anything,omitzero"`
	CheckpointPtr *string        `json:"checkpoint_cursor,omitzero"`
}

func TestDecodeBytes(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		wantErr bool
		ptr     string // expected Error.Pointer when wantErr
		reason  string // substring of Error.Reason when wantErr
	}{
		// Accepted.
		{name: "minimal", in: `{"request_id":"req_1"}`},
		{name: "whitespace around", in: " \r\n\t{\"request_id\":\"req_1\"}\n "},
		{name: "nullable pointer", in: `{"thread_id":null,"checkpoint_cursor":null}`},
		{name: "full", in: `{"request_id":"r","recipient_ids":["a","b"],"thread_id":"t","kind":"result",
			"body":{"text":"hi"},"source":{"native_thread_id":"x"},"items":[{"item_id":"i","stage":"received"}],
			"limit":50,"small":-128,"count":4294967295,"ratio":-0.0,"flag":false,
			"metadata":{"a":null,"b":[1,2.5e10,true],"c":{"d":"\u20ac"}},"raw":{"z":[null]},"anything":null}`},
		{name: "metadata accepts any member", in: `{"metadata":{"undeclared":{"deep":1}}}`},
		{name: "raw value null", in: `{"raw":null}`},
		{name: "big finite float", in: `{"ratio":1.7976931348623157e308}`},
		{name: "underflow is finite", in: `{"ratio":1e-400}`},
		{name: "escaped surrogate pair", in: `{"kind":"\ud83d\ude00"}`},
		{name: "depth 32", in: `{"anything":` + strings.Repeat(`[`, 31) + strings.Repeat(`]`, 31) + `}`},

		// Size-independent syntax rules.
		{name: "empty", in: ``, wantErr: true, reason: "empty body"},
		{name: "only whitespace", in: " \n", wantErr: true, reason: "empty body"},
		{name: "truncated", in: `{"request_id":"secret-value"`, wantErr: true, reason: "unexpected end"},
		{name: "trailing value", in: `{} {}`, wantErr: true, reason: "after the top-level"},
		{name: "trailing garbage", in: `{}x`, wantErr: true, reason: "after the top-level"},
		{name: "trailing comma", in: `{"request_id":"a",}`, wantErr: true, reason: "malformed"},
		{name: "single quotes", in: `{'request_id':'a'}`, wantErr: true, reason: "malformed"},
		{name: "BOM", in: "\uFEFF{}", wantErr: true, reason: "malformed"},
		{name: "comment", in: `{/* c */}`, wantErr: true, reason: "malformed"},
		{name: "invalid UTF-8 raw", in: "{\"request_id\":\"\xff\"}", wantErr: true, reason: "not valid UTF-8"},
		{name: "invalid UTF-8 overlong", in: "{\"kind\":\"\xc0\xaf\"}", wantErr: true, reason: "not valid UTF-8"},
		{name: "lone high surrogate", in: `{"kind":"\ud800"}`, wantErr: true, ptr: "/kind", reason: "surrogate"},
		{name: "lone low surrogate", in: `{"kind":"\udc00x"}`, wantErr: true, ptr: "/kind", reason: "surrogate"},
		{name: "bad escape", in: `{"kind":"\x"}`, wantErr: true, ptr: "/kind", reason: "escape"},
		{name: "control char in string", in: "{\"kind\":\"a\x01\"}", wantErr: true, ptr: "/kind", reason: "malformed"},
		{name: "depth 33", in: `{"metadata":` + strings.Repeat(`[`, 32) + strings.Repeat(`]`, 32) + `}`,
			wantErr: true, reason: "nesting"},

		// Duplicate names at any depth.
		{name: "duplicate top", in: `{"request_id":"a","request_id":"a"}`, wantErr: true, ptr: "/request_id", reason: "duplicate"},
		{name: "duplicate nested", in: `{"body":{"text":"a","text":"b"}}`, wantErr: true, ptr: "/body/text", reason: "duplicate"},
		{name: "duplicate in metadata", in: `{"metadata":{"x":[{"k":1,"k":1}]}}`, wantErr: true, ptr: "/metadata/x/0/k", reason: "duplicate"},
		{name: "duplicate in raw", in: `{"raw":{"k":1,"k":2}}`, wantErr: true, ptr: "/raw/k", reason: "duplicate"},
		{name: "duplicate via escape", in: `{"kind":"a","\u006bind":"b"}`, wantErr: true, ptr: "/kind", reason: "duplicate"},

		// Unknown members at any depth.
		{name: "unknown top", in: `{"request_id":"a","admin":true}`, wantErr: true, ptr: "/admin", reason: "unknown member"},
		{name: "unknown case variant", in: `{"Request_ID":"a"}`, wantErr: true, ptr: "/Request_ID", reason: "unknown member"},
		{name: "unknown nested", in: `{"body":{"text":"a","html":"b"}}`, wantErr: true, ptr: "/body/html", reason: "unknown member"},
		{name: "unknown in array item", in: `{"items":[{"item_id":"i","stage":"received","x":1}]}`, wantErr: true, ptr: "/items/0/x", reason: "unknown member"},

		// Numbers.
		{name: "NaN literal", in: `{"ratio":NaN}`, wantErr: true, reason: "malformed"},
		{name: "Infinity literal", in: `{"ratio":Infinity}`, wantErr: true, reason: "malformed"},
		{name: "NaN string into float", in: `{"ratio":"NaN"}`, wantErr: true, ptr: "/ratio", reason: "expected number, got string"},
		{name: "1e400", in: `{"ratio":1e400}`, wantErr: true, ptr: "/ratio", reason: "not finite"},
		{name: "-1e400 in metadata", in: `{"metadata":{"a":[-1e400]}}`, wantErr: true, ptr: "/metadata/a/0", reason: "not finite"},
		{name: "1e400 in raw", in: `{"raw":{"a":1e400}}`, wantErr: true, ptr: "/raw/a", reason: "not finite"},
		{name: "1e400 in any", in: `{"anything":1e400}`, wantErr: true, ptr: "/anything", reason: "not finite"},
		{name: "int8 overflow", in: `{"small":128}`, wantErr: true, ptr: "/small", reason: "out of range"},
		{name: "int overflow", in: `{"limit":9223372036854775808}`, wantErr: true, ptr: "/limit", reason: "out of range"},
		{name: "uint negative", in: `{"count":-1}`, wantErr: true, ptr: "/count", reason: "negative number for unsigned integer"},
		{name: "uint32 overflow", in: `{"count":4294967296}`, wantErr: true, ptr: "/count", reason: "out of range"},
		{name: "fraction into int", in: `{"limit":1.5}`, wantErr: true, ptr: "/limit", reason: "not an integer"},
		{name: "exponent into int", in: `{"limit":1e2}`, wantErr: true, ptr: "/limit", reason: "not an integer"},
		{name: "leading zero", in: `{"limit":01}`, wantErr: true, reason: "malformed"},
		{name: "plus sign", in: `{"limit":+1}`, wantErr: true, reason: "malformed"},

		// Wrong types.
		{name: "top array", in: `[]`, wantErr: true, ptr: "", reason: "expected object, got array"},
		{name: "top string", in: `"x"`, wantErr: true, reason: "expected object, got string"},
		{name: "top null", in: `null`, wantErr: true, reason: "null is not allowed"},
		{name: "string for int", in: `{"limit":"5"}`, wantErr: true, ptr: "/limit", reason: "expected integer"},
		{name: "number for string", in: `{"request_id":5}`, wantErr: true, ptr: "/request_id", reason: "expected string, got number"},
		{name: "bool for string", in: `{"request_id":true}`, wantErr: true, ptr: "/request_id", reason: "expected string, got boolean"},
		{name: "object for array", in: `{"recipient_ids":{}}`, wantErr: true, ptr: "/recipient_ids", reason: "expected array, got object"},
		{name: "string for object", in: `{"body":"text"}`, wantErr: true, ptr: "/body", reason: "expected object, got string"},
		{name: "number in string array", in: `{"recipient_ids":["a",1]}`, wantErr: true, ptr: "/recipient_ids/1", reason: "expected string"},
		{name: "string for bool", in: `{"flag":"true"}`, wantErr: true, ptr: "/flag", reason: "expected boolean"},
		{name: "array for map", in: `{"metadata":[]}`, wantErr: true, ptr: "/metadata", reason: "expected object, got array"},

		// Null where the Go type cannot hold it.
		{name: "null string", in: `{"request_id":null}`, wantErr: true, ptr: "/request_id", reason: "null is not allowed; expected string"},
		{name: "null slice", in: `{"recipient_ids":null}`, wantErr: true, ptr: "/recipient_ids", reason: "expected array"},
		{name: "null slice item", in: `{"recipient_ids":[null]}`, wantErr: true, ptr: "/recipient_ids/0", reason: "expected string"},
		{name: "null struct field", in: `{"body":{"text":null}}`, wantErr: true, ptr: "/body/text", reason: "expected string"},
		{name: "null int8", in: `{"small":null}`, wantErr: true, ptr: "/small", reason: "null is not allowed"},
		{name: "null map", in: `{"metadata":null}`, wantErr: true, ptr: "/metadata", reason: "expected object"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var v testRequest
			err := DecodeBytes([]byte(tc.in), &v)
			if !tc.wantErr {
				if err != nil {
					t.Fatalf("DecodeBytes(%q) = %v, want nil", tc.in, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("DecodeBytes(%q) = nil, want error", tc.in)
			}
			if !errors.Is(err, ErrInvalid) || errors.Is(err, ErrTooLarge) {
				t.Fatalf("error %v does not wrap ErrInvalid only", err)
			}
			serr, ok := errors.AsType[*Error](err)
			if !ok {
				t.Fatalf("error %T is not *Error", err)
			}
			if tc.ptr != "" && serr.Pointer != tc.ptr {
				t.Errorf("Pointer = %q, want %q (%v)", serr.Pointer, tc.ptr, err)
			}
			if !strings.Contains(serr.Reason, tc.reason) {
				t.Errorf("Reason = %q, want it to contain %q", serr.Reason, tc.reason)
			}
		})
	}
}

func TestErrorsDoNotEchoValues(t *testing.T) {
	const secret = "whsec_c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0"
	inputs := []string{
		`{"request_id":"` + secret + `"`,
		`{"request_id":` + `"` + secret + `","request_id":"` + secret + `"}`,
		`{"limit":"` + secret + `"}`,
		`{"kind":"` + secret + `\q"}`,
		`{"kind":"` + secret + `\ud800"}`,
		`{"request_id":"` + secret + `"}` + secret,
		`{"small":1` + strings.Repeat("0", 40) + `}`,
		`{"ratio":1e` + strings.Repeat("9", 40) + `}`,
		`{"request_id":"` + secret + "\x01\"}",
		`{"body":{"text":` + secret + `}}`,
	}
	for _, in := range inputs {
		var v testRequest
		err := DecodeBytes([]byte(in), &v)
		if err == nil {
			t.Fatalf("DecodeBytes(%q) = nil, want error", in)
		}
		msg := err.Error()
		if strings.Contains(msg, "whsec") || strings.Contains(msg, "c2VjcmV0") || strings.Contains(msg, "0000000000") ||
			strings.Contains(msg, "9999999999") {
			t.Errorf("error for %q echoes input: %s", in, msg)
		}
	}
}

func TestLongPointerIsTruncated(t *testing.T) {
	name := strings.Repeat("k", 5000)
	err := DecodeBytes([]byte(`{"`+name+`":1}`), new(testRequest))
	serr, ok := errors.AsType[*Error](err)
	if !ok {
		t.Fatalf("got %v", err)
	}
	if len(serr.Pointer) > echo.MaxBytes+len("…") {
		t.Errorf("pointer not truncated: %d bytes", len(serr.Pointer))
	}
}

// countingReader records how many bytes were read from it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func TestDecodeSizeLimit(t *testing.T) {
	body := `{"request_id":"req_1"}` // 22 bytes
	tests := []struct {
		max     int64
		tooBig  bool
		padding int
	}{
		{max: 22}, {max: 23}, {max: 21, tooBig: true}, {max: 0, tooBig: true}, {max: -1, tooBig: true},
		{max: 1 << 62},
		{max: 64, padding: 1 << 20, tooBig: true},
	}
	for _, tc := range tests {
		in := body + strings.Repeat(" ", tc.padding)
		cr := &countingReader{r: strings.NewReader(in)}
		var v testRequest
		err := Decode(cr, tc.max, &v)
		if tc.tooBig {
			if !errors.Is(err, ErrTooLarge) || errors.Is(err, ErrInvalid) {
				t.Errorf("max=%d: err = %v, want ErrTooLarge", tc.max, err)
			}
			limit := max(tc.max, 0) + 1
			if cr.n > limit {
				t.Errorf("max=%d: read %d bytes, want at most %d", tc.max, cr.n, limit)
			}
			continue
		}
		if err != nil || v.RequestID != "req_1" {
			t.Errorf("max=%d: err = %v, v = %+v", tc.max, err, v)
		}
	}
}

// TestDecodeMaxBytesReader: the refusal of the transport's own reader reaches the transport, which maps
// it (the package does not import net/http).
func TestDecodeMaxBytesReader(t *testing.T) {
	rec := httptest.NewRecorder()
	r := http.MaxBytesReader(rec, io.NopCloser(strings.NewReader(`{"request_id":"req_1"}`)), 5)
	err := Decode(r, 1000, new(testRequest))
	if _, ok := errors.AsType[*http.MaxBytesError](err); !ok || errors.Is(err, ErrInvalid) {
		t.Fatalf("err = %v, want the reader's *http.MaxBytesError, wrapped", err)
	}
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("connection reset") }

func TestDecodeReadError(t *testing.T) {
	err := Decode(failingReader{}, 100, new(testRequest))
	if err == nil || errors.Is(err, ErrInvalid) || errors.Is(err, ErrTooLarge) {
		t.Fatalf("err = %v, want a plain read error", err)
	}
}

func TestDecodeTarget(t *testing.T) {
	for _, v := range []any{nil, testRequest{}, (*testRequest)(nil)} {
		err := DecodeBytes([]byte(`{}`), v)
		if err == nil || errors.Is(err, ErrInvalid) {
			t.Errorf("DecodeBytes into %T: err = %v, want a non-ErrInvalid error", v, err)
		}
	}
}

func TestCheckSyntax(t *testing.T) {
	ok := []string{
		`{}`, `[]`, `null`, `0`, `-0`, `"x"`, `{"a":{"b":[1,2,{"c":null}]}}`, `1e308`, `1e-400`,
		`{"a":1,"A":1}`, `{"":1}`,
		strings.Repeat(`[`, MaxDepth) + strings.Repeat(`]`, MaxDepth),
	}
	bad := []string{
		``, `{`, `{"a":1,"a":2}`, `[{"a":1,"a":2}]`, `1e400`, `[-1e400]`, `NaN`, `{"a":Infinity}`,
		`{} {}`, `[] x`, "\"\xff\"", `"\udfff"`,
		strings.Repeat(`[`, MaxDepth+1) + strings.Repeat(`]`, MaxDepth+1),
		strings.Repeat(`{"a":`, MaxDepth+1) + `1` + strings.Repeat(`}`, MaxDepth+1),
		strings.Repeat(`[`, 100000),
	}
	for _, in := range ok {
		if err := CheckSyntax([]byte(in)); err != nil {
			t.Errorf("CheckSyntax(%.40q) = %v, want nil", in, err)
		}
	}
	for _, in := range bad {
		err := CheckSyntax([]byte(in))
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("CheckSyntax(%.40q) = %v, want ErrInvalid", in, err)
		}
	}
}

func TestErrorString(t *testing.T) {
	err := DecodeBytes([]byte(`{"body":{"text":"a","html":"b"}}`), new(testRequest))
	want := `strictjson: invalid JSON request at "/body/html": unknown member`
	if !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Error() = %q, want prefix %q", err.Error(), want)
	}
}

func TestConcurrentUse(t *testing.T) {
	// DecodeBytes has no shared mutable state; run it in parallel under -race.
	in := []byte(`{"request_id":"r","metadata":{"a":[1,{"b":null}]},"thread_id":null}`)
	done := make(chan error)
	for range 8 {
		go func() {
			var err error
			for range 100 {
				var v testRequest
				if err = DecodeBytes(in, &v); err != nil {
					break
				}
			}
			done <- err
		}()
	}
	for range 8 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

func TestDecodeLargeValidBody(t *testing.T) {
	var b bytes.Buffer
	b.WriteString(`{"recipient_ids":[`)
	for i := range 5000 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"actor_x"`)
	}
	b.WriteString(`]}`)
	var v testRequest
	if err := Decode(&b, 65536, &v); err != nil || len(v.RecipientIDs) != 5000 {
		t.Fatalf("err = %v, len = %d", err, len(v.RecipientIDs))
	}
}
