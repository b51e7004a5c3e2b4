package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/waypost/waypost/domain/port"
)

// testSeq is the sequence the contract's sequence tests use.
func testSeq(name string) *port.Sequence {
	return &port.Sequence{Counter: key("sq-"+name, "SEQ"), Slots: "sq-" + name + "-slots", Head: key("sq-"+name+"-head", "HEAD")}
}

// slotPuts returns the puts of count slots from first, each holding tag.
func slotPuts(seq *port.Sequence, first, count uint64, tag string) []port.Op {
	out := make([]port.Op, 0, count)
	for v := first; v < first+count; v++ {
		out = append(out, port.Put(port.Item{Key: seq.Slot(v), Data: []byte(tag)}, port.NotExists()))
	}
	return out
}

func head(t testing.TB, s port.ItemStore, seq *port.Sequence) uint64 {
	t.Helper()
	h, err := s.Head(context.Background(), *seq)
	if err != nil {
		t.Fatalf("head of %s: %v", seq.Slots, err)
	}
	return h
}

// testSeqBasics: values start at 1 and increase by Count; Build sees the first value; the head of an unused
// sequence is 0 and, with one writer, covers each commit once it returns; slots read back.
func testSeqBasics(t *testing.T, s port.ItemStore) {
	seq := testSeq("basics")
	if h := head(t, s, seq); h != 0 {
		t.Fatalf("head of an unused sequence %d, want 0", h)
	}
	var prev uint64
	for i, count := range []uint64{1, 3, 1, 2} {
		var built uint64
		tag := fmt.Sprint("c", i)
		first, err := s.Commit(context.Background(), port.Tx{Seq: seq, Count: count, Max: 1 << 53, Build: func(first uint64) ([]port.Op, error) {
			built = first
			return append(slotPuts(seq, first, count, tag), port.Put(item("sq-side", fmt.Sprint(first), tag), port.NotExists())), nil
		}})
		if err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
		if first != built || first <= prev {
			t.Fatalf("commit %d: first %d, Build saw %d, previous last %d", i, first, built, prev)
		}
		prev = first + count - 1
		if h := head(t, s, seq); h != prev {
			t.Fatalf("head after commit %d: %d, want %d", i, h, prev)
		}
		for v := first; v <= prev; v++ {
			wantItem(t, s, port.Item{Key: seq.Slot(v), Data: []byte(tag)})
		}
	}
	if got := len(all(t, s, seq.Slots)); got != 7 {
		t.Fatalf("%d slots, want 7", got)
	}
}

// testSeqShape: a sequence transaction must put each of its slots guarded by NotExists and must not touch
// its counter or head; Counter and Seq together, and Count 0, are rejected. Nothing is written.
func testSeqShape(t *testing.T, s port.ItemStore) {
	seq := testSeq("shape")
	commitSeq := func(count uint64, build func(first uint64) []port.Op) error {
		_, err := s.Commit(context.Background(), port.Tx{Seq: seq, Count: count, Max: 100, Build: func(first uint64) ([]port.Op, error) {
			return build(first), nil
		}})
		return err
	}
	cases := map[string]func(uint64) []port.Op{
		"no slot":             func(uint64) []port.Op { return []port.Op{port.Put(item("sq-x", "a", ""), port.Cond{})} },
		"one of two slots":    func(f uint64) []port.Op { return slotPuts(seq, f, 1, "x") },
		"slot without a cond": func(f uint64) []port.Op { return []port.Op{port.Put(port.Item{Key: seq.Slot(f)}, port.Cond{})} },
		"slot deleted": func(f uint64) []port.Op {
			return []port.Op{port.Delete(seq.Slot(f), port.NotExists())}
		},
		"op on head": func(f uint64) []port.Op {
			return append(slotPuts(seq, f, 1, "x"), port.Put(item(seq.Head.PK, seq.Head.SK, ""), port.Cond{}))
		},
		"op on counter": func(f uint64) []port.Op {
			return append(slotPuts(seq, f, 1, "x"), port.Put(item(seq.Counter.PK, seq.Counter.SK, ""), port.Cond{}))
		},
	}
	for name, build := range cases {
		count := uint64(1)
		if name == "one of two slots" {
			count = 2
		}
		wantRejected(t, name, commitSeq(count, build))
	}
	ctr := key("sq-y", "CTR")
	_, err := s.Commit(context.Background(), port.Tx{Counter: &ctr, Seq: seq, Count: 1, Max: 100, Build: ops()})
	wantRejected(t, "counter and sequence", err)
	_, err = s.Commit(context.Background(), port.Tx{Seq: seq, Count: 0, Max: 100, Build: ops()})
	wantRejected(t, "Count 0", err)
	if got := all(t, s, seq.Slots); len(got) != 0 {
		t.Fatalf("rejected transactions wrote slots %q", sks(got))
	}
	mustAbsent(t, s, key("sq-x", "a"))
	// The sequence still works, and no rejected transaction left a slot the head waits for.
	first, err := s.Commit(context.Background(), port.Tx{Seq: seq, Count: 1, Max: 100, Build: func(f uint64) ([]port.Op, error) { return slotPuts(seq, f, 1, "ok"), nil }})
	if err != nil {
		t.Fatal(err)
	}
	if h := head(t, s, seq); h != first {
		t.Fatalf("head %d after committing %d", h, first)
	}
}

// testSeqFailedCondition: a transaction whose own condition fails reports that op, writes nothing, and
// leaves no slot for the head to wait on: the next commit takes a higher value and the head covers it.
func testSeqFailedCondition(t *testing.T, s port.ItemStore) {
	seq := testSeq("cond")
	_, err := s.Commit(context.Background(), port.Tx{Seq: seq, Count: 2, Max: 100, Build: func(f uint64) ([]port.Op, error) {
		return append(slotPuts(seq, f, 2, "x"), port.Check(key("sq-c", "missing"), port.Exists())), nil
	}})
	wantCondFailed(t, err, 2, key("sq-c", "missing"))
	if got := query(t, s, port.Query{PK: seq.Slots}); len(got) != 0 {
		t.Fatalf("failed transaction left slots %q", sks(got))
	}
	first, err := s.Commit(context.Background(), port.Tx{Seq: seq, Count: 1, Max: 100, Build: func(f uint64) ([]port.Op, error) { return slotPuts(seq, f, 1, "ok"), nil }})
	if err != nil || first < 1 {
		t.Fatalf("commit after the failure: %d, %v", first, err)
	}
	// ReservesSequences says which: a refused transaction used its two values up, or took none.
	if want := map[bool]uint64{false: 1, true: 3}[s.ReservesSequences()]; first != want {
		t.Fatalf("commit after a refused transaction of 2 values got %d, want %d (ReservesSequences %v)", first, want, s.ReservesSequences())
	}
	if h := head(t, s, seq); h != first {
		t.Fatalf("head %d after committing %d (a failed transaction's values must not hold it back)", h, first)
	}
	if got := sks(all(t, s, seq.Slots)); !equalStrings(got, []string{port.SlotSK(first)}) {
		t.Fatalf("slots %q, want only %s", got, port.SlotSK(first))
	}
}

// testSeqSlotTaken: a slot that already holds an item (written outside its sequence, as in a damaged store)
// is never overwritten by the transaction allocating its value. A store that allocates inside the
// transaction fails the slot's NotExists condition, wherever the slot is among the transaction's slots, and
// writes nothing; one that reserves values (ReservesSequences) may instead move past the taken value. An
// item past the allocated slots fails nothing. (The embedded store checks a run of slots with one seek over
// their range, kv.AbsentView.)
func testSeqSlotTaken(t *testing.T, s port.ItemStore) {
	for _, taken := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprintf("slot %d of 3", taken), func(t *testing.T) {
			seq := testSeq(fmt.Sprintf("taken%d", taken))
			put(t, s, port.Item{Key: seq.Slot(taken), Data: []byte("before")})
			first, err := s.Commit(context.Background(), port.Tx{Seq: seq, Count: 3, Max: 100, Build: func(f uint64) ([]port.Op, error) {
				return slotPuts(seq, f, 3, "x"), nil
			}})
			want := []string{port.SlotSK(taken)}
			switch {
			case err == nil && s.ReservesSequences() && (taken < first || taken > first+2):
				want = append(want, port.SlotSK(first), port.SlotSK(first+1), port.SlotSK(first+2))
				slices.Sort(want)
			case err == nil:
				t.Fatalf("commit of slots %d-%d over an item at %d succeeded", first, first+2, taken)
			default:
				wantCondFailed(t, err, int(taken-1), seq.Slot(taken))
			}
			if got := sks(all(t, s, seq.Slots)); !equalStrings(got, want) {
				t.Fatalf("slots %q, want %q", got, want)
			}
			if it := mustGet(t, s, seq.Slot(taken)); string(it.Data) != "before" {
				t.Fatalf("the item at %d holds %q, want it untouched", taken, it.Data)
			}
		})
	}
	t.Run("item past the slots", func(t *testing.T) {
		seq := testSeq("takenpast")
		put(t, s, port.Item{Key: seq.Slot(4), Data: []byte("before")})
		first, err := s.Commit(context.Background(), port.Tx{Seq: seq, Count: 3, Max: 100, Build: func(f uint64) ([]port.Op, error) {
			return slotPuts(seq, f, 3, "x"), nil
		}})
		if err != nil || first != 1 {
			t.Fatalf("commit of slots 1-3 beside an item at 4: %d, %v", first, err)
		}
		if got := sks(all(t, s, seq.Slots)); !equalStrings(got, []string{port.SlotSK(1), port.SlotSK(2), port.SlotSK(3), port.SlotSK(4)}) {
			t.Fatalf("slots %q, want 1 to 4", got)
		}
	})
}

// testSeqMax: values never pass Max (port.ErrCounterExhausted), and never wrap.
func testSeqMax(t *testing.T, s port.ItemStore) {
	seq := testSeq("max")
	commitN := func(count, max uint64) (uint64, error) {
		return s.Commit(context.Background(), port.Tx{Seq: seq, Count: count, Max: max, Build: func(f uint64) ([]port.Op, error) {
			return slotPuts(seq, f, count, "m"), nil
		}})
	}
	if _, err := commitN(3, 2); !errors.Is(err, port.ErrCounterExhausted) {
		t.Fatalf("Count above Max: %v, want ErrCounterExhausted", err)
	}
	first, err := commitN(4, 5)
	if err != nil {
		t.Fatal(err)
	}
	last := first + 3
	if last > 5 {
		t.Fatalf("values %d…%d pass Max 5", first, last)
	}
	for last < 5 {
		f, err := commitN(1, 5)
		if err != nil {
			t.Fatal(err)
		}
		last = f
	}
	if _, err := commitN(1, 5); !errors.Is(err, port.ErrCounterExhausted) {
		t.Fatalf("past Max: %v, want ErrCounterExhausted", err)
	}
	if h := head(t, s, seq); h != 5 {
		t.Fatalf("head %d, want 5", h)
	}
}

// testSeqConcurrent has 16 goroutines commit 1–3 values at a time with a side item each: values are unique,
// each writer's values increase, every committed slot holds its writer's tag, the head covers every commit
// once all have returned, and nothing else is visible in the slot partition.
func testSeqConcurrent(t *testing.T, s port.ItemStore) {
	const workers, perWorker = 16, 8
	seq := testSeq("conc")
	type commit struct {
		first, count uint64
		tag          string
	}
	results := make([][]commit, workers)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range perWorker {
				count := uint64(1 + (w+j)%3)
				tag := fmt.Sprintf("w%02d-%d", w, j)
				first, err := s.Commit(context.Background(), port.Tx{Seq: seq, Count: count, Max: 1 << 53,
					Build: func(first uint64) ([]port.Op, error) {
						return append(slotPuts(seq, first, count, tag), port.Put(item("sq-conc-side", tag, fmt.Sprint(first)), port.Cond{})), nil
					}})
				if err != nil {
					errs <- fmt.Errorf("worker %d tx %d: %w", w, j, err)
					return
				}
				results[w] = append(results[w], commit{first, count, tag})
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	owner := map[uint64]string{}
	var top uint64
	for w, rs := range results {
		for j, r := range rs {
			if j > 0 && r.first <= rs[j-1].first+rs[j-1].count-1 {
				t.Fatalf("worker %d: commit %d got %d after %d", w, j, r.first, rs[j-1].first)
			}
			for v := r.first; v < r.first+r.count; v++ {
				if prev, dup := owner[v]; dup {
					t.Fatalf("value %d taken by %s and %s", v, prev, r.tag)
				}
				owner[v] = r.tag
				top = max(top, v)
			}
			wantItem(t, s, item("sq-conc-side", r.tag, fmt.Sprint(r.first)))
		}
	}
	if h := head(t, s, seq); h < top {
		t.Fatalf("head %d below the highest committed value %d after every commit returned", h, top)
	}
	slots := all(t, s, seq.Slots)
	if len(slots) != len(owner) {
		t.Fatalf("%d slots visible, %d values committed", len(slots), len(owner))
	}
	var seen []uint64
	for _, it := range slots {
		v, ok := port.ParseSlotSK(it.SK)
		if !ok {
			t.Fatalf("slot key %q", it.SK)
		}
		if owner[v] != string(it.Data) {
			t.Fatalf("slot %d holds %q, but %q committed it", v, it.Data, owner[v])
		}
		if _, found, _ := s.Get(context.Background(), it.Key); !found {
			t.Fatalf("slot %d listed but not found", v)
		}
		seen = append(seen, v)
	}
	if !slices.IsSorted(seen) {
		t.Fatalf("slots out of order: %v", seen)
	}
}
