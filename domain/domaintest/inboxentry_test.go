package domaintest_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/domain/domaintest"
	"github.com/waypost/waypost/domain/port"
)

// TestInboxEntryRestsOnItsFeedSlot: an inbox entry is put without a condition of its own (the embedded store
// would read its key again to check one) because the transaction that puts it also puts the feed slot of the
// same seq if absent — for a send's recipients and an ack's receipts alike; and a send whose feed slot is
// taken publishes nothing, so no inbox entry is ever written over.
func TestInboxEntryRestsOnItsFeedSlot(t *testing.T) {
	rec := domaintest.NewRecorder()
	var store port.ItemStore
	f := domaintest.New(t, func(t testing.TB) domaintest.Backend {
		b := rec.Wrap(domaintest.MemBackend(t))
		store = b.Store
		return b
	}, nil)
	sp := f.Space()
	a, b, c := f.Party(sp.SpaceID), f.Party(sp.SpaceID), f.Party(sp.SpaceID)
	f.Send(a.P, "hi", b.ActorID, c.ActorID)
	items, cur := f.ReadAll(b.P, b.ConsumerID, nil, 10)
	if _, err := f.Svc.Ack(context.Background(), b.P, domain.AckRequest{RequestID: "ack", ConsumerID: b.ConsumerID,
		Items: []domain.AckEntry{{ItemID: items[0].ItemID, Stage: domain.StageProcessed}}, CheckpointCursor: &cur}); err != nil {
		t.Fatal(err)
	}

	entries := 0
	for _, tx := range rec.Txs() {
		for _, op := range tx.Ops {
			if op.Kind != port.OpPut || !strings.HasPrefix(op.Item.PK, "IN#") {
				continue
			}
			entries++
			if op.Cond.Kind != port.CondNone {
				t.Errorf("inbox entry %s carries a condition (%v)", op.Item.Key, op.Cond.Kind)
			}
			if tx.Seq == nil {
				t.Fatalf("inbox entry %s put by a transaction without a sequence", op.Item.Key)
			}
			slot := false
			for _, o := range tx.Ops {
				slot = slot || (o.Kind == port.OpPut && o.Item.Key == tx.Seq.Slot(mustSlot(t, op.Item.SK)) && o.Cond.Kind == port.CondNotExists)
			}
			if !slot {
				t.Errorf("inbox entry %s: its transaction does not put feed slot %s if absent", op.Item.Key, op.Item.SK)
			}
		}
	}
	if entries != 3 { // the message in two inboxes, the receipt in the sender's
		t.Fatalf("%d inbox entries put, want 3", entries)
	}

	// A send that finds its feed slot taken (as if the counter were behind) fails whole: no inbox entry.
	head := f.Send(a.P, "second", b.ActorID)
	last, err := strconv.ParseUint(head.VisibleSeq, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	next := last + 1
	if _, err := store.Commit(context.Background(), port.Tx{Build: func(uint64) ([]port.Op, error) {
		return []port.Op{port.Put(port.Item{Key: port.Key{PK: "FD#" + sp.SpaceID, SK: port.SlotSK(next)}, Data: []byte(`{}`)}, port.NotExists())}, nil
	}}); err != nil {
		t.Fatal(err)
	}
	before, _ := f.ReadAll(b.P, b.ConsumerID, nil, 10)
	if _, err := f.Svc.SendMessage(context.Background(), a.P, domain.SendRequest{RequestID: "taken", RecipientIDs: []string{b.ActorID},
		Body: &domain.MessageBody{Text: "third"}}); err == nil {
		t.Fatal("a send onto a taken feed slot succeeded")
	}
	if _, found, err := store.Get(context.Background(), port.Key{PK: "IN#" + sp.SpaceID + "#" + b.ActorID, SK: port.SlotSK(next)}); err != nil || found {
		t.Fatalf("inbox entry at the taken slot: found %v, %v", found, err)
	}
	if after, _ := f.ReadAll(b.P, b.ConsumerID, nil, 10); len(after) != len(before) {
		t.Fatalf("the failed send changed the inbox: %d items, were %d", len(after), len(before))
	}
}

func mustSlot(t *testing.T, sk string) uint64 {
	t.Helper()
	v, ok := port.ParseSlotSK(sk)
	if !ok {
		t.Fatalf("%q is not a slot", sk)
	}
	return v
}
