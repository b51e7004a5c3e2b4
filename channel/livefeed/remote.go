package livefeed

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/waypost/waypost/channel/chanclient"
	"github.com/waypost/waypost/domain/port"
)

// Defaults of RemoteOptions.
const (
	// DefaultBudget bounds how long one Notify may hold a commit.
	DefaultBudget = 50 * time.Millisecond
	// DefaultMinBackoff and DefaultMaxBackoff bound how long announcing stops after failures.
	DefaultMinBackoff = time.Second
	DefaultMaxBackoff = 30 * time.Second
)

// RemoteOptions tune a Remote. The zero value gives the defaults.
type RemoteOptions struct {
	// Budget bounds one Notify, all its announcements together (DefaultBudget): a commit never waits longer
	// for the channel service.
	Budget time.Duration
	// MinBackoff and MaxBackoff shape the circuit breaker: after a Notify fails (an error, or the budget
	// spent), announcing stops for MinBackoff, doubled for each further failure in a row up to MaxBackoff
	// (±20% jitter); then one Notify tries again, and a success closes the breaker.
	MinBackoff, MaxBackoff time.Duration
	// Now tells the time; default time.Now.
	Now func() time.Time
}

// Remote is a port.Notifier that announces committed items to a channel service over its internal API
// (the AWS topology: Lambdas commit, the always-on channel service wakes feed.wait). It is best effort and
// off the commit's critical path: one Notify takes at most the budget (50 ms), and while the service is
// slow or down a circuit breaker skips announcing altogether for a back-off period. Announcements lost so
// are harmless: the service's waits re-read the durable feed at least every fallback interval (Fallback),
// and every item they return comes from the durable feed anyway.
type Remote struct {
	api  chanclient.API
	log  *slog.Logger
	opts RemoteOptions

	mu        sync.Mutex
	openUntil time.Time // the breaker is open (announcements skipped) until then
	failures  int       // failed Notify calls in a row
	probing   bool      // a Notify is trying the service after a back-off
	skipped   int       // announcements skipped while open, logged when it closes
}

// NewRemote returns a notifier publishing through api (chanclient.New or chanclient.NewInProcess) with
// the default options.
func NewRemote(api chanclient.API, log *slog.Logger) *Remote {
	return NewRemoteWith(api, log, RemoteOptions{})
}

// NewRemoteWith returns a notifier publishing through api with opts.
func NewRemoteWith(api chanclient.API, log *slog.Logger, opts RemoteOptions) *Remote {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.Budget <= 0 {
		opts.Budget = DefaultBudget
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = DefaultMinBackoff
	}
	if opts.MaxBackoff < opts.MinBackoff {
		opts.MaxBackoff = max(DefaultMaxBackoff, opts.MinBackoff)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Remote{api: api, log: log, opts: opts}
}

// Notify publishes each item on its space's feed channel, within the budget, unless the breaker is open.
func (r *Remote) Notify(ctx context.Context, items []port.Published) {
	if len(items) == 0 || !r.allow(len(items)) {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.opts.Budget)
	defer cancel()
	var err error
	for _, it := range items {
		if _, err = r.api.Publish(cctx, it.SpaceID, ChannelName, Encode(it)); err != nil {
			break
		}
	}
	r.record(ctx, err)
}

// allow reports whether a Notify of n items may announce: the breaker is closed, or its back-off ended and
// no other Notify is trying the service already.
func (r *Remote) allow(n int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failures == 0 {
		return true
	}
	if r.probing || r.opts.Now().Before(r.openUntil) {
		r.skipped += n
		return false
	}
	r.probing = true
	return true
}

// record closes the breaker after a success, or opens it for the next back-off after a failure.
func (r *Remote) record(ctx context.Context, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.probing = false
	if err == nil {
		if r.failures > 0 {
			r.log.LogAttrs(ctx, slog.LevelInfo, "livefeed: the channel service answers again; announcing resumed",
				slog.Int("skipped", r.skipped))
		}
		r.failures, r.skipped, r.openUntil = 0, 0, time.Time{}
		return
	}
	r.failures++
	backoff := r.opts.MinBackoff << min(r.failures-1, 20)
	if backoff <= 0 || backoff > r.opts.MaxBackoff {
		backoff = r.opts.MaxBackoff
	}
	backoff = time.Duration(float64(backoff) * (0.8 + 0.4*rand.Float64()))
	r.openUntil = r.opts.Now().Add(backoff)
	r.log.LogAttrs(ctx, slog.LevelWarn, "livefeed: announcing to the channel service failed; not announcing for a while",
		slog.String("error", err.Error()), slog.Int("failures_in_a_row", r.failures), slog.Duration("backoff", backoff))
}
