package livefeed

import (
	"context"
	"math"
	"time"

	"github.com/waypost/waypost/domain/port"
)

// DefaultFallbackInterval is Fallback's interval when none is given.
const DefaultFallbackInterval = 2 * time.Second

// Fallback is a port.FeedWatcher over another one (the channel service's live hubs) whose watches also wake
// when Interval passes without an announcement, saying "something may have committed" (as Poller does):
// feed.wait then re-reads the durable feed at least that often. Announcements are best effort — a
// committer whose circuit breaker is open skips them (Remote), a restarted channel service missed those
// made before — so without it such an item would only be returned at the wait's timeout; with it, within
// Interval.
type Fallback struct {
	Watcher port.FeedWatcher
	// Interval between re-reads without announcements; 0 means DefaultFallbackInterval.
	Interval time.Duration
}

// Watch subscribes through the wrapped watcher.
func (f Fallback) Watch(ctx context.Context, spaceID string) (port.Watch, error) {
	w, err := f.Watcher.Watch(ctx, spaceID)
	if err != nil {
		return nil, err
	}
	iv := f.Interval
	if iv <= 0 {
		iv = DefaultFallbackInterval
	}
	return &fallbackWatch{Watch: w, interval: iv}, nil
}

type fallbackWatch struct {
	port.Watch
	interval time.Duration
}

// Next waits for the next announcement, at most the interval: when the interval passes first (and the
// timeout does not), it announces a sequence above any position, so the waiter reads the durable feed again.
func (w *fallbackWatch) Next(ctx context.Context, timeout time.Duration) (port.Published, port.WatchStatus, error) {
	if timeout <= w.interval {
		return w.Watch.Next(ctx, timeout)
	}
	p, st, err := w.Watch.Next(ctx, w.interval)
	if err == nil && st == port.WatchTimeout && ctx.Err() == nil {
		return port.Published{VisibleSeq: math.MaxUint64}, port.WatchAnnounced, nil
	}
	return p, st, err
}
