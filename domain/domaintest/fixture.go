// Package domaintest provides a fixture for tests of the domain through its public operations: a service
// over any storage adapter, and helpers that create spaces, actors, consumers and tokens. The property
// suites of SUPPLEMENT §15 are written on it and run against every adapter.
package domaintest

import (
	"context"
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

// Fixture is a service plus helpers.
type Fixture struct {
	T       testing.TB
	Svc     *domain.Service
	Backend Backend
	Clock   *Clock
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
	return &Fixture{T: t, Svc: svc, Backend: b, Clock: clock}
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

// Space creates a space.
func (f *Fixture) Space() domain.SpaceResult {
	f.T.Helper()
	return Must[domain.SpaceResult](f.T)(f.Svc.CreateSpace(context.Background(), domain.CreateSpaceRequest{RequestID: f.RID("sp")}))
}

// Actor creates an actor.
func (f *Fixture) Actor(space string) string {
	f.T.Helper()
	return Must[domain.ActorResult](f.T)(f.Svc.CreateActor(context.Background(), space, domain.CreateActorRequest{RequestID: f.RID("act")})).ActorID
}

// Consumer creates a consumer.
func (f *Fixture) Consumer(space, actor string, view domain.View, filter *domain.Filter) string {
	f.T.Helper()
	return Must[domain.ConsumerResult](f.T)(f.Svc.CreateConsumer(context.Background(), space, domain.CreateConsumerRequest{
		RequestID: f.RID("con"), ActorID: actor, View: view, Filter: filter})).ConsumerID
}

// AllScopes is every scope, for tokens that should be allowed everything.
var AllScopes = domain.AllScopes

// Token creates a token and returns its secret and ID.
func (f *Fixture) Token(space, actor, consumer string, scopes ...domain.Scope) (secret, id string) {
	f.T.Helper()
	if len(scopes) == 0 {
		scopes = domain.AllScopes()
	}
	r := Must[domain.TokenResult](f.T)(f.Svc.CreateToken(context.Background(), space, domain.CreateTokenRequest{
		RequestID: f.RID("tok"), ActorID: actor, ConsumerID: consumer, Scopes: scopes}))
	return r.Token, r.TokenID
}

// Principal authenticates a token.
func (f *Fixture) Principal(token string) *domain.Principal {
	f.T.Helper()
	return Must[*domain.Principal](f.T)(f.Svc.Authenticate(context.Background(), token))
}

// Party is an actor with a consumer and an all-scopes token, authenticated.
type Party struct {
	ActorID    string
	ConsumerID string
	Token      string
	TokenID    string
	P          *domain.Principal
}

// Party creates an actor with one inbox consumer and a token.
func (f *Fixture) Party(space string) Party {
	f.T.Helper()
	a := f.Actor(space)
	c := f.Consumer(space, a, domain.ViewInbox, nil)
	tok, id := f.Token(space, a, "")
	return Party{ActorID: a, ConsumerID: c, Token: tok, TokenID: id, P: f.Principal(tok)}
}

// Send sends a text message to recipients and fails the test on error.
func (f *Fixture) Send(p *domain.Principal, text string, to ...string) domain.SendResult {
	f.T.Helper()
	return Must[domain.SendResult](f.T)(f.Svc.SendMessage(context.Background(), p, domain.SendRequest{
		RequestID: f.RID("send"), RecipientIDs: to, Subject: "s", Body: &domain.MessageBody{Text: text}}))
}

// ReadAll reads a consumer's feed from cursor to the end, page by page.
func (f *Fixture) ReadAll(p *domain.Principal, consumer string, cursor *string, limit int) ([]domain.FeedItem, string) {
	f.T.Helper()
	var all []domain.FeedItem
	for {
		page := Must[domain.Page](f.T)(f.Svc.ReadInbox(context.Background(), p, domain.ReadRequest{ConsumerID: consumer, Cursor: cursor, Limit: limit}))
		all = append(all, page.Items...)
		c := page.NextCursor
		cursor = &c
		if !page.HasMore {
			return all, c
		}
	}
}
