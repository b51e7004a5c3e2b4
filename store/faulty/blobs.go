package faulty

import (
	"context"
	"io"
	"sync"

	"github.com/waypost/waypost/domain/port"
)

// PutFault is a fault on BlobStore.Put.
type PutFault struct {
	Fault
	// After stores the object and then returns the error. Otherwise the put fails before the body is read
	// and nothing is stored.
	After bool
	// Match, when set, restricts the fault to the keys it accepts.
	Match func(key string) bool
}

// KeyFault is a fault on BlobStore.Head, Get or Delete.
type KeyFault struct {
	Fault
	// Match, when set, restricts the fault to the keys it accepts.
	Match func(key string) bool
}

// BlobStore wraps a port.BlobStore with armable faults. It is safe for concurrent use.
type BlobStore struct {
	inner   port.BlobStore
	puts    registry[PutFault]
	heads   registry[KeyFault]
	gets    registry[KeyFault]
	deletes registry[KeyFault]

	mu        sync.Mutex
	beforePut func(key string)
	random    *Random
	intercept func(ctx context.Context, key string, size int64, sha256 string, r io.Reader, next PutStep) (port.BlobInfo, error)
}

// PutStep is what a Put does after interception: the armed faults, then the inner store.
type PutStep func(ctx context.Context, key string, size int64, sha256 string, r io.Reader) (port.BlobInfo, error)

// SetInterceptPut installs fn (nil removes it): every Put, after the BeforePut hook and the random faults,
// goes through fn, which decides as SetInterceptCommit's does.
func (s *BlobStore) SetInterceptPut(fn func(ctx context.Context, key string, size int64, sha256 string, r io.Reader, next PutStep) (port.BlobInfo, error)) {
	s.mu.Lock()
	s.intercept = fn
	s.mu.Unlock()
}

var _ port.BlobStore = (*BlobStore)(nil)

// NewBlobStore wraps inner; with no fault armed it behaves exactly like inner.
func NewBlobStore(inner port.BlobStore) *BlobStore { return &BlobStore{inner: inner} }

// Inner returns the wrapped store.
func (s *BlobStore) Inner() port.BlobStore { return s.inner }

// FailPut arms a Put fault.
func (s *BlobStore) FailPut(f PutFault) *Armed { return s.puts.add(f.Fault, f) }

// FailHead arms a Head fault.
func (s *BlobStore) FailHead(f KeyFault) *Armed { return s.heads.add(f.Fault, f) }

// FailGet arms a Get fault.
func (s *BlobStore) FailGet(f KeyFault) *Armed { return s.gets.add(f.Fault, f) }

// FailDelete arms a Delete fault (the object is not deleted).
func (s *BlobStore) FailDelete(f KeyFault) *Armed { return s.deletes.add(f.Fault, f) }

// SetBeforePut installs fn (nil removes it), called at the start of every Put, before any fault and before
// the body is read, so a test can place an operation between another's read and its blob write.
func (s *BlobStore) SetBeforePut(fn func(key string)) {
	s.mu.Lock()
	s.beforePut = fn
	s.mu.Unlock()
}

// SetRandom makes r inject random faults into Put (nil: none).
func (s *BlobStore) SetRandom(r *Random) {
	s.mu.Lock()
	s.random = r
	s.mu.Unlock()
}

// Reset disarms every fault and removes the hook and the random faults.
func (s *BlobStore) Reset() {
	s.puts.reset()
	s.heads.reset()
	s.gets.reset()
	s.deletes.reset()
	s.mu.Lock()
	s.beforePut, s.random, s.intercept = nil, nil, nil
	s.mu.Unlock()
}

// fireKey fires the first armed key fault that accepts key.
func fireKey(faults *registry[KeyFault], key, what string) error {
	return fire(faults.snapshot(), func(f KeyFault) bool { return matches(f.Match, key) }, what+" "+key)
}

// Put runs the BeforePut hook, then stores through the inner store, injecting an armed fault before or after
// storing (or a random one before).
func (s *BlobStore) Put(ctx context.Context, key string, size int64, sha256 string, r io.Reader) (port.BlobInfo, error) {
	s.mu.Lock()
	hook, random, intercept := s.beforePut, s.random, s.intercept
	s.mu.Unlock()
	if hook != nil {
		hook(key)
	}
	if random.roll(planPut) {
		return port.BlobInfo{}, randomErr("blob put before storing " + key)
	}
	if intercept != nil {
		return intercept(ctx, key, size, sha256, r, s.put)
	}
	return s.put(ctx, key, size, sha256, r)
}

// put stores through the inner store, injecting an armed fault before or after storing.
func (s *BlobStore) put(ctx context.Context, key string, size int64, sha256 string, r io.Reader) (port.BlobInfo, error) {
	faults := s.puts.snapshot()
	if err := fire(faults, func(f PutFault) bool { return !f.After && matches(f.Match, key) }, "blob put before storing "+key); err != nil {
		return port.BlobInfo{}, err
	}
	info, err := s.inner.Put(ctx, key, size, sha256, r)
	if err != nil {
		return info, err
	}
	if err := fire(faults, func(f PutFault) bool { return f.After && matches(f.Match, key) }, "blob put stored, response lost "+key); err != nil {
		return port.BlobInfo{}, err
	}
	return info, nil
}

// Head reads through the inner store unless a Head fault fires.
func (s *BlobStore) Head(ctx context.Context, key string) (port.BlobInfo, error) {
	if err := fireKey(&s.heads, key, "blob head"); err != nil {
		return port.BlobInfo{}, err
	}
	return s.inner.Head(ctx, key)
}

// Get reads through the inner store unless a Get fault fires.
func (s *BlobStore) Get(ctx context.Context, key string) (io.ReadCloser, port.BlobInfo, error) {
	if err := fireKey(&s.gets, key, "blob get"); err != nil {
		return nil, port.BlobInfo{}, err
	}
	return s.inner.Get(ctx, key)
}

// Delete deletes through the inner store unless a Delete fault fires.
func (s *BlobStore) Delete(ctx context.Context, key string) error {
	if err := fireKey(&s.deletes, key, "blob delete"); err != nil {
		return err
	}
	return s.inner.Delete(ctx, key)
}
