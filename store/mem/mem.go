// Package mem is an in-memory port.ItemStore for unit tests. It shares its transaction semantics with the
// embedded store through store/kv and passes the same contract suite (store/storetest).
//
// State is a map of partitions, each a sorted slice of sort keys plus a map of items, behind one RWMutex:
// reads share the lock, a commit holds it exclusively, so transactions are serializable.
package mem

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/store/kv"
)

// MaxOps is the largest number of actions (counter included) in one transaction, as on DynamoDB.
const MaxOps = 100

// Store is an in-memory port.ItemStore. The zero value is not usable; call New. It is safe for concurrent use.
type Store struct {
	mu    sync.RWMutex
	parts map[string]*partition
}

type partition struct {
	sks   []string // ascending
	items map[string]port.Item
}

var _ port.ItemStore = (*Store)(nil)

// New returns an empty store.
func New() *Store {
	return &Store{parts: make(map[string]*partition)}
}

// MaxOps returns MaxOps.
func (s *Store) MaxOps() int { return MaxOps }

// ReservesSequences is false: a transaction allocates its sequence values inside its commit.
func (s *Store) ReservesSequences() bool { return false }

// Get returns a copy of the item at key.
func (s *Store) Get(ctx context.Context, key port.Key) (port.Item, bool, error) {
	if err := ctx.Err(); err != nil {
		return port.Item{}, false, fmt.Errorf("mem: get: %w", err)
	}
	if err := kv.ValidateKey(key); err != nil {
		return port.Item{}, false, fmt.Errorf("mem: get: %w", err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	it, ok, _ := view{s}.Get(key)
	if !ok {
		return port.Item{}, false, nil
	}
	return kv.CloneItem(it), true, nil
}

// GetMany reads each key with Get (kv.GetEach).
func (s *Store) GetMany(ctx context.Context, keys []port.Key) ([]port.Item, []bool, error) {
	return kv.GetEach(ctx, keys, s.Get)
}

// Query returns copies of the items of one partition within q's bounds, in ascending sort-key order.
func (s *Store) Query(ctx context.Context, q port.Query) ([]port.Item, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	items, err := kv.Query(ctx, view{s}, q)
	if err != nil {
		return nil, fmt.Errorf("mem: %w", err)
	}
	return items, nil
}

// DropSequence removes nothing: the counter is an ordinary item and every slot a visible one.
func (s *Store) DropSequence(context.Context, port.Sequence, int) (int, error) { return 0, nil }

// Head returns the visible head of a sequence: its counter, which the store allocates inside the transaction
// that writes the slots (see kv.Head).
func (s *Store) Head(ctx context.Context, seq port.Sequence) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("mem: head: %w", err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	n, err := kv.Head(view{s}, seq)
	if err != nil {
		return 0, fmt.Errorf("mem: %w", err)
	}
	return n, nil
}

// Commit applies tx all or nothing (see store/kv).
func (s *Store) Commit(ctx context.Context, tx port.Tx) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Writes to memory cannot fail, so kv.Commit never leaves partial writes behind.
	first, err := kv.Commit(ctx, view{s}, tx, MaxOps)
	if err != nil {
		if _, ok := port.FailedOp(err); ok {
			return 0, err
		}
		return 0, fmt.Errorf("mem: %w", err)
	}
	return first, nil
}

// view gives kv access to the store's state; the caller holds the lock.
type view struct{ s *Store }

func (v view) Get(k port.Key) (port.Item, bool, error) {
	p := v.s.parts[k.PK]
	if p == nil {
		return port.Item{}, false, nil
	}
	it, ok := p.items[k.SK]
	return it, ok, nil
}

func (v view) Put(it port.Item) error {
	it = kv.CloneItem(it) // the caller's memory (kv.View)
	p := v.s.parts[it.PK]
	if p == nil {
		p = &partition{items: make(map[string]port.Item)}
		v.s.parts[it.PK] = p
	}
	if _, ok := p.items[it.SK]; !ok {
		i := sort.SearchStrings(p.sks, it.SK)
		p.sks = append(p.sks, "")
		copy(p.sks[i+1:], p.sks[i:])
		p.sks[i] = it.SK
	}
	p.items[it.SK] = it
	return nil
}

func (v view) Delete(k port.Key) error {
	p := v.s.parts[k.PK]
	if p == nil {
		return nil
	}
	if _, ok := p.items[k.SK]; !ok {
		return nil
	}
	delete(p.items, k.SK)
	i := sort.SearchStrings(p.sks, k.SK)
	p.sks = append(p.sks[:i], p.sks[i+1:]...)
	if len(p.sks) == 0 {
		delete(v.s.parts, k.PK)
	}
	return nil
}

func (v view) Scan(pk, after string, fn func(port.Item) bool) error {
	p := v.s.parts[pk]
	if p == nil {
		return nil
	}
	i := 0
	if after != "" {
		i = sort.Search(len(p.sks), func(j int) bool { return p.sks[j] > after })
	}
	for ; i < len(p.sks); i++ {
		if !fn(kv.CloneItem(p.items[p.sks[i]])) {
			return nil
		}
	}
	return nil
}
