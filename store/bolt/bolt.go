// Package bolt is the embedded port.ItemStore on go.etcd.io/bbolt. Transaction semantics come from store/kv,
// shared with the in-memory store; this package adds the on-disk layout, group commit and error mapping.
//
// # Layout
//
// All items live in ONE bucket, "items", under composite keys
//
//	uvarint(len(PK)) ‖ PK ‖ SK
//
// The length prefix is self-delimiting, so the keys of one partition are exactly those that start with
// uvarint(len(PK)) ‖ PK, they are contiguous, and bbolt's byte-wise key order orders them by SK. A partition
// range read is a cursor Seek to prefix ‖ After and a walk while the prefix matches. (One bucket per
// partition would leave an empty bucket behind for every emptied partition and cost a bucket per
// idempotency record; the composite key has neither problem.)
//
// Values are encoded as
//
//	0x01 ‖ uvarint(#attrs) ‖ { uvarint(len(name)) ‖ name ‖ uvarint(len(value)) ‖ value }* ‖ Data
//
// with attributes sorted by name; Data is the rest of the value, so it is binary safe. A bucket "meta"
// records the layout version, checked on Open.
//
// # Commit
//
// Concurrent commits share one write transaction and one fsync (group commit without a timer, see
// groupCommitter): commits that arrive while a batch is syncing form the next batch. A transaction that
// fails for its own reasons (condition, counter exhausted, invalid, Build error) writes nothing and keeps
// its own error; one that fails after writing (a failed bbolt write) makes the batch roll back, and every
// commit of that batch then runs alone. A commit function may therefore run more than once; it resets its
// results each time, and Build may be called more than once (the port allows it).
//
// fsync is on unless Options.NoSync is set (tests only). I/O failures of the file system and a full database
// are reported wrapping port.ErrUnavailable; a closed store reports ErrClosed.
package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"syscall"
	"time"

	bbolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/store/kv"
)

// MaxOps is the largest number of actions (counter included) in one transaction. It is larger than
// DynamoDB's 100; the domain must not rely on more than that.
const MaxOps = 1000

// Defaults for Options.
const (
	// DefaultMaxBatchSize is the default Options.MaxBatchSize (bbolt's own default).
	DefaultMaxBatchSize = 1000
	// DefaultLockTimeout is the default Options.LockTimeout.
	DefaultLockTimeout = 5 * time.Second
)

// ErrClosed reports use of a closed store.
var ErrClosed = errors.New("store closed")

var (
	bucketItems = []byte("items")
	bucketMeta  = []byte("meta")
	metaFormat  = []byte("format")
	formatV1    = []byte("waypost-items-1")
)

const valueV1 = 0x01

// Options configure Open. The zero value is the production setting: fsync on, default batching.
type Options struct {
	// NoSync skips fsync on commit. Only for tests that explicitly opt out of durability.
	NoSync bool
	// MaxBatchSize is the most commits grouped into one write transaction (0: DefaultMaxBatchSize).
	MaxBatchSize int
	// LockTimeout is how long Open waits for the file lock held by another process or Store
	// (0: DefaultLockTimeout).
	LockTimeout time.Duration
}

// Store is the embedded port.ItemStore. It is safe for concurrent use.
type Store struct {
	db    *bbolt.DB
	group *groupCommitter
	// failWrite, set only by this package's tests before use, makes item writes fail.
	failWrite func(port.Key) error
}

var _ port.ItemStore = (*Store)(nil)

// Open opens or creates the database file at path (mode 0600).
func Open(path string, opts Options) (*Store, error) {
	if opts.MaxBatchSize < 0 || opts.LockTimeout < 0 {
		return nil, fmt.Errorf("bolt: open %s: negative option", path)
	}
	if opts.MaxBatchSize == 0 {
		opts.MaxBatchSize = DefaultMaxBatchSize
	}
	if opts.LockTimeout == 0 {
		opts.LockTimeout = DefaultLockTimeout
	}
	// The freelist is rebuilt on open instead of being written with every commit: fewer pages per fsync.
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: opts.LockTimeout, NoSync: opts.NoSync,
		NoFreelistSync: true, FreelistType: bbolt.FreelistMapType})
	if err != nil {
		return nil, fmt.Errorf("bolt: open %s: %w", path, mapErr(err))
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		if _, err := tx.CreateBucketIfNotExists(bucketItems); err != nil {
			return err
		}
		meta, err := tx.CreateBucketIfNotExists(bucketMeta)
		if err != nil {
			return err
		}
		switch v := meta.Get(metaFormat); {
		case v == nil:
			return meta.Put(metaFormat, formatV1)
		case !bytes.Equal(v, formatV1):
			return fmt.Errorf("unknown layout %q", v)
		}
		return nil
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("bolt: open %s: %w", path, mapErr(err))
	}
	return &Store{db: db, group: &groupCommitter{db: db, max: opts.MaxBatchSize}}, nil
}

// Close closes the database, waiting for running transactions. Later calls fail with ErrClosed.
func (s *Store) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("bolt: close: %w", mapErr(err))
	}
	return nil
}

// MaxOps returns MaxOps.
func (s *Store) MaxOps() int { return MaxOps }

// Get reads one item.
func (s *Store) Get(ctx context.Context, key port.Key) (port.Item, bool, error) {
	if err := ctx.Err(); err != nil {
		return port.Item{}, false, fmt.Errorf("bolt: get: %w", err)
	}
	if err := kv.ValidateKey(key); err != nil {
		return port.Item{}, false, fmt.Errorf("bolt: get: %w", err)
	}
	var (
		it    port.Item
		found bool
	)
	err := s.db.View(func(tx *bbolt.Tx) error {
		var err error
		it, found, err = view{b: tx.Bucket(bucketItems)}.Get(key)
		return err
	})
	if err != nil {
		return port.Item{}, false, fmt.Errorf("bolt: get %s: %w", key, mapErr(err))
	}
	return it, found, nil
}

// Query reads one partition within q's bounds in ascending sort-key order.
func (s *Store) Query(ctx context.Context, q port.Query) ([]port.Item, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("bolt: query: %w", err)
	}
	var items []port.Item
	err := s.db.View(func(tx *bbolt.Tx) error {
		var err error
		items, err = kv.Query(ctx, view{b: tx.Bucket(bucketItems)}, q)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("bolt: %w", mapErr(err))
	}
	return items, nil
}

// Commit applies tx all or nothing. Concurrent commits share one fsynced bbolt write transaction (group
// commit, see groupCommitter); each keeps its own outcome.
func (s *Store) Commit(ctx context.Context, tx port.Tx) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("bolt: commit: %w", err)
	}
	var first uint64
	own, storage := s.group.do(func(btx *bbolt.Tx) (bool, error) {
		// The function may run again (when the shared transaction is retried): start afresh.
		first = 0
		v := &view{b: btx.Bucket(bucketItems), failWrite: s.failWrite}
		f, err := kv.Commit(ctx, v, tx, MaxOps)
		if err != nil {
			return v.wrote, err
		}
		first = f
		return v.wrote, nil
	})
	switch {
	case storage != nil:
		return 0, fmt.Errorf("bolt: commit: %w", mapErr(storage))
	case own != nil:
		if _, ok := port.FailedOp(own); ok {
			return 0, own
		}
		return 0, fmt.Errorf("bolt: %w", mapErr(own))
	}
	return first, nil
}

// mapErr classifies bbolt and file-system errors: transient storage failures wrap port.ErrUnavailable, a
// closed database wraps ErrClosed, anything else is returned as is.
func mapErr(err error) error {
	var (
		errno syscall.Errno
		perr  *fs.PathError
	)
	switch {
	case errors.Is(err, berrors.ErrDatabaseNotOpen):
		return fmt.Errorf("%w: %w", ErrClosed, err)
	case errors.Is(err, port.ErrUnavailable):
		return err
	case errors.Is(err, berrors.ErrTimeout), errors.Is(err, berrors.ErrMaxSizeReached),
		errors.As(err, &errno), errors.As(err, &perr):
		return fmt.Errorf("%w: %w", port.ErrUnavailable, err)
	}
	return err
}

// view adapts a bbolt bucket to kv.View and kv.Ranger.
type view struct {
	b         *bbolt.Bucket
	wrote     bool
	failWrite func(port.Key) error
}

func (v view) Get(k port.Key) (port.Item, bool, error) {
	raw := v.b.Get(encodeKey(k))
	if raw == nil {
		return port.Item{}, false, nil
	}
	it, err := decodeValue(k, raw)
	if err != nil {
		return port.Item{}, false, err
	}
	return it, true, nil
}

func (v *view) Put(it port.Item) error {
	v.wrote = true
	if v.failWrite != nil {
		if err := v.failWrite(it.Key); err != nil {
			return err
		}
	}
	return v.b.Put(encodeKey(it.Key), encodeValue(it))
}

func (v *view) Delete(k port.Key) error {
	v.wrote = true
	if v.failWrite != nil {
		if err := v.failWrite(k); err != nil {
			return err
		}
	}
	return v.b.Delete(encodeKey(k))
}

func (v view) Scan(pk, after string, fn func(port.Item) bool) error {
	prefix := partitionPrefix(pk)
	c := v.b.Cursor()
	seek := append(append([]byte(nil), prefix...), after...)
	for k, val := c.Seek(seek); k != nil && bytes.HasPrefix(k, prefix); k, val = c.Next() {
		sk := string(k[len(prefix):])
		if after != "" && sk <= after {
			continue
		}
		it, err := decodeValue(port.Key{PK: pk, SK: sk}, val)
		if err != nil {
			return err
		}
		if !fn(it) {
			return nil
		}
	}
	return nil
}

func partitionPrefix(pk string) []byte {
	b := make([]byte, 0, binary.MaxVarintLen64+len(pk))
	b = binary.AppendUvarint(b, uint64(len(pk)))
	return append(b, pk...)
}

func encodeKey(k port.Key) []byte {
	b := make([]byte, 0, binary.MaxVarintLen64+len(k.PK)+len(k.SK))
	b = binary.AppendUvarint(b, uint64(len(k.PK)))
	b = append(b, k.PK...)
	return append(b, k.SK...)
}

func encodeValue(it port.Item) []byte {
	names := make([]string, 0, len(it.Attrs))
	size := 1 + binary.MaxVarintLen64 + len(it.Data)
	for name, val := range it.Attrs {
		names = append(names, name)
		size += 2*binary.MaxVarintLen64 + len(name) + len(val)
	}
	sort.Strings(names)
	b := make([]byte, 0, size)
	b = append(b, valueV1)
	b = binary.AppendUvarint(b, uint64(len(names)))
	for _, name := range names {
		val := it.Attrs[name]
		b = binary.AppendUvarint(b, uint64(len(name)))
		b = append(b, name...)
		b = binary.AppendUvarint(b, uint64(len(val)))
		b = append(b, val...)
	}
	return append(b, it.Data...)
}

// decodeValue decodes a stored value into a fresh item (it copies out of bbolt's memory map).
func decodeValue(k port.Key, raw []byte) (port.Item, error) {
	bad := func(what string) (port.Item, error) {
		return port.Item{}, fmt.Errorf("%w: %s: %s", kv.ErrCorrupt, k, what)
	}
	if len(raw) == 0 || raw[0] != valueV1 {
		return bad("unknown value version")
	}
	p := raw[1:]
	n, w := binary.Uvarint(p)
	if w <= 0 || n > uint64(len(p)) {
		return bad("attribute count")
	}
	p = p[w:]
	it := port.Item{Key: k}
	if n > 0 {
		it.Attrs = make(map[string]string, n)
	}
	str := func() (string, bool) {
		l, w := binary.Uvarint(p)
		if w <= 0 || l > uint64(len(p)-w) {
			return "", false
		}
		s := string(p[w : w+int(l)])
		p = p[w+int(l):]
		return s, true
	}
	for i := uint64(0); i < n; i++ {
		name, ok1 := str()
		val, ok2 := str()
		if !ok1 || !ok2 {
			return bad("attribute")
		}
		it.Attrs[name] = val
	}
	if len(p) > 0 {
		it.Data = append([]byte(nil), p...)
	}
	return it, nil
}
