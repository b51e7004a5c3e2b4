package pebble_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/internal/cputime"
	"github.com/waypost/waypost/store/kv"
	"github.com/waypost/waypost/store/pebble"
)

// BenchmarkCommit measures committed transactions per second with fsync on, each transaction allocating one
// value of a shared counter and putting 5 items of ~300 bytes, at several numbers of concurrent committers.
// It reports tx/s, the p50/p99 commit latency and the process CPU time per commit (cpu-µs/op; it includes
// Build and the benchmark's own goroutines).
func BenchmarkCommit(b *testing.B) {
	for _, g := range []int{1, 8, 32, 128} {
		b.Run(fmt.Sprintf("goroutines=%d", g), func(b *testing.B) { benchCommit(b, g, pebble.Options{}) })
	}
}

func benchCommit(b *testing.B, goroutines int, opts pebble.Options) {
	s, err := pebble.Open(filepath.Join(b.TempDir(), "items"), opts)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctr := port.Key{PK: "SP#bench", SK: "SEQ"}
	payload := make([]byte, 260)
	for i := range payload {
		payload[i] = 'a' + byte(i%26)
	}
	attrs := map[string]string{"state": "committed", "gen": "1"}
	build := func(first uint64) ([]port.Op, error) {
		ops := make([]port.Op, 5)
		for i := range ops {
			ops[i] = port.Put(port.Item{
				Key:   port.Key{PK: fmt.Sprintf("FD#bench#%d", i), SK: fmt.Sprintf("%020d", first)},
				Attrs: attrs,
				Data:  payload,
			}, port.NotExists())
		}
		return ops, nil
	}
	var (
		next      atomic.Int64
		mu        sync.Mutex
		latencies = make([]time.Duration, 0, b.N)
		wg        sync.WaitGroup
	)
	b.ResetTimer()
	start, cpu0 := time.Now(), cputime.Self()
	for w := 0; w < goroutines; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local := make([]time.Duration, 0, b.N/goroutines+1)
			for next.Add(1) <= int64(b.N) {
				t0 := time.Now()
				if _, err := s.Commit(context.Background(), port.Tx{Counter: &ctr, Count: 1, Max: 1 << 53, Build: build}); err != nil {
					b.Error(err)
					return
				}
				local = append(local, time.Since(t0))
			}
			mu.Lock()
			latencies = append(latencies, local...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed, cpu := time.Since(start), cputime.Self()-cpu0
	b.StopTimer()
	slices.Sort(latencies)
	if len(latencies) == 0 {
		return
	}
	pct := func(p float64) float64 {
		return float64(latencies[int(p*float64(len(latencies)-1))].Microseconds())
	}
	b.ReportMetric(float64(len(latencies))/elapsed.Seconds(), "tx/s")
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
	b.ReportMetric(float64(cpu.Microseconds())/float64(len(latencies)), "cpu-µs/op")
}

// BenchmarkCommitNoSync is BenchmarkCommit at 32 goroutines without fsync: the CPU cost of a commit.
func BenchmarkCommitNoSync(b *testing.B) { benchCommit(b, 32, pebble.Options{NoSync: true}) }

// BenchmarkGetMany reads 50 keys of which 10 exist, as an ack's receipts are read, from a store of 20,000
// items: GetMany (one iterator, prefix seeks) against a Get per key.
func BenchmarkGetMany(b *testing.B) {
	s, err := pebble.Open(filepath.Join(b.TempDir(), "items"), pebble.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	for i := 0; i < 20000; i += 100 {
		var ops []port.Op
		for j := i; j < i+100; j++ {
			ops = append(ops, port.Put(port.Item{Key: port.Key{PK: "RC#bench", SK: fmt.Sprintf("it_%06d", j)}, Data: []byte(`{"stage":"received"}`)}, port.Cond{}))
		}
		if _, err := s.Commit(ctx, port.Tx{Build: func(uint64) ([]port.Op, error) { return ops, nil }}); err != nil {
			b.Fatal(err)
		}
	}
	keys := make([]port.Key, 50)
	for i := range keys {
		keys[i] = port.Key{PK: "RC#bench", SK: fmt.Sprintf("it_%06d", 19990+i)} // the last 10 exist
	}
	for _, c := range []struct {
		name string
		get  func() ([]port.Item, []bool, error)
	}{
		{"GetMany", func() ([]port.Item, []bool, error) { return s.GetMany(ctx, keys) }},
		{"GetEach", func() ([]port.Item, []bool, error) { return kv.GetEach(ctx, keys, s.Get) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if _, found, err := c.get(); err != nil || !found[0] {
					b.Fatalf("%v, %v", found, err)
				}
			}
		})
	}
}

// BenchmarkFeedSlots compares the two ways the domain reads the feed slots of 50 inbox entries
// (domain.feedSlotsOf): GetMany of their keys, and one range Query when they are dense. 100,000 slots of
// 450 bytes, flushed to tables, in the block cache after the first reads.
func BenchmarkFeedSlots(b *testing.B) {
	ctx := context.Background()
	s, err := pebble.Open(filepath.Join(b.TempDir(), "items"), pebble.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const n, page, pk = 100000, 50, "FD#sp_bench"
	payload := make([]byte, 450)
	for i := range payload {
		payload[i] = 'a' + byte(i%26)
	}
	for i := 0; i < n; i += 100 {
		if _, err := s.Commit(ctx, port.Tx{Build: func(uint64) ([]port.Op, error) {
			var ops []port.Op
			for j := i + 1; j <= i+100; j++ {
				ops = append(ops, port.Put(port.Item{Key: port.Key{PK: pk, SK: port.SlotSK(uint64(j))}, Data: payload}, port.Cond{}),
					port.Put(port.Item{Key: port.Key{PK: "IN#sp_bench#act", SK: port.SlotSK(uint64(j))}}, port.Cond{}))
			}
			return ops, nil
		}}); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Checkpoint(filepath.Join(b.TempDir(), "copy")); err != nil { // flushes the memtable
		b.Fatal(err)
	}
	first := uint64(1)
	next := func() uint64 {
		f := first
		first = 1 + (first+page)%(n-page)
		return f
	}
	b.Run("getmany", func(b *testing.B) {
		keys := make([]port.Key, page)
		for b.Loop() {
			f := next()
			for i := range keys {
				keys[i] = port.Key{PK: pk, SK: port.SlotSK(f + uint64(i))}
			}
			if _, found, err := s.GetMany(ctx, keys); err != nil || !found[page-1] {
				b.Fatal(err)
			}
		}
	})
	b.Run("query", func(b *testing.B) {
		for b.Loop() {
			f := next()
			items, err := s.Query(ctx, port.Query{PK: pk, After: port.SlotSK(f - 1), UpTo: port.SlotSK(f + page - 1), Limit: page})
			if err != nil || len(items) != page {
				b.Fatal(err, len(items))
			}
		}
	})
}
