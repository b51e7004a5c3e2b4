package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"testing"

	"github.com/waypost/waypost/api/boundary"
	"github.com/waypost/waypost/domain"
)

// TestHotAnswersAsEncodingJSON: the answers of message.send, inbox.read and inbox.ack, which the API writes
// without encoding/json (boundary.Envelope.AppendWire), are byte for byte what encoding/json writes for the
// same envelope — strings that need escaping included — and carry their Content-Length, also for a page
// larger than net/http's buffer (which answers a handler's encoding/json output in chunks).
func TestHotAnswersAsEncodingJSON(t *testing.T) {
	m := newM1(t)
	w := m.world()
	same := func(what string, r m1Resp, data any) {
		t.Helper()
		var env struct {
			RequestID string          `json:"request_id"`
			Data      json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(r.body, &env); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if err := json.Unmarshal(env.Data, data); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(boundary.Envelope{OK: true, RequestID: env.RequestID, Data: reflect.ValueOf(data).Elem().Interface()}); err != nil { // the result as a value, as operations return it
			t.Fatal(err)
		}
		if !bytes.Equal(r.body, want.Bytes()) {
			t.Fatalf("%s:\n got %s\nwant %s", what, r.body, want.Bytes())
		}
		if cl := r.header.Get("Content-Length"); cl != strconv.Itoa(len(r.body)) || len(r.header.Values("Transfer-Encoding")) > 0 {
			t.Fatalf("%s: Content-Length %q, Transfer-Encoding %q for %d bytes", what, cl, r.header.Values("Transfer-Encoding"), len(r.body))
		}
	}
	subject := "<b>tags</b> & \"quotes\" \\ \u2028 é 😀 \x01"
	for i := range 30 {
		r := m.call("POST", "/v0/messages", w.aTok, map[string]any{"request_id": m.rid("wire"), "recipient_ids": []any{w.b},
			"subject": fmt.Sprint(subject, i), "body": map[string]any{"text": "hello <there>"}}, "message.send.response")
		same("send", r, new(domain.SendResult))
	}
	r := m.call("POST", "/v0/inbox/read", w.bTok, map[string]any{"consumer_id": w.bConsumer, "limit": 30}, "inbox.read.response")
	if len(r.body) <= 4096 {
		t.Fatalf("the page is %d bytes, not larger than net/http's buffer", len(r.body))
	}
	var page domain.Page
	same("read", r, &page)
	items := []any{}
	for _, it := range page.Items {
		items = append(items, map[string]any{"item_id": it.ItemID, "stage": "processed"})
	}
	r = m.call("POST", "/v0/inbox/ack", w.bTok, map[string]any{"request_id": m.rid("ack"), "consumer_id": w.bConsumer,
		"checkpoint_cursor": page.NextCursor, "items": items}, "inbox.ack.response")
	same("ack", r, new(domain.AckResult))
}
