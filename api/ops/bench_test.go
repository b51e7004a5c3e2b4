package ops_test

import (
	"strings"
	"testing"

	"github.com/waypost/waypost/api/ops"
	"github.com/waypost/waypost/schemas"
)

// BenchmarkDecodeSend measures what the boundary does with a 600-byte message.send body: syntax, schema,
// request_id and strict decoding.
func BenchmarkDecodeSend(b *testing.B) {
	set, err := ops.NewSet(schemas.MustNew(), ops.List())
	if err != nil {
		b.Fatal(err)
	}
	o := set.Op("message.send")
	raw := []byte(`{"request_id":"bench-0123456789ab-c0-12345","subject":"bench","body":{"text":"` + strings.Repeat("x", 600) + `"}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := set.Decode(o, raw, false, nil); err != nil {
			b.Fatal(err)
		}
	}
}
