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
// after (applyGroup); a Get, GetMany, Query or Checkpoint that starts after the answer waits for that and
// returns the commit, and Close waits for it too.
func TestReadsAfterAnAnswerSeeIt(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "items")
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	k := port.Key{PK: "P", SK: "k"}
	put(t, s, k, []byte("1"))
	if _, _, err := s.Get(ctx, k); err != nil { // after the first group's apply began: the hook is for the second
		t.Fatal(err)
	}

	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	first := s
	t.Cleanup(func() { free(); _ = first.Close() }) // a failed check does not leave the store waiting
	s.beforeApply = func() { <-release }            // read by the second group's apply only (no other commit follows)
	put(t, s, k, []byte("2"))                       // answered; its batch waits for release

	type read struct {
		what string
		data string
		err  error
	}
	reads := make(chan read, 4)
	go func() {
		it, _, err := s.Get(ctx, k)
		reads <- read{"Get", string(it.Data), err}
	}()
	go func() {
		its, _, err := s.GetMany(ctx, []port.Key{k, {PK: "P", SK: "other"}})
		var data string
		if err == nil {
			data = string(its[0].Data)
		}
		reads <- read{"GetMany", data, err}
	}()
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
	for range 4 {
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
