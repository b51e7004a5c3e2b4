package pebble

import (
	"hash/maphash"
	"slices"
	"sync"
	"sync/atomic"
)

// memKeys answers, for the committer's reads, "may this key be in a memtable not yet flushed?" without
// looking: pebble's memtable is a skiplist with no filter, and a point read of a key it does not hold walks
// it down to the bottom — about twenty levels of cache misses in a memtable of tens of MiB, the largest part
// of a commit's reads, most of which ask for keys that do not exist yet (the NotExists conditions of new
// records). A key memKeys says no to is read with OnlyReadGuaranteedDurable, from the tables only, whose
// Bloom filters answer for it.
//
// It holds Bloom filters of the keys applied to the memtables, newest first. The one rule it keeps:
// every key in a memtable not yet flushed is in one of the filters. So
//
//   - a batch's keys are added to the newest filter before the batch is applied, and adding and applying
//     happen under mu (apply);
//   - before each of the journal's flushes (flush), a new newest filter starts, under mu: every batch
//     applied before that point went into the memtables the flush writes to tables (pebble's Flush flushes
//     the memtable it finds and everything queued before it), every later one adds to the new filter;
//   - once that flush has returned, the filters older than the one it started are dropped.
//
// Flushes pebble makes on its own (a full memtable, Checkpoint) only move keys from memtables to tables:
// the filters keep them, which costs a full read, never a wrong one.
//
// A reader takes the list of filters (snapshot) before it opens its table-only iterator, so that a filter
// dropped before the snapshot was flushed before the iterator saw the tables.
type memKeys struct {
	seed    maphash.Seed
	mu      sync.Mutex                  // orders apply against the start of a new filter (flush)
	filters atomic.Pointer[[]*keyBloom] // newest first; a published slice is never modified
}

func newMemKeys() *memKeys {
	m := &memKeys{seed: maphash.MakeSeed()}
	m.filters.Store(&[]*keyBloom{new(keyBloom)})
	return m
}

// apply adds keys to the newest filter, then runs applyBatch (which puts them in the memtable).
func (m *memKeys) apply(keys func(add func(key []byte)), applyBatch func() error) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	newest := (*m.filters.Load())[0]
	keys(func(key []byte) { newest.add(maphash.Bytes(m.seed, key)) })
	return applyBatch()
}

// flush starts a new filter, runs flushMemtables, and when it succeeds drops the filters older than the new
// one: their keys are in tables now.
func (m *memKeys) flush(flushMemtables func() error) error {
	m.mu.Lock()
	started := new(keyBloom)
	with := append([]*keyBloom{started}, *m.filters.Load()...)
	m.filters.Store(&with)
	m.mu.Unlock()
	if err := flushMemtables(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := *m.filters.Load()
	if i := slices.Index(cur, started); i >= 0 {
		kept := slices.Clone(cur[:i+1])
		m.filters.Store(&kept)
	}
	return nil
}

// snapshot returns the filters as they are now, for one reader.
func (m *memKeys) snapshot() memKeysView {
	return memKeysView{seed: m.seed, filters: *m.filters.Load()}
}

// memKeysView is a reader's snapshot of memKeys. Filters gain keys after it is taken; none is dropped from it.
type memKeysView struct {
	seed    maphash.Seed
	filters []*keyBloom
}

// mayHold reports whether key may be in a memtable not yet flushed (false: it is not).
func (v memKeysView) mayHold(key []byte) bool {
	h := maphash.Bytes(v.seed, key)
	for _, f := range v.filters {
		if f.has(h) {
			return true
		}
	}
	return false
}

// keyBloom is a Bloom filter of fixed size over 64-bit key hashes, safe for concurrent adds and lookups.
// 2^21 bits and 4 probes: about 0.1 % false positives at the ~100,000 keys of a journal segment, 3.5 % at
// 300,000 (a false positive costs a read through the memtable, as before the filters).
type keyBloom struct {
	words [keyBloomBits / 64]atomic.Uint64
}

const (
	keyBloomBits   = 1 << 21
	keyBloomProbes = 4
)

func (b *keyBloom) add(h uint64) {
	h1, h2 := h, h>>32|1
	for i := uint64(0); i < keyBloomProbes; i++ {
		bit := (h1 + i*h2) % keyBloomBits
		b.words[bit/64].Or(1 << (bit % 64))
	}
}

func (b *keyBloom) has(h uint64) bool {
	h1, h2 := h, h>>32|1
	for i := uint64(0); i < keyBloomProbes; i++ {
		bit := (h1 + i*h2) % keyBloomBits
		if b.words[bit/64].Load()&(1<<(bit%64)) == 0 {
			return false
		}
	}
	return true
}
