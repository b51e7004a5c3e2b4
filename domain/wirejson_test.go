package domain

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// wireEncoding is what the HTTP API's encoder writes for v (an Encoder with SetEscapeHTML(false)), less its
// trailing newline.
func wireEncoding(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

func feedItemOf(t *rapid.T, label string) FeedItem {
	return FeedItem{ItemID: jsonString(t, label+"-item"), SpaceID: jsonString(t, label+"-space"), VisibleSeq: jsonString(t, label+"-vs"),
		ItemType: ItemType(jsonString(t, label+"-type")), ResourceID: jsonString(t, label+"-res"), ResourceVersion: rapid.Int64().Draw(t, label+"-ver"),
		ProducerID: jsonString(t, label+"-producer"), RecipientIDs: jsonStrings(t, label+"-recipients"), ThreadID: jsonStringPtr(t, label+"-thread"),
		CommittedAt: jsonTime(t, label+"-at"), Data: jsonRaw(t, label+"-data")}
}

// TestWireJSONMatchesEncodingJSON: AppendWireJSON writes the results of send, read and ack byte for byte as
// the transport's encoding/json Encoder does, strings with every kind of escape included, and declines
// (false) every value that encoder refuses.
func TestWireJSONMatchesEncodingJSON(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var items []FeedItem
		if !rapid.Bool().Draw(t, "items-nil") {
			items = []FeedItem{}
			for i := range rapid.IntRange(0, 3).Draw(t, "n-items") {
				items = append(items, feedItemOf(t, fmt.Sprint("it", i)))
			}
		}
		var receipts []AckReceipt
		if !rapid.Bool().Draw(t, "receipts-nil") {
			receipts = []AckReceipt{}
			for i := range rapid.IntRange(0, 3).Draw(t, "n-receipts") {
				receipts = append(receipts, AckReceipt{ItemID: jsonString(t, fmt.Sprint("r-item", i)), Stage: Stage(jsonString(t, fmt.Sprint("r-stage", i))),
					Changed: rapid.Bool().Draw(t, fmt.Sprint("r-changed", i))})
			}
		}
		values := []any{
			SendResult{SubmissionState: SubmissionState(jsonString(t, "state")), ResourceID: jsonString(t, "res"), MessageID: jsonString(t, "msg"),
				ThreadID: jsonString(t, "thread"), CommittedAt: jsonTime(t, "at"), VisibleSeq: jsonString(t, "vs")},
			Page{Items: items, NextCursor: jsonString(t, "next"), HasMore: rapid.Bool().Draw(t, "more"), CheckpointCursor: jsonStringPtr(t, "cp")},
			AckResult{Receipts: receipts, CheckpointCursor: jsonStringPtr(t, "ack-cp")},
		}
		for _, v := range values {
			want, err := wireEncoding(v)
			got, ok := AppendWireJSON([]byte("prefix"), v)
			if err != nil {
				if ok {
					t.Fatalf("AppendWireJSON(%#v) = %s, encoding/json: %v", v, got, err)
				}
				continue
			}
			if ok && !bytes.Equal(got, append([]byte("prefix"), want...)) {
				t.Fatalf("AppendWireJSON(%T):\n got %s\nwant prefix%s", v, got, want)
			}
		}
	})
}

// TestWireJSONFastPath: the results as the service makes them take the direct path (a test that it matches
// encoding/json cannot tell whether it ran), and no other value does.
func TestWireJSONFastPath(t *testing.T) {
	now := time.Now().UTC()
	thread, cp := "th_1", "cur_1"
	data := encode(MessageItemData{MessageID: "msg_1", Subject: "<hello> & bye"})
	item := FeedItem{ItemID: "it_1", ThreadID: &thread, RecipientIDs: []string{"act_1"}, CommittedAt: now, Data: data}
	for _, v := range []any{
		SendResult{SubmissionState: StateCommitted, CommittedAt: now},
		Page{Items: []FeedItem{item, item}, NextCursor: "cur_2", CheckpointCursor: &cp},
		Page{Items: []FeedItem{}},
		AckResult{Receipts: []AckReceipt{{ItemID: "it_1", Stage: StageReceived, Changed: true}}, CheckpointCursor: &cp},
	} {
		if _, ok := AppendWireJSON(nil, v); !ok {
			t.Errorf("%T took encoding/json's path", v)
		}
	}
	for _, v := range []any{&SendResult{}, FeedItem{}, map[string]any{}, nil} {
		if _, ok := AppendWireJSON(nil, v); ok {
			t.Errorf("%T took the direct path", v)
		}
	}
}

// TestWireJSONCoversEveryField: with every field of each result type set (at any depth), AppendWireJSON
// still writes what encoding/json writes — a field added to one of these types fails here until its
// encoder writes it.
func TestWireJSONCoversEveryField(t *testing.T) {
	for _, v := range []any{SendResult{}, Page{}, AckResult{}} {
		p := reflect.New(reflect.TypeOf(v))
		fillAll(p.Elem(), 0)
		full := p.Elem().Interface()
		want, err := wireEncoding(full)
		if err != nil {
			t.Fatalf("%T: %v", full, err)
		}
		got, ok := AppendWireJSON(nil, full)
		if !ok || !bytes.Equal(got, want) {
			t.Errorf("%T with every field set:\n got %s (direct %v)\nwant %s", full, got, ok, want)
		}
	}
}

// BenchmarkWirePage writes a 50-item inbox page and a send's result as the HTTP API answers them, directly
// and with encoding/json.
func BenchmarkWirePage(b *testing.B) {
	now := time.Now().UTC()
	thread := "th_01jz8k3m4n5p6q7r8s9t0v1w2x"
	page := Page{NextCursor: "c1.0123456789abcdef0123456789abcdef0123456789abcdef"}
	for i := range 50 {
		data := encode(MessageItemData{MessageID: fmt.Sprintf("msg_01jz8k3m4n5p6q7r8s9t0v%02d", i), Kind: "message", Subject: "bench"})
		page.Items = append(page.Items, FeedItem{ItemID: fmt.Sprintf("it_%d_msg_01jz8k3m4n5p6q7r8s9t0v%02d", 1000+i, i), SpaceID: "sp_01jz8k3m4n5p6q7r8s9t0v1w2x",
			VisibleSeq: fmt.Sprint(1000 + i), ItemType: ItemMessage, ResourceID: "msg_x", ResourceVersion: 1, ProducerID: "act_01jz8k3m4n5p6q7r8s9t0v1w2x",
			RecipientIDs: []string{"act_01jz8k3m4n5p6q7r8s9t0v1w2y"}, ThreadID: &thread, CommittedAt: now, Data: data})
	}
	res := SendResult{SubmissionState: StateCommitted, ResourceID: "msg_01jz8k3m4n5p6q7r8s9t0v1w2x", MessageID: "msg_01jz8k3m4n5p6q7r8s9t0v1w2x",
		ThreadID: thread, CommittedAt: now, VisibleSeq: "123456"}
	for _, c := range []struct {
		name string
		v    any
	}{{"", page}, {"send-", res}} {
		b.Run(c.name+"direct", func(b *testing.B) {
			b.ReportAllocs()
			var buf []byte
			for b.Loop() {
				buf, _ = AppendWireJSON(buf[:0], c.v)
			}
		})
		b.Run(c.name+"encoding-json", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := wireEncoding(c.v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
