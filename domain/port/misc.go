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
