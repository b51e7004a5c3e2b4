package domain

// The results of the hottest operations (message.send, inbox.read, inbox.ack) are written for the HTTP API
// directly instead of through encoding/json's reflection, byte for byte as an encoding/json Encoder with
// SetEscapeHTML(false) writes them (the transport's encoder, httpx.WriteJSON) less its trailing newline:
// TestWireJSONMatchesEncodingJSON holds them to that, TestWireJSONCoversEveryField fails when one of these
// types gains a field the encoder does not write. A 50-item inbox page costs encoding/json a reflective walk
// of every item and a second scan of each item's raw data (the compaction of a json.RawMessage).

// AppendWireJSON appends v as the HTTP API writes a result (an encoding/json Encoder with
// SetEscapeHTML(false), without its trailing newline) when v is a SendResult, Page or AckResult; it reports
// false for any other value, or where the direct path does not apply (then encoding/json writes v).
func AppendWireJSON(b []byte, v any) ([]byte, bool) {
	switch r := v.(type) {
	case SendResult:
		return r.appendJSON(b, &wireSafe)
	case Page:
		return r.appendWire(b)
	case AckResult:
		return r.appendWire(b), true
	}
	return nil, false
}

// AppendJSONString appends s as a JSON string the way encoding/json's Marshal writes one (HTML characters
// escaped, invalid UTF-8 replaced).
func AppendJSONString(b []byte, s string) []byte { return appendJSONString(b, s, &jsonSafe) }

// AppendWireString appends s as a JSON string the way the HTTP API writes one (HTML characters unescaped).
func AppendWireString(b []byte, s string) []byte { return appendJSONString(b, s, &wireSafe) }

func (p Page) appendWire(b []byte) ([]byte, bool) {
	b = append(b, `{"items":`...)
	b, ok := appendJSONArray(b, p.Items, func(b []byte, it FeedItem) ([]byte, bool) { return it.appendJSON(b, &wireSafe) })
	if !ok {
		return nil, false
	}
	b = append(b, `,"next_cursor":`...)
	b = appendJSONString(b, p.NextCursor, &wireSafe)
	b = append(b, `,"has_more":`...)
	b = appendBool(b, p.HasMore)
	b = append(b, `,"checkpoint_cursor":`...)
	b = appendJSONStringPtr(b, p.CheckpointCursor, &wireSafe)
	return append(b, '}'), true
}

func (r AckResult) appendWire(b []byte) []byte {
	b = append(b, `{"receipts":`...)
	b, _ = appendJSONArray(b, r.Receipts, func(b []byte, e AckReceipt) ([]byte, bool) {
		b = append(b, `{"item_id":`...)
		b = appendJSONString(b, e.ItemID, &wireSafe)
		b = append(b, `,"stage":`...)
		b = appendJSONString(b, string(e.Stage), &wireSafe)
		b = append(b, `,"changed":`...)
		return append(appendBool(b, e.Changed), '}'), true
	})
	b = append(b, `,"checkpoint_cursor":`...)
	b = appendJSONStringPtr(b, r.CheckpointCursor, &wireSafe)
	return append(b, '}')
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, "true"...)
	}
	return append(b, "false"...)
}
