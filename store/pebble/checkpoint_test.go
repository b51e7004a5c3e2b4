package pebble_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/store/pebble"
)

// TestCheckpointUnderLoad: a checkpoint taken while writers commit holds exactly a prefix of the commits:
// every commit answered before it began, each one whole (its item with the counter value it allocated), the
// counter equal to the last item, no gap — and it opens as a store of its own.
func TestCheckpointUnderLoad(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, filepath.Join(dir, "items"), pebble.Options{})
	ctx := context.Background()
	ctr := port.Key{PK: "sp", SK: "SEQ"}
	var answered atomic.Uint64 // highest value whose commit was answered
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				first, err := s.Commit(ctx, port.Tx{Counter: &ctr, Count: 1, Max: 1 << 40, Build: func(first uint64) ([]port.Op, error) {
					return []port.Op{port.Put(port.Item{Key: port.Key{PK: "feed", SK: fmt.Sprintf("%020d", first)},
						Attrs: map[string]string{"n": strconv.FormatUint(first, 10)}}, port.NotExists())}, nil
				}})
				if err != nil {
					t.Error(err)
					return
				}
				for {
					cur := answered.Load()
					if first <= cur || answered.CompareAndSwap(cur, first) {
						break
					}
				}
			}
		}()
	}
	// Under load means commits answered before the checkpoint begins. Waiting for them rather than a fixed
	// time: a new store's first commit zero-fills its first journal segment, which on a loaded machine can
	// take longer than any sleep (the checkpoint then rightly holds nothing).
	for deadline := time.Now().Add(30 * time.Second); answered.Load() < 100; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			close(stop)
			wg.Wait()
			t.Fatalf("only %d commits answered in 30 s", answered.Load())
		}
	}
	before := answered.Load()
	cp := filepath.Join(dir, "checkpoint")
	if err := s.Checkpoint(cp); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	close(stop)
	wg.Wait()
	if err := s.Checkpoint(cp); err == nil {
		t.Errorf("a checkpoint into an existing directory succeeded")
	}

	c := openStore(t, cp, pebble.Options{})
	counter, found, err := c.Get(ctx, ctr)
	if err != nil || !found {
		t.Fatalf("counter in the checkpoint: %v %v (%d commits were answered before it began)", found, err, before)
	}
	n, _ := strconv.ParseUint(counter.Attr(port.CounterAttr), 10, 64)
	items, err := c.Query(ctx, port.Query{PK: "feed", Limit: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	if n < before || uint64(len(items)) != n {
		t.Fatalf("checkpoint: counter %d, %d items; %d commits were answered before it began", n, len(items), before)
	}
	for i, it := range items {
		if it.Attr("n") != strconv.Itoa(i+1) {
			t.Fatalf("item %d is %s: a gap or a partial commit", i+1, it.Attr("n"))
		}
	}
	t.Logf("checkpoint holds %d commits (%d answered before it began)", n, before)
}

// TestCheckpointAfterClose: a checkpoint of a closed store fails with ErrClosed, as every other operation
// does, rather than reaching the closed database (pebble panics); one running while Close is called ends
// before the database is closed.
func TestCheckpointAfterClose(t *testing.T) {
	dir := t.TempDir()
	s, err := pebble.Open(filepath.Join(dir, "items"), pebble.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		put := port.Put(port.Item{Key: port.Key{PK: "P", SK: fmt.Sprint(i)}, Data: make([]byte, 100)}, port.Cond{})
		if _, err := s.Commit(context.Background(), port.Tx{Build: func(uint64) ([]port.Op, error) {
			return []port.Op{put}, nil
		}}); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() { done <- s.Checkpoint(filepath.Join(dir, "during")) }() // Close waits for it, or it fails
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil && !errors.Is(err, pebble.ErrClosed) {
		t.Fatalf("checkpoint during Close: %v, want success or ErrClosed", err)
	}
	if err := s.Checkpoint(filepath.Join(dir, "checkpoint")); !errors.Is(err, pebble.ErrClosed) {
		t.Fatalf("checkpoint after Close: %v, want ErrClosed", err)
	}
}
