// Package pebble is the embedded port.ItemStore on github.com/cockroachdb/pebble/v2, an LSM engine with
// compressed tables, behind a write-ahead log of the store's own (the journal, journal.go). Transaction semantics come from store/kv, shared with the in-memory
// store; this package adds the on-disk layout, group commit, durable reads and error mapping.
//
// # Layout
//
// The store is one pebble directory, with the journal's segment files in its folder "journal". Items live under composite keys
//
//	uvarint(len(PK)) ‖ PK ‖ SK
//
// The length prefix is self-delimiting, so the keys of one partition are exactly those that start with
// uvarint(len(PK)) ‖ PK, they are contiguous, and pebble's byte-wise order orders them by SK. A partition
// range read is one iterator bounded by that prefix. Values are encoded as
//
//	0x01 ‖ uvarint(#attrs) ‖ { uvarint(len(name)) ‖ name ‖ uvarint(len(value)) ‖ value }* ‖ Data
//
// with attributes sorted by name; Data is the rest of the value, so it is binary safe. Keys starting with
// 0x00 (never an item key, since PK is not empty) hold the store's own records: "\x00format" names the
// layout and is checked on Open. Tables are compressed (MinLZ, see Open).
//
// # Commit
//
// Commits are grouped without a timer and without goroutines of their own. A caller that finds nobody
// committing takes the committer role:
//
//   - it takes everything queued (at most Options.MaxBatchSize commits, its own first) as one group and runs
//     each transaction through kv.Commit against an indexed view: the transaction's own writes, then the
//     writes of its group and of earlier groups not yet applied, then the items the committer keeps (see
//     hotCache), then the database. A transaction's writes are buffered and join the group's batch only
//     when it succeeds, so one that fails (condition, counter exhausted, invalid, Build error or panic)
//     writes nothing and never affects the others;
//   - it hands the role to the oldest commit still queued, then, after the previous group, writes the
//     group's batch to the journal and fsyncs it — itself, with no log-writer goroutine to hand the write to
//     and be woken by — and answers the group's callers. A goroutine then applies the batch to pebble's
//     memtable (only then: a memtable flush must never take a batch whose record is not durable) and
//     publishes the view after it (reads that start after the answer read the group: see Reads), and the
//     next group is made durable after it.
//
// The committer's reads of keys that no memtable still holds — memKeys keeps Bloom filters of the keys
// applied since the journal's last flush — go to the tables only, whose Bloom filters answer for an absent
// key without the walk down pebble's filterless memtable skiplist.
//
// A lone commit thus runs in its caller's goroutine from start to answer. Under load, one caller evaluates the
// next group while the previous group waits for its fsync, so a group holds every commit that arrived during
// the previous sync: one fsync per group.
//
// Every caller, whatever its outcome, is answered only after its group and every group before it is
// durable, so no answer rests on state a crash could still lose. A failure to make a group durable (a
// journal write or fsync, a volume without the room the journal keeps) makes the store refuse writes: that
// group and every commit until the store recovers fail wrapping port.ErrUnavailable, while reads go on. The
// store recovers by itself once the volume has room again (recover.go), and a restarted server recovers from
// the journal. (A durable group the memtable refused, which pebble does only once closed, leaves the store
// refusing writes until a restart replays it.) fsync is on unless Options.NoSync is set (tests only).
//
// # Reads
//
// Get and Query read a pebble snapshot taken after the last durable group, never data still waiting for its
// fsync: a reader never sees a write that a crash could take back, and a caller sees its own acknowledged
// commits. Between a group's answer and its view, GetMany and Head read the keys the group wrote from its
// writes, and a Query of a range it wrote in waits for its view.
package pebble

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	pdb "github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/store/kv"
)

// MaxOps is the largest number of actions (counter included) in one transaction. It is larger than
// DynamoDB's 100; the domain must not rely on more than that.
const MaxOps = 1000

// Format names the store's layout, recorded in the store and checked on Open.
const Format = "waypost-items-pebble-2"

// Defaults for Options.
const (
	// DefaultMaxBatchSize is the default Options.MaxBatchSize.
	DefaultMaxBatchSize = 1000
	// DefaultLockTimeout is the default Options.LockTimeout.
	DefaultLockTimeout = 5 * time.Second
)

// Engine settings. The journal decides when the memtable is flushed: sealing a segment (segmentSize of
// records) flushes it, so that the segment can be recycled. The memtable's capacity is twice a segment's
// size, so that it does not fill before that flush (it holds a little more than the records: about 40
// bytes per key of skiplist) and every flush is the journal's, one per segment; with a capacity of about a
// segment, pebble's own flushes of full memtables came on top of the journal's, a third more flushes and
// compactions and several µs more CPU per send. L0 gathers l0CompactionThreshold flushed tables before
// they are compacted into the level below: every L0 table spans nearly the whole key space (a send writes
// under four key prefixes), so each such compaction rewrites most of that level, and fewer, larger ones
// rewrite it less often. With 24 MiB memtables and a threshold of 8 instead of 16 MiB and pebble's 4, a
// send cost about a tenth less CPU and the p99 latency at 32 clients fell by about a fifth
// (docs/benchmarks.md); reads check a few more L0 tables' Bloom filters. Pebble charges its memtables (the
// live one and one being flushed) to the block cache, so the cache is that much larger than the blocks it
// is meant to hold.
//
// On a small volume the segments are smaller (segmentSizeFor) and the memtable with them.
const (
	l0CompactionThreshold = 8
	l0StopWritesThreshold = 24
)

// memTableSize is the memtable capacity for journal segments of segSize.
func memTableSize(segSize int64) int64 { return 2 * segSize }

// cacheSize is the block cache size for journal segments of segSize.
func cacheSize(segSize int64) int64 { return 2*memTableSize(segSize) + 64<<20 }

// ErrClosed reports use of a closed store.
var ErrClosed = errors.New("store closed")

// ErrFormat reports a directory holding a store of another layout.
var ErrFormat = errors.New("unknown store format")

// Options configure Open. The zero value is the production setting: fsync on, default batching.
type Options struct {
	// NoSync skips fsync on commit. Only for tests that explicitly opt out of durability.
	NoSync bool
	// MaxBatchSize is the most commits grouped into one durable write (0: DefaultMaxBatchSize).
	MaxBatchSize int
	// LockTimeout is how long Open waits for the directory lock held by another process or Store
	// (0: DefaultLockTimeout).
	LockTimeout time.Duration
	// Logger receives the engine's own messages: errors, and at debug level its flushes and compactions
	// (nil: discarded).
	Logger *slog.Logger
	// OnBatch, when set, is told after every durable write how many commits it carried (group commit) and
	// how long the write took, its fsync included. It runs on the committer's path: it must be quick.
	OnBatch func(commits int, d time.Duration)

	// FS is the file system the store's files live on (nil: the operating system's, vfs.Default). Tests
	// pass one that injects faults (a volume that fills up).
	FS vfs.FS
	// RecoverEvery is how often a store refusing writes checks whether it can take them again (0:
	// DefaultRecoverEvery).
	RecoverEvery time.Duration
	// NoRoomCheck skips the check of free room at Open (RoomToStart), for tools that only read the store,
	// such as verify.
	NoRoomCheck bool

	// segmentSize is the journal's segment size (0: segmentSizeFor the volume); this package's tests make it
	// small.
	segmentSize int64
}

// Store is the embedded port.ItemStore. It is safe for concurrent use.
type Store struct {
	db      *pdb.DB
	lock    *pdb.Lock
	journal *journal // the write-ahead log, written by the caller making a group durable
	memKeys *memKeys // which keys may be in a memtable not yet flushed (the committer's reads)
	max     int
	log     *slog.Logger
	// onBatch is Options.OnBatch (nil: none).
	onBatch func(commits int, d time.Duration)

	mu         sync.Mutex // guards queue, evaluating and closing
	queue      []*request
	evaluating bool           // a caller holds the committer role
	closing    bool           // Close was called: no more commits or checkpoints
	active     sync.WaitGroup // commits not answered yet, checkpoints not done

	// Owned by the caller holding the committer role (handed over under mu).
	inflight   []*group // evaluated, not known to be applied yet; oldest first
	hot        hotCache
	tail       *group             // the last group evaluated: the next one is made durable after it
	reader     *pdb.Iterator      // the committer's reads of the group being evaluated (readDB), memtables included
	durable    *pdb.Iterator      // the same, of the tables only, for keys memKeys says no memtable holds
	inMem      memKeysView        // memKeys when the group's reads began
	txv        txView             // the view of the commit being evaluated, its writes buffer reused from one to the next
	freeWrites []map[string]write // emptied writes maps of applied groups, for the next groups (writesMap)
	sortBuf    []string           // buildBatch's keys, kept for the next group

	viewMu     sync.Mutex // guards view, viewClosed, pending, found and absent
	view       *snapView  // the snapshot after the last durable group
	viewClosed bool
	// pending is the group answered last while its view is not published yet (applyGroup), nil when it is.
	// At most one group is pending: the next is made durable after it. GetMany reads the keys pending wrote
	// from its writes (durable, and answered); a Query of a range it wrote in, and Checkpoint, wait for its
	// view (awaitView: its synced channel).
	pending *group
	found   readCache      // items Get found, as of view
	absent  absentKeys     // keys Get and GetMany found absent, as of view
	snaps   sync.WaitGroup // open snapshots
	// pin is a snapshot older than every view, replaced about every pinEvery (publishView): pebble looks
	// for compactions to run whenever the oldest snapshot is closed, which a view would otherwise be at
	// every group. Owned by the applier. It keeps the versions that the last second of writes overwrote or
	// deleted until its next replacement (on a store that stops writing, its next write).
	pin      *pdb.Snapshot
	pinnedAt time.Time

	// applies hands each answered group to the applier goroutine, which applies it (applyGroup): one
	// goroutine for the store's life, whose stack has grown to what a memtable insert needs, instead of a
	// new one per group. At most one group waits in it (the next is made durable after it is applied).
	applies     chan *group
	applierDone chan struct{}

	failed atomic.Pointer[error] // the storage failure in force; every commit fails with it until recovered
	// unapplied is set when an answered group could not be applied to the memtable (applyGroup): only a
	// restart, which replays it from the journal, recovers from that.
	unapplied atomic.Bool

	fs           vfs.FS
	dir          string
	segSize      int64
	recoverEvery time.Duration
	room         roomState      // writes refused, since when, the last warning
	stop         chan struct{}  // closed by Close: the recovery loop ends
	recoverDone  sync.WaitGroup // the recovery loop (recover.go)
	elog         *engineLogger

	closeOnce sync.Once
	closeErr  error

	// failWrite, set only by this package's tests before use, makes item writes fail.
	failWrite func(port.Key) error
	// beforeSync, set only by this package's tests before use, runs between a group's journal write and its
	// fsync.
	beforeSync func()
	// beforeApply, set only by this package's tests before use, runs when a group is answered, before its
	// batch is applied to the memtable.
	beforeApply func()
	// afterRepair, set only by this package's tests, runs when a recovery has repaired the journal, before
	// commits are taken again.
	afterRepair func()
}

var _ port.ItemStore = (*Store)(nil)

// Open opens or creates the store in directory dir (mode 0700). It refuses (a *NoRoomError, at once) a
// volume with less free room than the store needs to start (RoomToStart).
func Open(dir string, opts Options) (*Store, error) {
	if opts.MaxBatchSize < 0 || opts.LockTimeout < 0 || opts.RecoverEvery < 0 {
		return nil, fmt.Errorf("pebble: open %s: negative option", dir)
	}
	if opts.MaxBatchSize == 0 {
		opts.MaxBatchSize = DefaultMaxBatchSize
	}
	if opts.LockTimeout == 0 {
		opts.LockTimeout = DefaultLockTimeout
	}
	if opts.RecoverEvery == 0 {
		opts.RecoverEvery = DefaultRecoverEvery
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.FS == nil {
		opts.FS = vfs.Default
	}
	fsys := &throttleFS{FS: opts.FS}
	if err := fsys.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("pebble: open %s: %w", dir, mapErr(err))
	}
	segSize := opts.segmentSize
	var usage *vfs.DiskUsage
	if u, err := fsys.GetDiskUsage(dir); err == nil {
		usage = &u
	}
	if segSize <= 0 {
		segSize = segmentSize
		if usage != nil {
			segSize = segmentSizeFor(usage.TotalBytes)
		}
	}
	if need := RoomToStart(segSize); usage != nil && !opts.NoSync && !opts.NoRoomCheck && int64(usage.AvailBytes) < need {
		return nil, &NoRoomError{Dir: dir, Avail: int64(usage.AvailBytes), Need: need, Total: int64(usage.TotalBytes)}
	}
	lock, err := lockDir(fsys, dir, opts.LockTimeout)
	if err != nil {
		return nil, fmt.Errorf("pebble: open %s: %w", dir, err)
	}
	elog := newEngineLogger(opts.Logger)
	po := &pdb.Options{
		FS:                    fsys,
		FormatMajorVersion:    pdb.FormatNewest,
		MemTableSize:          uint64(memTableSize(segSize)),
		CacheSize:             cacheSize(segSize),
		L0CompactionThreshold: l0CompactionThreshold,
		L0StopWritesThreshold: l0StopWritesThreshold,
		Lock:                  lock,
		Logger:                elog,
		// The store writes its own log (journal.go) and pebble none: see Commit in the package doc.
		DisableWAL: true,
	}
	// Bloom filters on every level: most point reads of a commit ask for keys that do not exist yet (the
	// NotExists conditions of new records), and a filter answers them without reading a data block.
	po.Levels[0].FilterPolicy = bloom.FilterPolicy(10)
	// MinLZ at every level. zstd (level 1 in the bottom levels) stored a send in about a fifth less space,
	// but compressing every compaction's output with it cost about a fifth of the server's CPU per send
	// (docs/decisions.md).
	po.ApplyCompressionSettings(func() pdb.DBCompressionSettings { return pdb.DBCompressionFastest })
	db, err := pdb.Open(dir, po)
	if err != nil {
		_ = lock.Close()
		return nil, fmt.Errorf("pebble: open %s: %w", dir, mapErr(err))
	}
	if err := checkFormat(db); err != nil {
		_ = db.Close()
		_ = lock.Close()
		return nil, fmt.Errorf("pebble: open %s: %w", dir, err)
	}
	mk := newMemKeys()
	replayWait := timeout(replayFlushWait)
	j, err := openJournal(dir, journalOptions{fs: fsys, segSize: segSize, reserve: reserveFor(segSize), noSync: opts.NoSync, log: opts.Logger,
		apply: func(repr []byte) error {
			b := db.NewBatch()
			defer b.Close()
			if err := b.SetRepr(slices.Clone(repr)); err != nil {
				return err
			}
			return mk.apply(batchKeys(b), func() error { return db.Apply(b, pdb.NoSync) })
		},
		flush:       func(stop <-chan struct{}) error { return mk.flush(func() error { return flushUntil(db, stop) }) },
		replayFlush: replayWait})
	if err != nil {
		if errors.Is(err, errFlushAbandoned) {
			// The replayed journal could not be flushed in time: the volume is too full for the tables. The
			// database is left open (closing it waits for the flush pebble keeps retrying); the caller exits.
			avail := int64(-1)
			if u, uerr := fsys.GetDiskUsage(dir); uerr == nil {
				avail = int64(u.AvailBytes)
			}
			return nil, &NoRoomError{Dir: dir, Avail: avail, Need: RoomToStart(segSize), Replay: true}
		}
		_ = db.Close()
		_ = lock.Close()
		return nil, fmt.Errorf("pebble: open %s: %w", dir, err)
	}
	s := &Store{db: db, lock: lock, journal: j, memKeys: mk, max: opts.MaxBatchSize, log: opts.Logger, hot: make(hotCache),
		found: make(readCache), absent: make(absentKeys), onBatch: opts.OnBatch, fs: fsys, dir: dir, segSize: segSize, recoverEvery: opts.RecoverEvery,
		stop: make(chan struct{}), elog: elog}
	s.pin, s.pinnedAt = db.NewSnapshot(), time.Now()
	s.snaps.Add(1)
	s.view = &snapView{snap: db.NewSnapshot(), refs: 1}
	s.startApplier()
	s.startRecovery()
	return s, nil
}

// lockDir takes the directory lock, retrying while another process or Store holds it, up to timeout.
func lockDir(fsys vfs.FS, dir string, timeout time.Duration) (*pdb.Lock, error) {
	deadline := time.Now().Add(timeout)
	for wait := 5 * time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		lock, err := pdb.LockDirectory(dir, fsys)
		if err == nil {
			return lock, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%w: directory locked by another process or store (waited %v): %w",
				port.ErrUnavailable, timeout, err)
		}
		time.Sleep(wait)
	}
}

// checkFormat checks the store's layout record, writing it into a store that holds nothing yet.
func checkFormat(db *pdb.DB) error {
	v, closer, err := db.Get(metaFormat)
	switch {
	case err == nil:
		defer closer.Close()
		if string(v) != Format {
			return fmt.Errorf("%w %q (this build reads %q)", ErrFormat, v, Format)
		}
		return nil
	case !errors.Is(err, pdb.ErrNotFound):
		return mapErr(err)
	}
	it, err := db.NewIter(nil)
	if err != nil {
		return mapErr(err)
	}
	nonEmpty := it.First()
	if err := it.Close(); err != nil {
		return mapErr(err)
	}
	if nonEmpty {
		return fmt.Errorf("%w: items without a format record", ErrFormat)
	}
	if err := db.Set(metaFormat, []byte(Format), pdb.NoSync); err != nil {
		return mapErr(err)
	}
	return mapErr(db.Flush()) // the record is written before the journal exists: a flush makes it durable
}

// Checkpoint writes a consistent copy of the store into dir (which must not exist), while the store keeps
// serving: every commit answered before the call is in it, each commit whole, and the commits in it are a
// prefix of the store's (a flush during the call may add groups answered meanwhile). Its files are hard
// links to the store's immutable tables where the file system allows, so it is quick and small; Open reads
// it as a store of its own. dir must be on the same file system for the links, anywhere otherwise.
func (s *Store) Checkpoint(dir string) error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return fmt.Errorf("pebble: checkpoint into %s: %w", dir, ErrClosed)
	}
	s.active.Add(1) // Close waits for it before closing the database
	s.mu.Unlock()
	defer s.active.Done()
	s.viewMu.Lock()
	s.awaitView() // every commit answered so far is applied
	s.viewMu.Unlock()
	// Every commit answered so far is in the memtable or the tables; the flush puts all of it in the tables,
	// which is what a checkpoint copies (it has no journal).
	// A volume too full for the tables gives the flush up rather than waiting for room for ever.
	if err := flushUntil(s.db, timeout(replayFlushWait)); err != nil {
		return fmt.Errorf("pebble: checkpoint into %s: %w", dir, mapErr(err))
	}
	if err := s.db.Checkpoint(dir); err != nil {
		return fmt.Errorf("pebble: checkpoint into %s: %w", dir, err)
	}
	return nil
}

// Close stops accepting commits and checkpoints, waits for the queued commits to be answered, for running
// checkpoints and for running reads, and closes the database. Later calls return nil; other operations on a
// closed store fail with ErrClosed.
func (s *Store) Close() error { return s.close(true) }

// close is Close; with clean false it leaves the journal as a killed process would, unflushed (tests).
func (s *Store) close(clean bool) error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closing = true
		s.mu.Unlock()
		close(s.stop)
		s.recoverDone.Wait()
		s.active.Wait()
		close(s.applies) // every answered group is applied
		<-s.applierDone
		// A store refusing writes leaves its journal to the next Open, as a killed process would: the
		// flush of a clean close needs room the volume may not have.
		clean = clean && s.failure() == nil
		s.viewMu.Lock()
		s.viewClosed = true
		cur := s.view
		s.view = nil
		s.viewMu.Unlock()
		s.release(cur)
		s.snaps.Wait()
		_ = s.pin.Close()
		err := s.journal.close(clean)
		cerr := s.db.Close()
		if cerr != nil && errors.Is(cerr, syscall.ENOSPC) {
			// pebble closes its write-ahead log, which the store disables and which holds nothing, by
			// writing its last block: on a full volume that fails, and nothing is lost (the journal holds
			// every commit the tables do not).
			s.log.Warn("item store: closing on a full volume", "dir", s.dir, "err", cerr)
			cerr = nil
		}
		if err == nil {
			err = cerr
		}
		if lerr := s.lock.Close(); err == nil {
			err = lerr
		}
		if err != nil {
			s.closeErr = fmt.Errorf("pebble: close: %w", mapErr(err))
		}
	})
	return s.closeErr
}

// MaxOps returns MaxOps.
func (s *Store) MaxOps() int { return MaxOps }

// ReservesSequences is false: a transaction allocates its sequence values inside its commit.
func (s *Store) ReservesSequences() bool { return false }

// Get reads one item as of the last durable commit (GetMany of one key).
func (s *Store) Get(ctx context.Context, key port.Key) (port.Item, bool, error) {
	items, found, err := s.getMany(ctx, []port.Key{key})
	if err != nil {
		return port.Item{}, false, fmt.Errorf("pebble: get: %w", err) // a failed read names its key
	}
	return items[0], found[0], nil
}

// GetMany reads keys as of the last durable commit, as Get reads each: the cached items from the read
// cache, the keys known absent (absentKeys) from that set, the others through one iterator over the current view, a prefix seek per key instead of a point
// lookup that builds its iterator stack every time (most keys an operation checks in bulk are absent, and
// the Bloom filters answer those).
func (s *Store) GetMany(ctx context.Context, keys []port.Key) ([]port.Item, []bool, error) {
	items, found, err := s.getMany(ctx, keys)
	if err != nil {
		return nil, nil, fmt.Errorf("pebble: get many: %w", err)
	}
	return items, found, nil
}

func (s *Store) getMany(ctx context.Context, keys []port.Key) ([]port.Item, []bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	encoded := make([][]byte, len(keys))
	for i, k := range keys {
		if err := kv.ValidateKey(k); err != nil {
			return nil, nil, err
		}
		encoded[i] = encodeKey(k)
	}
	items, found := make([]port.Item, len(keys)), make([]bool, len(keys))
	var miss []int
	s.viewMu.Lock()
	if s.viewClosed {
		s.viewMu.Unlock()
		return nil, nil, ErrClosed
	}
	for i := range keys {
		if w, ok := s.pendingWrite(string(encoded[i])); ok {
			if !w.del {
				items[i], found[i] = cachedItem(w.item).share(), true
			}
		} else if it, ok := s.found[string(encoded[i])]; ok {
			items[i], found[i] = it.share(), true
		} else if !s.absent.has(string(encoded[i])) {
			miss = append(miss, i)
		}
	}
	if len(miss) == 0 {
		s.viewMu.Unlock()
		return items, found, nil
	}
	v := s.view
	v.refs++
	s.viewMu.Unlock()
	defer s.release(v)
	// One key: a point lookup. More: one iterator and a prefix seek each, which costs about twice a point
	// lookup to set up and a third of one per key after that.
	lookup := func(i int) (port.Item, bool, error) { return getKey(v.snap, keys[i], encoded[i]) }
	if len(miss) > 1 {
		iter, err := v.snap.NewIter(&pdb.IterOptions{UseL6Filters: true}) // see readDB
		if err != nil {
			return nil, nil, mapErr(err)
		}
		defer iter.Close()
		lookup = func(i int) (port.Item, bool, error) {
			val, ok, err := seekValue(iter, encoded[i])
			if !ok || err != nil {
				return port.Item{}, false, err
			}
			it, err := decodeValue(keys[i], val)
			return it, err == nil, err
		}
	}
	var read, none []int // the positions found in the database, and those absent from it
	for _, i := range miss {
		it, ok, err := lookup(i)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", keys[i], err)
		}
		if ok {
			items[i], found[i] = it, true
			read = append(read, i)
		} else {
			none = append(none, i)
		}
	}
	s.viewMu.Lock()
	if s.view == v { // no group became durable since the read: it is the current state
		for _, i := range read {
			s.found.add(string(encoded[i]), items[i])
		}
		for _, i := range none { // mostly keys whose NotExists conditions are about to be checked (absentKeys)
			s.absent.add(string(encoded[i]))
		}
	}
	s.viewMu.Unlock()
	for _, i := range read {
		items[i] = cachedItem(items[i]).share() // the cache keeps the decoded item; the caller gets a copy
	}
	return items, found, nil
}

// readCacheMax bounds the items Get and GetMany keep.
const readCacheMax = 4096

// readCache holds items Get found, by encoded key, as of the durable view: publishView applies every group's
// writes to the keys it holds when it publishes the group's view, so a hit is what a read of the view would
// return. The items that authentication and most operations read (actors, tokens, consumers, spaces) are
// read from the database once while they stay unchanged. Only items found are kept: absent keys are mostly
// keys about to be written. The callers of Get and GetMany get copies.
type readCache map[string]cachedItem

// cachedItem is an item Get or GetMany found.
type cachedItem port.Item

// share returns a copy of the item for a caller of Get, who may change it.
func (c cachedItem) share() port.Item {
	it := port.Item(c)
	it.Attrs = maps.Clone(it.Attrs)
	it.Data = slices.Clone(it.Data)
	return it
}

// add keeps an item, emptying the cache when it is full.
func (c readCache) add(key string, it port.Item) {
	if _, ok := c[key]; !ok && len(c) >= readCacheMax {
		clear(c)
	}
	c[key] = cachedItem(it)
}

// apply brings the cached items a durable group wrote up to date.
func (c readCache) apply(writes map[string]write) {
	if len(c) == 0 {
		return
	}
	for k, w := range writes {
		if _, ok := c[k]; !ok {
			continue
		}
		if w.del {
			delete(c, k)
			continue
		}
		c[k] = cachedItem(w.item)
	}
}

// absentMax bounds the keys absentKeys holds.
const absentMax = 4096

// absentKeys holds keys Get and GetMany found absent, by encoded key, as of the durable view: publishView
// removes every key a group wrote when it publishes the group's view, so a key held is absent from the
// view. An operation that reads keys it then commits with NotExists conditions (the idempotency record of
// every write, inbox.ack's receipts) has the committer answer those conditions from here (txView.Get)
// instead of seeking each key again in the tables.
type absentKeys map[string]struct{}

// add keeps a key, emptying the set when it is full.
func (a absentKeys) add(key string) {
	if len(a) >= absentMax {
		clear(a)
	}
	a[key] = struct{}{}
}

// has reports whether key is known absent.
func (a absentKeys) has(key string) bool {
	_, ok := a[key]
	return ok
}

// apply forgets the keys a durable group wrote or deleted.
func (a absentKeys) apply(writes map[string]write) {
	if len(a) == 0 {
		return
	}
	if len(a) < len(writes) {
		for k := range a {
			if _, ok := writes[k]; ok {
				delete(a, k)
			}
		}
		return
	}
	for k := range writes {
		delete(a, k)
	}
}

// Query reads one partition within q's bounds in ascending sort-key order, as of the last durable commit.
func (s *Store) Query(ctx context.Context, q port.Query) ([]port.Item, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("pebble: query: %w", err)
	}
	v, err := s.acquire(q)
	if err != nil {
		return nil, fmt.Errorf("pebble: query: %w", err)
	}
	defer s.release(v)
	items, err := kv.Query(ctx, ranger{v.snap}, q)
	if err != nil {
		return nil, fmt.Errorf("pebble: %w", err)
	}
	return items, nil
}

// DropSequence removes nothing: the counter is an ordinary item and every slot a visible one.
func (s *Store) DropSequence(context.Context, port.Sequence, int) (int, error) { return 0, nil }

// Head returns the visible head of a sequence as of the last durable commit: its counter, which kv.Commit
// allocates inside the transaction that writes the slots (see kv.Head), read as GetMany reads.
func (s *Store) Head(ctx context.Context, seq port.Sequence) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("pebble: head: %w", err)
	}
	items, found, err := s.getMany(ctx, []port.Key{seq.Counter})
	if err != nil {
		return 0, fmt.Errorf("pebble: head: read counter %s: %w", seq.Counter, err)
	}
	n, err := kv.CounterValue(items[0], found[0])
	if err != nil {
		return 0, fmt.Errorf("pebble: head: %w", err)
	}
	return n, nil
}

// Commit applies tx all or nothing and returns once it is durable (see the package documentation).
func (s *Store) Commit(ctx context.Context, tx port.Tx) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("pebble: commit: %w", err)
	}
	if err := s.failure(); err != nil {
		return 0, fmt.Errorf("pebble: commit: %w", err) // refused at once while writes are refused
	}
	r := &request{ctx: ctx, tx: tx, done: make(chan struct{}), promote: make(chan struct{})}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return 0, fmt.Errorf("pebble: commit: %w", ErrClosed)
	}
	s.active.Add(1)
	s.queue = append(s.queue, r)
	if s.evaluating {
		s.mu.Unlock()
		select {
		case <-r.done:
			return r.result()
		case <-r.promote: // the committer role is ours, and r heads the queue
			s.mu.Lock()
		}
	}
	s.lead()
	<-r.done
	return r.result()
}

// result returns the outcome the group left in r, re-raising a panic of its Build.
func (r *request) result() (uint64, error) {
	switch {
	case r.panicked != nil:
		panic(r.panicked)
	case r.err == nil:
		return r.first, nil
	}
	if _, ok := port.FailedOp(r.err); ok {
		return 0, r.err
	}
	return 0, fmt.Errorf("pebble: commit: %w", r.err)
}

// failure returns the store's storage failure, nil while there is none.
func (s *Store) failure() error {
	if p := s.failed.Load(); p != nil {
		return *p
	}
	return nil
}

// fail records a storage failure, refusing every commit until the store recovers from it (recover.go), and
// returns the failure in force.
func (s *Store) fail(err error) error {
	err = fmt.Errorf("%w: a durable write failed; they are refused until the store recovers (room on the volume of %s): %w",
		port.ErrWritesRefused, s.dir, err)
	if s.failed.CompareAndSwap(nil, &err) {
		s.refused(err)
	}
	return s.failure()
}

// mapErr classifies pebble and file-system errors: transient storage failures wrap port.ErrUnavailable, a
// closed database wraps ErrClosed, anything else is returned as is.
func mapErr(err error) error {
	if err == nil {
		return nil // before the targets of errors.As below, which escape: most calls pass nil (readDB's misses)
	}
	var (
		errno syscall.Errno
		perr  *fs.PathError
	)
	switch {
	case errors.Is(err, pdb.ErrClosed):
		return fmt.Errorf("%w: %w", ErrClosed, err)
	case errors.Is(err, port.ErrUnavailable), errors.Is(err, ErrClosed):
		return err
	case errors.As(err, &errno), errors.As(err, &perr):
		return fmt.Errorf("%w: %w", port.ErrUnavailable, err)
	}
	return err
}

// snapView is a snapshot shared by readers; it is closed when the last of them and the store let go.
type snapView struct {
	snap *pdb.Snapshot
	refs int // guarded by Store.viewMu
}

// acquire returns the current durable view for q, referenced until release: the view after every answered
// group (awaitView) when the pending group wrote within q's range, else the last one published, which holds
// the same items there.
func (s *Store) acquire(q port.Query) (*snapView, error) {
	s.viewMu.Lock()
	defer s.viewMu.Unlock()
	if s.pendingWrote(q) {
		s.awaitView()
	}
	if s.viewClosed {
		return nil, ErrClosed
	}
	s.view.refs++
	return s.view, nil
}

func (s *Store) release(v *snapView) {
	s.viewMu.Lock()
	v.refs--
	last := v.refs == 0
	s.viewMu.Unlock()
	if last {
		_ = v.snap.Close()
		s.snaps.Done()
	}
}

// publishView makes a snapshot of the database as it is now, after the group that wrote writes, the view of
// later reads, and lets the reads waiting for it go on.
func (s *Store) publishView(writes map[string]write) {
	if time.Since(s.pinnedAt) >= pinEvery {
		old := s.pin
		s.pin, s.pinnedAt = s.db.NewSnapshot(), time.Now()
		_ = old.Close()
	}
	s.snaps.Add(1)
	next := &snapView{snap: s.db.NewSnapshot(), refs: 1}
	s.viewMu.Lock()
	old := s.view
	s.view = next
	s.found.apply(writes)
	s.absent.apply(writes)
	s.endPending()
	s.viewMu.Unlock()
	s.release(old)
}

// pinEvery is how often publishView replaces the pinned snapshot (Store.pin).
const pinEvery = time.Second

// endPending marks the pending group's view published (or given up), with viewMu held: later reads use the
// view, and nothing reads the group's writes any more, which the committer may then reuse once the group is
// finished (finish, which also lets the reads waiting for it go on).
func (s *Store) endPending() { s.pending = nil }

// pendingWrite returns the pending group's write of the encoded key, with viewMu held.
func (s *Store) pendingWrite(key string) (write, bool) {
	if s.pending == nil {
		return write{}, false
	}
	w, ok := s.pending.writes[key]
	return w, ok
}

// pendingWrote reports whether the pending group wrote within q's range (its partition, between After and
// UpTo), with viewMu held.
func (s *Store) pendingWrote(q port.Query) bool {
	if s.pending == nil {
		return false
	}
	prefix := string(encodeKey(port.Key{PK: q.PK}))
	for k := range s.pending.writes {
		if sk, ok := strings.CutPrefix(k, prefix); ok && (q.After == "" || sk > q.After) && (q.UpTo == "" || sk <= q.UpTo) {
			return true
		}
	}
	return false
}

// awaitView waits, with viewMu held (and released while waiting), until the view after every group answered
// so far is published: a group is answered once durable, and applied to the memtable and published just
// after (applyGroup), so a read that starts after a commit's answer reads that commit. A group answered
// while it waits is not waited for: it is concurrent with the read.
func (s *Store) awaitView() {
	if g := s.pending; g != nil {
		s.viewMu.Unlock()
		<-g.synced
		s.viewMu.Lock()
	}
}

// getter is what point reads go through: the database or a snapshot of it.
type getter interface {
	Get(key []byte) ([]byte, io.Closer, error)
}

// getKey reads and decodes one item through r, its key already encoded (ek).
func getKey(r getter, key port.Key, ek []byte) (port.Item, bool, error) {
	val, closer, err := r.Get(ek)
	if errors.Is(err, pdb.ErrNotFound) {
		return port.Item{}, false, nil
	}
	if err != nil {
		return port.Item{}, false, mapErr(err)
	}
	defer closer.Close()
	it, err := decodeValue(key, val)
	if err != nil {
		return port.Item{}, false, err
	}
	return it, true, nil
}

// ranger adapts a snapshot to kv.Ranger.
type ranger struct{ snap *pdb.Snapshot }

func (r ranger) Scan(pk, after string, fn func(port.Item) bool) error {
	prefix := partitionPrefix(pk)
	lower := prefix
	if after != "" {
		lower = append(append(slices.Clip(prefix), after...), 0) // the first key after prefix ‖ after
	}
	iter, err := r.snap.NewIter(&pdb.IterOptions{LowerBound: lower, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return mapErr(err)
	}
	for ok := iter.First(); ok && bytes.HasPrefix(iter.Key(), prefix); ok = iter.Next() {
		val, err := iter.ValueAndErr()
		if err != nil {
			_ = iter.Close()
			return mapErr(err)
		}
		it, err := decodeValue(port.Key{PK: pk, SK: string(iter.Key()[len(prefix):])}, val)
		if err != nil {
			_ = iter.Close()
			return err
		}
		if !fn(it) {
			break
		}
	}
	return mapErr(iter.Close())
}
