package pebble

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/waypost/waypost/domain/port"
)

// TestReadsAfterAnAnswerSeeIt: a group is answered once its record is durable and reaches the memtable just
// after (applyGroup). Reads that start after the answer return the commit: Get, GetMany and Head at once,
// from the group's writes; a Query of a range the group wrote in, and Checkpoint, once the group's view is
// published; a Query of another partition or range at once. Close waits for the group too.
func TestReadsAfterAnAnswerSeeIt(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "items")
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	k, other, ctr := port.Key{PK: "P", SK: "k"}, port.Key{PK: "Q", SK: "k"}, port.Key{PK: "C", SK: "ctr"}
	seq := port.Sequence{Counter: ctr}
	commit := func(data string) {
		t.Helper()
		if _, err := s.Commit(ctx, port.Tx{Counter: &ctr, Count: 1, Max: 1 << 40, Build: func(uint64) ([]port.Op, error) {
			return []port.Op{port.Put(port.Item{Key: k, Data: []byte(data)}, port.Cond{})}, nil
		}}); err != nil {
			t.Fatal(err)
		}
	}
	commit("1")
	put(t, s, other, []byte("q"))
	for { // until the last group's view is published: no apply is left to read the hook but the next group's
		s.viewMu.Lock()
		pending := s.pending
		s.viewMu.Unlock()
		if pending == nil {
			break
		}
		time.Sleep(time.Millisecond)
	}

	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	first := s
	t.Cleanup(func() { free(); _ = first.Close() }) // a failed check does not leave the store waiting
	s.beforeApply = func() { <-release }            // read by the next group's apply only (no other commit follows)
	commit("2")                                     // answered; its batch waits for release

	// At once, from the group's writes.
	if it, found, err := s.Get(ctx, k); err != nil || !found || string(it.Data) != "2" {
		t.Fatalf("Get after the answer: %q %v %v, want %q", it.Data, found, err, "2")
	}
	if its, found, err := s.GetMany(ctx, []port.Key{k, {PK: "P", SK: "none"}, other}); err != nil || !found[0] || string(its[0].Data) != "2" ||
		found[1] || string(its[2].Data) != "q" {
		t.Fatalf("GetMany after the answer: %v %v %v", its, found, err)
	}
	if it, _, _ := s.Get(ctx, k); true {
		it.Data[0] = 'X' // a caller may change what it got
		if again, _, _ := s.Get(ctx, k); string(again.Data) != "2" {
			t.Fatalf("a caller's change reached the store: %q", again.Data)
		}
	}
	if n, err := s.Head(ctx, seq); err != nil || n != 2 {
		t.Fatalf("Head after the answer: %d, %v; want 2", n, err)
	}
	if its, err := s.Query(ctx, port.Query{PK: "Q", Limit: 10}); err != nil || len(its) != 1 || string(its[0].Data) != "q" {
		t.Fatalf("Query of a partition the group did not write: %v, %v", its, err)
	}
	if its, err := s.Query(ctx, port.Query{PK: "P", UpTo: "j", Limit: 10}); err != nil || len(its) != 0 {
		t.Fatalf("Query of a range of P the group did not write: %v, %v", its, err)
	}

	// Once the group's view is published.
	type read struct {
		what string
		data string
		err  error
	}
	reads := make(chan read, 2)
	go func() {
		its, err := s.Query(ctx, port.Query{PK: "P", Limit: 10})
		var data string
		if err == nil && len(its) == 1 {
			data = string(its[0].Data)
		}
		reads <- read{"Query", data, err}
	}()
	go func() {
		err := s.Checkpoint(filepath.Join(t.TempDir(), "copy"))
		reads <- read{"Checkpoint", "2", err}
	}()
	select {
	case r := <-reads:
		t.Fatalf("%s returned %q (%v) before the answered group reached the memtable", r.what, r.data, r.err)
	case <-time.After(100 * time.Millisecond):
	}
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) before the answered group reached the memtable", err)
	case <-time.After(50 * time.Millisecond):
	}
	free()
	for range 2 {
		if r := <-reads; r.err != nil || r.data != "2" {
			t.Errorf("%s after the answer: %q, %v; want %q", r.what, r.data, r.err, "2")
		}
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if it, _, err := s.Get(ctx, k); err != nil || string(it.Data) != "2" {
		t.Fatalf("after reopening: %q, %v", it.Data, err)
	}
}
