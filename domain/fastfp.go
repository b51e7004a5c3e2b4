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
	b := make([]byte, 0, 256+len(n.Body.Text)+len(n.Subject)+len(n.Metadata))
	// Members in JCS order (the names are ASCII, so byte order is UTF-16 order).
	b = append(b, `{"attachment_ids":`...)
	if b, ok = appendJCSStrings(b, n.AttachmentIDs); !ok {
		return "", false
	}
	b = append(b, `,"body":{"text":`...)
	if b, ok = appendJCSString(b, n.Body.Text); !ok {
		return "", false
	}
	b = append(b, `},"in_reply_to":`...)
	if b, ok = appendJCSStringPtr(b, n.InReplyTo); !ok {
		return "", false
	}
	b = append(b, `,"kind":`...)
	if b, ok = appendJCSString(b, n.Kind); !ok {
		return "", false
	}
	b = append(b, `,"metadata":`...)
	if len(n.Metadata) == 0 {
		b = append(b, "null"...)
	} else {
		b = append(b, n.Metadata...)
	}
	b = append(b, `,"recipient_ids":`...)
	if b, ok = appendJCSStrings(b, n.RecipientIDs); !ok {
		return "", false
	}
	b = append(b, `,"source":{`...)
	sep := ""
	for _, f := range [2]struct{ name, v string }{
		{"native_message_id", n.Source.NativeMessageID}, {"native_thread_id", n.Source.NativeThreadID},
	} {
		if f.v == "" {
			continue // omitempty
		}
		b = append(b, sep...)
		b = append(b, `"`+f.name+`":`...)
		if b, ok = appendJCSString(b, f.v); !ok {
			return "", false
		}
		sep = ","
	}
	b = append(b, `},"subject":`...)
	if b, ok = appendJCSString(b, n.Subject); !ok {
		return "", false
	}
	b = append(b, `,"thread_id":`...)
	if b, ok = appendJCSStringPtr(b, n.ThreadID); !ok {
		return "", false
	}
	b = append(b, '}')
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), true
}

// ackFingerprint returns fingerprintOf(OpInboxAck, …) of an ack request, as Ack computes it on the generic
// path, by writing its RFC 8785 form directly: {"op":"inbox.ack","req":{"checkpoint_cursor",
// "consumer_id","items":[{"item_id","stage"}…]}}. ok is false when a string is not valid UTF-8 (the caller
// then takes the generic path). TestAckFingerprintMatchesJCS checks that both paths agree.
func ackFingerprint(req AckRequest) (fp string, ok bool) {
	b := make([]byte, 0, 128+len(req.ConsumerID)+48*len(req.Items))
	b = append(b, `{"op":"inbox.ack","req":{"checkpoint_cursor":`...)
	if b, ok = appendJCSStringPtr(b, req.CheckpointCursor); !ok {
		return "", false
	}
	b = append(b, `,"consumer_id":`...)
	if b, ok = appendJCSString(b, req.ConsumerID); !ok {
		return "", false
	}
	b = append(b, `,"items":`...)
	b = append(b, '[') // a nil slice too: Fingerprint marshals it as []
	for i, e := range req.Items {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"item_id":`...)
		if b, ok = appendJCSString(b, e.ItemID); !ok {
			return "", false
		}
		b = append(b, `,"stage":`...)
		if b, ok = appendJCSString(b, string(e.Stage)); !ok {
			return "", false
		}
		b = append(b, '}')
	}
	b = append(b, ']')
	b = append(b, "}}"...)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), true
}

func appendJCSStrings(b []byte, ss []string) ([]byte, bool) {
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		var ok bool
		if b, ok = appendJCSString(b, s); !ok {
			return b, false
		}
	}
	return append(b, ']'), true
}

func appendJCSStringPtr(b []byte, s *string) ([]byte, bool) {
	if s == nil {
		return append(b, "null"...), true
	}
	return appendJCSString(b, *s)
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
