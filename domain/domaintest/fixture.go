// Package domaintest provides a fixture for tests of the domain through its public operations: a service
// over any storage adapter, and helpers that create spaces, actors, consumers and tokens. The property
// suites of SUPPLEMENT §15 are written on it and run against every adapter.
package domaintest

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/internal/platform"
)

// Backend is one storage adapter pair under test.
type Backend struct {
	Store port.ItemStore
	Blobs port.BlobStore
}

// NewBackend makes a fresh, empty backend for one test.
type NewBackend func(t testing.TB) Backend

// Clock is a settable test clock, safe for concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock at a fixed instant.
func NewClock() *Clock { return &Clock{now: time.Date(2026, 10, 11, 10, 0, 0, 0, time.UTC)} }

// Now returns the current test time.
func (c *Clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

// Advance moves the clock forward.
func (c *Clock) Advance(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

// Fixture is a service plus helpers: the operations of its Client, which fails the fixture's test.
type Fixture struct {
	*Client
	T       testing.TB
	Svc     *domain.Service
	Backend Backend
	Clock   *Clock
	cfg     domain.Config
	seq     atomic.Int64
}

// New builds a fixture on a fresh backend. cfg may adjust the service config (nil for defaults).
func New(t testing.TB, nb NewBackend, cfg func(*domain.Config)) *Fixture {
	t.Helper()
	b := nb(t)
	clock := NewClock()
	c := domain.Config{Store: b.Store, Blobs: b.Blobs, Clock: clock, IDs: platform.IDs{},
		CursorKey: []byte("0123456789abcdef0123456789abcdef-test-key")}
	if cfg != nil {
		cfg(&c)
	}
	svc, err := domain.New(c)
	if err != nil {
		t.Fatalf("domain.New: %v", err)
	}
	f := &Fixture{T: t, Svc: svc, Backend: b, Clock: clock, cfg: c}
	f.Client = f.With(t)
	return f
}

// OtherProcess returns a second service with the fixture's config over the same backend and clock: another
// process (a Lambda instance) with caches of its own.
func (f *Fixture) OtherProcess() *domain.Service {
	f.T.Helper()
	svc, err := domain.New(f.cfg)
	if err != nil {
		f.T.Fatalf("domain.New: %v", err)
	}
	return svc
}

// RID returns a fresh request ID.
func (f *Fixture) RID(prefix string) string { return fmt.Sprintf("%s-%d", prefix, f.seq.Add(1)) }

// Must returns a function that fails the test on err and returns v: Must[T](t)(call()).
func Must[T any](t testing.TB) func(v T, err error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return v
	}
}

// AllScopes is every scope, for tokens that should be allowed everything.
var AllScopes = domain.AllScopes

// Party is an actor with a consumer and an all-scopes token, authenticated.
type Party struct {
	ActorID    string
	ConsumerID string
	Token      string
	TokenID    string
	P          *domain.Principal
}
