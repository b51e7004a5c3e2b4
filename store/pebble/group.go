package pebble

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	pdb "github.com/cockroachdb/pebble/v2"

	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/store/kv"
)

// request is one caller's commit; the group's leader fills in its outcome before closing done.
type request struct {
	ctx      context.Context
	tx       port.Tx
	first    uint64
	err      error
	panicked any           // a panic raised by Build, re-raised in the caller's goroutine
	done     chan struct{} // closed once the outcome is durable and final
	promote  chan struct{} // closed when the caller is to take the committer role
}

// group is the commits evaluated together and made durable by one batch.
type group struct {
	reqs   []*request
	writes map[string]write // the group's writes by encoded key, the last one per key
	batch  *pdb.Batch       // nil while the group wrote nothing
	// prevSynced is the synced channel of the group made durable just before this one (nil for the first).
	prevSynced chan struct{}
	synced     chan struct{} // closed once the group is applied (or failed) and its view published
	applied    atomic.Bool   // set once the batch is in the database
}

// write is one buffered put (val, item) or delete (del) of an encoded key.
type write struct {
	key  string
	val  []byte
	item port.Item
	del  bool
}

// hotMax bounds the committer's cache of recently read items.
const hotMax = 4096

// hotCache holds items the committer read from the database, by encoded key, kept up to date with every
// write the committer accepts (it is the only writer), so that hot items — counters, the actors whose
// generation every commit checks — are read from the database once. It belongs to the committer role.
// Only items found are kept: absent keys are mostly new keys, asked for once.
type hotCache map[string]port.Item

// update applies an accepted write to the cache.
func (h hotCache) update(w write) {
	if _, ok := h[w.key]; !ok {
		return
	}
	if w.del {
		delete(h, w.key)
		return
	}
	h[w.key] = w.item
}

// add remembers an item read from the database, emptying the cache when it is full.
func (h hotCache) add(key string, it port.Item) {
	if len(h) >= hotMax {
		clear(h)
	}
	h[key] = it
}

// lead is run by the caller that takes the committer role, with s.mu held: it takes the queued commits
// (its own first) as a group and evaluates them, hands the role to the oldest commit still queued, then
// makes the group durable and answers it. A commit that arrives while nobody leads runs in its caller's
// goroutine from start to end. Under load, one caller evaluates the next group while the previous group's
// caller waits for its fsync; a leader first waits until at most one group is ahead of its own, so that its
// group holds everything that queued up during that group's sync.
func (s *Store) lead() {
	s.evaluating = true
	if t := s.tail; t != nil && t.prevSynced != nil {
		s.mu.Unlock()
		<-t.prevSynced
		s.mu.Lock()
	}
	var reqs []*request
	if len(s.queue) <= s.max {
		reqs, s.queue = s.queue, nil
	} else {
		reqs = slices.Clone(s.queue[:s.max])
		s.queue = slices.Delete(s.queue, 0, s.max)
	}
	s.mu.Unlock()

	for len(s.inflight) > 0 && s.inflight[0].applied.Load() {
		s.recycleWrites(s.inflight[0].writes)
		s.inflight[0] = nil
		s.inflight = s.inflight[1:]
	}
	g := &group{reqs: reqs, writes: s.writesMap(), synced: make(chan struct{})}
	if s.tail != nil {
		g.prevSynced = s.tail.synced
	}
	for _, r := range reqs {
		s.evaluate(g, r)
	}
	s.closeReader()
	s.buildBatch(g)
	s.inflight = append(s.inflight, g)
	s.tail = g

	s.mu.Lock()
	if len(s.queue) > 0 {
		close(s.queue[0].promote)
	} else {
		s.evaluating = false
	}
	s.mu.Unlock()

	s.makeDurable(g)
}

// writesMap returns an empty map for a group's writes, one a group applied earlier used when there is one:
// a map keeps the room it grew to, and a group's map grows to hold every write of its commits.
func (s *Store) writesMap() map[string]write {
	if n := len(s.freeWrites); n > 0 {
		m := s.freeWrites[n-1]
		s.freeWrites = s.freeWrites[:n-1]
		return m
	}
	return make(map[string]write)
}

// recycleWrites keeps the writes map of a group that is applied (nothing reads it any more: the committer
// read it while the group was in flight, publishView before the group was marked applied), unless it grew
// large or enough are kept.
func (s *Store) recycleWrites(m map[string]write) {
	if len(m) > maxRecycledWrites || len(s.freeWrites) >= 4 {
		return
	}
	clear(m)
	s.freeWrites = append(s.freeWrites, m)
}

// maxRecycledWrites bounds the maps recycleWrites keeps: a map never shrinks, and a rare large group should
// not pin its room.
const maxRecycledWrites = 4096

// evaluate runs one commit against the indexed view and, when it succeeds, adds its writes to the group.
func (s *Store) evaluate(g *group, r *request) {
	if err := s.failure(); err != nil {
		r.err = err
		return
	}
	v := &s.txv
	*v = txView{s: s, g: g, inflight: s.inflight, hot: s.hot, writes: v.writes[:0]}
	defer func() {
		clear(v.writes) // the buffer is kept for the next commit, not what it held
		*v = txView{writes: v.writes[:0]}
	}()
	func() {
		defer func() {
			if p := recover(); p != nil {
				r.panicked = p
			}
		}()
		r.first, r.err = kv.Commit(r.ctx, v, r.tx, MaxOps)
	}()
	if r.err != nil || r.panicked != nil {
		r.first = 0 // the buffered writes are dropped: nothing of a failed commit is written
		return
	}
	for _, w := range v.writes {
		g.writes[w.key] = w
		s.hot.update(w)
	}
}

// buildBatch puts the group's writes (the last one of each key) in its batch in key order. The memtable
// inserts a batch's keys one after the other, each from where the previous one went: keys in order find
// their place in a few steps, where keys in the order the commits wrote them (an ack's receipt, feed slot
// and inbox entry, item after item) each search the skiplist from its top. That took up to a third of an
// inbox.ack of 50 items in a full memtable (docs/benchmarks.md).
func (s *Store) buildBatch(g *group) {
	if len(g.writes) == 0 {
		return
	}
	keys := s.sortBuf[:0]
	for k := range g.writes {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	g.batch = s.db.NewBatch()
	for _, k := range keys {
		w := g.writes[k]
		var err error
		if w.del {
			err = g.batch.Delete([]byte(k), nil)
		} else {
			err = g.batch.Set([]byte(k), w.val, nil)
		}
		if err != nil { // a batch only refuses writes beyond its 4 GiB limit
			err = s.fail(err)
			for _, r := range g.reqs {
				if r.err == nil && r.panicked == nil {
					r.first, r.err = 0, err
				}
			}
			break
		}
	}
	clear(keys)
	s.sortBuf = keys[:0]
}

// makeDurable writes the group's batch to the journal and fsyncs it (one fsync for the group), after the
// previous group's, and answers the group's callers as soon as the record is durable; the batch then
// reaches the memtable and the new durable view is published in the background (applyGroup). Until then
// the group is the store's pending group, which reads that start after the answer read (GetMany) or wait
// for (awaitView), so a caller still reads its own acknowledged commit. The next group is made durable only
// after it (prevSynced): the memtable takes batches in journal order (docs/decisions.md, "Answered at the
// fsync").
func (s *Store) makeDurable(g *group) {
	if g.prevSynced != nil {
		<-g.prevSynced
	}
	err := s.failure()
	if err == nil && g.batch != nil {
		start := time.Now()
		if werr := s.logBatch(g.batch); werr != nil {
			err = s.fail(werr)
		} else {
			if s.onBatch != nil {
				s.onBatch(len(g.reqs), time.Since(start))
			}
			s.viewMu.Lock()
			s.pending = g // until publishView
			s.viewMu.Unlock()
			s.active.Add(1) // Close waits for the apply
			s.answer(g, nil)
			s.applies <- g
			return
		}
	}
	s.finish(g)
	s.answer(g, err)
}

// finish releases a group's batch and lets the committer recycle its writes and the next group be made
// durable.
func (s *Store) finish(g *group) {
	if g.batch != nil {
		_ = g.batch.Close()
	}
	g.applied.Store(true)
	close(g.synced)
}

// answer closes the done channel of every commit of g; err, when not nil, replaces every outcome that is
// not a panic: whatever a commit's own outcome, it was judged on state that is not durable.
func (s *Store) answer(g *group, err error) {
	for _, r := range g.reqs {
		if err != nil && r.panicked == nil {
			r.first, r.err = 0, err
		}
		close(r.done)
		s.active.Done()
	}
}

// startApplier starts the goroutine that applies the answered groups, in order, until Close (Open).
func (s *Store) startApplier() {
	s.applies, s.applierDone = make(chan *group, 1), make(chan struct{})
	go func() {
		defer close(s.applierDone)
		for g := range s.applies {
			s.applyGroup(g)
		}
	}()
}

// applyGroup applies a durable group's batch to the memtable and publishes the view after it, then lets the
// next group be made durable. A batch the memtable refuses (pebble refuses one only once closed, which Close
// never does while a group is being applied) leaves the store refusing writes until a restart replays the
// journal, which holds the group: the group was answered, so no repair may clear its record (recover).
func (s *Store) applyGroup(g *group) {
	defer s.active.Done()
	if s.beforeApply != nil {
		s.beforeApply()
	}
	if err := s.memKeys.apply(batchKeys(g.batch), func() error { return g.batch.Commit(pdb.NoSync) }); err != nil {
		s.unapplied.Store(true)
		_ = s.fail(fmt.Errorf("applying a durable group to the memtable: %w", mapErr(err)))
		s.viewMu.Lock()
		s.endPending() // reads go on from the last view
		s.viewMu.Unlock()
	} else {
		s.publishView(g.writes)
	}
	s.finish(g)
}

// logBatch makes a group's batch durable: its record is written to the journal and synced. The batch
// reaches the memtable only after (applyGroup): a memtable flush (the journal's flusher, Checkpoint,
// pebble's own) may write the memtable to tables at any moment, and a batch flushed before its record is
// durable would, after a power loss that took the record, stay in the tables while replaying the earlier
// records put the keys it overwrote back to their older values — half a commit. After a failed write or sync
// the journal takes nothing more and the store refuses writes (Store.fail) until it recovers (recover.go) —
// or a restart recovers what the journal holds.
func (s *Store) logBatch(b *pdb.Batch) error {
	if err := s.journal.append(b.Repr()); err != nil {
		return err
	}
	if s.beforeSync != nil {
		s.beforeSync()
	}
	if err := s.journal.sync(); err != nil {
		return err
	}
	s.journal.committed() // answered from here on: a repair keeps it
	return nil
}

// batchKeys calls add with the key of every record in b, deletions included (a deletion in the memtable
// hides an older value in the tables).
func batchKeys(b *pdb.Batch) func(add func(key []byte)) {
	return func(add func(key []byte)) {
		r := b.Reader()
		for {
			_, key, _, ok, err := r.Next()
			if !ok || err != nil {
				return // a batch the store built; pebble's apply reports what is wrong with it
			}
			add(key)
		}
	}
}

// txView is one commit's view for kv.Commit: its own buffered writes, then its group's, then those of the
// groups still being made durable (newest first), then the committer's cache, then the database.
type txView struct {
	s        *Store
	g        *group
	inflight []*group
	hot      hotCache
	writes   []write
}

// pendingWrite returns the last write of key not yet durable: the commit's own, else its group's, else that
// of the newest group in flight that wrote it.
func (v *txView) pendingWrite(key string) (write, bool) {
	for i := len(v.writes) - 1; i >= 0; i-- {
		if v.writes[i].key == key {
			return v.writes[i], true
		}
	}
	if w, ok := v.g.writes[key]; ok {
		return w, true
	}
	for i := len(v.inflight) - 1; i >= 0; i-- {
		if w, ok := v.inflight[i].writes[key]; ok {
			return w, true
		}
	}
	return write{}, false
}

func (v *txView) Get(k port.Key) (port.Item, bool, error) {
	key := encodeKey(k)
	if w, ok := v.pendingWrite(string(key)); ok {
		return v.pending(w)
	}
	if it, ok := v.hot[string(key)]; ok {
		return it, true, nil
	}
	// Every group that wrote since the durable view was published is in inflight, read above: a key absent
	// from that view is absent.
	v.s.viewMu.Lock()
	absent := v.s.absent.has(string(key))
	v.s.viewMu.Unlock()
	if absent {
		return port.Item{}, false, nil
	}
	val, found, err := v.s.readDB(key)
	if err != nil || !found {
		return port.Item{}, false, err
	}
	it, err := decodeValue(k, val)
	if err != nil {
		return port.Item{}, false, err
	}
	v.hot.add(string(key), it)
	return it, true, nil
}

// NoneExists reports whether none of keys — of one partition, in ascending sort-key order — exists in the
// commit's view: none is among the pending writes, and one seek over their range finds no key of the
// database in it (kv.AbsentView).
func (v *txView) NoneExists(keys []port.Key) (bool, error) {
	if len(keys) == 0 {
		return true, nil
	}
	for _, k := range keys {
		if _, ok := v.pendingWrite(keyString(k)); ok {
			return false, nil
		}
	}
	lo, hi := encodeKey(keys[0]), encodeKey(keys[len(keys)-1])
	it, err := v.s.fullReader()
	if err != nil {
		return false, err
	}
	if !it.SeekGE(lo) {
		return it.Error() == nil, mapErr(it.Error())
	}
	return bytes.Compare(it.Key(), hi) > 0, nil
}

// readDB reads one key from the database for the committer, through an iterator it creates on its group's
// first read and keeps for the rest of the group's evaluation (closeReader): one prefix seek per read
// instead of a point lookup that builds its iterator stack every time (most of a commit's reads ask for
// keys that do not exist yet, answered by the tables' Bloom filters). The iterator sees every group applied
// before it was created; the groups applied since are still in inflight, which txView.Get consults first.
// The value is valid until the next read.
func (s *Store) readDB(key []byte) ([]byte, bool, error) {
	s.beginReads()
	if !s.inMem.mayHold(key) {
		if s.durable == nil {
			it, err := s.db.NewIter(&pdb.IterOptions{UseL6Filters: true, OnlyReadGuaranteedDurable: true})
			if err != nil {
				return nil, false, mapErr(err)
			}
			s.durable = it
		}
		return seekValue(s.durable, key)
	}
	it, err := s.fullReader()
	if err != nil {
		return nil, false, err
	}
	return seekValue(it, key)
}

// fullReader returns the committer's iterator over the whole database, memtables included, creating it on
// the group's first read that needs it.
func (s *Store) fullReader() (*pdb.Iterator, error) {
	s.beginReads()
	if s.reader == nil {
		// UseL6Filters: pebble skips the bottom level's Bloom filters unless asked, and reads a data block
		// instead, which costs more than the filter for keys that are absent.
		it, err := s.db.NewIter(&pdb.IterOptions{UseL6Filters: true})
		if err != nil {
			return nil, mapErr(err)
		}
		s.reader = it
	}
	return s.reader, nil
}

// beginReads takes, at a group's first read, the memKeys snapshot that tells readDB which iterator to use: before
// either iterator exists (memKeys).
func (s *Store) beginReads() {
	if s.reader == nil && s.durable == nil {
		s.inMem = s.memKeys.snapshot()
	}
}

// seekValue reads key's value through it, an iterator opened with UseL6Filters: one prefix seek, which the
// tables' Bloom filters answer for an absent key. The value is valid until the iterator moves.
func seekValue(it *pdb.Iterator, key []byte) ([]byte, bool, error) {
	if !it.SeekPrefixGE(key) || !bytes.Equal(it.Key(), key) {
		return nil, false, mapErr(it.Error())
	}
	val, err := it.ValueAndErr()
	if err != nil {
		return nil, false, mapErr(err)
	}
	return val, true, nil
}

// closeReader closes the committer's read iterator, if any, at the end of a group's evaluation.
func (s *Store) closeReader() {
	for _, it := range []**pdb.Iterator{&s.reader, &s.durable} {
		if *it != nil {
			_ = (*it).Close()
			*it = nil
		}
	}
	s.inMem = memKeysView{}
}

// pending returns the item a buffered write leaves (shared: kv.Commit never modifies what Get returns).
func (v *txView) pending(w write) (port.Item, bool, error) {
	if w.del {
		return port.Item{}, false, nil
	}
	return w.item, true, nil
}

func (v *txView) Put(it port.Item) error {
	if v.s.failWrite != nil {
		if err := v.s.failWrite(it.Key); err != nil {
			return err
		}
	}
	// The write keeps the item as stored, not the caller's memory (kv.View): its data is the tail of the
	// encoded value, which nothing modifies, its attributes a copy.
	val := encodeValue(it)
	kept := port.Item{Key: it.Key, Attrs: maps.Clone(it.Attrs)}
	if it.Data != nil {
		kept.Data = val[len(val)-len(it.Data) : len(val) : len(val)]
	}
	v.writes = append(v.writes, write{key: keyString(it.Key), val: val, item: kept})
	return nil
}

func (v *txView) Delete(k port.Key) error {
	if v.s.failWrite != nil {
		if err := v.s.failWrite(k); err != nil {
			return err
		}
	}
	v.writes = append(v.writes, write{key: keyString(k), del: true})
	return nil
}
