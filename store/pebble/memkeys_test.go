package pebble

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"pgregory.net/rapid"

	"github.com/waypost/waypost/domain/port"
)

// TestMemKeysAcrossFlushes: the committer's conditions see every put and every deletion, whichever way the
// journal's flushes (every 64 KiB here) interleave with the commits that make them: the reads of keys that
// memKeys rules out of the memtables go to the tables only, so a key it lost while still in a memtable would
// be read as absent (its put) or as still there (its deletion, over an older value in the tables).
func TestMemKeysAcrossFlushes(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "items"), Options{NoSync: true, segmentSize: smallSegments})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	commit := func(ops ...port.Op) error {
		_, err := s.Commit(context.Background(), port.Tx{Build: func(uint64) ([]port.Op, error) { return ops, nil }})
		return err
	}
	pad := bytes.Repeat([]byte("p"), 2048) // fills segments, so that flushes come every few commits
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 250 {
				k := port.Key{PK: fmt.Sprintf("mk%d", g), SK: fmt.Sprintf("%06d", i)}
				if err := commit(port.Put(port.Item{Key: k, Data: pad}, port.NotExists()),
					port.Put(port.Item{Key: port.Key{PK: "pad", SK: k.String()}, Data: pad}, port.Cond{})); err != nil {
					t.Errorf("%s: put if absent: %v", k, err)
					return
				}
				if _, failed := port.FailedOp(commit(port.Put(port.Item{Key: k}, port.NotExists()))); !failed {
					t.Errorf("%s: a second put if absent did not fail on its condition", k)
					return
				}
				if err := commit(port.Delete(k, port.Exists())); err != nil {
					t.Errorf("%s: delete: %v", k, err)
					return
				}
				if err := commit(port.Check(k, port.NotExists())); err != nil {
					t.Errorf("%s: absent after its deletion: %v", k, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// TestMemKeysNeverForgetsUnflushed: memKeys never says no to a key applied since the last flush that
// completed, whatever the order of applies and flushes, and forgets keys only by a successful flush.
func TestMemKeysNeverForgetsUnflushed(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := newMemKeys()
		var unflushed [][]byte // applied since the last successful flush began
		for _, step := range rapid.SliceOfN(rapid.IntRange(0, 9), 1, 60).Draw(t, "steps") {
			switch {
			case step == 0: // a flush that fails keeps everything
				_ = m.flush(func() error { return errors.New("disk full") })
			case step == 1: // a flush; keys applied while it runs stay
				during := rapid.SliceOfN(rapid.SliceOfN(rapid.Byte(), 1, 8), 0, 3).Draw(t, "during")
				if err := m.flush(func() error {
					for _, k := range during {
						_ = m.apply(func(add func([]byte)) { add(k) }, func() error { return nil })
					}
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				unflushed = during
			default:
				k := rapid.SliceOfN(rapid.Byte(), 1, 8).Draw(t, "key")
				_ = m.apply(func(add func([]byte)) { add(k) }, func() error { return nil })
				unflushed = append(unflushed, k)
			}
			v := m.snapshot()
			for _, k := range unflushed {
				if !v.mayHold(k) {
					t.Fatalf("forgot %q before a flush wrote it", k)
				}
			}
		}
	})
}

// TestKeyBloomFalsePositives: at the ~100,000 keys of a journal segment the filter says yes to about 0.1 %
// of other keys (a false positive costs a read through the memtable).
func TestKeyBloomFalsePositives(t *testing.T) {
	m := newMemKeys()
	const n = 100_000
	_ = m.apply(func(add func([]byte)) {
		for i := range n {
			add(fmt.Appendf(nil, "in-%d", i))
		}
	}, func() error { return nil })
	v, yes := m.snapshot(), 0
	for i := range n {
		if !v.mayHold(fmt.Appendf(nil, "in-%d", i)) {
			t.Fatalf("lost in-%d", i)
		}
		if v.mayHold(fmt.Appendf(nil, "out-%d", i)) {
			yes++
		}
	}
	if yes > n/100 {
		t.Fatalf("%d of %d other keys reported present (expected ~0.1 %%)", yes, n)
	}
	t.Logf("%d of %d other keys reported present", yes, n)
}
