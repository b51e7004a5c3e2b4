package jcsfp

import (
	"bytes"
	stdjson "encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/waypost/waypost/internal/codec/strictjson"
)

// FuzzCanonical checks that Canonical never panics, that its output is
// strict JSON, canonical (a fixed point), whitespace-independent, and
// denotes the same value as the input when both are parsed into Go values.
func FuzzCanonical(f *testing.F) {
	for _, s := range []string{
		`{}`, `[]`, `null`, `true`, `0`, `-0`, `1e21`, `1e-7`, `0.000001`, `4.50`, `2e-3`,
		`333333333.33333329`, `9007199254740991`, `9007199254740992`, `1e400`, `5e-324`,
		`{"\u20ac":1,"\r":2,"\ufb33":3,"1":4,"\ud83d\ude00":5,"\u0080":6,"\u00f6":7}`,
		`{"numbers":[333333333.33333329,1E30,4.50,2e-3,0.000000000000000000000000001],"string":"\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/","literals":[null,true,false]}`,
		`{"a":1,"a":2}`, `"\ud800"`, "\"\xff\"", `{"a":[{"b":{"c":[]}}]}`, `"\u2028\u2029\u007f"`,
		` [ 1 , 2 ] `, `{"":""}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := Canonical(in)
		if err != nil {
			if !errors.Is(err, ErrNotIJSON) {
				t.Fatalf("error does not wrap ErrNotIJSON: %v", err)
			}
			return
		}
		if err := strictjson.CheckSyntax(out); err != nil {
			t.Fatalf("output %q is not strict JSON: %v", out, err)
		}
		again, err := Canonical(out)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("not a fixed point: %q -> %q (%v)", out, again, err)
		}
		// Reformatting the input must not change the canonical form.
		v := jsontext.Value(bytes.Clone(in))
		if err := v.Indent(jsontext.WithIndent("\t")); err == nil {
			re, err := Canonical(v)
			if err != nil || !bytes.Equal(re, out) {
				t.Fatalf("indented input canonicalizes differently: %q vs %q (%v)", re, out, err)
			}
		}
		// Same value: compare the parsed forms (numbers as float64).
		var a, b any
		if err := stdjson.Unmarshal(in, &a); err != nil {
			t.Fatalf("encoding/json rejects accepted input: %v", err)
		}
		if err := stdjson.Unmarshal(out, &b); err != nil {
			t.Fatalf("encoding/json rejects output %q: %v", out, err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("value changed:\n%#v\n%#v", a, b)
		}
		if fp, err := FingerprintJSON(in); err != nil || len(fp) != 64 {
			t.Fatalf("FingerprintJSON: %q, %v", fp, err)
		}
	})
}
