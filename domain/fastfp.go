package domain

import (
	"crypto/sha256"
	"encoding/hex"
	"unicode/utf8"
)

// sendFingerprint returns Fingerprint(n) without the generic path (marshal, re-parse, sort, re-encode):
// it writes the RFC 8785 form of normalizedSend directly. n.Metadata must be in JCS form already, as
// validateSend leaves it. ok is false when a string is not valid UTF-8; the caller then takes the generic
// path, which reports the error. TestSendFingerprintMatchesJCS checks that both paths agree.
func sendFingerprint(n normalizedSend) (fp string, ok bool) {
	w := jcsWriter{b: make([]byte, 0, 256+len(n.Body.Text)+len(n.Subject)+len(n.Metadata)), ok: true}
	// Members in JCS order (the names are ASCII, so byte order is UTF-16 order).
	w.raw(`{"attachment_ids":`)
	w.strings(n.AttachmentIDs)
	w.raw(`,"body":{"text":`)
	w.string(n.Body.Text)
	w.raw(`},"in_reply_to":`)
	w.stringPtr(n.InReplyTo)
	w.raw(`,"kind":`)
	w.string(n.Kind)
	w.raw(`,"metadata":`)
	if len(n.Metadata) == 0 {
		w.raw("null")
	} else {
		w.b = append(w.b, n.Metadata...)
	}
	w.raw(`,"recipient_ids":`)
	w.strings(n.RecipientIDs)
	w.raw(`,"source":{`)
	sep := ""
	for _, f := range [2]struct{ name, v string }{
		{"native_message_id", n.Source.NativeMessageID}, {"native_thread_id", n.Source.NativeThreadID},
	} {
		if f.v == "" {
			continue // omitempty
		}
		w.raw(sep + `"` + f.name + `":`)
		w.string(f.v)
		sep = ","
	}
	w.raw(`},"subject":`)
	w.string(n.Subject)
	w.raw(`,"thread_id":`)
	w.stringPtr(n.ThreadID)
	w.raw("}")
	return w.sum()
}

// ackFingerprint returns fingerprintOf(OpInboxAck, …) of an ack request, as Ack computes it on the generic
// path, by writing its RFC 8785 form directly: {"op":"inbox.ack","req":{"checkpoint_cursor",
// "consumer_id","items":[{"item_id","stage"}…]}}. ok is false when a string is not valid UTF-8 (the caller
// then takes the generic path). TestAckFingerprintMatchesJCS checks that both paths agree.
func ackFingerprint(req AckRequest) (fp string, ok bool) {
	w := jcsWriter{b: make([]byte, 0, 128+len(req.ConsumerID)+48*len(req.Items)), ok: true}
	w.raw(`{"op":"inbox.ack","req":{"checkpoint_cursor":`)
	w.stringPtr(req.CheckpointCursor)
	w.raw(`,"consumer_id":`)
	w.string(req.ConsumerID)
	w.raw(`,"items":[`) // a nil slice too: Fingerprint marshals it as []
	for i, e := range req.Items {
		if i > 0 {
			w.raw(",")
		}
		w.raw(`{"item_id":`)
		w.string(e.ItemID)
		w.raw(`,"stage":`)
		w.string(string(e.Stage))
		w.raw("}")
	}
	w.raw("]}}")
	return w.sum()
}

// jcsWriter writes the RFC 8785 form of a value member by member. ok turns false at the first string that
// is not valid UTF-8, after which nothing more is written.
type jcsWriter struct {
	b  []byte
	ok bool
}

// raw appends JSON text that is already in JCS form (member names, punctuation).
func (w *jcsWriter) raw(s string) { w.b = append(w.b, s...) }

// string appends a JSON string.
func (w *jcsWriter) string(s string) {
	if w.ok {
		w.b, w.ok = appendJCSString(w.b, s)
	}
}

// stringPtr appends a JSON string, or null for nil.
func (w *jcsWriter) stringPtr(s *string) {
	if s == nil {
		w.raw("null")
		return
	}
	w.string(*s)
}

// strings appends an array of JSON strings ([] for nil, as Fingerprint marshals it).
func (w *jcsWriter) strings(ss []string) {
	w.raw("[")
	for i, s := range ss {
		if i > 0 {
			w.raw(",")
		}
		w.string(s)
	}
	w.raw("]")
}

// sum returns the lowercase hex SHA-256 of what was written, and whether it was all valid.
func (w *jcsWriter) sum() (string, bool) {
	if !w.ok {
		return "", false
	}
	s := sha256.Sum256(w.b)
	return hex.EncodeToString(s[:]), true
}

// appendJCSString appends s as RFC 8785 writes a string (ECMAScript JSON.stringify): `"` and `\` escaped,
// the control characters below U+0020 as \b \t \n \f \r or \u00xx, everything else as is. It reports false
// for invalid UTF-8.
func appendJCSString(b []byte, s string) ([]byte, bool) {
	if !utf8.ValidString(s) {
		return b, false
	}
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b = appendEscapedASCII(append(b, s[start:i]...), c)
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"'), true
}
