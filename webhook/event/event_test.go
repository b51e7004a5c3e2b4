package event_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	ce "github.com/cloudevents/sdk-go/v2/event"

	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/internal/testjson"
	"github.com/waypost/waypost/webhook/event"
)

const source = "urn:uuid:7fdd711b-6779-4cb8-8108-8e3df90aed95"

var committed = time.Date(2026, 10, 11, 10, 0, 0, 0, time.UTC)

func ptr[T any](v T) *T { return &v }

func messageItem(t *testing.T) domain.FeedItem {
	return domain.FeedItem{ItemID: "feed_001", SpaceID: "sp_1", VisibleSeq: "1", ItemType: domain.ItemMessage,
		ResourceID: "msg_001", ResourceVersion: 1, ProducerID: "act_a", RecipientIDs: []string{"act_b"},
		ThreadID: ptr("thread_001"), CommittedAt: committed,
		Data: testjson.Marshal(t, domain.MessageItemData{MessageID: "msg_001", Kind: "note", Subject: "TOP SECRET SUBJECT", AttachmentCount: 2})}
}

func memoryItem(t *testing.T) domain.FeedItem {
	return domain.FeedItem{ItemID: "it_2_ab", SpaceID: "sp_1", VisibleSeq: "42", ItemType: domain.ItemMemoryRevision,
		ResourceID: "col_x", ResourceVersion: 7, ProducerID: "act_a", RecipientIDs: []string{},
		CommittedAt: time.Date(2026, 10, 11, 10, 0, 1, 500_000_000, time.FixedZone("CEST", 2*3600)),
		Data:        testjson.Marshal(t, domain.MemoryRevisionItemData{CollectionID: "col_x", SourceActorID: "act_a", Revision: 7, Mode: "delta", Upserted: 3, Deleted: 1})}
}

func receiptItem(t *testing.T) domain.FeedItem {
	return domain.FeedItem{ItemID: "it_3_cd", SpaceID: "sp_1", VisibleSeq: "9007199254740991", ItemType: domain.ItemReceipt,
		ResourceID: "rcpt_1", ResourceVersion: 2, ProducerID: "act_b", RecipientIDs: []string{"act_a"},
		ThreadID: ptr("thread_001"), CommittedAt: committed,
		Data: testjson.Marshal(t, domain.ReceiptItemData{ConsumerID: "con_b", AckedItemID: "feed_001", ResourceID: "msg_001",
			Stage: domain.StageProcessed, ReceiptVersion: 2})}
}

// TestGolden pins the exact bytes of each event type: member order, time format, data members.
func TestGolden(t *testing.T) {
	cases := []struct {
		name string
		item domain.FeedItem
		want string
	}{
		{"message", messageItem(t), `{"specversion":"1.0","id":"feed_001","source":"urn:uuid:7fdd711b-6779-4cb8-8108-8e3df90aed95",` +
			`"type":"waypost.message.committed.v1","subject":"messages/msg_001","time":"2026-10-11T10:00:00Z",` +
			`"datacontenttype":"application/json","data":{"api_version":"0.1","message_id":"msg_001","visible_seq":"1","thread_id":"thread_001"}}`},
		{"memory_revision", memoryItem(t), `{"specversion":"1.0","id":"it_2_ab","source":"urn:uuid:7fdd711b-6779-4cb8-8108-8e3df90aed95",` +
			`"type":"waypost.memory.revision.published.v1","subject":"collections/col_x/revisions/7","time":"2026-10-11T08:00:01.5Z",` +
			`"datacontenttype":"application/json","data":{"api_version":"0.1","collection_id":"col_x","revision":7,"visible_seq":"42"}}`},
		{"receipt", receiptItem(t), `{"specversion":"1.0","id":"it_3_cd","source":"urn:uuid:7fdd711b-6779-4cb8-8108-8e3df90aed95",` +
			`"type":"waypost.receipt.updated.v1","subject":"receipts/rcpt_1","time":"2026-10-11T10:00:00Z",` +
			`"datacontenttype":"application/json","data":{"api_version":"0.1","receipt_id":"rcpt_1","receipt_version":2,` +
			`"consumer_id":"con_b","acked_item_id":"feed_001","resource_id":"msg_001","visible_seq":"9007199254740991"}}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ev, err := event.FromFeedItem(source, tc.item)
			if err != nil {
				t.Fatal(err)
			}
			if string(ev.Bytes) != tc.want {
				t.Fatalf("bytes:\n got %s\nwant %s", ev.Bytes, tc.want)
			}
			again, err := event.FromFeedItem(source, tc.item)
			if err != nil || string(again.Bytes) != string(ev.Bytes) {
				t.Fatalf("second encoding differs: %s (%v)", again.Bytes, err)
			}
			if ev.ID != tc.item.ItemID || ev.Source != source || !ev.Time.Equal(tc.item.CommittedAt) || ev.Time.Location() != time.UTC {
				t.Fatalf("attributes: %+v", ev)
			}
		})
	}
}

// TestSDKRoundTrip parses the bytes with the CloudEvents SDK, which must agree on every attribute.
func TestSDKRoundTrip(t *testing.T) {
	for _, item := range []domain.FeedItem{messageItem(t), memoryItem(t), receiptItem(t)} {
		ev, err := event.FromFeedItem(source, item)
		if err != nil {
			t.Fatal(err)
		}
		var got ce.Event
		if err := json.Unmarshal(ev.Bytes, &got); err != nil {
			t.Fatalf("SDK rejects %s: %v", ev.Bytes, err)
		}
		if err := got.Validate(); err != nil {
			t.Fatalf("SDK validation: %v", err)
		}
		wantType, _ := event.TypeFor(item.ItemType)
		if got.SpecVersion() != "1.0" || got.ID() != item.ItemID || got.Source() != source || got.Type() != wantType ||
			got.Subject() != ev.Subject || !got.Time().Equal(item.CommittedAt) || got.DataContentType() != "application/json" {
			t.Fatalf("SDK reads different attributes: %s", got.String())
		}
		var data map[string]any
		if err := got.DataAs(&data); err != nil {
			t.Fatal(err)
		}
		if data["api_version"] != "0.1" || data["visible_seq"] != item.VisibleSeq {
			t.Fatalf("data: %v", data)
		}
		if len(got.Extensions()) != 0 {
			t.Fatalf("unexpected extensions %v", got.Extensions())
		}
	}
}

// TestNoContent: the message subject, kind and counts of the item data never reach the event, nor does the
// receipt stage or memory mode.
func TestNoContent(t *testing.T) {
	for _, item := range []domain.FeedItem{messageItem(t), memoryItem(t), receiptItem(t)} {
		ev, err := event.FromFeedItem(source, item)
		if err != nil {
			t.Fatal(err)
		}
		for _, leak := range []string{"TOP SECRET", "note", "attachment", "processed", "stage", "delta", "upserted", "producer", "act_"} {
			if strings.Contains(string(ev.Bytes), leak) {
				t.Fatalf("event carries %q: %s", leak, ev.Bytes)
			}
		}
	}
}

func TestSizeLimit(t *testing.T) {
	item := receiptItem(t)
	ev, err := event.FromFeedItem(source, item)
	if err != nil {
		t.Fatal(err)
	}
	n := len(ev.Bytes)
	if _, err := event.FromFeedItemMax(source, item, n); err != nil {
		t.Fatalf("exactly at the limit: %v", err)
	}
	_, err = event.FromFeedItemMax(source, item, n-1)
	var tl *event.TooLargeError
	if !errors.As(err, &tl) || tl.Size != n || tl.Max != n-1 || tl.ID != item.ItemID {
		t.Fatalf("one byte over: %v", err)
	}
	// The default limit is 8192 bytes.
	long := "https://example.com/" + strings.Repeat("a", event.MaxBytes)
	if _, err := event.FromFeedItem(long, item); !errors.As(err, &tl) || tl.Max != 8192 {
		t.Fatalf("oversized default: %v", err)
	}
	for _, bad := range []int{0, -1, event.MaxBytes + 1} {
		if _, err := event.FromFeedItemMax(source, item, bad); err == nil {
			t.Fatalf("max %d accepted", bad)
		}
	}
}

func TestRejectsBadItems(t *testing.T) {
	cases := map[string]func(*domain.FeedItem) string{
		"unknown type":      func(i *domain.FeedItem) string { i.ItemType = "vote"; return source },
		"empty item id":     func(i *domain.FeedItem) string { i.ItemID = ""; return source },
		"slash in resource": func(i *domain.FeedItem) string { i.ResourceID = "a/b"; return source },
		"slash in thread":   func(i *domain.FeedItem) string { i.ThreadID = ptr("../x"); return source },
		"seq zero":          func(i *domain.FeedItem) string { i.VisibleSeq = "0"; return source },
		"seq leading zero":  func(i *domain.FeedItem) string { i.VisibleSeq = "01"; return source },
		"seq not a number":  func(i *domain.FeedItem) string { i.VisibleSeq = "x"; return source },
		"seq empty":         func(i *domain.FeedItem) string { i.VisibleSeq = ""; return source },
		"zero time":         func(i *domain.FeedItem) string { i.CommittedAt = time.Time{}; return source },
		"relative source":   func(*domain.FeedItem) string { return "spaces/sp_1" },
		"empty source":      func(*domain.FeedItem) string { return "" },
		"padded source":     func(*domain.FeedItem) string { return " " + source },
		"receipt bad data":  func(i *domain.FeedItem) string { *i = receiptItem(t); i.Data = json.RawMessage(`[]`); return source },
		"receipt no consumer": func(i *domain.FeedItem) string {
			*i = receiptItem(t)
			i.Data = json.RawMessage(`{"acked_item_id":"a","resource_id":"b"}`)
			return source
		},
		"receipt version 0": func(i *domain.FeedItem) string { *i = receiptItem(t); i.ResourceVersion = 0; return source },
		"revision 0":        func(i *domain.FeedItem) string { *i = memoryItem(t); i.ResourceVersion = 0; return source },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			item := messageItem(t)
			src := mutate(&item)
			if ev, err := event.FromFeedItem(src, item); err == nil {
				t.Fatalf("accepted: %s", ev.Bytes)
			}
		})
	}
}

func TestTypeFor(t *testing.T) {
	want := map[domain.ItemType]string{
		domain.ItemMessage:        "waypost.message.committed.v1",
		domain.ItemMemoryRevision: "waypost.memory.revision.published.v1",
		domain.ItemReceipt:        "waypost.receipt.updated.v1",
	}
	for it, w := range want {
		if got, err := event.TypeFor(it); err != nil || got != w {
			t.Fatalf("%s: %q %v", it, got, err)
		}
	}
	if _, err := event.TypeFor("other"); err == nil {
		t.Fatal("unknown item type accepted")
	}
}
