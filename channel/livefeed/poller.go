package livefeed

import (
	"context"
	"math"
	"time"

	"github.com/waypost/waypost/domain/port"
)

// DefaultPollInterval is the Poller's interval when none is given.
const DefaultPollInterval = 500 * time.Millisecond

// Poller is a port.FeedWatcher for processes that cannot hold the live hubs (the AWS Lambda functions: the
// always-on channel service holds them and serves HTTP feed.wait itself). Its watches announce "something
// may have committed" every Interval, so feed.wait re-reads the durable feed at that pace: the same results
// as with live hubs (every item returned always comes from the durable feed), woken up to Interval later
// and at the cost of one feed read per interval.
type Poller struct {
	// Interval between re-reads; 0 means DefaultPollInterval.
	Interval time.Duration
}

// Watch returns a polling watch; it never fails.
func (p Poller) Watch(context.Context, string) (port.Watch, error) {
	iv := p.Interval
	if iv <= 0 {
		iv = DefaultPollInterval
	}
	return &pollWatch{interval: iv}, nil
}

type pollWatch struct{ interval time.Duration }

// Next waits for the interval (or the timeout, whichever is first). After a full interval it announces a
// sequence above any position, which makes the waiter read the durable feed again.
func (w *pollWatch) Next(ctx context.Context, timeout time.Duration) (port.Published, port.WatchStatus, error) {
	d, status := w.interval, port.WatchAnnounced
	if timeout < d {
		d, status = timeout, port.WatchTimeout
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return port.Published{}, port.WatchTimeout, ctx.Err()
	case <-t.C:
	}
	if status == port.WatchTimeout {
		return port.Published{}, status, nil
	}
	return port.Published{VisibleSeq: math.MaxUint64}, status, nil
}

// Close does nothing: a polling watch holds no resources.
func (w *pollWatch) Close() {}
