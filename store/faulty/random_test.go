package faulty_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/store/faulty"
	"github.com/waypost/waypost/store/mem"
)

// TestRandomPlan: a Plan's faults are reproducible from its seed, lost responses are applied commits, and
// Stop ends them.
func TestRandomPlan(t *testing.T) {
	t.Parallel()
	run := func(seed uint64) (outcomes string, applied int, r *faulty.Random) {
		r = &faulty.Random{}
		s := faulty.NewItemStore(mem.New())
		s.SetRandom(r)
		r.Start(faulty.Plan{Seed: seed, Read: 0.3, Commit: 0.5, Lost: 0.5})
		ctx := context.Background()
		for i := range 40 {
			_, err := s.Commit(ctx, putTx("p", fmt.Sprint(i)))
			if err != nil && !(errors.Is(err, port.ErrUnavailable) && errors.Is(err, faulty.ErrInjected)) {
				t.Fatalf("commit %d: %v", i, err)
			}
			outcomes += map[bool]string{true: "x", false: "."}[err != nil]
			if _, ok, _ := s.Inner().Get(ctx, port.Key{PK: "p", SK: fmt.Sprint(i)}); ok {
				applied++
			}
		}
		r.Stop()
		for i := range 10 {
			if _, err := s.Commit(ctx, putTx("q", fmt.Sprint(i))); err != nil {
				t.Fatalf("commit after Stop: %v", err)
			}
		}
		return outcomes, applied, r
	}
	a, appliedA, r := run(7)
	b, _, _ := run(7)
	if a != b {
		t.Errorf("the same seed gave %s and %s", a, b)
	}
	injected, lost := r.Counts()
	failed := bytes.Count([]byte(a), []byte("x"))
	if failed == 0 || failed == len(a) || lost == 0 || injected < failed {
		t.Errorf("outcomes %s: injected %d, lost %d", a, injected, lost)
	}
	if ok := len(a) - failed; appliedA != ok+lost {
		t.Errorf("%d commits applied, want %d succeeded + %d lost", appliedA, ok, lost)
	}
}

// TestQueryAndPutHooks: the hooks run before the call, and a hook may remove itself and call the store.
func TestQueryAndPutHooks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := faulty.NewItemStore(mem.New())
	var queried []string
	s.SetBeforeQuery(func(q port.Query) {
		s.SetBeforeQuery(nil)
		queried = append(queried, q.PK)
		if _, err := s.Commit(ctx, putTx(q.PK, "raced")); err != nil { // lands before the read
			t.Error(err)
		}
	})
	items, err := s.Query(ctx, port.Query{PK: "p", Limit: 10})
	if err != nil || len(items) != 1 || len(queried) != 1 {
		t.Fatalf("query: %v %v, hook ran for %v", items, err, queried)
	}
	if _, err := s.Query(ctx, port.Query{PK: "p", Limit: 10}); err != nil || len(queried) != 1 {
		t.Fatalf("the hook ran again: %v", queried)
	}
	b := faulty.NewBlobStore(nil)
	var keys []string
	b.SetBeforePut(func(key string) { keys = append(keys, key) })
	b.SetRandom(&faulty.Random{}) // not started: injects nothing
	b.FailPut(faulty.PutFault{})
	if _, err := b.Put(ctx, "k", 1, "x", bytes.NewReader([]byte("x"))); err == nil || len(keys) != 1 || keys[0] != "k" {
		t.Fatalf("put: %v, hook saw %v", err, keys)
	}
}
