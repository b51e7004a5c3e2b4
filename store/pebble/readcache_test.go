package pebble_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"pgregory.net/rapid"

	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/store/pebble"
)

// TestGetSeesEveryCommit: whatever Get already read (and may keep), it returns what the last acknowledged
// commit left — after puts, deletes, a failed condition (which writes nothing), a counter allocation, and
// two writes of one key in a row — and a caller's changes to what it got change nothing.
func TestGetSeesEveryCommit(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, filepath.Join(t.TempDir(), "items"), pebble.Options{NoSync: true})
	run := 0
	rapid.Check(t, func(rt *rapid.T) {
		run++
		pk := func(p string) string { return fmt.Sprintf("%s%d", p, run) } // fresh keys for every run
		keys := []port.Key{{PK: pk("p"), SK: "a"}, {PK: pk("p"), SK: "b"}, {PK: pk("q"), SK: "a"}, {PK: pk("ctr"), SK: "c"}}
		model := map[port.Key]string{}
		check := func(step string) {
			for _, k := range keys[:3] {
				it, found, err := s.Get(ctx, k)
				want, ok := model[k]
				if err != nil || found != ok || (found && (it.Attr("v") != want || string(it.Data) != "data-"+want)) {
					rt.Fatalf("%s: Get(%s) = %v %v %v, want %q (present %v)", step, k, it, found, err, want, ok)
				}
				if found { // a caller may change what it got
					it.Attrs["v"] = "changed"
					it.Data[0] = 'X'
				}
			}
		}
		for i := range rapid.IntRange(1, 30).Draw(rt, "steps") {
			ki := rapid.IntRange(0, 2).Draw(rt, "key")
			k := keys[ki]
			v := strconv.Itoa(i)
			put := func(k port.Key, v string) port.Op {
				return port.Put(port.Item{Key: k, Attrs: map[string]string{"v": v}, Data: []byte("data-" + v)}, port.Cond{})
			}
			var ops []port.Op
			switch op := rapid.IntRange(0, 4).Draw(rt, "op"); op {
			case 0, 1:
				ops = []port.Op{put(k, v)}
				model[k] = v
			case 2:
				ops = []port.Op{port.Delete(k, port.Cond{})}
				delete(model, k)
			case 3: // refused: writes nothing
				ops = []port.Op{put(k, v), port.Put(port.Item{Key: keys[(ki+1)%3]}, port.AttrEquals("v", "never"))}
			case 4: // two commits of one key with no read between them: the second wins
				if _, err := s.Commit(ctx, port.Tx{Build: func(uint64) ([]port.Op, error) { return []port.Op{put(k, v)}, nil }}); err != nil {
					rt.Fatal(err)
				}
				w := v + "b"
				ops = []port.Op{put(k, w)}
				model[k] = w
			}
			ctr := keys[3]
			_, err := s.Commit(ctx, port.Tx{Counter: &ctr, Count: 1, Max: 1 << 40, Build: func(uint64) ([]port.Op, error) { return ops, nil }})
			if _, refused := port.FailedOp(err); err != nil && !refused {
				rt.Fatal(err)
			}
			check(fmt.Sprintf("step %d", i))
		}
	})
}

// TestGetIsNeverBehindAnAcknowledgedCommit: readers running alongside writers never read a version of a
// key older than one whose commit was acknowledged before their read began.
func TestGetIsNeverBehindAnAcknowledgedCommit(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, filepath.Join(t.TempDir(), "items"), pebble.Options{NoSync: true})
	const writers, versions = 4, 300
	var acked [writers]atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	key := func(w int) port.Key { return port.Key{PK: "k", SK: strconv.Itoa(w)} }
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for v := int64(1); v <= versions; v++ {
				if _, err := s.Commit(ctx, port.Tx{Build: func(uint64) ([]port.Op, error) {
					return []port.Op{port.Put(port.Item{Key: key(w), Attrs: map[string]string{"v": strconv.FormatInt(v, 10)}}, port.Cond{})}, nil
				}}); err != nil {
					t.Error(err)
					return
				}
				acked[w].Store(v)
			}
		}()
	}
	var readers sync.WaitGroup
	var reads atomic.Int64
	for range 3 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				for w := range writers {
					floor := acked[w].Load()
					it, found, err := s.Get(ctx, key(w))
					if err != nil {
						t.Error(err)
						return
					}
					got, _ := strconv.ParseInt(it.Attr("v"), 10, 64)
					if floor > 0 && (!found || got < floor) {
						t.Errorf("key %d: read version %d (found %v) after version %d was acknowledged", w, got, found, floor)
						return
					}
					reads.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	readers.Wait()
	if reads.Load() == 0 {
		t.Fatal("no reads")
	}
}
