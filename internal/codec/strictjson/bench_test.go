package strictjson

import (
	"strings"
	"testing"
)

// benchSendBody is a message.send request as `waypost bench` sends it: a 600-byte text.
var benchSendBody = []byte(`{"request_id":"bench-0123456789ab-c12-123456","subject":"bench","body":{"text":"` + strings.Repeat("x", 600) + `"}}`)

// BenchmarkParse parses a message.send request into generic values, as the transport does before the schema.
func BenchmarkParse(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(benchSendBody); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeChecked decodes a message.send request strictly into its struct, as the transport does after
// the schema.
func BenchmarkDecodeChecked(b *testing.B) {
	b.ReportAllocs()
	type body struct {
		Text string `json:"text"`
	}
	for b.Loop() {
		var v struct {
			RequestID string  `json:"request_id"`
			Subject   string  `json:"subject"`
			Body      body    `json:"body"`
			Thread    *string `json:"thread_id"`
		}
		if err := DecodeChecked(benchSendBody, &v); err != nil {
			b.Fatal(err)
		}
	}
}
