package domain

import (
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"
)

// The records written on every send and acknowledgement are encoded here directly instead of through
// encoding/json's reflection, byte for byte as json.Marshal writes them (TestRecordJSONMatchesEncodingJSON
// holds every encoder to that, and TestRecordJSONCoversEveryField fails when one of these types gains a
// field its encoder does not write). An encoder reports false where its fast path does not apply (a time outside
// UTC or years 0-9999, an embedded raw JSON value that json.Marshal would still compact or escape, an error
// object); encode then takes json.Marshal's path. Embedded raw values (FeedItem.Data, Submission.Fixed and
// .Result, Message.Metadata) are JSON the service wrote itself, so they are copied, not validated again.

// encodeFast returns the JSON of the record types written on the hot paths, or false for any other value.
func encodeFast(v any) ([]byte, bool) {
	switch r := v.(type) {
	case FeedItem:
		return r.storedJSON()
	case storedMessage:
		return r.appendJSON(make([]byte, 0, r.sizeHint()))
	case Submission:
		return r.appendJSON(make([]byte, 0, 320+len(r.Fixed)+len(r.Result)))
	case SendResult:
		return r.appendJSON(make([]byte, 0, 256), &jsonSafe)
	case sendFixed:
		return r.appendJSON(make([]byte, 0, 128))
	case MessageItemData:
		return r.appendJSON(make([]byte, 0, 160+len(r.Subject)))
	case ReceiptItemData:
		return r.appendJSON(make([]byte, 0, 192))
	case receiptRecord:
		return r.appendJSON(make([]byte, 0, 96))
	case MessageBody:
		b := append(make([]byte, 0, 16+len(r.Text)), `{"text":`...)
		return append(appendJSONString(b, r.Text, &jsonSafe), '}'), true
	}
	return nil, false
}

// sizeHint is about the length of f's JSON when nothing in it needs escaping: the member names, the
// punctuation and the time (about 240 bytes), and the strings and data, so that appendJSON fills one buffer
// instead of growing it (a receipt's item is about 560 bytes).
func (f FeedItem) sizeHint() int {
	n := 256 + len(f.ItemID) + len(f.SpaceID) + len(f.VisibleSeq) + len(f.ItemType) + len(f.ResourceID) +
		len(f.ProducerID) + len(f.Data)
	for _, r := range f.RecipientIDs {
		n += len(r) + 3
	}
	if f.ThreadID != nil {
		n += len(*f.ThreadID)
	}
	return n
}

// storedJSON writes f as it is stored, into one buffer of sizeHint.
func (f FeedItem) storedJSON() ([]byte, bool) {
	return f.appendJSON(make([]byte, 0, f.sizeHint()), &jsonSafe)
}

func (f FeedItem) appendJSON(b []byte, safe *asciiSafe) ([]byte, bool) {
	b = append(b, `{"item_id":`...)
	b = appendJSONString(b, f.ItemID, safe)
	b = append(b, `,"space_id":`...)
	b = appendJSONString(b, f.SpaceID, safe)
	b = append(b, `,"visible_seq":`...)
	b = appendJSONString(b, f.VisibleSeq, safe)
	b = append(b, `,"item_type":`...)
	b = appendJSONString(b, string(f.ItemType), safe)
	b = append(b, `,"resource_id":`...)
	b = appendJSONString(b, f.ResourceID, safe)
	b = append(b, `,"resource_version":`...)
	b = strconv.AppendInt(b, f.ResourceVersion, 10)
	b = append(b, `,"producer_id":`...)
	b = appendJSONString(b, f.ProducerID, safe)
	b = append(b, `,"recipient_ids":`...)
	b = appendJSONStrings(b, f.RecipientIDs, safe)
	b = append(b, `,"thread_id":`...)
	b = appendJSONStringPtr(b, f.ThreadID, safe)
	b = append(b, `,"committed_at":`...)
	var ok bool
	if b, ok = appendJSONTime(b, f.CommittedAt); !ok {
		return nil, false
	}
	b = append(b, `,"data":`...)
	if b, ok = appendJSONRaw(b, f.Data, safe); !ok {
		return nil, false
	}
	return append(b, '}'), true
}

// sizeHint is about the length of m's JSON when nothing in it needs escaping: the member names, the
// punctuation, the time and the body's digest (about 400 bytes), and the strings, so that appendJSON fills
// one buffer instead of growing it at its end.
func (m storedMessage) sizeHint() int {
	n := 448 + len(m.MessageID) + len(m.SpaceID) + len(m.ProducerID) + len(m.ThreadID) + len(m.Kind) +
		len(m.Subject) + len(m.Body.Text) + len(m.Metadata) + len(m.Source.NativeThreadID) + len(m.Source.NativeMessageID)
	if m.InReplyTo != nil {
		n += len(*m.InReplyTo)
	}
	for _, ids := range [][]string{m.RecipientIDs, m.AttachmentIDs} {
		for _, id := range ids {
			n += len(id) + 3
		}
	}
	return n
}

func (m storedMessage) appendJSON(b []byte) ([]byte, bool) {
	b = append(b, `{"message_id":`...)
	b = appendJSONString(b, m.MessageID, &jsonSafe)
	b = append(b, `,"space_id":`...)
	b = appendJSONString(b, m.SpaceID, &jsonSafe)
	b = append(b, `,"producer_id":`...)
	b = appendJSONString(b, m.ProducerID, &jsonSafe)
	b = append(b, `,"thread_id":`...)
	b = appendJSONString(b, m.ThreadID, &jsonSafe)
	b = append(b, `,"in_reply_to":`...)
	b = appendJSONStringPtr(b, m.InReplyTo, &jsonSafe)
	b = append(b, `,"kind":`...)
	b = appendJSONString(b, m.Kind, &jsonSafe)
	b = append(b, `,"subject":`...)
	b = appendJSONString(b, m.Subject, &jsonSafe)
	b = append(b, `,"body":{"text":`...)
	b = appendJSONString(b, m.Body.Text, &jsonSafe)
	b = append(b, `},"source":{`...)
	if m.Source.NativeThreadID != "" {
		b = append(b, `"native_thread_id":`...)
		b = appendJSONString(b, m.Source.NativeThreadID, &jsonSafe)
		if m.Source.NativeMessageID != "" {
			b = append(b, ',')
		}
	}
	if m.Source.NativeMessageID != "" {
		b = append(b, `"native_message_id":`...)
		b = appendJSONString(b, m.Source.NativeMessageID, &jsonSafe)
	}
	b = append(b, `},"recipient_ids":`...)
	b = appendJSONStrings(b, m.RecipientIDs, &jsonSafe)
	b = append(b, `,"attachment_ids":`...)
	b = appendJSONStrings(b, m.AttachmentIDs, &jsonSafe)
	b = append(b, `,"metadata":`...)
	var ok bool
	if b, ok = appendJSONRaw(b, m.Metadata, &jsonSafe); !ok {
		return nil, false
	}
	b = append(b, `,"committed_at":`...)
	if b, ok = appendJSONTime(b, m.CommittedAt); !ok {
		return nil, false
	}
	b = append(b, `,"envelope_version":`...)
	b = strconv.AppendInt(b, int64(m.EnvelopeVersion), 10)
	b = append(b, `,"visible_seq":`...)
	b = appendJSONString(b, m.VisibleSeq, &jsonSafe)
	if m.Inline {
		b = append(b, `,"body_inline":true`...)
	}
	if m.BodySHA256 != "" {
		b = append(b, `,"body_sha256":`...)
		b = appendJSONString(b, m.BodySHA256, &jsonSafe)
	}
	if m.BodySize != 0 {
		b = append(b, `,"body_size":`...)
		b = strconv.AppendInt(b, m.BodySize, 10)
	}
	return append(b, '}'), true
}

func (s Submission) appendJSON(b []byte) ([]byte, bool) {
	if s.Error != nil {
		return nil, false
	}
	b = append(b, `{"operation":`...)
	b = appendJSONString(b, s.Operation, &jsonSafe)
	b = append(b, `,"request_id":`...)
	b = appendJSONString(b, s.RequestID, &jsonSafe)
	b = append(b, `,"fingerprint":`...)
	b = appendJSONString(b, s.Fingerprint, &jsonSafe)
	b = append(b, `,"resource_id":`...)
	b = appendJSONString(b, s.ResourceID, &jsonSafe)
	b = append(b, `,"state":`...)
	b = appendJSONString(b, string(s.State), &jsonSafe)
	b = append(b, `,"reserved_at":`...)
	var ok bool
	if b, ok = appendJSONTime(b, s.ReservedAt); !ok {
		return nil, false
	}
	if len(s.Fixed) > 0 {
		b = append(b, `,"fixed":`...)
		if b, ok = appendJSONRaw(b, s.Fixed, &jsonSafe); !ok {
			return nil, false
		}
	}
	if len(s.Result) > 0 {
		b = append(b, `,"result":`...)
		if b, ok = appendJSONRaw(b, s.Result, &jsonSafe); !ok {
			return nil, false
		}
	}
	return append(b, '}'), true
}

func (r SendResult) appendJSON(b []byte, safe *asciiSafe) ([]byte, bool) {
	b = append(b, `{"submission_state":`...)
	b = appendJSONString(b, string(r.SubmissionState), safe)
	b = append(b, `,"resource_id":`...)
	b = appendJSONString(b, r.ResourceID, safe)
	b = append(b, `,"message_id":`...)
	b = appendJSONString(b, r.MessageID, safe)
	b = append(b, `,"thread_id":`...)
	b = appendJSONString(b, r.ThreadID, safe)
	b = append(b, `,"committed_at":`...)
	var ok bool
	if b, ok = appendJSONTime(b, r.CommittedAt); !ok {
		return nil, false
	}
	b = append(b, `,"visible_seq":`...)
	b = appendJSONString(b, r.VisibleSeq, safe)
	return append(b, '}'), true
}

func (f sendFixed) appendJSON(b []byte) ([]byte, bool) {
	b = append(b, `{"thread_id":`...)
	b = appendJSONString(b, f.ThreadID, &jsonSafe)
	b = append(b, `,"recipient_ids":`...)
	b = appendJSONStrings(b, f.RecipientIDs, &jsonSafe)
	return append(b, '}'), true
}

func (d MessageItemData) appendJSON(b []byte) ([]byte, bool) {
	b = append(b, `{"message_id":`...)
	b = appendJSONString(b, d.MessageID, &jsonSafe)
	b = append(b, `,"kind":`...)
	b = appendJSONString(b, d.Kind, &jsonSafe)
	b = append(b, `,"subject":`...)
	b = appendJSONString(b, d.Subject, &jsonSafe)
	b = append(b, `,"in_reply_to":`...)
	b = appendJSONStringPtr(b, d.InReplyTo, &jsonSafe)
	b = append(b, `,"attachment_count":`...)
	b = strconv.AppendInt(b, int64(d.AttachmentCount), 10)
	return append(b, '}'), true
}

func (d ReceiptItemData) appendJSON(b []byte) ([]byte, bool) {
	b = append(b, `{"consumer_id":`...)
	b = appendJSONString(b, d.ConsumerID, &jsonSafe)
	b = append(b, `,"acked_item_id":`...)
	b = appendJSONString(b, d.AckedItemID, &jsonSafe)
	b = append(b, `,"resource_id":`...)
	b = appendJSONString(b, d.ResourceID, &jsonSafe)
	b = append(b, `,"stage":`...)
	b = appendJSONString(b, string(d.Stage), &jsonSafe)
	b = append(b, `,"receipt_version":`...)
	b = strconv.AppendInt(b, d.ReceiptVersion, 10)
	return append(b, '}'), true
}

func (r receiptRecord) appendJSON(b []byte) ([]byte, bool) {
	b = append(b, `{"receipt_id":`...)
	b = appendJSONString(b, r.ReceiptID, &jsonSafe)
	b = append(b, `,"stage":`...)
	b = appendJSONString(b, string(r.Stage), &jsonSafe)
	b = append(b, `,"version":`...)
	b = strconv.AppendInt(b, r.Version, 10)
	return append(b, '}'), true
}

// appendJSONTime appends t as time.Time's MarshalJSON writes it (RFC 3339 with nanoseconds), for a UTC time
// of the years 0-9999; false otherwise.
func appendJSONTime(b []byte, t time.Time) ([]byte, bool) {
	if t.Location() != time.UTC || t.Year() < 0 || t.Year() > 9999 {
		return nil, false
	}
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"'), true
}

// appendJSONRaw appends raw JSON as encoding/json embeds a json.RawMessage: null when nil, else compacted,
// and, when safe is the HTML-safe set (json.Marshal), with '<', '>', '&', U+2028 and U+2029 escaped. It
// reports false for a value that would change (white space outside strings; in HTML-safe mode those
// characters in a string, or any rune that starts with their first byte) or be refused (empty). The value
// is JSON the service wrote itself: it is not validated again.
func appendJSONRaw(b []byte, raw json.RawMessage, safe *asciiSafe) ([]byte, bool) {
	if raw == nil {
		return append(b, "null"...), true
	}
	if len(raw) == 0 {
		return nil, false
	}
	html := !safe['<']
	inString := false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if inString {
			switch {
			case c == '\\':
				i++ // the escaped character
			case c == '"':
				inString = false
			case html && (c == '<' || c == '>' || c == '&' || c == 0xE2): // 0xE2 starts U+2028 and U+2029 (and other runes)
				return nil, false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case ' ', '\t', '\n', '\r':
			return nil, false
		}
	}
	return append(b, raw...), true
}

func appendJSONStringPtr(b []byte, s *string, safe *asciiSafe) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	return appendJSONString(b, *s, safe)
}

func appendJSONStrings(b []byte, ss []string, safe *asciiSafe) []byte {
	b, _ = appendJSONArray(b, ss, func(b []byte, s string) ([]byte, bool) { return appendJSONString(b, s, safe), true })
	return b
}

// appendJSONArray appends xs as encoding/json writes a slice (null when nil), each element by elem; false
// when elem reports false for one.
func appendJSONArray[T any](b []byte, xs []T, elem func([]byte, T) ([]byte, bool)) ([]byte, bool) {
	if xs == nil {
		return append(b, "null"...), true
	}
	b = append(b, '[')
	for i, x := range xs {
		if i > 0 {
			b = append(b, ',')
		}
		var ok bool
		if b, ok = elem(b, x); !ok {
			return nil, false
		}
	}
	return append(b, ']'), true
}

const hexDigits = "0123456789abcdef"

// appendEscapedASCII appends the escape of an ASCII byte that a JSON string may not hold as it is (or that
// the encoder chooses to escape): `\"` and `\\`, the short escapes \b \f \n \r \t, else \u00xx in lower-case
// hex — the same bytes for encoding/json and RFC 8785 (appendJCSString).
func appendEscapedASCII(b []byte, c byte) []byte {
	switch c {
	case '\\', '"':
		return append(b, '\\', c)
	case '\b':
		return append(b, '\\', 'b')
	case '\f':
		return append(b, '\\', 'f')
	case '\n':
		return append(b, '\\', 'n')
	case '\r':
		return append(b, '\\', 'r')
	case '\t':
		return append(b, '\\', 't')
	default:
		return append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
	}
}

// asciiSafe marks the ASCII bytes a JSON string holds as they are; the others are escaped.
type asciiSafe = [utf8.RuneSelf]bool

// jsonSafe is encoding/json's HTML-safe set, as json.Marshal writes stored records; wireSafe also holds '<',
// '>' and '&' as they are, as the HTTP API writes its answers (an Encoder with SetEscapeHTML(false)).
var jsonSafe, wireSafe = safeASCII(true), safeASCII(false)

func safeASCII(html bool) (t asciiSafe) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && (!html || c != '<' && c != '>' && c != '&')
	}
	return t
}

// appendJSONString appends s quoted as encoding/json writes a string: '"' and '\\' escaped, \b \f \n \r \t
// and the other control characters escaped, '<', '>' and '&' escaped unless safe holds them (jsonSafe:
// HTML-safe, as json.Marshal; wireSafe: as an Encoder with SetEscapeHTML(false)), U+2028 and U+2029
// escaped, and each byte of invalid UTF-8 replaced by \ufffd.
func appendJSONString(b []byte, s string, safe *asciiSafe) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if safe[c] {
				i++
				continue
			}
			b = appendEscapedASCII(append(b, s[start:i]...), c)
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
