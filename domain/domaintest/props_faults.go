package domaintest

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/store/faulty"
)

// propFaults decides which storage calls fail. The zero plan injects nothing. Decisions come from a PRNG
// seeded by the rapid check, so a sequential check sees the same faults when it is replayed.
type propFaults struct {
	mu        sync.Mutex
	rng       *rand.Rand
	pRead     float64 // chance that a Get or Query fails
	pCommit   float64 // chance that a Commit fails
	pLost     float64 // chance that a failing Commit was applied before failing (response lost)
	pPut      float64 // chance that a blob Put fails before storing
	injected  int
	lostCount int
}

// set starts random faults.
func (f *propFaults) set(seed uint64, pRead, pCommit, pLost, pPut float64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rng = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	f.pRead, f.pCommit, f.pLost, f.pPut = pRead, pCommit, pLost, pPut
}

// stop ends random faults.
func (f *propFaults) stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rng = nil
}

func (f *propFaults) roll(p float64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.rng == nil || p <= 0 || f.rng.Float64() >= p {
		return false
	}
	f.injected++
	return true
}

func (f *propFaults) counts() (injected, lost int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.injected, f.lostCount
}

var errPropFault = fmt.Errorf("injected fault: %w", port.ErrUnavailable)

// propFaultyStore is a port.ItemStore that fails calls with port.ErrUnavailable as its plan says: reads fail
// before reading, commits fail either before applying or after applying (the response is lost).
type propFaultyStore struct {
	port.ItemStore
	plan *propFaults
}

func (s propFaultyStore) Get(ctx context.Context, key port.Key) (port.Item, bool, error) {
	if s.plan.roll(s.plan.pRead) {
		return port.Item{}, false, errPropFault
	}
	return s.ItemStore.Get(ctx, key)
}

func (s propFaultyStore) Query(ctx context.Context, q port.Query) ([]port.Item, error) {
	if s.plan.roll(s.plan.pRead) {
		return nil, errPropFault
	}
	return s.ItemStore.Query(ctx, q)
}

func (s propFaultyStore) Commit(ctx context.Context, tx port.Tx) (uint64, error) {
	if !s.plan.roll(s.plan.pCommit) {
		return s.ItemStore.Commit(ctx, tx)
	}
	if s.plan.roll(s.plan.pLost) {
		first, err := s.ItemStore.Commit(ctx, tx)
		if err != nil {
			return first, err
		}
		s.plan.mu.Lock()
		s.plan.lostCount++
		s.plan.mu.Unlock()
		return 0, fmt.Errorf("response lost after commit: %w", errPropFault)
	}
	return 0, errPropFault
}

// propFaultyBlobs is a port.BlobStore whose Puts fail before storing as its plan says.
type propFaultyBlobs struct {
	port.BlobStore
	plan *propFaults
}

func (b propFaultyBlobs) Put(ctx context.Context, key string, size int64, sha256 string, r io.Reader) (port.BlobInfo, error) {
	if b.plan.roll(b.plan.pPut) {
		return port.BlobInfo{}, errPropFault
	}
	return b.BlobStore.Put(ctx, key, size, sha256, r)
}

// withFaultyBlobs wraps the blob store of the backend nb makes with store/faulty, so that a check can fail
// a chosen blob put (*blobs is set when the fixture builds its backend).
func withFaultyBlobs(nb NewBackend, blobs **faulty.BlobStore) NewBackend {
	return func(t testing.TB) Backend {
		b := nb(t)
		*blobs = faulty.NewBlobStore(b.Blobs)
		return Backend{Store: b.Store, Blobs: *blobs}
	}
}

// withPropFaults wraps the backend nb makes with plan.
func withPropFaults(nb NewBackend, plan *propFaults) NewBackend {
	return func(t testing.TB) Backend {
		b := nb(t)
		return Backend{Store: propFaultyStore{ItemStore: b.Store, plan: plan}, Blobs: propFaultyBlobs{BlobStore: b.Blobs, plan: plan}}
	}
}
