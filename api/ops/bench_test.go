package ops_test

import (
	"fmt"
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

// BenchmarkDecodeAck measures the same for an inbox.ack of 50 items with a checkpoint cursor, as the
// read+ack phase of `waypost bench` sends it.
func BenchmarkDecodeAck(b *testing.B) {
	set, err := ops.NewSet(schemas.MustNew(), ops.List())
	if err != nil {
		b.Fatal(err)
	}
	o := set.Op("inbox.ack")
	var sb strings.Builder
	sb.WriteString(`{"request_id":"bench-0123456789ab-ack0-12","consumer_id":"con_1nh7gsv1pvg8pmtb1jac","checkpoint_cursor":"` + strings.Repeat("c", 120) + `","items":[`)
	for i := range 50 {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"item_id":"it_%d_49f3f430a1f36ec5","stage":"received"}`, 1000+i)
	}
	sb.WriteString("]}")
	raw := []byte(sb.String())
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := set.Decode(o, raw, false, nil); err != nil {
			b.Fatal(err)
		}
	}
}
