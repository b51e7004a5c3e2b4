package domain

import (
	"encoding/json"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// jcsText draws strings that exercise every JCS escaping rule: quotes, backslashes, each control
// character, DEL, U+2028/U+2029, non-ASCII and astral characters, and arbitrary runes.
func jcsText() *rapid.Generator[string] {
	special := rapid.SampledFrom([]string{`"`, `\`, "\b", "\f", "\n", "\r", "\t", "\x00", "\x01", "\x0f", "\x10",
		"\x1f", " ", "\x7f", "\u2028", "\u2029", "é", "€", "😀", "/", "<", "&", "a"})
	return rapid.Custom(func(t *rapid.T) string {
		parts := rapid.SliceOfN(rapid.OneOf(special, rapid.String()), 0, 6).Draw(t, "parts")
		s := ""
		for _, p := range parts {
			s += p
		}
		return s
	})
}

// sameAsGeneric fails t unless the direct fingerprint (fast) accepts the request and equals the generic
// path's (generic).
func sameAsGeneric(t *rapid.T, name string, generic func() (string, error), fast func() (string, bool)) {
	want, err := generic()
	if err != nil {
		t.Fatalf("generic path: %v", err)
	}
	if got, ok := fast(); !ok || got != want {
		t.Fatalf("%s = %q, %v; generic path %q", name, got, ok, want)
	}
}

// TestSendFingerprintMatchesJCS: the direct encoder of message.send fingerprints gives exactly the
// fingerprint of the generic path (marshal, RFC 8785 canonicalization, SHA-256) for any normalized request,
// and declines invalid UTF-8.
func TestSendFingerprintMatchesJCS(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		str := jcsText()
		ptr := func(label string) *string {
			if !rapid.Bool().Draw(t, label+"?") {
				return nil
			}
			v := str.Draw(t, label)
			return &v
		}
		md := rapid.MapOfN(str, rapid.OneOf(
			rapid.Map(str, func(s string) any { return s }),
			rapid.Map(rapid.IntRange(-1<<53+1, 1<<53-1), func(n int) any { return n }),
			rapid.Map(rapid.Float64Range(-1e15, 1e15), func(f float64) any { return f }),
			rapid.Just[any](nil), rapid.Just[any](true),
			rapid.Map(rapid.SliceOfN(str, 0, 3), func(s []string) any { return s }),
		), 0, 5).Draw(t, "metadata")
		raw, err := json.Marshal(md)
		if err != nil {
			t.Fatal(err)
		}
		canon, err := canonicalJSON(raw)
		if err != nil {
			t.Fatalf("metadata %s: %v", raw, err)
		}
		n := normalizedSend{
			RecipientIDs: rapid.SliceOfN(str, 0, 3).Draw(t, "recipients"),
			ThreadID:     ptr("thread"), InReplyTo: ptr("reply"),
			Kind: str.Draw(t, "kind"), Subject: str.Draw(t, "subject"),
			Body:          MessageBody{Text: str.Draw(t, "text")},
			Source:        MessageSource{NativeThreadID: str.Draw(t, "nthread"), NativeMessageID: str.Draw(t, "nmsg")},
			AttachmentIDs: rapid.SliceOfN(str, 0, 3).Draw(t, "attachments"),
			Metadata:      canon,
		}
		if rapid.Bool().Draw(t, "nil slices") {
			n.RecipientIDs, n.AttachmentIDs = nil, nil
		}
		sameAsGeneric(t, "sendFingerprint", func() (string, error) { return Fingerprint(n) }, func() (string, bool) { return sendFingerprint(n) })
	})
	bad := normalizedSend{Subject: "\xff", Metadata: []byte("{}")}
	if _, ok := sendFingerprint(bad); ok {
		t.Fatal("invalid UTF-8 accepted")
	}
	if _, err := Fingerprint(bad); err == nil {
		t.Fatal("the generic path accepts invalid UTF-8: the fast path must not decline it")
	}
}

// TestAckFingerprintMatchesJCS: the direct encoder of inbox.ack fingerprints gives exactly the fingerprint of
// the generic path for any request (strings with every escaping rule, no or empty items, with and without a
// checkpoint cursor), and declines invalid UTF-8.
func TestAckFingerprintMatchesJCS(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		str := jcsText()
		req := AckRequest{RequestID: str.Draw(t, "request_id"), ConsumerID: str.Draw(t, "consumer")}
		if rapid.Bool().Draw(t, "cursor?") {
			c := str.Draw(t, "cursor")
			req.CheckpointCursor = &c
		}
		if rapid.Bool().Draw(t, "items?") {
			req.Items = rapid.SliceOfN(rapid.Custom(func(t *rapid.T) AckEntry {
				return AckEntry{ItemID: str.Draw(t, "item"), Stage: Stage(rapid.OneOf(rapid.SampledFrom([]string{"received", "processed"}), str).Draw(t, "stage"))}
			}), 0, 4).Draw(t, "items")
		}
		sameAsGeneric(t, "ackFingerprint", func() (string, error) { return ackFingerprintGeneric(req) }, func() (string, bool) { return ackFingerprint(req) })
	})
	for _, bad := range []AckRequest{{ConsumerID: "\xff"}, {Items: []AckEntry{{ItemID: "it_\xfe"}}}} {
		if _, ok := ackFingerprint(bad); ok {
			t.Fatalf("%+v: invalid UTF-8 accepted", bad)
		}
		if _, err := ackFingerprintGeneric(bad); err == nil {
			t.Fatalf("%+v: the generic path accepts invalid UTF-8: the fast path must not decline it", bad)
		}
	}
}

// BenchmarkAckFingerprint compares the direct and the generic fingerprint of a 50-item ack with a
// checkpoint cursor, as a consumer acknowledging a page sends it.
func BenchmarkAckFingerprint(b *testing.B) {
	cursor := "c1." + strings.Repeat("x", 120)
	req := AckRequest{RequestID: "ack-1", ConsumerID: "con_0123456789abcdefghij", CheckpointCursor: &cursor}
	for i := range 50 {
		req.Items = append(req.Items, AckEntry{ItemID: newItemID(uint64(1000+i), "msg_0123456789abcdefghij"), Stage: StageReceived})
	}
	b.Run("direct", func(b *testing.B) {
		for b.Loop() {
			if _, ok := ackFingerprint(req); !ok {
				b.Fatal("declined")
			}
		}
	})
	b.Run("generic", func(b *testing.B) {
		for b.Loop() {
			if _, err := ackFingerprintGeneric(req); err != nil {
				b.Fatal(err)
			}
		}
	})
}
