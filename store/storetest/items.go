package storetest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waypost/waypost/domain/port"
)

// RunItemStore runs the port.ItemStore contract against the stores newStore returns (a fresh, empty one per
// subtest).
func RunItemStore(t *testing.T, newStore func(t *testing.T) port.ItemStore) {
	runContract(t, newStore, []contractCheck[port.ItemStore]{
		{"GetAbsent", testGetAbsent},
		{"PutGet", testPutGet},
		{"GetMany", testGetMany},
		{"PutReplaces", testPutReplaces},
		{"Delete", testDelete},
		{"Conditions", testConditions},
		{"AllOrNothing", testAllOrNothing},
		{"FirstFailedConditionReported", testFirstFailedReported},
		{"ConditionsSeeStateBeforeTx", testConditionsSeeStateBeforeTx},
		{"ConditionsAfterGetMany", testConditionsAfterGetMany},
		{"EmptyTx", testEmptyTx},
		{"CounterFirstValue", testCounterFirst},
		{"CounterCount", testCounterCount},
		{"CounterMax", testCounterMax},
		{"CounterNoWrap", testCounterNoWrap},
		{"CounterKeepsAttrs", testCounterKeepsAttrs},
		{"CounterWithFailedCondition", testCounterFailedCondition},
		{"CounterConcurrent", testCounterConcurrent},
		{"SeqBasics", testSeqBasics},
		{"SeqShape", testSeqShape},
		{"SeqFailedCondition", testSeqFailedCondition},
		{"SeqSlotTaken", testSeqSlotTaken},
		{"SeqMax", testSeqMax},
		{"SeqConcurrent", testSeqConcurrent},
		{"QuotaUsage", testQuotaUsage},
		{"QuotaLimits", testQuotaLimits},
		{"QuotaConcurrent", testQuotaConcurrent},
		{"ConcurrentCreate", testConcurrentCreate},
		{"BuildCalledAgain", testBuildCalledAgain},
		{"BuildError", testBuildError},
		{"DuplicateKey", testDuplicateKey},
		{"TooManyOps", testTooManyOps},
		{"InvalidKeys", testInvalidKeys},
		{"QueryOrder", testQueryOrder},
		{"QueryBounds", testQueryBounds},
		{"QueryLimitAndPaging", testQueryPaging},
		{"QueryPartitionIsolation", testQueryIsolation},
		{"QueryEmptyPartition", testQueryEmpty},
		{"BinarySafe", testBinarySafe},
		{"DeepCopies", testDeepCopies},
		{"ContextCancelled", testContextCancelled},
		{"Model", testModel},
	})
}

// testConditionsAfterGetMany: keys a GetMany found absent, then written or deleted by later commits, are
// read by the next GetMany and judged by a NotExists or Exists condition as they are now, not as the first
// GetMany saw them (the embedded store
// keeps what GetMany found absent for the conditions that usually follow).
func testConditionsAfterGetMany(t *testing.T, s port.ItemStore) {
	ctx := context.Background()
	keys := []port.Key{key("gm", "a"), key("gm", "b"), key("gm", "c")}
	if _, found, err := s.GetMany(ctx, keys); err != nil || slices.Contains(found, true) {
		t.Fatalf("GetMany of fresh keys: %v, %v", found, err)
	}
	put(t, s, item("gm", "a", "1"), item("gm", "b", "1"))
	commit(t, s, port.Delete(keys[1], port.Cond{}))
	if _, found, err := s.GetMany(ctx, keys); err != nil || !slices.Equal(found, []bool{true, false, false}) {
		t.Fatalf("GetMany after a and b were put and b deleted: found %v, %v; want a only", found, err)
	}
	for i, want := range []bool{true, false, false} { // a exists, b was deleted, c never written
		_, err := s.Commit(ctx, port.Tx{Build: ops(port.Put(item("gm", keys[i].SK, "2"), port.NotExists()))})
		if failed := err != nil; failed != want {
			t.Fatalf("NotExists put of %s after GetMany and later writes: %v, want failed %v", keys[i], err, want)
		}
	}
	if _, err := s.Commit(ctx, port.Tx{Build: ops(port.Check(keys[2], port.Exists()))}); err != nil {
		t.Fatalf("Exists check of %s, put by the last commit: %v", keys[2], err)
	}
}

func testGetAbsent(t *testing.T, s port.ItemStore) {
	mustAbsent(t, s, key("nope", "x"))
	put(t, s, item("p", "b", "1"))
	mustAbsent(t, s, key("p", "a"))
	mustAbsent(t, s, key("p", "c"))
	mustAbsent(t, s, key("q", "b"))
	it, ok, err := s.Get(context.Background(), key("p", "a"))
	if err != nil || ok || it.Attrs != nil || it.Data != nil || it.Key != (port.Key{}) {
		t.Fatalf("absent get = %s, %v, %v; want zero item, false, nil", show(it), ok, err)
	}
}

func testPutGet(t *testing.T, s port.ItemStore) {
	a := item("p", "a", `{"x":1}`, "state", "open", "gen", "7")
	b := item("p", "b", "")
	c := item("p2", "a", "other partition")
	put(t, s, a, b)
	put(t, s, c)
	wantItem(t, s, a)
	wantItem(t, s, b)
	wantItem(t, s, c)
	if got := mustGet(t, s, a.Key); got.Attr("state") != "open" || got.Attr("missing") != "" {
		t.Fatalf("attrs of %s = %s", a.Key, show(got))
	}
}

// testGetMany reads 260 keys at once (more than one DynamoDB BatchGetItem holds): present and absent ones
// in two partitions, a deleted one and repeats, and checks each answer against Get's, position by position.
func testGetMany(t *testing.T, s port.ItemStore) {
	ctx := context.Background()
	if items, found, err := s.GetMany(ctx, nil); err != nil || len(items) != 0 || len(found) != 0 {
		t.Fatalf("GetMany of no keys = %d items, %d found, %v", len(items), len(found), err)
	}
	var keys []port.Key
	var present []port.Item
	for i := range 240 {
		pk := []string{"gm", "gm2"}[i%2]
		k := key(pk, fmt.Sprintf("k%03d", i))
		keys = append(keys, k)
		if i%3 != 0 {
			present = append(present, item(pk, k.SK, fmt.Sprintf("data %d", i), "n", fmt.Sprint(i)))
		}
	}
	for chunk := range slices.Chunk(present, 20) {
		put(t, s, chunk...)
	}
	commit(t, s, port.Delete(keys[1], port.Cond{}))
	keys = append(keys, keys[2], keys[2], keys[3], keys[1], key("gm3", "none"))
	keys = append(keys, keys[4:19]...)
	items, found, err := s.GetMany(ctx, keys)
	if err != nil {
		t.Fatalf("GetMany of %d keys: %v", len(keys), err)
	}
	if len(items) != len(keys) || len(found) != len(keys) {
		t.Fatalf("GetMany of %d keys: %d items, %d found", len(keys), len(items), len(found))
	}
	hits := 0
	for i, k := range keys {
		want, ok := get(t, s, k)
		if found[i] != ok || (ok && !sameItem(items[i], want)) || (!ok && items[i].Key != (port.Key{})) {
			t.Fatalf("GetMany[%d] (%s) = %s, %v; Get = %s, %v", i, k, show(items[i]), found[i], show(want), ok)
		}
		if ok {
			hits++
		}
	}
	if hits < 150 {
		t.Fatalf("only %d of %d keys found", hits, len(keys))
	}
	// Again, now that Get has read every key (a store may answer from a cache it filled): the same answers.
	again, againFound, err := s.GetMany(ctx, keys)
	if err != nil {
		t.Fatalf("GetMany again: %v", err)
	}
	for i := range keys {
		if againFound[i] != found[i] || (found[i] && !sameItem(again[i], items[i])) {
			t.Fatalf("GetMany again [%d] (%s) = %s, %v; first %s, %v", i, keys[i], show(again[i]), againFound[i], show(items[i]), found[i])
		}
	}
	again[2].Data[0] = 'Y' // a cached item handed out is the caller's own
	// Each position is the caller's own: changing one repeat changes neither the other nor the store.
	items[240].Data[0] = 'X'
	items[240].Attrs["n"] = "changed"
	if !sameItem(items[241], mustGet(t, s, keys[2])) {
		t.Fatalf("a repeated key's items share memory: %s", show(items[241]))
	}
	if _, _, err := s.GetMany(ctx, []port.Key{key("gm", "k002"), {PK: "", SK: "a"}}); err == nil {
		t.Fatal("GetMany with an empty partition key: no error")
	}
}

func testPutReplaces(t *testing.T, s port.ItemStore) {
	put(t, s, item("p", "a", "old data", "a", "1", "b", "2"))
	next := item("p", "a", "new", "a", "3")
	put(t, s, next)
	wantItem(t, s, next) // b is gone: a put replaces the whole item
	put(t, s, item("p", "a", ""))
	wantItem(t, s, item("p", "a", ""))
}

func testDelete(t *testing.T, s port.ItemStore) {
	put(t, s, item("p", "a", "1"), item("p", "b", "2"))
	commit(t, s, port.Delete(key("p", "a"), port.Cond{}))
	mustAbsent(t, s, key("p", "a"))
	wantItem(t, s, item("p", "b", "2"))
	commit(t, s, port.Delete(key("p", "a"), port.Cond{}))    // absent: not an error
	commit(t, s, port.Delete(key("none", "x"), port.Cond{})) // absent partition
	if got := sks(query(t, s, port.Query{PK: "p"})); !equalStrings(got, []string{"b"}) {
		t.Fatalf("after delete, partition holds %q", got)
	}
}

// testConditions tries every condition kind on every op kind against a present and an absent item.
func testConditions(t *testing.T, s port.ItemStore) {
	conds := []port.Cond{
		{},
		port.Exists(),
		port.NotExists(),
		port.AttrEquals("state", "open"),
		port.AttrEquals("state", "closed"),
		port.AttrEquals("other", "open"),
	}
	orig := item("c", "present", "orig", "state", "open")
	put(t, s, orig)
	n := 0
	for _, kind := range []port.OpKind{port.OpPut, port.OpDelete, port.OpCheck} {
		for _, cond := range conds {
			if kind == port.OpCheck && cond.Kind == port.CondNone {
				continue // a check without a condition is meaningless
			}
			for _, present := range []bool{true, false} {
				n++
				k := key("c", "absent")
				if present {
					k = orig.Key
				}
				cur, _ := get(t, s, k)
				holds := cond.Holds(cur, present)
				newItem := item(k.PK, k.SK, fmt.Sprintf("new %d", n), "state", "new")
				op := port.Op{Kind: kind, Item: newItem, Cond: cond}
				if kind != port.OpPut {
					op.Item = port.Item{Key: k}
				}
				name := describe([]port.Op{op})
				_, err := s.Commit(context.Background(), port.Tx{Build: ops(op)})
				if !holds {
					if err == nil {
						t.Fatalf("%s on present=%v: committed, want condition failure", name, present)
					}
					wantCondFailed(t, err, 0, k)
				} else if err != nil {
					t.Fatalf("%s on present=%v: %v", name, present, err)
				}
				got, found := get(t, s, k)
				switch {
				case holds && kind == port.OpPut:
					if !found || !sameItem(got, newItem) {
						t.Fatalf("%s: item %s, want %s", name, show(got), show(newItem))
					}
				case holds && kind == port.OpDelete:
					if found {
						t.Fatalf("%s: item still present", name)
					}
				case present:
					if !found || !sameItem(got, orig) {
						t.Fatalf("%s: item %s (found %v), want unchanged %s", name, show(got), found, show(orig))
					}
				default:
					if found {
						t.Fatalf("%s: absent item appeared: %s", name, show(got))
					}
				}
				// Restore the starting state.
				commit(t, s, port.Put(orig, port.Cond{}), port.Delete(key("c", "absent"), port.Cond{}))
			}
		}
	}
}

// testAllOrNothing makes each op of a mixed transaction fail in turn and checks nothing is written and the
// counter does not move.
func testAllOrNothing(t *testing.T, s port.ItemStore) {
	ctr := key("aon", "#ctr")
	put(t, s, item("aon", "del", "d", "v", "1"), item("aon", "chk", "c", "v", "1"), item("aon", "rep", "r", "v", "1"))
	if _, err := s.Commit(context.Background(), port.Tx{Counter: &ctr, Count: 1, Max: 100, Build: ops()}); err != nil {
		t.Fatal(err)
	}
	before := all(t, s, "aon")
	good := []port.Op{
		port.Put(item("aon", "new", "n"), port.NotExists()),
		port.Delete(key("aon", "del"), port.Exists()),
		port.Check(key("aon", "chk"), port.AttrEquals("v", "1")),
		port.Put(item("aon", "rep", "r2", "v", "2"), port.AttrEquals("v", "1")),
		port.Put(item("aon2", "x", "other partition"), port.Cond{}),
	}
	bad := []port.Op{
		port.Put(item("aon", "new", "n"), port.Exists()),
		port.Delete(key("aon", "del"), port.NotExists()),
		port.Check(key("aon", "chk"), port.AttrEquals("v", "2")),
		port.Put(item("aon", "rep", "r2", "v", "2"), port.AttrEquals("w", "1")),
		port.Put(item("aon2", "x", "other partition"), port.Exists()),
	}
	for _, withCounter := range []bool{false, true} {
		for i := range good {
			tx := make([]port.Op, len(good))
			copy(tx, good)
			tx[i] = bad[i]
			ptx := port.Tx{Build: ops(tx...)}
			if withCounter {
				ptx.Counter, ptx.Count, ptx.Max = &ctr, 3, 100
			}
			_, err := s.Commit(context.Background(), ptx)
			wantCondFailed(t, err, i, tx[i].Item.Key)
			if got := all(t, s, "aon"); len(got) != len(before) {
				t.Fatalf("failed tx (op %d) changed the partition: %q, want %q", i, sks(got), sks(before))
			} else {
				for j := range got {
					if !sameItem(got[j], before[j]) {
						t.Fatalf("failed tx (op %d) changed %s to %s", i, show(before[j]), show(got[j]))
					}
				}
			}
			mustAbsent(t, s, key("aon2", "x"))
			if n := counterValue(t, s, ctr); n != 1 {
				t.Fatalf("failed tx (op %d) moved the counter to %d", i, n)
			}
		}
	}
	// And the good transaction does commit, with the counter.
	first, err := s.Commit(context.Background(), port.Tx{Counter: &ctr, Count: 3, Max: 100, Build: ops(good...)})
	if err != nil || first != 2 {
		t.Fatalf("good tx: first %d, %v; want 2, nil", first, err)
	}
	wantItem(t, s, item("aon", "new", "n"))
	mustAbsent(t, s, key("aon", "del"))
	wantItem(t, s, item("aon", "rep", "r2", "v", "2"))
	wantItem(t, s, item("aon2", "x", "other partition"))
	if n := counterValue(t, s, ctr); n != 4 {
		t.Fatalf("counter %d, want 4", n)
	}
}

func testFirstFailedReported(t *testing.T, s port.ItemStore) {
	put(t, s, item("ff", "a", "1"))
	_, err := s.Commit(context.Background(), port.Tx{Build: ops(
		port.Put(item("ff", "b", "1"), port.NotExists()),
		port.Check(key("ff", "a"), port.NotExists()),
		port.Delete(key("ff", "c"), port.Exists()),
	)})
	wantCondFailed(t, err, 1, key("ff", "a"))
	mustAbsent(t, s, key("ff", "b"))
}

// testConditionsSeeStateBeforeTx checks that a condition is evaluated against the state before the
// transaction, not against the effect of an earlier op of the same transaction.
func testConditionsSeeStateBeforeTx(t *testing.T, s port.ItemStore) {
	put(t, s, item("sb", "a", "1", "v", "1"))
	// Op 0 changes a's partition neighbour; op 1 conditions on a's old attribute.
	commit(t, s,
		port.Put(item("sb", "b", "2", "v", "2"), port.NotExists()),
		port.Put(item("sb", "a", "1b", "v", "3"), port.AttrEquals("v", "1")),
	)
	wantItem(t, s, item("sb", "a", "1b", "v", "3"))
	wantItem(t, s, item("sb", "b", "2", "v", "2"))
}

func testEmptyTx(t *testing.T, s port.ItemStore) {
	first, err := s.Commit(context.Background(), port.Tx{Build: ops()})
	if err != nil || first != 0 {
		t.Fatalf("empty tx: %d, %v", first, err)
	}
	// A counter-only transaction allocates.
	ctr := key("e", "#ctr")
	first, err = s.Commit(context.Background(), port.Tx{Counter: &ctr, Count: 1, Max: 10, Build: ops()})
	if err != nil || first != 1 {
		t.Fatalf("counter-only tx: %d, %v; want 1, nil", first, err)
	}
}

func testCounterFirst(t *testing.T, s port.ItemStore) {
	ctr := key("sp", "SEQ")
	var got []uint64
	build := func(first uint64) ([]port.Op, error) {
		got = append(got, first)
		return []port.Op{port.Put(item("feed", fmt.Sprintf("%020d", first), "x"), port.NotExists())}, nil
	}
	for want := uint64(1); want <= 3; want++ {
		first, err := s.Commit(context.Background(), port.Tx{Counter: &ctr, Count: 1, Max: 1000, Build: build})
		if err != nil || first != want {
			t.Fatalf("allocation %d: first %d, %v", want, first, err)
		}
		if got[len(got)-1] != want {
			t.Fatalf("Build got %d, want %d", got[len(got)-1], want)
		}
		if n := counterValue(t, s, ctr); n != want {
			t.Fatalf("counter %d, want %d", n, want)
		}
	}
	if it := mustGet(t, s, ctr); it.Attr(port.CounterAttr) != "3" {
		t.Fatalf("counter attribute %q, want \"3\"", it.Attr(port.CounterAttr))
	}
	// Without a counter Build sees 0 and Commit returns 0.
	var seen uint64 = 99
	first, err := s.Commit(context.Background(), port.Tx{Build: func(f uint64) ([]port.Op, error) { seen = f; return nil, nil }})
	if err != nil || first != 0 || seen != 0 {
		t.Fatalf("no counter: first %d, Build saw %d, %v", first, seen, err)
	}
}

func testCounterCount(t *testing.T, s port.ItemStore) {
	ctr := key("sp", "SEQ")
	for _, step := range []struct{ count, first, after uint64 }{{1, 1, 1}, {5, 2, 6}, {2, 7, 8}, {1, 9, 9}} {
		first, err := s.Commit(context.Background(), port.Tx{Counter: &ctr, Count: step.count, Max: 1 << 53, Build: ops()})
		if err != nil || first != step.first {
			t.Fatalf("allocate %d: first %d, %v; want %d", step.count, first, err, step.first)
		}
		if n := counterValue(t, s, ctr); n != step.after {
			t.Fatalf("after allocating %d: counter %d, want %d", step.count, n, step.after)
		}
	}
	// Count 0 with a counter is not a valid allocation.
	_, err := s.Commit(context.Background(), port.Tx{Counter: &ctr, Count: 0, Max: 100, Build: ops()})
	wantRejected(t, "Count 0", err)
	if n := counterValue(t, s, ctr); n != 9 {
		t.Fatalf("counter moved to %d on a rejected tx", n)
	}
}

func testCounterMax(t *testing.T, s port.ItemStore) {
	ctr := key("sp", "SEQ")
	alloc := func(count, max uint64) (uint64, error) {
		return s.Commit(context.Background(), port.Tx{Counter: &ctr, Count: count, Max: max,
			Build: func(first uint64) ([]port.Op, error) {
				return []port.Op{port.Put(item("m", fmt.Sprint(first), ""), port.Cond{})}, nil
			}})
	}
	if first, err := alloc(4, 5); err != nil || first != 1 {
		t.Fatalf("alloc 4 of max 5: %d, %v", first, err)
	}
	if _, err := alloc(2, 5); !errors.Is(err, port.ErrCounterExhausted) {
		t.Fatalf("alloc 2 more of max 5 at 4: %v, want ErrCounterExhausted", err)
	}
	mustAbsent(t, s, key("m", "5"))
	if n := counterValue(t, s, ctr); n != 4 {
		t.Fatalf("counter %d after exhausted allocation, want 4", n)
	}
	if first, err := alloc(1, 5); err != nil || first != 5 {
		t.Fatalf("alloc last value: %d, %v; want 5", first, err)
	}
	if _, err := alloc(1, 5); !errors.Is(err, port.ErrCounterExhausted) {
		t.Fatalf("alloc past max: %v, want ErrCounterExhausted", err)
	}
	if _, err := alloc(1, 0); !errors.Is(err, port.ErrCounterExhausted) {
		t.Fatalf("alloc with Max 0: %v, want ErrCounterExhausted", err)
	}
	// A larger Max lets it continue.
	if first, err := alloc(1, 6); err != nil || first != 6 {
		t.Fatalf("alloc with raised max: %d, %v; want 6", first, err)
	}
	fresh := key("sp", "SEQ2")
	if _, err := s.Commit(context.Background(), port.Tx{Counter: &fresh, Count: 3, Max: 2, Build: ops()}); !errors.Is(err, port.ErrCounterExhausted) {
		t.Fatalf("Count above Max on a fresh counter: %v, want ErrCounterExhausted", err)
	}
	mustAbsent(t, s, fresh)
}

func testCounterNoWrap(t *testing.T, s port.ItemStore) {
	ctr := key("sp", "BIG")
	put(t, s, item("sp", "BIG", "", port.CounterAttr, fmt.Sprint(uint64(math.MaxUint64-2))))
	first, err := s.Commit(context.Background(), port.Tx{Counter: &ctr, Count: 1, Max: math.MaxUint64, Build: ops()})
	if err != nil || first != math.MaxUint64-1 {
		t.Fatalf("near the top: %d, %v", first, err)
	}
	if _, err := s.Commit(context.Background(), port.Tx{Counter: &ctr, Count: 2, Max: math.MaxUint64, Build: ops()}); !errors.Is(err, port.ErrCounterExhausted) {
		t.Fatalf("allocation that would wrap: %v, want ErrCounterExhausted", err)
	}
	if _, err := s.Commit(context.Background(), port.Tx{Counter: &ctr, Count: math.MaxUint64, Max: math.MaxUint64, Build: ops()}); !errors.Is(err, port.ErrCounterExhausted) {
		t.Fatalf("allocation of MaxUint64 values: %v, want ErrCounterExhausted", err)
	}
	first, err = s.Commit(context.Background(), port.Tx{Counter: &ctr, Count: 1, Max: math.MaxUint64, Build: ops()})
	if err != nil || first != math.MaxUint64 {
		t.Fatalf("last value: %d, %v", first, err)
	}
	if n := counterValue(t, s, ctr); n != math.MaxUint64 {
		t.Fatalf("counter %d", n)
	}
}

func testCounterKeepsAttrs(t *testing.T, s port.ItemStore) {
	ctr := key("sp", "META")
	put(t, s, item("sp", "META", "space doc", "gen", "3", port.CounterAttr, "41"))
	first, err := s.Commit(context.Background(), port.Tx{Counter: &ctr, Count: 1, Max: 1000, Build: ops()})
	if err != nil || first != 42 {
		t.Fatalf("allocate from 41: %d, %v; want 42", first, err)
	}
	wantItem(t, s, item("sp", "META", "space doc", "gen", "3", port.CounterAttr, "42"))
}

func testCounterFailedCondition(t *testing.T, s port.ItemStore) {
	ctr := key("sp", "SEQ")
	_, err := s.Commit(context.Background(), port.Tx{Counter: &ctr, Count: 1, Max: 100, Build: ops(
		port.Put(item("f", "1", ""), port.Cond{}),
		port.Check(key("sp", "missing"), port.Exists()),
	)})
	wantCondFailed(t, err, 1, key("sp", "missing"))
	mustAbsent(t, s, ctr)
	mustAbsent(t, s, key("f", "1"))
	first, err := s.Commit(context.Background(), port.Tx{Counter: &ctr, Count: 1, Max: 100, Build: ops()})
	if err != nil || first != 1 {
		t.Fatalf("after the failed tx the first value is %d, %v; want 1 (no gap)", first, err)
	}
}

// testCounterConcurrent has 16 goroutines allocate and write one item per allocated value; the values must
// be unique and gapless, and each item written by the transaction that allocated its value.
func testCounterConcurrent(t *testing.T, s port.ItemStore) {
	const workers, perWorker = 16, 12
	ctr := key("cc", "SEQ")
	type alloc struct{ first, count uint64 }
	results := make([][]alloc, workers)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for j := 0; j < perWorker; j++ {
				count := uint64(1 + (w+j)%3)
				tag := fmt.Sprintf("w%d-%d", w, j)
				first, err := s.Commit(context.Background(), port.Tx{Counter: &ctr, Count: count, Max: 1 << 53,
					Build: func(first uint64) ([]port.Op, error) {
						o := make([]port.Op, 0, count)
						for v := first; v < first+count; v++ {
							o = append(o, port.Put(item("ccfeed", fmt.Sprintf("%020d", v), tag), port.NotExists()))
						}
						return o, nil
					}})
				if err != nil {
					errs <- fmt.Errorf("worker %d tx %d: %w", w, j, err)
					return
				}
				results[w] = append(results[w], alloc{first, count})
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var total uint64
	owner := map[uint64]string{}
	for w, rs := range results {
		for j, r := range rs {
			total += r.count
			for v := r.first; v < r.first+r.count; v++ {
				if prev, dup := owner[v]; dup {
					t.Fatalf("value %d allocated twice (%s and w%d-%d)", v, prev, w, j)
				}
				owner[v] = fmt.Sprintf("w%d-%d", w, j)
			}
		}
	}
	if n := counterValue(t, s, ctr); n != total {
		t.Fatalf("counter %d, want %d", n, total)
	}
	items := all(t, s, "ccfeed")
	if uint64(len(items)) != total {
		t.Fatalf("%d items, want %d", len(items), total)
	}
	for i, it := range items {
		v := uint64(i + 1)
		if it.SK != fmt.Sprintf("%020d", v) {
			t.Fatalf("item %d has key %s: values not gapless", i, it.SK)
		}
		if string(it.Data) != owner[v] {
			t.Fatalf("item %d written by %s, but %s allocated it", v, it.Data, owner[v])
		}
	}
}

// testConcurrentCreate races create-only puts of one key: exactly one wins.
func testConcurrentCreate(t *testing.T, s port.ItemStore) {
	const n = 16
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, errs[i] = s.Commit(context.Background(), port.Tx{Build: ops(
				port.Put(item("race", "k", fmt.Sprint(i)), port.NotExists()),
				port.Put(item("race", fmt.Sprintf("side-%02d", i), ""), port.Cond{}),
			)})
		}(i)
	}
	wg.Wait()
	winner := -1
	for i, err := range errs {
		if err == nil {
			if winner >= 0 {
				t.Fatalf("both %d and %d created the key", winner, i)
			}
			winner = i
			continue
		}
		wantCondFailed(t, err, 0, key("race", "k"))
	}
	if winner < 0 {
		t.Fatal("no put won")
	}
	wantItem(t, s, item("race", "k", fmt.Sprint(winner)))
	if got := sks(all(t, s, "race")); !equalStrings(got, []string{"k", fmt.Sprintf("side-%02d", winner)}) {
		t.Fatalf("partition %q: a losing tx wrote its side item", got)
	}
}

// testBuildCalledAgain commits one Tx value several times: Build is called anew each time, with the value
// allocated for that commit, and the ops of that call are the ones applied.
func testBuildCalledAgain(t *testing.T, s port.ItemStore) {
	ctr := key("bc", "SEQ")
	var mu sync.Mutex
	calls := 0
	tx := port.Tx{Counter: &ctr, Count: 2, Max: 100, Build: func(first uint64) ([]port.Op, error) {
		mu.Lock()
		calls++
		mu.Unlock()
		return []port.Op{port.Put(item("bc", fmt.Sprintf("i%03d", first), fmt.Sprint(first)), port.NotExists())}, nil
	}}
	for i, want := range []uint64{1, 3, 5} {
		first, err := s.Commit(context.Background(), tx)
		if err != nil || first != want {
			t.Fatalf("commit %d: %d, %v; want %d", i, first, err, want)
		}
		wantItem(t, s, item("bc", fmt.Sprintf("i%03d", want), fmt.Sprint(want)))
	}
	if calls < 3 {
		t.Fatalf("Build called %d times for 3 commits", calls)
	}
	if got := sks(all(t, s, "bc")); !equalStrings(got, []string{"SEQ", "i001", "i003", "i005"}) {
		t.Fatalf("partition %q", got)
	}
}

func testBuildError(t *testing.T, s port.ItemStore) {
	ctr := key("be", "SEQ")
	boom := errors.New("build refused")
	_, err := s.Commit(context.Background(), port.Tx{Counter: &ctr, Count: 1, Max: 10, Build: func(uint64) ([]port.Op, error) {
		return []port.Op{port.Put(item("be", "x", ""), port.Cond{})}, boom
	}})
	if !errors.Is(err, boom) {
		t.Fatalf("commit: %v, want the Build error", err)
	}
	mustAbsent(t, s, key("be", "x"))
	mustAbsent(t, s, ctr)
}

func testDuplicateKey(t *testing.T, s port.ItemStore) {
	ctr := key("dk", "SEQ")
	put(t, s, item("dk", "a", "orig"))
	cases := map[string]port.Tx{
		"put+put":       {Build: ops(port.Put(item("dk", "a", "1"), port.Cond{}), port.Put(item("dk", "a", "2"), port.Cond{}))},
		"put+delete":    {Build: ops(port.Put(item("dk", "b", "1"), port.Cond{}), port.Delete(key("dk", "b"), port.Cond{}))},
		"check+put":     {Build: ops(port.Check(key("dk", "a"), port.Exists()), port.Put(item("dk", "a", "2"), port.Exists()))},
		"delete+delete": {Build: ops(port.Delete(key("dk", "a"), port.Cond{}), port.Delete(key("dk", "a"), port.Cond{}))},
		"op on counter": {Counter: &ctr, Count: 1, Max: 10, Build: ops(port.Put(item("dk", "SEQ", "", port.CounterAttr, "5"), port.Cond{}))},
		"put+put with counter": {Counter: &ctr, Count: 1, Max: 10, Build: ops(
			port.Put(item("dk", "c", "1"), port.Cond{}), port.Put(item("dk", "c", "2"), port.Cond{}))},
	}
	for name, tx := range cases {
		_, err := s.Commit(context.Background(), tx)
		wantRejected(t, name, err)
		wantItem(t, s, item("dk", "a", "orig"))
		mustAbsent(t, s, key("dk", "b"))
		mustAbsent(t, s, key("dk", "c"))
		mustAbsent(t, s, ctr)
	}
	// Same SK in different partitions, and same PK with different SKs, are different keys.
	commit(t, s, port.Put(item("dk", "x", ""), port.Cond{}), port.Put(item("dk2", "x", ""), port.Cond{}),
		port.Put(item("dk", "y", ""), port.Cond{}))
}

func testTooManyOps(t *testing.T, s port.ItemStore) {
	max := s.MaxOps()
	if max < 100 {
		t.Fatalf("MaxOps %d: the domain may use up to DynamoDB's 100 actions", max)
	}
	many := func(n int, tag string) []port.Op {
		o := make([]port.Op, n)
		for i := range o {
			o[i] = port.Put(item("tm", fmt.Sprintf("%s%05d", tag, i), ""), port.Cond{})
		}
		return o
	}
	ctr := key("tmc", "SEQ")
	_, err := s.Commit(context.Background(), port.Tx{Build: ops(many(max+1, "a")...)})
	if !errors.Is(err, port.ErrTooManyOps) {
		t.Fatalf("%d ops: %v, want ErrTooManyOps", max+1, err)
	}
	_, err = s.Commit(context.Background(), port.Tx{Counter: &ctr, Count: 1, Max: 10, Build: ops(many(max, "b")...)})
	if !errors.Is(err, port.ErrTooManyOps) {
		t.Fatalf("%d ops and a counter: %v, want ErrTooManyOps", max, err)
	}
	if got := query(t, s, port.Query{PK: "tm", Limit: 1}); len(got) != 0 {
		t.Fatalf("rejected transactions wrote %s", got[0].Key)
	}
	mustAbsent(t, s, ctr)
	commit(t, s, many(max, "c")...)
	first, err := s.Commit(context.Background(), port.Tx{Counter: &ctr, Count: 1, Max: 10, Build: ops(many(max-1, "d")...)})
	if err != nil || first != 1 {
		t.Fatalf("%d ops and a counter: %d, %v", max-1, first, err)
	}
	if got := len(all(t, s, "tm")); got != 2*max-1 {
		t.Fatalf("%d items, want %d", got, 2*max-1)
	}
}

func testInvalidKeys(t *testing.T, s port.ItemStore) {
	for name, k := range map[string]port.Key{
		"empty PK":   {PK: "", SK: "a"},
		"empty SK":   {PK: "p", SK: ""},
		"PK of 2049": {PK: strings.Repeat("p", 2049), SK: "a"},
		"SK of 1025": {PK: "p", SK: strings.Repeat("s", 1025)},
	} {
		_, err := s.Commit(context.Background(), port.Tx{Build: ops(
			port.Put(item("ik", "ok", ""), port.Cond{}),
			port.Put(port.Item{Key: k}, port.Cond{}),
		)})
		wantRejected(t, "put with "+name, err)
		mustAbsent(t, s, key("ik", "ok"))
		kk := k
		_, err = s.Commit(context.Background(), port.Tx{Counter: &kk, Count: 1, Max: 10, Build: ops()})
		wantRejected(t, "counter with "+name, err)
	}
	if _, err := s.Query(context.Background(), port.Query{PK: ""}); err == nil {
		t.Fatal("query of the empty partition key: no error")
	}
	if _, err := s.Query(context.Background(), port.Query{PK: "p", Limit: -1}); err == nil {
		t.Fatal("query with a negative limit: no error")
	}
	// The longest keys DynamoDB takes work.
	long := item(strings.Repeat("p", 2048), strings.Repeat("s", 1024), "long")
	put(t, s, long)
	wantItem(t, s, long)
}

func seedPartition(t *testing.T, s port.ItemStore, pk string, sortKeys ...string) {
	items := make([]port.Item, len(sortKeys))
	for i, sk := range sortKeys {
		items[i] = item(pk, sk, "data of "+sk)
	}
	put(t, s, items...)
}

func testQueryOrder(t *testing.T, s port.ItemStore) {
	// Inserted out of order; byte-wise order puts upper case before lower case and multi-byte UTF-8 last.
	seedPartition(t, s, "qo", "b", "é", "a", "B", "aa", "~", "a0", "0")
	want := []string{"0", "B", "a", "a0", "aa", "b", "~", "é"}
	got := query(t, s, port.Query{PK: "qo"})
	if !equalStrings(sks(got), want) {
		t.Fatalf("order %q, want %q", sks(got), want)
	}
	for _, it := range got {
		if string(it.Data) != "data of "+it.SK {
			t.Fatalf("item %s carries %q", it.Key, it.Data)
		}
	}
	// Zero-padded sequence keys, written in reverse.
	for i := 30; i >= 1; i-- {
		put(t, s, item("qs", fmt.Sprintf("%020d", i), ""))
	}
	seq := sks(all(t, s, "qs"))
	for i, sk := range seq {
		if sk != fmt.Sprintf("%020d", i+1) {
			t.Fatalf("sequence order broken at %d: %q", i, seq)
		}
	}
}

func testQueryBounds(t *testing.T, s port.ItemStore) {
	seedPartition(t, s, "qb", "a", "b", "c", "d", "e")
	for _, tc := range []struct {
		after, upTo string
		want        []string
	}{
		{"", "", []string{"a", "b", "c", "d", "e"}},
		{"b", "", []string{"c", "d", "e"}},
		{"bb", "", []string{"c", "d", "e"}},
		{"0", "", []string{"a", "b", "c", "d", "e"}},
		{"e", "", []string{}},
		{"z", "", []string{}},
		{"", "c", []string{"a", "b", "c"}},
		{"", "cc", []string{"a", "b", "c"}},
		{"", "a", []string{"a"}},
		{"", "0", []string{}},
		{"", "z", []string{"a", "b", "c", "d", "e"}},
		{"a", "d", []string{"b", "c", "d"}},
		{"b", "c", []string{"c"}},
		{"c", "c", []string{}},
		{"d", "b", []string{}},
	} {
		got := sks(query(t, s, port.Query{PK: "qb", After: tc.after, UpTo: tc.upTo}))
		if !equalStrings(got, tc.want) {
			t.Errorf("After %q UpTo %q: %q, want %q", tc.after, tc.upTo, got, tc.want)
		}
	}
}

func testQueryPaging(t *testing.T, s port.ItemStore) {
	var keys []string
	for i := 0; i < 23; i++ {
		keys = append(keys, fmt.Sprintf("k%02d", i))
	}
	seedPartition(t, s, "qp", keys...)
	if got := sks(query(t, s, port.Query{PK: "qp", Limit: 2})); !equalStrings(got, []string{"k00", "k01"}) {
		t.Fatalf("Limit 2: %q", got)
	}
	if got := sks(query(t, s, port.Query{PK: "qp", After: "k05", UpTo: "k20", Limit: 3})); !equalStrings(got, []string{"k06", "k07", "k08"}) {
		t.Fatalf("After k05 UpTo k20 Limit 3: %q", got)
	}
	if got := sks(query(t, s, port.Query{PK: "qp", After: "k19", UpTo: "k20", Limit: 5})); !equalStrings(got, []string{"k20"}) {
		t.Fatalf("UpTo before Limit: %q", got)
	}
	if got := query(t, s, port.Query{PK: "qp", Limit: 0}); len(got) == 0 || got[0].SK != "k00" {
		t.Fatalf("Limit 0 (adapter page size): %q", sks(got))
	}
	for _, limit := range []int{1, 4, 7, 23, 50} {
		var got []string
		after := ""
		for pages := 0; ; pages++ {
			if pages > 30 {
				t.Fatalf("Limit %d: paging does not end", limit)
			}
			page := query(t, s, port.Query{PK: "qp", After: after, Limit: limit})
			if len(page) > limit {
				t.Fatalf("Limit %d: page of %d", limit, len(page))
			}
			if len(page) == 0 {
				break
			}
			got = append(got, sks(page)...)
			after = page[len(page)-1].SK
		}
		if !equalStrings(got, keys) {
			t.Fatalf("Limit %d: paged %q, want %q", limit, got, keys)
		}
	}
}

func testQueryIsolation(t *testing.T, s port.ItemStore) {
	// Partition keys that are prefixes of one another, and PK+SK concatenations that coincide.
	seedPartition(t, s, "a", "bc", "b")
	seedPartition(t, s, "ab", "c", "a")
	seedPartition(t, s, "a#", "x")
	for pk, want := range map[string][]string{"a": {"b", "bc"}, "ab": {"a", "c"}, "a#": {"x"}, "abc": {}, "b": {}} {
		if got := sks(query(t, s, port.Query{PK: pk})); !equalStrings(got, want) {
			t.Errorf("partition %q: %q, want %q", pk, got, want)
		}
	}
	mustAbsent(t, s, key("ab", "bc"))
	mustAbsent(t, s, key("a", "c"))
}

func testQueryEmpty(t *testing.T, s port.ItemStore) {
	if got := query(t, s, port.Query{PK: "never"}); len(got) != 0 {
		t.Fatalf("never-used partition: %q", sks(got))
	}
	seedPartition(t, s, "gone", "a", "b")
	seedPartition(t, s, "gone2", "a")
	commit(t, s, port.Delete(key("gone", "a"), port.Cond{}), port.Delete(key("gone", "b"), port.Cond{}))
	if got := query(t, s, port.Query{PK: "gone"}); len(got) != 0 {
		t.Fatalf("emptied partition: %q", sks(got))
	}
	if got := query(t, s, port.Query{PK: "gone", After: "a", UpTo: "z", Limit: 3}); len(got) != 0 {
		t.Fatalf("emptied partition with bounds: %q", sks(got))
	}
	if got := sks(query(t, s, port.Query{PK: "gone2"})); !equalStrings(got, []string{"a"}) {
		t.Fatalf("neighbour partition: %q", got)
	}
}

func testBinarySafe(t *testing.T, s port.ItemStore) {
	data := make([]byte, 0, 512)
	for i := 0; i < 256; i++ {
		data = append(data, byte(i))
	}
	data = append(data, 0xff, 0xfe, 0x00, 0x00, 0xc3, 0x28) // invalid UTF-8, NULs
	it := port.Item{Key: key("bin", "k"), Data: data, Attrs: map[string]string{
		"empty": "", "nul": "a\x00b", "unicode": "héllo ☃", "long": strings.Repeat("x", 4000), "n": "12",
	}}
	put(t, s, it)
	wantItem(t, s, it)
	if got := query(t, s, port.Query{PK: "bin"}); len(got) != 1 || !sameItem(got[0], it) {
		t.Fatalf("query returned %d items", len(got))
	}
	if got := mustGet(t, s, it.Key); got.Attrs == nil || got.Attrs["empty"] != "" {
		t.Fatal("attrs lost")
	} else if _, ok := got.Attrs["empty"]; !ok {
		t.Fatal("an attribute with an empty value disappeared")
	}
	big := port.Item{Key: key("bin", "big"), Data: []byte(strings.Repeat("0123456789abcdef", 16<<10))} // 256 KiB
	put(t, s, big)
	wantItem(t, s, big)
}

func testDeepCopies(t *testing.T, s port.ItemStore) {
	it := item("dc", "a", "original", "v", "1")
	built := []port.Op{port.Put(it, port.Cond{})}
	if _, err := s.Commit(context.Background(), port.Tx{Build: func(uint64) ([]port.Op, error) { return built, nil }}); err != nil {
		t.Fatal(err)
	}
	// The caller mutates what it passed in.
	it.Attrs["v"] = "mutated"
	it.Attrs["extra"] = "x"
	it.Data[0] = 'X'
	built[0].Item.Data = append(built[0].Item.Data[:0], "zzz"...)
	want := item("dc", "a", "original", "v", "1")
	wantItem(t, s, want)

	// The caller mutates what it got out.
	got := mustGet(t, s, want.Key)
	got.Attrs["v"] = "mutated"
	got.Attrs["extra"] = "x"
	got.Data[0] = 'X'
	wantItem(t, s, want)
	items := query(t, s, port.Query{PK: "dc"})
	items[0].Attrs["v"] = "mutated"
	items[0].Data[0] = 'X'
	wantItem(t, s, want)
	if again := query(t, s, port.Query{PK: "dc"}); !sameItem(again[0], want) {
		t.Fatalf("query after mutation: %s", show(again[0]))
	}
	// Two gets do not share memory.
	a, b := mustGet(t, s, want.Key), mustGet(t, s, want.Key)
	a.Attrs["v"] = "a"
	a.Data[1] = 'Y'
	if !sameItem(b, want) {
		t.Fatalf("gets share memory: %s", show(b))
	}

	// The caller mutates an item a transaction put over one it read (a store may keep such an item for the
	// next transactions' conditions): the next transaction's condition still sees what was committed.
	over := item("dc", "a", "second", "v", "2")
	commit(t, s, port.Put(over, port.AttrEquals("v", "1")))
	over.Attrs["v"] = "mutated"
	over.Data[0] = 'X'
	commit(t, s, port.Put(item("dc", "a", "third", "v", "3"), port.AttrEquals("v", "2"))) // on what was committed
	wantItem(t, s, item("dc", "a", "third", "v", "3"))
}

func testContextCancelled(t *testing.T, s port.ItemStore) {
	put(t, s, item("cx", "a", "1"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := s.Get(ctx, key("cx", "a")); !errors.Is(err, context.Canceled) {
		t.Fatalf("get: %v, want context.Canceled", err)
	}
	if _, err := s.Query(ctx, port.Query{PK: "cx"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("query: %v, want context.Canceled", err)
	}
	if _, _, err := s.GetMany(ctx, []port.Key{key("cx", "a")}); !errors.Is(err, context.Canceled) {
		t.Fatalf("get many: %v, want context.Canceled", err)
	}
	ctr := key("cx", "SEQ")
	_, err := s.Commit(ctx, port.Tx{Counter: &ctr, Count: 1, Max: 10, Build: ops(port.Put(item("cx", "b", ""), port.Cond{}))})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("commit: %v, want context.Canceled", err)
	}
	mustAbsent(t, s, key("cx", "b"))
	mustAbsent(t, s, ctr)
	dctx, dcancel := context.WithDeadline(context.Background(), time.Unix(1, 0))
	defer dcancel()
	if _, err := s.Commit(dctx, port.Tx{Build: ops(port.Put(item("cx", "c", ""), port.Cond{}))}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("commit after deadline: %v, want context.DeadlineExceeded", err)
	}
	mustAbsent(t, s, key("cx", "c"))
}
