package domain

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"pgregory.net/rapid"
)

// plainFeedItem draws a feed item as the service stores them: IDs of printable ASCII, a UTC time, and the data
// of a message or a receipt (with a subject that now and then needs escaping, which only the data holds).
func plainFeedItem(t *rapid.T) FeedItem {
	id := rapid.StringMatching(`[a-z]{2,4}_[0-9a-z]{0,26}`)
	var thread *string
	if rapid.Bool().Draw(t, "has-thread") {
		s := id.Draw(t, "thread")
		thread = &s
	}
	var recipients []string
	if !rapid.Bool().Draw(t, "nil-recipients") {
		recipients = rapid.SliceOfN(id, 0, 3).Draw(t, "recipients")
	}
	var data json.RawMessage
	if rapid.Bool().Draw(t, "receipt") {
		data = encode(ReceiptItemData{ConsumerID: id.Draw(t, "con"), AckedItemID: id.Draw(t, "acked"), ResourceID: id.Draw(t, "res"),
			Stage: Stage(rapid.SampledFrom([]string{"received", "processed"}).Draw(t, "stage")), ReceiptVersion: rapid.Int64().Draw(t, "rv")})
	} else {
		var reply *string
		if rapid.Bool().Draw(t, "has-reply") {
			s := id.Draw(t, "reply")
			reply = &s
		}
		data = encode(MessageItemData{MessageID: id.Draw(t, "msg"), Kind: rapid.SampledFrom([]string{"", "result", "note"}).Draw(t, "kind"),
			Subject: jsonString(t, "subject"), InReplyTo: reply, AttachmentCount: rapid.IntRange(0, 64).Draw(t, "n")})
	}
	return FeedItem{ItemID: id.Draw(t, "item"), SpaceID: id.Draw(t, "space"), VisibleSeq: rapid.StringMatching(`[1-9][0-9]{0,18}`).Draw(t, "vs"),
		ItemType: ItemType(rapid.SampledFrom([]string{"message", "receipt", "memory"}).Draw(t, "type")), ResourceID: id.Draw(t, "res"),
		ResourceVersion: rapid.Int64().Draw(t, "ver"), ProducerID: id.Draw(t, "producer"), RecipientIDs: recipients, ThreadID: thread,
		CommittedAt: time.Unix(rapid.Int64Range(0, 253402300799).Draw(t, "at"), rapid.Int64Range(0, 999999999).Draw(t, "ns")).UTC(), Data: data}
}

// TestDecodeFastFeedItem: every feed item the service stores takes decodeFast's path, and decodes to what
// encoding/json and the general decoder decode.
func TestDecodeFastFeedItem(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		data := encode(plainFeedItem(t))
		var fast FeedItem
		if !decodeFast(data, &fast) {
			t.Fatalf("decodeFast refused a stored feed item: %s", data)
		}
		sameAsGeneralDecoders(t, data, fast)
	})
}

// TestDecodeFastFeedItemFallsBack: a feed item in another form than appendJSON's is left to the general
// decoder, which decodes it as before.
func TestDecodeFastFeedItemFallsBack(t *testing.T) {
	stored := string(encode(FeedItem{ItemID: "it_1", SpaceID: "sp_1", VisibleSeq: "1", ItemType: ItemMessage, ResourceID: "msg_1",
		ResourceVersion: 1, ProducerID: "act_1", RecipientIDs: []string{"act_2"}, CommittedAt: time.Date(2026, 12, 5, 1, 2, 3, 4, time.UTC),
		Data: json.RawMessage(`{"message_id":"msg_1","kind":"","subject":"s","in_reply_to":null,"attachment_count":0}`)}))
	tests := []struct{ name, data string }{
		{"escaped string", strings.Replace(stored, `"act_2"`, `"act\u005f2"`, 1)},
		{"non-ASCII string", strings.Replace(stored, `"act_2"`, `"act_é"`, 1)},
		{"members reordered", strings.Replace(stored, `{"item_id":"it_1","space_id":"sp_1"`, `{"space_id":"sp_1","item_id":"it_1"`, 1)},
		{"unknown member", strings.Replace(stored, `{"item_id"`, `{"x":1,"item_id"`, 1)},
		{"white space", strings.Replace(stored, `,"space_id"`, ` ,"space_id"`, 1)},
		{"time with an offset", strings.Replace(stored, `2026-12-05T01:02:03.000000004Z`, `2026-12-05T02:02:03.000000004+01:00`, 1)},
		{"data after white space", strings.Replace(stored, `"data":{`, `"data": {`, 1)},
		{"repeated member in data", strings.Replace(stored, `"attachment_count":0}`, `"attachment_count":0,"kind":"x"}`, 1)},
		{"leading zero", strings.Replace(stored, `"resource_version":1`, `"resource_version":01`, 1)},
		{"version overflow", strings.Replace(stored, `"resource_version":1`, `"resource_version":9223372036854775808`, 1)},
		{"trailing text", stored + " "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.data == stored {
				t.Fatal("the case changed nothing")
			}
			var fi FeedItem
			if decodeFast([]byte(tt.data), &fi) {
				t.Fatalf("decodeFast accepted %s", tt.data)
			}
			var std, general FeedItem
			stdErr, err := json.Unmarshal([]byte(tt.data), &std), decodeStored([]byte(tt.data), &general)
			if (stdErr == nil) != (err == nil) || stdErr == nil && !reflect.DeepEqual(std, general) {
				t.Fatalf("decodeStored(%s) = %#v (%v), encoding/json %#v (%v)", tt.data, general, err, std, stdErr)
			}
		})
	}
	var fi FeedItem
	if !decodeFast([]byte(stored), &fi) {
		t.Fatalf("decodeFast refused %s", stored)
	}
}

// sameAsGeneralDecoders fails t unless encoding/json and decodeStored's general decoder decode data to got.
func sameAsGeneralDecoders(t interface{ Fatalf(string, ...any) }, data []byte, got FeedItem) {
	var std, v2 FeedItem
	if err := json.Unmarshal(data, &std); err != nil || !reflect.DeepEqual(std, got) {
		t.Fatalf("decodeFast(%s):\n got %#v\nencoding/json %#v (%v)", data, got, std, err)
	}
	if err := jsonv2.Unmarshal(data, &v2, storedJSON); err != nil || !reflect.DeepEqual(v2, got) {
		t.Fatalf("decodeFast(%s):\n got %#v\ngeneral decoder %#v (%v)", data, got, v2, err)
	}
}

// FuzzDecodeFeedItem: whatever decodeFast accepts, encoding/json and the general decoder accept and decode
// alike; whatever validItemData accepts is valid JSON.
func FuzzDecodeFeedItem(f *testing.F) {
	f.Add(encode(FeedItem{ItemID: "it_1", SpaceID: "sp_1", VisibleSeq: "7", ItemType: ItemReceipt, ResourceID: "rcpt_1", ResourceVersion: -3,
		ProducerID: "act_1", RecipientIDs: []string{}, CommittedAt: time.Unix(1, 5).UTC(),
		Data: encode(ReceiptItemData{ConsumerID: "con_1", AckedItemID: "it_0", ResourceID: "msg_1", Stage: StageReceived, ReceiptVersion: 1})}))
	thread := "thr_1"
	f.Add(encode(FeedItem{ItemID: "it_2", SpaceID: "sp_1", VisibleSeq: "8", ItemType: ItemMessage, ResourceID: "msg_2", ResourceVersion: 1,
		ProducerID: "act_1", RecipientIDs: []string{"a", "b"}, ThreadID: &thread, CommittedAt: time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		Data: json.RawMessage(`{"message_id":"msg_2","kind":"k","subject":"\u003c","in_reply_to":"msg_1","attachment_count":2}`)}))
	f.Add([]byte(`{"item_id":"a","space_id":"b","visible_seq":"1","item_type":"t","resource_id":"r","resource_version":0,"producer_id":"p","recipient_ids":null,"thread_id":null,"committed_at":"2026-02-30T00:00:00Z","data":null}`))
	f.Add([]byte(`{"item_id":"a","space_id":"b","visible_seq":"1","item_type":"t","resource_id":"r","resource_version":-0,"producer_id":"p","recipient_ids":[""],"thread_id":"","committed_at":"2026-01-01T24:00:00Z","data":[1,{"a":"b"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if validItemData(data) && !json.Valid(data) {
			t.Fatalf("validItemData accepted %q", data)
		}
		var got FeedItem
		if decodeFast(data, &got) {
			sameAsGeneralDecoders(t, data, got)
		}
	})
}

// BenchmarkDecodeFeedItem decodes a message's feed item as stored, by decodeStored (decodeFast's path) and by
// the general decoder alone.
func BenchmarkDecodeFeedItem(b *testing.B) {
	thread, msg := "thr_01jz8k3m4n5p6q7r8s9t0v1w2x", "msg_01jz8k3m4n5p6q7r8s9t0v1w2x"
	data := encode(FeedItem{ItemID: "it_2n9c_0ffee161d980ea93", SpaceID: "sp_01jz8k3m4n5p6q7r8s9t0v1w2x", VisibleSeq: "123456", ItemType: ItemMessage,
		ResourceID: msg, ResourceVersion: 1, ProducerID: "act_01jz8k3m4n5p6q7r8s9t0v1w2y", RecipientIDs: []string{"act_01jz8k3m4n5p6q7r8s9t0v1w2x"},
		ThreadID: &thread, CommittedAt: time.Date(2026, 12, 5, 13, 14, 47, 295895820, time.UTC), Data: encode(MessageItemData{MessageID: msg, Subject: "bench"})})
	for _, d := range []struct {
		name   string
		decode func([]byte, any) error
	}{
		{"decodeStored", decodeStored},
		{"general", func(data []byte, v any) error { return jsonv2.Unmarshal(data, v, storedJSON) }},
	} {
		b.Run(d.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var fi FeedItem
				if err := d.decode(data, &fi); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestValidItemDataTakesStoredShapes: the data of message and receipt feed items, as the service encodes
// it, is recognised by validItemData's shape matcher (without it, every item's data goes to the general
// validator: still right, only slower, which no other test would notice).
func TestValidItemDataTakesStoredShapes(t *testing.T) {
	reply := "msg_0"
	for _, v := range []any{
		MessageItemData{MessageID: "msg_1", Kind: "message", Subject: "s", AttachmentCount: 2},
		MessageItemData{MessageID: "msg_1", Kind: "message", Subject: "", InReplyTo: &reply},
		ReceiptItemData{ConsumerID: "con_1", AckedItemID: "it_1", ResourceID: "msg_1", Stage: StageProcessed, ReceiptVersion: 3},
	} {
		if data := encode(v); !validItemData(data) {
			t.Errorf("validItemData refused %s", data)
		}
	}
}
