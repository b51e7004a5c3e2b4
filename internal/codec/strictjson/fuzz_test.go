package strictjson

import (
	"bytes"
	stdjson "encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/go-json-experiment/json"
)

// fuzzSeeds are edge cases for FuzzDecode; the corpus under
// testdata/fuzz/FuzzDecode holds inputs found by earlier fuzzing runs.
var fuzzSeeds = []string{
	`{}`,
	`{"request_id":"req_1","recipient_ids":["a","b"],"thread_id":null,"kind":"result","body":{"text":"hi"}}`,
	`{"metadata":{"a":null,"b":[1,-0,2.5e-10,1e308,true],"c":{"d":"\u20ac\ud83d\ude00"}}}`,
	`{"raw":{"z":[null,{"y":-1e-400}]},"anything":[{}]}`,
	`{"items":[{"item_id":"i","stage":"received"}],"checkpoint_cursor":null}`,
	`{"limit":9223372036854775807,"small":-128,"count":4294967295,"ratio":-0.0}`,
	`{"limit":9223372036854775808}`,
	`{"small":128}`,
	`{"ratio":1e400}`,
	`{"ratio":NaN}`,
	`{"a":1,"a":2}`,
	`{"metadata":{"x":{"y":1,"y":2}}}`,
	`{"request_id":null}`,
	`{"Request_ID":"x"}`,
	`{"kind":"\ud800"}`,
	"{\"kind\":\"\xff\"}",
	`{} {}`,
	`{"body":{"text":"a"}}x`,
	`[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]`,
	`{"metadata":{"a":"\u0000\"\\\/\b\f\n\r\t"}}`,
	`{"ratio":4.9e-324,"limit":-0}`,
	"  \n{\"flag\":true}\t",
	``,
	`null`,
}

// FuzzDecode checks that DecodeBytes never panics, that whatever it accepts
// is also accepted by CheckSyntax and by encoding/json, and that accepted
// values survive a marshal/decode round trip unchanged.
func FuzzDecode(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var v testRequest
		err := DecodeBytes(in, &v)
		syntaxErr := CheckSyntax(in)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("rejection does not wrap ErrInvalid: %v", err)
			}
			if _, ok := errors.AsType[*Error](err); !ok {
				t.Fatalf("rejection is %T, not *Error", err)
			}
			if syntaxErr != nil && err.Error() != syntaxErr.Error() {
				t.Fatalf("DecodeBytes and CheckSyntax disagree: %v vs %v", err, syntaxErr)
			}
			return
		}
		if syntaxErr != nil {
			t.Fatalf("DecodeBytes accepted what CheckSyntax rejects: %v", syntaxErr)
		}

		// encoding/json must accept it as well.
		var v1 testRequest
		if err := stdjson.Unmarshal(in, &v1); err != nil {
			t.Fatalf("encoding/json rejects accepted input: %v", err)
		}

		// Round trip: marshal, decode strictly again, marshal again.
		m1, err := json.Marshal(&v, json.Deterministic(true))
		if err != nil {
			t.Fatalf("marshal accepted value: %v", err)
		}
		var w testRequest
		if err := DecodeBytes(m1, &w); err != nil {
			t.Fatalf("re-decoding %s: %v", m1, err)
		}
		m2, err := json.Marshal(&w, json.Deterministic(true))
		if err != nil {
			t.Fatalf("marshal round-tripped value: %v", err)
		}
		if !bytes.Equal(m1, m2) {
			t.Fatalf("round trip changed the value:\n%s\n%s", m1, m2)
		}
		// The canonical re-encoding must be accepted by encoding/json too.
		var w1 testRequest
		if err := stdjson.Unmarshal(m1, &w1); err != nil {
			t.Fatalf("encoding/json rejects re-encoded value %s: %v", m1, err)
		}
	})
}

// FuzzParse checks that Parse accepts exactly what CheckSyntax accepts, with the same error, and that the
// document it builds is the one encoding/json decodes with UseNumber (what JSON Schema validators such as
// santhosh-tekuri/jsonschema parse a document into).
func FuzzParse(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	for _, s := range []string{`[]`, `[{},[],""]`, `"x"`, `1.50`, `-0`, `1E+2`, `{"a":{"b":[{"c":[]}]}}`, `{"":0,"\u0061":1}`, `false`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		orig := bytes.Clone(in)
		doc, err := Parse(in)
		if !bytes.Equal(in, orig) { // the decoder reads the caller's bytes in place
			t.Fatalf("Parse changed its input: %q, was %q", in, orig)
		}
		syntaxErr := CheckSyntax(in)
		if (err == nil) != (syntaxErr == nil) || (err != nil && err.Error() != syntaxErr.Error()) {
			t.Fatalf("Parse and CheckSyntax disagree: %v vs %v", err, syntaxErr)
		}
		if err != nil {
			return
		}
		dec := stdjson.NewDecoder(bytes.NewReader(in))
		dec.UseNumber()
		var want any
		if err := dec.Decode(&want); err != nil {
			t.Fatalf("encoding/json rejects accepted input: %v", err)
		}
		if !reflect.DeepEqual(doc, want) {
			t.Fatalf("Parse built %#v, encoding/json decodes %#v", doc, want)
		}
	})
}
