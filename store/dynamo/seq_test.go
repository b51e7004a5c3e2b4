package dynamo_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/waypost/waypost/domain/domaintest"
	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/store/dynamo"
	"github.com/waypost/waypost/store/dynamo/dynamotest"
)

// hooked wraps the emulator's client; each hook, when set, runs before the call and may answer it instead
// (a non-nil output or error).
type hooked struct {
	dynamo.API
	onTx     func(ctx context.Context, in *dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error)
	onUpdate func(ctx context.Context, in *dynamodb.UpdateItemInput) error
	onPut    func(ctx context.Context, in *dynamodb.PutItemInput) error
}

func (h *hooked) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	if h.onTx != nil {
		if out, err := h.onTx(ctx, in); out != nil || err != nil {
			return out, err
		}
	}
	return h.API.TransactWriteItems(ctx, in, o...)
}

func (h *hooked) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if h.onUpdate != nil {
		if err := h.onUpdate(ctx, in); err != nil {
			return nil, err
		}
	}
	return h.API.UpdateItem(ctx, in, o...)
}

func (h *hooked) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if h.onPut != nil {
		if err := h.onPut(ctx, in); err != nil {
			return nil, err
		}
	}
	return h.API.PutItem(ctx, in, o...)
}

var seqUnderTest = port.Sequence{Counter: port.Key{PK: "SP#s", SK: "SEQ"}, Slots: "FD#s", Head: port.Key{PK: "SH#s", SK: "HEAD"}}

// seqTx is a sequence transaction of one value filling its slot with tag and a side item.
func seqTx(tag string, built *atomic.Int32) port.Tx {
	return port.Tx{Seq: &seqUnderTest, Count: 1, Max: 1 << 53, Build: func(first uint64) ([]port.Op, error) {
		if built != nil {
			built.Add(1)
		}
		return []port.Op{
			port.Put(port.Item{Key: seqUnderTest.Slot(first), Data: []byte(tag)}, port.NotExists()),
			port.Put(port.Item{Key: port.Key{PK: "SIDE#" + tag, SK: "x"}, Data: []byte(fmt.Sprint(first))}, port.NotExists()),
		}, nil
	}}
}

// seqStores returns n stores on one fresh table, each with its own API wrapper and gap observations (as n
// processes would have), sharing the fake clock it returns.
func seqStores(t *testing.T, n int) ([]*dynamo.Store, []*hooked, *domaintest.Clock) {
	t.Helper()
	clock := domaintest.NewClock()
	srv := dynamotest.New(t)
	table := srv.Table(t)
	stores := make([]*dynamo.Store, n)
	hooks := make([]*hooked, n)
	for i := range stores {
		hooks[i] = &hooked{API: srv.Client}
		opts := fast
		opts.Now = clock.Now
		st, err := dynamo.New(hooks[i], table, opts)
		if err != nil {
			t.Fatal(err)
		}
		stores[i] = st
	}
	return stores, hooks, clock
}

func mustHead(t *testing.T, s port.ItemStore) uint64 {
	t.Helper()
	h, err := s.Head(context.Background(), seqUnderTest)
	if err != nil {
		t.Fatalf("head: %v", err)
	}
	return h
}

func slotData(t *testing.T, s port.ItemStore, v uint64) (string, bool) {
	t.Helper()
	it, ok, err := s.Get(context.Background(), seqUnderTest.Slot(v))
	if err != nil {
		t.Fatal(err)
	}
	return string(it.Data), ok
}

// TestSeqLateWriterLosesToVoider plays the race the conditional void exists for: writer A reserves value 1
// and stalls before its transaction; writer B commits value 2; a reader sees slot 1 missing below slot 2,
// keeps the head at 0 for the grace period (measured from when it first saw the gap), then voids slot 1 and
// passes it. A's transaction then fails on its slot's condition; A reserves value 3, builds again and
// commits there. Nothing ever becomes visible at 1, and no head returned passed an item that committed
// later.
func TestSeqLateWriterLosesToVoider(t *testing.T) {
	st, hooks, clock := seqStores(t, 3)
	a, b, reader := st[0], st[1], st[2]
	var stalled atomic.Bool
	hooks[0].onTx = func(ctx context.Context, in *dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error) {
		if stalled.Swap(true) {
			return nil, nil // A's second attempt goes through
		}
		// A holds value 1 and has not sent its transaction yet.
		if first, err := b.Commit(ctx, seqTx("B", nil)); err != nil || first != 2 {
			t.Errorf("B: %d, %v; want 2", first, err)
		}
		if h := mustHead(t, reader); h != 0 {
			t.Errorf("head %d while slot 1 may still commit", h)
		}
		clock.Advance(dynamo.DefaultVoidGrace - time.Millisecond)
		if h := mustHead(t, reader); h != 0 {
			t.Errorf("head %d before the grace period ended", h)
		}
		clock.Advance(time.Millisecond)
		if h := mustHead(t, reader); h != 2 {
			t.Errorf("head %d after the grace period, want 2 (slot 1 voided)", h)
		}
		if _, ok := slotData(t, reader, 1); ok {
			t.Error("a void slot is visible")
		}
		return nil, nil
	}
	var builds atomic.Int32
	first, err := a.Commit(context.Background(), seqTx("A", &builds))
	if err != nil || first != 3 {
		t.Fatalf("A: %d, %v; want 3 (its slot 1 was voided)", first, err)
	}
	if n := builds.Load(); n != 2 {
		t.Fatalf("A built %d times, want 2", n)
	}
	if h := mustHead(t, reader); h != 3 {
		t.Fatalf("head %d, want 3", h)
	}
	for v, want := range map[uint64]string{2: "B", 3: "A"} {
		if got, ok := slotData(t, reader, v); !ok || got != want {
			t.Fatalf("slot %d holds %q (%v), want %q", v, got, ok, want)
		}
	}
	if _, ok := slotData(t, reader, 1); ok {
		t.Fatal("slot 1 became visible")
	}
	items, err := reader.Query(context.Background(), port.Query{PK: seqUnderTest.Slots})
	if err != nil || len(items) != 2 {
		t.Fatalf("slot partition: %d items, %v; want 2 (void slots are not listed)", len(items), err)
	}
}

// TestSeqLateWriterBeatsVoider: the writer's transaction lands just before the reader's void; the void then
// finds the slot filled and the head passes it as committed.
func TestSeqLateWriterBeatsVoider(t *testing.T) {
	st, hooks, clock := seqStores(t, 3)
	a, b, reader := st[0], st[1], st[2]
	var once atomic.Bool
	hooks[0].onTx = func(ctx context.Context, in *dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error) {
		if once.Swap(true) {
			return nil, nil
		}
		if _, err := b.Commit(ctx, seqTx("B", nil)); err != nil {
			t.Error(err)
		}
		if h := mustHead(t, reader); h != 0 { // the reader observes the gap now
			t.Errorf("head %d", h)
		}
		clock.Advance(dynamo.DefaultVoidGrace)
		out, err := hooks[0].API.TransactWriteItems(ctx, in) // A lands first …
		if h := mustHead(t, reader); h != 2 {                // … then the reader's void finds slot 1 filled
			t.Errorf("head %d, want 2", h)
		}
		if err == nil && out == nil {
			out = &dynamodb.TransactWriteItemsOutput{}
		}
		return out, err
	}
	var builds atomic.Int32
	first, err := a.Commit(context.Background(), seqTx("A", &builds))
	if err != nil || first != 1 || builds.Load() != 1 {
		t.Fatalf("A: %d, %v, built %d times; want 1, nil, once", first, err, builds.Load())
	}
	if got, ok := slotData(t, reader, 1); !ok || got != "A" {
		t.Fatalf("slot 1 holds %q (%v), want A", got, ok)
	}
}

// TestSeqDeadWriter: a writer that dies between its reservation and its commit leaves its slot unresolved.
// Readers hold the head below it for the grace period counted from their first observation of the gap (a
// second gap observed later gets its own, later deadline), then void it; the dead writer's transaction,
// were it ever sent, fails on the void.
func TestSeqDeadWriter(t *testing.T) {
	st, hooks, clock := seqStores(t, 3)
	dead, live, reader := st[0], st[1], st[2]
	var sent atomic.Pointer[dynamodb.TransactWriteItemsInput]
	killed := errors.New("process killed")
	hooks[0].onTx = func(_ context.Context, in *dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error) {
		sent.Store(in)
		return nil, killed
	}
	hooks[0].onPut = func(context.Context, *dynamodb.PutItemInput) error { return killed } // it cannot void either
	if _, err := dead.Commit(context.Background(), seqTx("dead", nil)); !errors.Is(err, killed) {
		t.Fatalf("dead writer: %v", err)
	}
	if first, err := live.Commit(context.Background(), seqTx("L1", nil)); err != nil || first != 2 {
		t.Fatalf("live: %d, %v", first, err)
	}
	if h := mustHead(t, reader); h != 0 {
		t.Fatalf("head %d past the dead writer's slot", h)
	}
	clock.Advance(dynamo.DefaultVoidGrace / 2)
	// A second dead writer leaves slot 3; slot 4 commits: slot 3's grace starts now, not with slot 1's.
	if _, err := dead.Commit(context.Background(), seqTx("dead2", nil)); !errors.Is(err, killed) {
		t.Fatalf("dead writer 2: %v", err)
	}
	if first, err := live.Commit(context.Background(), seqTx("L2", nil)); err != nil || first != 4 {
		t.Fatalf("live 2: %d, %v", first, err)
	}
	if h := mustHead(t, reader); h != 0 {
		t.Fatalf("head %d", h)
	}
	clock.Advance(dynamo.DefaultVoidGrace / 2)
	if h := mustHead(t, reader); h != 2 {
		t.Fatalf("head %d after slot 1's grace period, want 2 (slot 3 observed later)", h)
	}
	clock.Advance(dynamo.DefaultVoidGrace/2 - time.Millisecond)
	if h := mustHead(t, reader); h != 2 {
		t.Fatalf("head %d before slot 3's grace period ended", h)
	}
	clock.Advance(time.Millisecond)
	if h := mustHead(t, reader); h != 4 {
		t.Fatalf("head %d after slot 3's grace period, want 4", h)
	}
	// The dead writer's transaction arrives after all: it fails on the void.
	in := sent.Load()
	_, err := hooks[1].API.TransactWriteItems(context.Background(), in)
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		t.Fatalf("late transaction into a void slot: %v, want cancelled", err)
	}
	if _, ok := slotData(t, reader, 3); ok {
		t.Fatal("void slot visible")
	}
}

// TestSeqFailedTxVoidsAtOnce: a writer whose transaction fails for good voids its own slot at once, so the
// head passes it without waiting for the grace period.
func TestSeqFailedTxVoidsAtOnce(t *testing.T) {
	st, _, _ := seqStores(t, 2)
	w, reader := st[0], st[1]
	if _, err := w.Commit(context.Background(), seqTx("x", nil)); err != nil {
		t.Fatal(err)
	}
	_, err := w.Commit(context.Background(), seqTx("x", nil)) // its side item exists: op 1 fails
	if i, ok := port.FailedOp(err); !ok || i != 1 {
		t.Fatalf("commit: %v, want a condition failure on op 1", err)
	}
	if first, err := w.Commit(context.Background(), seqTx("y", nil)); err != nil || first != 3 {
		t.Fatalf("next commit: %d, %v; want 3", first, err)
	}
	if h := mustHead(t, reader); h != 3 {
		t.Fatalf("head %d, want 3 without waiting for the grace period", h)
	}
}

// TestSeqLostResponse: a transaction that committed but whose response was lost (the retries give up) is
// recognised when its writer tries to void the slot: Commit reports success with the value it committed.
func TestSeqLostResponse(t *testing.T) {
	st, hooks, _ := seqStores(t, 2)
	w, reader := st[0], st[1]
	hooks[0].onTx = func(ctx context.Context, in *dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error) {
		if _, err := hooks[0].API.TransactWriteItems(ctx, in); err != nil && !isCancelled(err) {
			t.Error(err)
		}
		return nil, apiError("InternalServerError")
	}
	first, err := w.Commit(context.Background(), seqTx("x", nil))
	if err != nil || first != 1 {
		t.Fatalf("commit: %d, %v; want 1, nil", first, err)
	}
	if h := mustHead(t, reader); h != 1 {
		t.Fatalf("head %d, want 1", h)
	}
}

func isCancelled(err error) bool {
	var tce *types.TransactionCanceledException
	return errors.As(err, &tce)
}

// TestSeqMigratesOptimisticCounter: a space whose visible_seq was allocated by the optimistic scheme (a_n
// on the counter item, no head item) keeps its head, and continues after it.
func TestSeqMigratesOptimisticCounter(t *testing.T) {
	st, _, _ := seqStores(t, 1)
	s := st[0]
	ctr := seqUnderTest.Counter
	for v := uint64(1); v <= 5; v++ {
		_, err := s.Commit(context.Background(), port.Tx{Counter: &ctr, Count: 1, Max: 100, Build: func(first uint64) ([]port.Op, error) {
			return []port.Op{port.Put(port.Item{Key: seqUnderTest.Slot(first), Data: []byte("old")}, port.NotExists())}, nil
		}})
		if err != nil {
			t.Fatal(err)
		}
	}
	if h := mustHead(t, s); h != 5 {
		t.Fatalf("head of the optimistic counter %d, want 5", h)
	}
	first, err := s.Commit(context.Background(), seqTx("new", nil))
	if err != nil || first != 6 {
		t.Fatalf("first reservation: %d, %v; want 6", first, err)
	}
	if h := mustHead(t, s); h != 6 {
		t.Fatalf("head %d, want 6", h)
	}
}

// TestSeqReadOnlyReader: a reader that may not write (the channel service's role grants reads; or its
// writes are throttled) still gets the head the slots establish: it passes filled slots without moving the
// watermark, and cannot pass a missing slot it may not void; a reader that may write does.
func TestSeqReadOnlyReader(t *testing.T) {
	st, hooks, clock := seqStores(t, 4)
	w, dead, ro, rw := st[0], st[1], st[2], st[3]
	denied := apiError("AccessDeniedException")
	hooks[0].onUpdate = func(_ context.Context, in *dynamodb.UpdateItemInput) error {
		if aws.ToString(in.UpdateExpression) == "SET #h = :to" {
			return denied // the writer's watermark moves fail: only the slots tell
		}
		return nil
	}
	hooks[2].onUpdate = func(context.Context, *dynamodb.UpdateItemInput) error { return denied }
	hooks[2].onPut = func(context.Context, *dynamodb.PutItemInput) error { return denied }
	for range 2 {
		if _, err := w.Commit(context.Background(), seqTx(fmt.Sprint(time.Now().UnixNano()), nil)); err != nil {
			t.Fatal(err)
		}
	}
	if h := mustHead(t, ro); h != 2 {
		t.Fatalf("read-only head %d, want 2", h)
	}
	killed := errors.New("killed")
	hooks[1].onTx = func(context.Context, *dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error) {
		return nil, killed
	}
	hooks[1].onPut = func(context.Context, *dynamodb.PutItemInput) error { return killed }
	if _, err := dead.Commit(context.Background(), seqTx("dead", nil)); !errors.Is(err, killed) {
		t.Fatal(err)
	}
	if _, err := w.Commit(context.Background(), seqTx("after", nil)); err != nil {
		t.Fatal(err)
	}
	mustHead(t, ro)
	mustHead(t, rw)
	clock.Advance(dynamo.DefaultVoidGrace)
	if h := mustHead(t, ro); h != 2 {
		t.Fatalf("read-only head %d past a slot it could not void", h)
	}
	if h := mustHead(t, rw); h != 4 {
		t.Fatalf("head %d, want 4", h)
	}
	if h := mustHead(t, ro); h != 4 {
		t.Fatalf("read-only head %d after the void, want 4", h)
	}
}

// queryCounter counts Query calls (probes of the slots) on top of hooked.
type queryCounter struct {
	*hooked
	n atomic.Int32
}

func (q *queryCounter) Query(ctx context.Context, in *dynamodb.QueryInput, o ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	q.n.Add(1)
	return q.hooked.Query(ctx, in, o...)
}

// TestSeqHeadProbes: a reader skips the probe above the watermark while its process saw the watermark
// move, or probed it, less than a second ago (a read is then one GetItem), and probes otherwise; a slot
// whose writer committed but never moved the watermark (it crashed in between) is found by the next probe,
// at most a second later, or by the next writer.
func TestSeqHeadProbes(t *testing.T) {
	st, hooks, clock := seqStores(t, 2)
	w := st[0]
	qc := &queryCounter{hooked: hooks[1]}
	reader, err := dynamo.New(qc, w.Table(), dynamo.Options{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	head := func(want uint64, probes int32) {
		t.Helper()
		before := qc.n.Load()
		if h := mustHead(t, reader); h != want {
			t.Fatalf("head %d, want %d", h, want)
		}
		if got := qc.n.Load() - before; got != probes {
			t.Fatalf("%d probes, want %d", got, probes)
		}
	}
	if _, err := w.Commit(context.Background(), seqTx("a", nil)); err != nil {
		t.Fatal(err)
	}
	head(1, 1) // first read of this process: probe
	head(1, 0) // within a second: trusted
	if _, err := w.Commit(context.Background(), seqTx("b", nil)); err != nil {
		t.Fatal(err)
	}
	head(2, 0) // it moved: writers carry it
	clock.Advance(time.Second)
	head(2, 1) // unchanged for a second: probe
	// A writer commits slot 3 and crashes before moving the watermark.
	hooks[0].onUpdate = func(_ context.Context, in *dynamodb.UpdateItemInput) error {
		if aws.ToString(in.UpdateExpression) == "SET #h = :to" {
			return errors.New("crashed")
		}
		return nil
	}
	if _, err := w.Commit(context.Background(), seqTx("c", nil)); err != nil {
		t.Fatal(err)
	}
	head(2, 0) // trusted: slot 3 is not visible yet …
	clock.Advance(time.Second)
	head(3, 2) // … until the next probe (which carries, and reads again above)
	hooks[0].onUpdate = nil
}
