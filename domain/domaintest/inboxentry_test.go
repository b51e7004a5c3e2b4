package domaintest_test

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
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

// costlyReads is a store that says its point reads are costly (as DynamoDB).
type costlyReads struct{ port.ItemStore }

func (costlyReads) PointReadsCostly() bool { return true }

// TestInboxEntryHoldsNoCopy: where point reads are cheap a feed item is stored once, in its space feed slot;
// an inbox entry holds neither data nor attributes, and a read of the inbox takes the item from the slot.
// Where they are costly (port.PointReadCoster) each entry holds a copy. Either way the inbox reads the same;
// an entry holding a copy reads the same in both, and an entry holding none whose slot is gone is an error,
// never an item read as empty.
func TestInboxEntryHoldsNoCopy(t *testing.T) {
	for _, costly := range []bool{false, true} {
		t.Run(fmt.Sprintf("costly=%v", costly), func(t *testing.T) { inboxEntryCopies(t, costly) })
	}
}

func inboxEntryCopies(t *testing.T, costly bool) {
	rec := domaintest.NewRecorder()
	var store port.ItemStore
	f := domaintest.New(t, func(t testing.TB) domaintest.Backend {
		b := rec.Wrap(domaintest.MemBackend(t))
		if costly {
			b.Store = costlyReads{b.Store}
		}
		store = b.Store
		return b
	}, nil)
	ctx := context.Background()
	sp := f.Space()
	a, b := f.Party(sp.SpaceID), f.Party(sp.SpaceID)
	f.Send(a.P, "one", b.ActorID)
	f.Send(a.P, "two", b.ActorID)
	slotOf := func(k port.Key) port.Key { return port.Key{PK: "FD#" + sp.SpaceID, SK: k.SK} }
	var entries []port.Key
	for _, tx := range rec.Txs() {
		for _, op := range tx.Ops {
			if op.Kind != port.OpPut || !strings.HasPrefix(op.Item.PK, "IN#") {
				continue
			}
			entries = append(entries, op.Item.Key)
			var slot []byte
			for _, o := range tx.Ops {
				if o.Kind == port.OpPut && o.Item.Key == slotOf(op.Item.Key) {
					slot = o.Item.Data
				}
			}
			switch {
			case len(op.Item.Attrs) != 0:
				t.Errorf("inbox entry %s holds attributes %v", op.Item.Key, op.Item.Attrs)
			case costly && (len(slot) == 0 || string(op.Item.Data) != string(slot)):
				t.Errorf("inbox entry %s holds %q, want its slot's copy %q", op.Item.Key, op.Item.Data, slot)
			case !costly && len(op.Item.Data) != 0:
				t.Errorf("inbox entry %s holds %d bytes, want none", op.Item.Key, len(op.Item.Data))
			}
		}
	}
	if len(entries) != 2 {
		t.Fatalf("%d inbox entries put, want 2", len(entries))
	}
	want, _ := f.ReadAll(b.P, b.ConsumerID, nil, 10)
	if len(want) != 2 || want[0].ItemType != domain.ItemMessage || want[1].ResourceID == "" || len(want[1].Data) == 0 {
		t.Fatalf("inbox read: %+v", want)
	}

	put := func(ops ...port.Op) {
		t.Helper()
		if _, err := store.Commit(ctx, port.Tx{Build: func(uint64) ([]port.Op, error) { return ops, nil }}); err != nil {
			t.Fatal(err)
		}
	}
	slot, found, err := store.Get(ctx, slotOf(entries[0]))
	if err != nil || !found {
		t.Fatalf("feed slot %s: found %v, %v", slotOf(entries[0]), found, err)
	}
	// The first entry holds a copy and the second none, whichever the store: both read the same.
	put(port.Put(port.Item{Key: entries[0], Data: slot.Data}, port.Cond{}), port.Put(port.Item{Key: entries[1]}, port.Cond{}))
	got, _ := f.ReadAll(b.P, b.ConsumerID, nil, 10)
	if len(got) != 2 || got[0].ItemID != want[0].ItemID || got[1].ItemID != want[1].ItemID ||
		string(got[0].Data) != string(want[0].Data) || string(got[1].Data) != string(want[1].Data) {
		t.Fatalf("with a copy in the first entry and none in the second the inbox reads %+v, want %+v", got, want)
	}

	// An entry holding none whose slot is gone fails the read, in a process that has not decoded the item
	// before (one that has takes it from its feed cache: a feed item never changes once written).
	put(port.Delete(slotOf(entries[1]), port.Cond{}))
	if _, err := f.OtherProcess().ReadInbox(ctx, b.P, domain.ReadRequest{ConsumerID: b.ConsumerID}); err == nil || !strings.Contains(err.Error(), "no feed slot") {
		t.Fatalf("reading an entry whose slot is gone: %v", err)
	}
	// And verify reports it (only it: the other entry holds a copy).
	var findings []domain.VerifyFinding
	if _, err := f.Svc.Verify(ctx, domain.VerifyOptions{SpaceIDs: []string{sp.SpaceID}}, func(v domain.VerifyFinding) { findings = append(findings, v) }); err != nil {
		t.Fatal(err)
	}
	seq, _ := port.ParseSlotSK(entries[1].SK)
	if len(findings) != 1 || findings[0].Kind != "inbox_entry" || findings[0].ID != fmt.Sprintf("%s@%d", b.ActorID, seq) || findings[0].Problem != domain.ProblemMissingRecord {
		t.Fatalf("verify found %+v, want the inbox entry of %s at %d", findings, b.ActorID, seq)
	}
}

// TestInboxReadsDenseRuns: an inbox whose entries fill at least half of the feed range they span reads their
// feed slots with one range query of the feed partition, a sparse one with GetMany; both read the items the
// inbox holds, in order, and a slot gone from a dense run is an error, never an item left out.
func TestInboxReadsDenseRuns(t *testing.T) {
	for _, tc := range []struct {
		name  string
		every int // one message in every this many goes to another actor
		dense bool
	}{{"dense", 3, true}, {"sparse", 1, false}} {
		t.Run(tc.name, func(t *testing.T) {
			var gets, queries atomic.Int64
			var store port.ItemStore
			f := domaintest.New(t, func(t testing.TB) domaintest.Backend {
				b := domaintest.MemBackend(t)
				b.Store = feedReads{b.Store, &gets, &queries}
				store = b.Store
				return b
			}, nil)
			ctx := context.Background()
			sp := f.Space()
			a, b, c := f.Party(sp.SpaceID), f.Party(sp.SpaceID), f.Party(sp.SpaceID)
			var want []string // the visible_seq of b's messages
			for i := range 40 {
				switch {
				case tc.dense && i%tc.every == 0, !tc.dense && i%4 != 0:
					f.Send(a.P, "not for b", c.ActorID)
				default:
					want = append(want, f.Send(a.P, "for b", b.ActorID).VisibleSeq)
				}
			}
			other := f.OtherProcess() // nothing decoded yet: every slot is read from the store
			ctx = counted(ctx)        // the reads below count
			var got []string
			var cursor *string
			for {
				// Pages of 15 over 26 entries (dense): runs of 16 (the page and the entry after it) and 10.
				page, err := other.ReadInbox(ctx, b.P, domain.ReadRequest{ConsumerID: b.ConsumerID, Cursor: cursor, Limit: 15})
				if err != nil {
					t.Fatal(err)
				}
				for _, it := range page.Items {
					got = append(got, it.VisibleSeq)
				}
				if !page.HasMore {
					break
				}
				cursor = &page.NextCursor
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("the inbox reads %v, want %v", got, want)
			}
			if dense := queries.Load() > 0; dense != tc.dense || (dense && gets.Load() > 0) || (!dense && gets.Load() == 0) {
				t.Fatalf("feed slots read by %d range queries and %d GetMany calls, want the dense path %v", queries.Load(), gets.Load(), tc.dense)
			}
			if !tc.dense {
				return
			}
			// A slot gone from the middle of a dense run.
			seq, _ := strconv.ParseUint(want[len(want)/2], 10, 64)
			if _, err := store.Commit(ctx, port.Tx{Build: func(uint64) ([]port.Op, error) {
				return []port.Op{port.Delete(port.Key{PK: "FD#" + sp.SpaceID, SK: port.SlotSK(seq)}, port.Cond{})}, nil
			}}); err != nil {
				t.Fatal(err)
			}
			if _, err := f.OtherProcess().ReadInbox(ctx, b.P, domain.ReadRequest{ConsumerID: b.ConsumerID, Limit: 200}); err == nil || !strings.Contains(err.Error(), "no feed slot") {
				t.Fatalf("reading a dense run whose slot %d is gone: %v", seq, err)
			}
		})
	}
}
