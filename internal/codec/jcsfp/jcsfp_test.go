package jcsfp

import (
	stdjson "encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/gowebpki/jcs"

	"github.com/waypost/waypost/internal/codec/strictjson"
)

func TestCanonicalNumbers(t *testing.T) {
	// RFC 8785 §3.2.2.3 and Appendix B, written in JSON forms that are
	// I-JSON under this package's rules (large integers in exponent form).
	tests := []struct{ in, want string }{
		{"1e21", "1e+21"},
		{"1E21", "1e+21"},
		{"1e+21", "1e+21"},
		{"0.000001", "0.000001"},
		{"1e-7", "1e-7"},
		{"-0", "0"},
		{"-0.0", "0"},
		{"0", "0"},
		{"333333333.33333329", "333333333.3333333"},
		{"4.50", "4.5"},
		{"2e-3", "0.002"},
		{"1E30", "1e+30"},
		{"0.000000000000000000000000001", "1e-27"},
		{"5e-324", "5e-324"},
		{"-5e-324", "-5e-324"},
		{"1.7976931348623157e308", "1.7976931348623157e+308"},
		{"-1.7976931348623157e308", "-1.7976931348623157e+308"},
		{"9.999999999999997e22", "9.999999999999997e+22"},
		{"1e23", "1e+23"},
		{"1.0000000000000001e23", "1.0000000000000001e+23"},
		{"9.999999999999997e-7", "9.999999999999997e-7"},
		{"333333333.3333332", "333333333.3333332"},
		{"333333333.33333325", "333333333.33333325"},
		{"333333333.3333334", "333333333.3333334"},
		{"333333333.33333343", "333333333.33333343"},
		{"-0.0000033333333333333333", "-0.0000033333333333333333"},
		{"1424953923781206.2", "1424953923781206.2"},
		{"9007199254740991", "9007199254740991"},
		{"9.007199254740991e15", "9007199254740991"},
		{"1e22", "1e+22"},
		{"-9007199254740991", "-9007199254740991"},
		{"100", "100"},
		{"1e-400", "0"}, // underflows to zero as a double
	}
	for _, tc := range tests {
		got, err := Canonical([]byte(tc.in))
		if err != nil {
			t.Errorf("Canonical(%s) error: %v", tc.in, err)
			continue
		}
		if string(got) != tc.want {
			t.Errorf("Canonical(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// TestAppendixBBits checks the RFC 8785 Appendix B table by IEEE 754 bit
// pattern: the canonical form of the shortest Go text of each double.
func TestAppendixBBits(t *testing.T) {
	tests := []struct {
		bits uint64
		want string
	}{
		{0x0000000000000000, "0"},
		{0x8000000000000000, "0"},
		{0x0000000000000001, "5e-324"},
		{0x8000000000000001, "-5e-324"},
		{0x7fefffffffffffff, "1.7976931348623157e+308"},
		{0xffefffffffffffff, "-1.7976931348623157e+308"},
		{0x4340000000000000, "9007199254740992"},
		{0xc340000000000000, "-9007199254740992"},
		{0x4430000000000000, "295147905179352830000"},
		{0x44b52d02c7e14af5, "9.999999999999997e+22"},
		{0x44b52d02c7e14af6, "1e+23"},
		{0x44b52d02c7e14af7, "1.0000000000000001e+23"},
		{0x444b1ae4d6e2ef4e, "999999999999999700000"},
		{0x444b1ae4d6e2ef4f, "999999999999999900000"},
		{0x444b1ae4d6e2ef50, "1e+21"},
		{0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"},
		{0x3eb0c6f7a0b5ed8d, "0.000001"},
		{0x41b3de4355555553, "333333333.3333332"},
		{0x41b3de4355555554, "333333333.33333325"},
		{0x41b3de4355555555, "333333333.3333333"},
		{0x41b3de4355555556, "333333333.3333334"},
		{0x41b3de4355555557, "333333333.33333343"},
		{0xbecbf647612f3696, "-0.0000033333333333333333"},
		{0x43143ff3c1cb0959, "1424953923781206.2"},
	}
	for _, tc := range tests {
		f := math.Float64frombits(tc.bits)
		// The number formatting of the library itself.
		if got, err := jcs.NumberToJSON(f); err != nil || got != tc.want {
			t.Errorf("NumberToJSON(%016x) = %s, %v; want %s", tc.bits, got, err, tc.want)
		}
		in := strconv.FormatFloat(f, 'e', -1, 64)
		got, err := Canonical([]byte(in))
		if !strings.ContainsAny(tc.want, ".e") && math.Abs(f) > MaxSafeInteger {
			// JCS would write an unsafe integer: rejected by design.
			if !errors.Is(err, ErrNotIJSON) {
				t.Errorf("%016x (%s): Canonical = %s, %v; want ErrNotIJSON", tc.bits, in, got, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%016x (%s): %v", tc.bits, in, err)
			continue
		}
		if string(got) != tc.want {
			t.Errorf("%016x (%s) = %s, want %s", tc.bits, in, got, tc.want)
		}
	}
}

// wantCanonical checks that the canonical form of the JSON text in is want.
func wantCanonical(t *testing.T, in, want string) {
	t.Helper()
	got, err := Canonical([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("Canonical =\n%s\nwant\n%s", got, want)
	}
}

func TestCanonicalKeyOrder(t *testing.T) {
	// RFC 8785 §3.2.3.
	in := `{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}`
	want := "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\"," +
		"\"\u00f6\":\"Latin Small Letter O With Diaeresis\",\"\u20ac\":\"Euro Sign\"," +
		"\"\U0001F600\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}"
	wantCanonical(t, in, want)
}

func TestCanonicalSample(t *testing.T) {
	// RFC 8785 §3.2.4 sample.
	in := `{
  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`
	want := `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],` +
		`"string":"€$\u000f\nA'B\"\\\\\"/"}`
	wantCanonical(t, in, want)
}

func TestCanonicalRejects(t *testing.T) {
	bad := map[string]string{
		"integer 2^53":         `9007199254740992`,
		"integer -2^53":        `-9007199254740992`,
		"big integer nested":   `{"a":[1,{"b":12345678901234567890}]}`,
		"huge integer":         `1` + strings.Repeat("0", 400),
		"1e400":                `1e400`,
		"-1e400":               `[-1e400]`,
		"NaN":                  `NaN`,
		"Infinity":             `{"a":Infinity}`,
		"duplicate":            `{"a":1,"a":2}`,
		"duplicate escaped":    `{"a":1,"\u0061":2}`,
		"lone surrogate":       `"\ud800"`,
		"invalid UTF-8":        "\"\xff\"",
		"trailing":             `{} 1`,
		"empty":                ``,
		"truncated":            `{"a":`,
		"too deep":             strings.Repeat("[", strictjson.MaxDepth+1) + strings.Repeat("]", strictjson.MaxDepth+1),
		"leading zero":         `01`,
		"single quoted":        `'a'`,
		"unescaped control":    "\"\x01\"",
		"trailing comma":       `[1,]`,
		"hex number":           `0x10`,
		"bare minus":           `-`,
		"plus":                 `+1`,
		"fraction without int": `.5`,
	}
	for name, in := range bad {
		_, err := Canonical([]byte(in))
		if !errors.Is(err, ErrNotIJSON) || !errors.Is(err, strictjson.ErrInvalid) {
			t.Errorf("%s: Canonical(%.40q) = %v, want ErrNotIJSON", name, in, err)
		}
		if err != nil && strings.Contains(err.Error(), "12345678901234567890") {
			t.Errorf("%s: error echoes input: %v", name, err)
		}
	}
}

func TestFingerprint(t *testing.T) {
	got, err := FingerprintJSON([]byte(" { } "))
	if err != nil {
		t.Fatal(err)
	}
	if want := "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"; got != want {
		t.Errorf("FingerprintJSON({}) = %s, want %s", got, want)
	}

	type req struct {
		B        []string       `json:"b"`
		A        int            `json:"a"`
		Metadata map[string]any `json:"metadata,omitempty"`
	}
	// {"a":1,"b":[]} canonical; nil and empty slices agree under v2.
	const want = "f87e4099e9be5e75094e0a4f46d3dc18a9c37429314a5a2490fb78d31e7e170c"
	for _, v := range []any{
		req{A: 1},
		req{A: 1, B: []string{}},
		map[string]any{"b": []any{}, "a": 1},
		jsontext.Value(`{"b":[],"a":1.0}`),
		stdjson.RawMessage(`{"a":1e0,"b":[ ]}`),
	} {
		got, err := Fingerprint(v)
		if err != nil {
			t.Fatalf("Fingerprint(%#v): %v", v, err)
		}
		if got != want {
			t.Errorf("Fingerprint(%#v) = %s, want %s", v, got, want)
		}
	}

	a, _ := Fingerprint(req{A: 1, Metadata: map[string]any{"x": 1}})
	b, _ := Fingerprint(req{A: 1, Metadata: map[string]any{"x": 2}})
	if a == b || len(a) != 64 || strings.ToLower(a) != a {
		t.Errorf("fingerprints %s and %s", a, b)
	}
}

func TestFingerprintErrors(t *testing.T) {
	if _, err := Fingerprint(math.NaN()); err == nil {
		t.Error("Fingerprint(NaN) succeeded")
	}
	if _, err := Fingerprint(math.Inf(1)); err == nil {
		t.Error("Fingerprint(+Inf) succeeded")
	}
	_, err := Fingerprint(map[string]int64{"n": 1 << 60})
	if !errors.Is(err, ErrNotIJSON) {
		t.Errorf("Fingerprint(2^60) = %v, want ErrNotIJSON", err)
	}
	var serr *Error
	if !errors.As(err, &serr) || serr.Pointer != "/n" {
		t.Errorf("error = %#v, want pointer /n", err)
	}
	if _, err := Fingerprint(jsontext.Value(`{"a":1,"a":1}`)); !errors.Is(err, ErrNotIJSON) {
		t.Errorf("Fingerprint(raw duplicate) = %v, want ErrNotIJSON", err)
	}
	if _, err := Fingerprint(stdjson.RawMessage(`[9007199254740993]`)); !errors.Is(err, ErrNotIJSON) {
		t.Errorf("Fingerprint(raw big int) = %v, want ErrNotIJSON", err)
	}
	if _, err := Fingerprint(make(chan int)); err == nil {
		t.Error("Fingerprint(chan) succeeded")
	}
}
