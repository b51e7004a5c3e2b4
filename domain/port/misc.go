package port

import (
	"context"
	"time"
)

// Clock tells the service time.
type Clock interface {
	Now() time.Time
}

// IDSource makes new random identifiers and secrets.
type IDSource interface {
	// NewID returns a new random public ID with the given prefix, matching [A-Za-z0-9_-]{1,96}.
	NewID(prefix string) string
	// Random fills b with cryptographically secure random bytes.
	Random(b []byte) error
}

// Published describes one committed feed item, announced after commit.
type Published struct {
	SpaceID    string
	VisibleSeq uint64
	ItemID     string
}

// Notifier announces committed feed items to live waiters. It is best effort: a lost announcement is
// harmless because readers always fall back to the durable feed.
type Notifier interface {
	Notify(ctx context.Context, items []Published)
}

// WatchStatus is the outcome of waiting on a Watch.
type WatchStatus int

const (
	// WatchAnnounced means an announcement arrived.
	WatchAnnounced WatchStatus = iota
	// WatchTimeout means nothing arrived before the timeout.
	WatchTimeout
	// WatchEnded means the watch ended (evicted for backlog, closed); subscribe again to continue.
	WatchEnded
)

// Watch is one live subscription to a space's announcements, owned by one request.
type Watch interface {
	// Next waits up to timeout for the next announcement.
	Next(ctx context.Context, timeout time.Duration) (Published, WatchStatus, error)
	// Close ends the subscription; it is idempotent.
	Close()
}

// FeedWatcher subscribes to the announcements of committed feed items of a space. A subscription made
// before a durable read receives every announcement of items committed after it (seed channel spec).
type FeedWatcher interface {
	Watch(ctx context.Context, spaceID string) (Watch, error)
}
