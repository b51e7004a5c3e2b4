package event_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/domain/domaintest"
	"github.com/waypost/waypost/webhook/event"
)

// TestFromRealFeed builds events from feed items the domain itself committed (a message and the receipt
// its ack produced), with the space's real source_uri.
func TestFromRealFeed(t *testing.T) {
	f := domaintest.New(t, domaintest.MemBackend, nil)
	sp := f.Space()
	a, b := f.Party(sp.SpaceID), f.Party(sp.SpaceID)
	sent := f.Send(a.P, "a body that must not leave the service", b.ActorID)
	items, cur := f.ReadAll(b.P, b.ConsumerID, nil, 10)
	if _, err := f.Svc.Ack(context.Background(), b.P, domain.AckRequest{RequestID: "ack1", ConsumerID: b.ConsumerID,
		Items: []domain.AckEntry{{ItemID: items[0].ItemID, Stage: domain.StageProcessed}}, CheckpointCursor: &cur}); err != nil {
		t.Fatal(err)
	}
	feed := f.With(t).Feed(sp.SpaceID).All()
	if len(feed) != 2 {
		t.Fatalf("feed has %d items", len(feed))
	}
	type data struct {
		MessageID  string `json:"message_id"`
		ThreadID   string `json:"thread_id"`
		ReceiptID  string `json:"receipt_id"`
		ResourceID string `json:"resource_id"`
		AckedItem  string `json:"acked_item_id"`
		ConsumerID string `json:"consumer_id"`
		VisibleSeq string `json:"visible_seq"`
	}
	wants := []struct {
		typ, subject string
		check        func(d data) bool
	}{
		{event.TypeMessageCommitted, "messages/" + sent.MessageID, func(d data) bool {
			return d.MessageID == sent.MessageID && d.ThreadID == sent.ThreadID && d.VisibleSeq == sent.VisibleSeq
		}},
		{event.TypeReceiptUpdated, "receipts/" + feed[1].ResourceID, func(d data) bool {
			return d.ReceiptID == feed[1].ResourceID && d.ResourceID == sent.MessageID && d.AckedItem == feed[0].ItemID &&
				d.ConsumerID == b.ConsumerID && d.VisibleSeq == "2"
		}},
	}
	for i, item := range feed {
		ev, err := event.FromFeedItem(sp.SourceURI, item)
		if err != nil {
			t.Fatalf("item %d: %v", i, err)
		}
		var got struct {
			ID, Source, Type, Subject string
			Data                      data
		}
		if err := json.Unmarshal(ev.Bytes, &got); err != nil {
			t.Fatal(err)
		}
		if got.ID != item.ItemID || got.Source != sp.SourceURI || got.Type != wants[i].typ || got.Subject != wants[i].subject || !wants[i].check(got.Data) {
			t.Fatalf("item %d: %s", i, ev.Bytes)
		}
		if len(ev.Bytes) > event.MaxBytes {
			t.Fatalf("%d bytes", len(ev.Bytes))
		}
	}
}
