package faulty_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/store/faulty"
	"github.com/waypost/waypost/store/fsblob"
	"github.com/waypost/waypost/store/mem"
	"github.com/waypost/waypost/store/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// With faults armed that never fire, the wrapper (including its Build wrapping) is transparent.
func TestContractThroughWrapper(t *testing.T) {
	never := func([]port.Op) bool { return false }
	storetest.RunItemStore(t, func(t *testing.T) port.ItemStore {
		s := faulty.NewItemStore(mem.New())
		s.FailCommit(faulty.CommitFault{Match: never})
		s.FailCommit(faulty.CommitFault{Match: never, After: true})
		s.FailGet(faulty.GetFault{Match: func(port.Key) bool { return false }})
		return s
	})
	storetest.RunBlobStore(t, func(t *testing.T) port.BlobStore {
		b, err := fsblob.New(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		s := faulty.NewBlobStore(b)
		s.FailPut(faulty.PutFault{Match: func(string) bool { return false }})
		return s
	})
}

func putTx(pk, sk string) port.Tx {
	return port.Tx{Build: func(uint64) ([]port.Op, error) {
		return []port.Op{port.Put(port.Item{Key: port.Key{PK: pk, SK: sk}}, port.Cond{})}, nil
	}}
}

func exists(t *testing.T, s port.ItemStore, pk, sk string) bool {
	t.Helper()
	_, ok, err := s.Get(context.Background(), port.Key{PK: pk, SK: sk})
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

func wantInjected(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, port.ErrUnavailable) || !errors.Is(err, faulty.ErrInjected) {
		t.Fatalf("err %v, want an injected ErrUnavailable", err)
	}
}

func TestNthCommitBefore(t *testing.T) {
	s := faulty.NewItemStore(mem.New())
	a := s.FailCommit(faulty.CommitFault{Fault: faulty.Fault{Nth: 3}})
	ctx := context.Background()
	for i := 1; i <= 5; i++ {
		_, err := s.Commit(ctx, putTx("p", fmt.Sprint(i)))
		if i == 3 {
			wantInjected(t, err)
			if exists(t, s, "p", "3") {
				t.Fatal("failed-before commit was applied")
			}
			continue
		}
		if err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
		if !exists(t, s, "p", fmt.Sprint(i)) {
			t.Fatalf("commit %d not applied", i)
		}
	}
	if a.Fired() != 1 {
		t.Fatalf("fired %d times", a.Fired())
	}
}

func TestRepeatAndDisarm(t *testing.T) {
	s := faulty.NewItemStore(mem.New())
	a := s.FailCommit(faulty.CommitFault{Fault: faulty.Fault{Nth: 2, Repeat: true}})
	ctx := context.Background()
	var failed []int
	for i := 1; i <= 6; i++ {
		if i == 5 {
			a.Disarm()
		}
		if _, err := s.Commit(ctx, putTx("p", fmt.Sprint(i))); err != nil {
			wantInjected(t, err)
			failed = append(failed, i)
		}
	}
	if fmt.Sprint(failed) != "[2 3 4]" || a.Fired() != 3 {
		t.Fatalf("failed %v, fired %d; want [2 3 4], 3", failed, a.Fired())
	}
}

func TestMatchBeforeKeepsCounter(t *testing.T) {
	s := faulty.NewItemStore(mem.New())
	a := s.FailCommit(faulty.CommitFault{Match: faulty.PutsPKPrefix("FD#")})
	ctx := context.Background()
	ctr := port.Key{PK: "SP#x", SK: "SEQ"}
	tx := func(pk string) port.Tx {
		return port.Tx{Counter: &ctr, Count: 1, Max: 100, Build: func(first uint64) ([]port.Op, error) {
			return []port.Op{port.Put(port.Item{Key: port.Key{PK: pk, SK: fmt.Sprint(first)}}, port.Cond{})}, nil
		}}
	}
	if first, err := s.Commit(ctx, tx("MS#x")); err != nil || first != 1 {
		t.Fatalf("non-matching commit: %d, %v", first, err)
	}
	// A delete of an FD# key is not a put: no match.
	if _, err := s.Commit(ctx, port.Tx{Build: func(uint64) ([]port.Op, error) {
		return []port.Op{port.Delete(port.Key{PK: "FD#x", SK: "0"}, port.Cond{})}, nil
	}}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	_, err := s.Commit(ctx, tx("FD#x"))
	wantInjected(t, err)
	if exists(t, s, "FD#x", "2") {
		t.Fatal("matched commit applied")
	}
	if first, err := s.Commit(ctx, tx("FD#x")); err != nil || first != 2 {
		t.Fatalf("after the fault: %d, %v; want 2 (counter not advanced by the failed commit)", first, err)
	}
	if a.Fired() != 1 {
		t.Fatalf("fired %d", a.Fired())
	}
}

func TestAfterAppliesThenFails(t *testing.T) {
	s := faulty.NewItemStore(mem.New())
	custom := errors.New("connection reset")
	a := s.FailCommit(faulty.CommitFault{After: true, Match: faulty.TouchesPKPrefix("ID#"), Fault: faulty.Fault{Err: custom}})
	ctx := context.Background()
	ctr := port.Key{PK: "SP#x", SK: "SEQ"}
	tx := port.Tx{Counter: &ctr, Count: 1, Max: 100, Build: func(first uint64) ([]port.Op, error) {
		return []port.Op{port.Put(port.Item{Key: port.Key{PK: "ID#x", SK: "req"}}, port.NotExists())}, nil
	}}
	if _, err := s.Commit(ctx, putTx("other", "a")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(ctx, tx); !errors.Is(err, custom) {
		t.Fatalf("err %v, want the custom error", err)
	}
	if !exists(t, s, "ID#x", "req") {
		t.Fatal("response-lost commit was not applied")
	}
	// The retry fails its condition; that is not counted and the fault is spent anyway.
	if _, err := s.Commit(ctx, tx); err == nil {
		t.Fatal("retry of a create-only put succeeded")
	} else if _, ok := port.FailedOp(err); !ok {
		t.Fatalf("retry: %v, want a condition failure", err)
	}
	if a.Fired() != 1 {
		t.Fatalf("fired %d", a.Fired())
	}
	n, _, _ := s.Inner().Get(ctx, ctr)
	if n.Attr(port.CounterAttr) != "1" {
		t.Fatalf("counter %q, want 1", n.Attr(port.CounterAttr))
	}
}

func TestAfterSkipsFailedCommits(t *testing.T) {
	s := faulty.NewItemStore(mem.New())
	a := s.FailCommit(faulty.CommitFault{After: true})
	ctx := context.Background()
	_, err := s.Commit(ctx, port.Tx{Build: func(uint64) ([]port.Op, error) {
		return []port.Op{port.Check(port.Key{PK: "p", SK: "x"}, port.Exists())}, nil
	}})
	if _, ok := port.FailedOp(err); !ok {
		t.Fatalf("%v, want the real condition failure", err)
	}
	if a.Fired() != 0 {
		t.Fatal("fault fired on a failed commit")
	}
	_, err = s.Commit(ctx, putTx("p", "y"))
	wantInjected(t, err)
	if !exists(t, s, "p", "y") {
		t.Fatal("not applied")
	}
}

func TestBeforeCommitHook(t *testing.T) {
	s := faulty.NewItemStore(mem.New())
	ctx := context.Background()
	gen := port.Key{PK: "TK#d", SK: "T"}
	if _, err := s.Commit(ctx, port.Tx{Build: func(uint64) ([]port.Op, error) {
		return []port.Op{port.Put(port.Item{Key: gen, Attrs: map[string]string{"gen": "1"}}, port.Cond{})}, nil
	}}); err != nil {
		t.Fatal(err)
	}
	var seen []port.Tx
	s.SetBeforeCommit(func(tx port.Tx) {
		seen = append(seen, tx)
		// Revoke: bump the generation underneath, through the inner store.
		if _, err := s.Inner().Commit(ctx, port.Tx{Build: func(uint64) ([]port.Op, error) {
			return []port.Op{port.Put(port.Item{Key: gen, Attrs: map[string]string{"gen": "2"}}, port.Cond{})}, nil
		}}); err != nil {
			t.Error(err)
		}
	})
	_, err := s.Commit(ctx, port.Tx{Build: func(uint64) ([]port.Op, error) {
		return []port.Op{
			port.Check(gen, port.AttrEquals("gen", "1")),
			port.Put(port.Item{Key: port.Key{PK: "MS#x", SK: "MSG"}}, port.NotExists()),
		}, nil
	}})
	if i, ok := port.FailedOp(err); !ok || i != 0 {
		t.Fatalf("%v, want the generation check to fail", err)
	}
	if len(seen) != 1 || exists(t, s, "MS#x", "MSG") {
		t.Fatalf("hook calls %d", len(seen))
	}
	s.Reset()
	if _, err := s.Commit(ctx, putTx("p", "z")); err != nil || len(seen) != 1 {
		t.Fatalf("after Reset: %v, hook calls %d", err, len(seen))
	}
}

func TestReadFaults(t *testing.T) {
	s := faulty.NewItemStore(mem.New())
	ctx := context.Background()
	if _, err := s.Commit(ctx, putTx("AG#x", "g")); err != nil {
		t.Fatal(err)
	}
	g := s.FailGet(faulty.GetFault{Match: func(k port.Key) bool { return strings.HasPrefix(k.PK, "AG#") }})
	q := s.FailQuery(faulty.QueryFault{Fault: faulty.Fault{Nth: 2}})
	if _, _, err := s.Get(ctx, port.Key{PK: "other", SK: "x"}); err != nil {
		t.Fatal(err)
	}
	_, _, err := s.Get(ctx, port.Key{PK: "AG#x", SK: "g"})
	wantInjected(t, err)
	if _, ok, err := s.Get(ctx, port.Key{PK: "AG#x", SK: "g"}); err != nil || !ok {
		t.Fatalf("second get: %v %v", ok, err)
	}
	if _, err := s.Query(ctx, port.Query{PK: "AG#x"}); err != nil {
		t.Fatal(err)
	}
	_, err = s.Query(ctx, port.Query{PK: "AG#x"})
	wantInjected(t, err)
	if g.Fired() != 1 || q.Fired() != 1 {
		t.Fatalf("fired %d %d", g.Fired(), q.Fired())
	}
}

// TestConcurrentDeterminism commits from 16 goroutines: a one-shot fault fires exactly once, a repeating
// one from the Nth call on.
func TestConcurrentDeterminism(t *testing.T) {
	for _, repeat := range []bool{false, true} {
		s := faulty.NewItemStore(mem.New())
		a := s.FailCommit(faulty.CommitFault{Fault: faulty.Fault{Nth: 5, Repeat: repeat}})
		b := s.FailCommit(faulty.CommitFault{Match: faulty.PutsPKPrefix("q"), Fault: faulty.Fault{Nth: 3}})
		var wg sync.WaitGroup
		var mu sync.Mutex
		failed := 0
		for w := 0; w < 16; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for j := 0; j < 10; j++ {
					pk := "p"
					if j%2 == 0 {
						pk = "q"
					}
					_, err := s.Commit(context.Background(), putTx(pk, fmt.Sprintf("%d-%d", w, j)))
					if err != nil {
						if !errors.Is(err, faulty.ErrInjected) {
							t.Error(err)
						}
						mu.Lock()
						failed++
						mu.Unlock()
					}
				}
			}(w)
		}
		wg.Wait()
		wantA := 1
		if repeat {
			wantA = 160 - 4
		}
		if a.Fired() != wantA || failed != a.Fired()+b.Fired() {
			t.Fatalf("repeat=%v: a fired %d (want %d), b fired %d, %d failures", repeat, a.Fired(), wantA, b.Fired(), failed)
		}
		if !repeat && b.Fired() != 1 {
			t.Fatalf("b fired %d", b.Fired())
		}
	}
}

func sum(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

func TestBlobFaults(t *testing.T) {
	inner, err := fsblob.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s := faulty.NewBlobStore(inner)
	ctx := context.Background()
	body := []byte("blob body")
	put := func(key string) (port.BlobInfo, error) {
		return s.Put(ctx, key, int64(len(body)), sum(body), bytes.NewReader(body))
	}
	s.FailPut(faulty.PutFault{Match: func(k string) bool { return strings.HasPrefix(k, "before/") }})
	after := s.FailPut(faulty.PutFault{After: true, Match: func(k string) bool { return strings.HasPrefix(k, "after/") }})
	r := bytes.NewReader(body)
	if _, err := s.Put(ctx, "before/x", int64(len(body)), sum(body), r); !errors.Is(err, faulty.ErrInjected) {
		t.Fatalf("before: %v", err)
	}
	if r.Len() != len(body) {
		t.Fatal("failed-before put read the body")
	}
	if _, err := s.Head(ctx, "before/x"); !errors.Is(err, port.ErrBlobNotFound) {
		t.Fatalf("failed-before put stored: %v", err)
	}
	_, err = put("after/x")
	wantInjected(t, err)
	if info, err := s.Head(ctx, "after/x"); err != nil || info.SHA256 != sum(body) {
		t.Fatalf("failed-after put not stored: %+v %v", info, err)
	}
	// The retry finds the stored object (the "already uploaded" path).
	if info, err := put("after/x"); !errors.Is(err, port.ErrBlobExists) || info.Size != int64(len(body)) {
		t.Fatalf("retry: %+v %v", info, err)
	}
	if after.Fired() != 1 {
		t.Fatalf("after fired %d", after.Fired())
	}
	if _, err := put("ok/x"); err != nil {
		t.Fatal(err)
	}
	s.FailHead(faulty.KeyFault{})
	s.FailGet(faulty.KeyFault{Match: func(k string) bool { return k == "ok/x" }})
	s.FailDelete(faulty.KeyFault{Fault: faulty.Fault{Nth: 2}})
	_, err = s.Head(ctx, "ok/x")
	wantInjected(t, err)
	if _, err := s.Head(ctx, "ok/x"); err != nil {
		t.Fatal(err)
	}
	_, _, err = s.Get(ctx, "ok/x")
	wantInjected(t, err)
	if err := s.Delete(ctx, "nothing"); err != nil {
		t.Fatal(err)
	}
	wantInjected(t, s.Delete(ctx, "ok/x"))
	if _, err := s.Head(ctx, "ok/x"); err != nil {
		t.Fatalf("failed delete removed the object: %v", err)
	}
	s.Reset()
	if _, err := put("before/y"); err != nil {
		t.Fatalf("after Reset: %v", err)
	}
}
