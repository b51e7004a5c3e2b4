package pebble_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	pdb "github.com/cockroachdb/pebble/v2"
	"go.uber.org/goleak"

	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/store/pebble"
	"github.com/waypost/waypost/store/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func openStore(t testing.TB, path string, opts pebble.Options) *pebble.Store {
	t.Helper()
	s, err := pebble.Open(path, opts)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestContract runs the suite with fsync on, as in production.
func TestContract(t *testing.T) {
	storetest.RunItemStore(t, func(t *testing.T) port.ItemStore {
		return openStore(t, filepath.Join(t.TempDir(), "items"), pebble.Options{})
	})
}

func TestReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "items")
	s, err := pebble.Open(path, pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctr := port.Key{PK: "sp", SK: "SEQ"}
	it := port.Item{Key: port.Key{PK: "p", SK: "a"}, Attrs: map[string]string{"v": "1"}, Data: []byte{0, 1, 2}}
	for i := 0; i < 3; i++ {
		if _, err := s.Commit(context.Background(), port.Tx{Counter: &ctr, Count: 2, Max: 100, Build: func(uint64) ([]port.Op, error) {
			return []port.Op{port.Put(it, port.Cond{})}, nil
		}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, path, pebble.Options{})
	got, ok, err := s.Get(context.Background(), it.Key)
	if err != nil || !ok || got.Attr("v") != "1" || !bytes.Equal(got.Data, it.Data) {
		t.Fatalf("after reopen: %+v, %v, %v", got, ok, err)
	}
	first, err := s.Commit(context.Background(), port.Tx{Counter: &ctr, Count: 1, Max: 100, Build: func(uint64) ([]port.Op, error) { return nil, nil }})
	if err != nil || first != 7 {
		t.Fatalf("counter after reopen: %d, %v; want 7", first, err)
	}
}

func TestClosed(t *testing.T) {
	s, err := pebble.Open(filepath.Join(t.TempDir(), "items"), pebble.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	k := port.Key{PK: "p", SK: "a"}
	if _, _, err := s.Get(context.Background(), k); !errors.Is(err, pebble.ErrClosed) {
		t.Fatalf("get: %v", err)
	}
	if _, err := s.Query(context.Background(), port.Query{PK: "p"}); !errors.Is(err, pebble.ErrClosed) {
		t.Fatalf("query: %v", err)
	}
	if _, err := s.Commit(context.Background(), port.Tx{Build: func(uint64) ([]port.Op, error) {
		return []port.Op{port.Put(port.Item{Key: k}, port.Cond{})}, nil
	}}); !errors.Is(err, pebble.ErrClosed) {
		t.Fatalf("commit: %v", err)
	}
}

func TestLockTimeout(t *testing.T) {
	path := filepath.Join(t.TempDir(), "items")
	openStore(t, path, pebble.Options{NoSync: true})
	start := time.Now()
	s, err := pebble.Open(path, pebble.Options{NoSync: true, LockTimeout: 100 * time.Millisecond})
	if err == nil {
		s.Close()
		t.Fatal("second open of a locked store succeeded")
	}
	if !errors.Is(err, port.ErrUnavailable) {
		t.Fatalf("second open: %v, want ErrUnavailable", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("lock timeout took %v", d)
	}
}

func TestOptions(t *testing.T) {
	for _, o := range []pebble.Options{{MaxBatchSize: -1}, {LockTimeout: -1}} {
		if s, err := pebble.Open(filepath.Join(t.TempDir(), "db"), o); err == nil {
			s.Close()
			t.Errorf("%+v accepted", o)
		}
	}
	// A batch of one and no delay still commits.
	s := openStore(t, filepath.Join(t.TempDir(), "db"), pebble.Options{MaxBatchSize: 1})
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if _, err := s.Commit(context.Background(), port.Tx{Build: func(uint64) ([]port.Op, error) {
				return []port.Op{port.Put(port.Item{Key: port.Key{PK: "p", SK: fmt.Sprint(i)}}, port.NotExists())}, nil
			}}); err != nil {
				t.Error(err)
			}
		}(i)
	}
	wg.Wait()
	if items, err := s.Query(context.Background(), port.Query{PK: "p"}); err != nil || len(items) != 8 {
		t.Fatalf("%d items, %v", len(items), err)
	}
}

// TestUnknownLayout: a directory whose store records another layout, or holds items without a layout
// record, is refused with ErrFormat and left as it was.
func TestUnknownLayout(t *testing.T) {
	for name, kvs := range map[string][][2]string{
		"other format":   {{"\x00format", "something-else"}},
		"no format":      {{"\x01pk", "\x01\x00"}},
		"older pebble-0": {{"\x00format", "waypost-items-pebble-0"}, {"\x01pk", "\x01\x00"}},
	} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "items")
			db, err := pdb.Open(dir, &pdb.Options{})
			if err != nil {
				t.Fatal(err)
			}
			for _, kv := range kvs {
				if err := db.Set([]byte(kv[0]), []byte(kv[1]), pdb.Sync); err != nil {
					t.Fatal(err)
				}
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			s, err := pebble.Open(dir, pebble.Options{})
			if err == nil {
				s.Close()
				t.Fatal("opened a store of an unknown layout")
			}
			if !errors.Is(err, pebble.ErrFormat) {
				t.Fatalf("open: %v, want ErrFormat", err)
			}
			// The refusal wrote nothing: a second attempt is refused the same way.
			if s, err := pebble.Open(dir, pebble.Options{}); !errors.Is(err, pebble.ErrFormat) {
				if s != nil {
					s.Close()
				}
				t.Fatalf("second open: %v", err)
			}
		})
	}
}

// TestBatchIsolation commits, in one batch, transactions that succeed, fail a condition, fail in Build and
// panic in Build: each gets its own outcome and only the successful ones are written.
func TestBatchIsolation(t *testing.T) {
	s := openStore(t, filepath.Join(t.TempDir(), "db"), pebble.Options{})
	ctx := context.Background()
	if _, err := s.Commit(ctx, port.Tx{Build: func(uint64) ([]port.Op, error) {
		return []port.Op{port.Put(port.Item{Key: port.Key{PK: "x", SK: "taken"}}, port.Cond{})}, nil
	}}); err != nil {
		t.Fatal(err)
	}
	const n = 40
	ctr := port.Key{PK: "x", SK: "SEQ"}
	boom := errors.New("build failed")
	var (
		wg   sync.WaitGroup
		errs = make([]error, n)
		pans = make([]any, n)
		firs = make([]uint64, n)
	)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			defer func() { pans[i] = recover() }()
			firs[i], errs[i] = s.Commit(ctx, port.Tx{Counter: &ctr, Count: 1, Max: 1000, Build: func(first uint64) ([]port.Op, error) {
				switch i % 4 {
				case 1:
					return []port.Op{port.Put(port.Item{Key: port.Key{PK: "x", SK: "taken"}}, port.NotExists())}, nil
				case 2:
					return nil, boom
				case 3:
					panic(fmt.Sprint("panic in build ", i))
				}
				return []port.Op{port.Put(port.Item{Key: port.Key{PK: "ok", SK: fmt.Sprintf("%04d", first)}, Data: []byte(fmt.Sprint(i))}, port.NotExists())}, nil
			}})
		}(i)
	}
	wg.Wait()
	seen := map[uint64]bool{}
	for i := 0; i < n; i++ {
		switch i % 4 {
		case 0:
			if errs[i] != nil || pans[i] != nil {
				t.Fatalf("tx %d: %v %v", i, errs[i], pans[i])
			}
			if seen[firs[i]] {
				t.Fatalf("value %d allocated twice", firs[i])
			}
			seen[firs[i]] = true
			it, ok, err := s.Get(ctx, port.Key{PK: "ok", SK: fmt.Sprintf("%04d", firs[i])})
			if err != nil || !ok || string(it.Data) != fmt.Sprint(i) {
				t.Fatalf("tx %d's item: %+v %v %v", i, it, ok, err)
			}
		case 1:
			if idx, ok := port.FailedOp(errs[i]); !ok || idx != 0 {
				t.Fatalf("tx %d: %v, want condition failure", i, errs[i])
			}
		case 2:
			if !errors.Is(errs[i], boom) {
				t.Fatalf("tx %d: %v, want the build error", i, errs[i])
			}
		case 3:
			if pans[i] == nil {
				t.Fatalf("tx %d: panic in Build did not reach the caller (err %v)", i, errs[i])
			}
		}
	}
	items, err := s.Query(ctx, port.Query{PK: "ok", Limit: 1000})
	if err != nil || len(items) != n/4 {
		t.Fatalf("%d items, %v; want %d", len(items), err, n/4)
	}
	for i, it := range items {
		if it.SK != fmt.Sprintf("%04d", i+1) {
			t.Fatalf("allocated values not gapless: %d-th is %s", i, it.SK)
		}
	}
}

// TestConcurrentCompareAndSwap: goroutines increment shared values by compare-and-swap (AttrEquals on the
// value read, then a put of the next value), retrying on condition failure. Conditions are evaluated against
// commits of the same group and of groups still being synced, and against the committer's cache of hot
// items; any stale read would let two increments of one value both succeed. Every success must be counted
// exactly once, and deletes in between must be seen.
func TestConcurrentCompareAndSwap(t *testing.T) {
	s := openStore(t, filepath.Join(t.TempDir(), "items"), pebble.Options{})
	ctx := context.Background()
	keys := []port.Key{{PK: "cas", SK: "a"}, {PK: "cas", SK: "b"}, {PK: "other", SK: "a"}}
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := map[port.Key]int{}
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 60; i++ {
				k := keys[(w+i)%len(keys)]
				for attempt := 0; ; attempt++ {
					if attempt == 10000 {
						t.Errorf("%s: no compare-and-swap succeeded in %d attempts", k, attempt)
						return
					}
					cur, found, err := s.Get(ctx, k)
					if err != nil {
						t.Error(err)
						return
					}
					n := 0
					cond := port.NotExists()
					if found {
						fmt.Sscan(cur.Attr("v"), &n)
						cond = port.AttrEquals("v", cur.Attr("v"))
					}
					_, err = s.Commit(ctx, port.Tx{Build: func(uint64) ([]port.Op, error) {
						return []port.Op{port.Put(port.Item{Key: k, Attrs: map[string]string{"v": fmt.Sprint(n + 1)}}, cond)}, nil
					}})
					if _, failed := port.FailedOp(err); failed {
						continue
					}
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					wins[k]++
					mu.Unlock()
					break
				}
			}
		}(w)
	}
	wg.Wait()
	for _, k := range keys {
		it, ok, err := s.Get(ctx, k)
		if err != nil || !ok || it.Attr("v") != fmt.Sprint(wins[k]) {
			t.Fatalf("%s: %+v %v %v, want v=%d", k, it, ok, err, wins[k])
		}
	}
	// A delete is seen by the next condition on the key (through the committer's cache too).
	k := keys[0]
	if _, err := s.Commit(ctx, port.Tx{Build: func(uint64) ([]port.Op, error) {
		return []port.Op{port.Delete(k, port.Exists())}, nil
	}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(ctx, port.Tx{Build: func(uint64) ([]port.Op, error) {
		return []port.Op{port.Check(k, port.Exists())}, nil
	}}); err == nil {
		t.Fatal("a check of a deleted item passed")
	}
}
