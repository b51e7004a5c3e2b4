package storetest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/waypost/waypost/domain/port"
)

// usage reads the usage a sequence's counter item keeps.
func usage(t testing.TB, s port.ItemStore, seq *port.Sequence) (bytes, items int64) {
	t.Helper()
	it, _, err := s.Get(context.Background(), seq.Counter)
	if err != nil {
		t.Fatalf("reading %s: %v", seq.Counter, err)
	}
	return port.UsageOf(it)
}

// quotaTx is a transaction taking count values of seq (a slot each, and one side item), with quota q.
func quotaTx(seq *port.Sequence, count uint64, q port.Quota, tag string) port.Tx {
	return port.Tx{Seq: seq, Count: count, Max: 1 << 53, Quota: &q, Build: func(first uint64) ([]port.Op, error) {
		return append(slotPuts(seq, first, count, tag), port.Put(item("qt-side", tag, "side "+tag), port.NotExists())), nil
	}}
}

// txBytes is what quotaTx stores (the slot keys have one width whatever the value).
func txBytes(seq *port.Sequence, count uint64, tag string) int64 {
	ops, _ := quotaTx(seq, count, port.Quota{}, tag).Build(1)
	return port.PutBytes(ops)
}

// testQuotaUsage: a transaction with a Quota adds exactly the size of its puts plus Extra, and its Items,
// to the usage its counter item keeps; one taking no value (Count 0) adds usage and leaves the head; a
// failed condition adds nothing.
func testQuotaUsage(t *testing.T, s port.ItemStore) {
	ctx := context.Background()
	seq := testSeq("quota-usage")
	if _, err := s.Commit(ctx, quotaTx(seq, 1, port.Quota{Extra: 100, Items: 1, MaxBytes: 1 << 40, MaxItems: 1 << 40}, "a")); err != nil {
		t.Fatal(err)
	}
	want := txBytes(seq, 1, "a") + 100
	if b, i := usage(t, s, seq); b != want || i != 1 {
		t.Fatalf("usage %d bytes %d items, want %d and 1", b, i, want)
	}
	// Count 0: stores something, takes no value.
	q := port.Quota{Extra: 7}
	if _, err := s.Commit(ctx, port.Tx{Seq: seq, Quota: &q, Build: func(uint64) ([]port.Op, error) {
		return []port.Op{port.Put(item("qt-side", "zero", "no value"), port.NotExists())}, nil
	}}); err != nil {
		t.Fatalf("a quota transaction taking no value: %v", err)
	}
	want += port.PutBytes([]port.Op{port.Put(item("qt-side", "zero", "no value"), port.NotExists())}) + 7
	if b, i := usage(t, s, seq); b != want || i != 1 {
		t.Fatalf("after Count 0: usage %d bytes %d items, want %d and 1", b, i, want)
	}
	if h := head(t, s, seq); h != 1 {
		t.Fatalf("head %d after a transaction taking no value, want 1", h)
	}
	// A failed condition: nothing added.
	_, err := s.Commit(ctx, quotaTx(seq, 1, port.Quota{Items: 1}, "a")) // side item "a" exists
	if _, ok := port.FailedOp(err); !ok {
		t.Fatalf("want a condition failure, got %v", err)
	}
	if b, i := usage(t, s, seq); b != want || i != 1 {
		t.Fatalf("after a failed condition: usage %d bytes %d items, want %d and 1", b, i, want)
	}
}

// testQuotaLimits: a transaction that would pass MaxBytes or MaxItems fails with port.ErrQuotaExceeded and
// writes nothing, takes no value and adds no usage; one that reaches a limit exactly commits.
func testQuotaLimits(t *testing.T, s port.ItemStore) {
	ctx := context.Background()
	seq := testSeq("quota-limits")
	size := txBytes(seq, 1, "x1")
	commit := func(tag string, q port.Quota) error {
		_, err := s.Commit(ctx, quotaTx(seq, 1, q, tag))
		return err
	}
	if err := commit("x1", port.Quota{Items: 1, MaxBytes: size, MaxItems: 2}); err != nil {
		t.Fatalf("a transaction reaching the byte limit exactly: %v", err)
	}
	for _, tc := range []struct {
		name string
		q    port.Quota
	}{
		{"bytes", port.Quota{Items: 1, MaxBytes: 2*size - 1, MaxItems: 10}},
		{"extra bytes", port.Quota{Extra: 1, Items: 1, MaxBytes: 2 * size, MaxItems: 10}},
		{"items", port.Quota{Items: 2, MaxBytes: 1 << 40, MaxItems: 2}},
		{"alone", port.Quota{Items: 1, MaxBytes: size - 1}},
	} {
		err := commit("x2", tc.q)
		if !errors.Is(err, port.ErrQuotaExceeded) {
			t.Fatalf("%s: want ErrQuotaExceeded, got %v", tc.name, err)
		}
		if b, i := usage(t, s, seq); b != size || i != 1 {
			t.Fatalf("%s: usage %d bytes %d items after a refusal, want %d and 1", tc.name, b, i, size)
		}
		if got := len(all(t, s, seq.Slots)); got != 1 {
			t.Fatalf("%s: %d slots after a refusal", tc.name, got)
		}
		if _, found, _ := s.Get(ctx, key("qt-side", "x2")); found {
			t.Fatalf("%s: a refused transaction wrote its side item", tc.name)
		}
	}
	if err := commit("x2", port.Quota{Items: 1, MaxBytes: 2 * size, MaxItems: 2}); err != nil {
		t.Fatalf("a transaction within both limits: %v", err)
	}
	if h := head(t, s, seq); h != 2 {
		t.Fatalf("head %d, want 2: a refusal took a value", h)
	}
}

// testQuotaConcurrent: of concurrent transactions each adding one item under MaxItems n, exactly n commit
// and the usage counts exactly n.
func testQuotaConcurrent(t *testing.T, s port.ItemStore) {
	seq := testSeq("quota-concurrent")
	const writers, limit = 12, 5
	var ok, refused atomic.Int64
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.Commit(context.Background(), quotaTx(seq, 1, port.Quota{Items: 1, MaxItems: limit}, "c"+string(rune('a'+w))))
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, port.ErrQuotaExceeded):
				refused.Add(1)
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if ok.Load() != limit || refused.Load() != writers-limit {
		t.Fatalf("%d committed, %d refused; want %d and %d", ok.Load(), refused.Load(), limit, writers-limit)
	}
	if _, i := usage(t, s, seq); i != limit {
		t.Fatalf("usage %d items, want %d", i, limit)
	}
}
