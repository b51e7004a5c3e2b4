// Package livefeed connects the domain's live-feed ports to channel hubs: committers announce
// {visible_seq, item_id} on the space's "feed" channel after each commit (port.Notifier, best effort), and
// feed.wait watches it (port.FeedWatcher). One hub per space is the channel spec's "instance".
//
// Waiters are multiplexed: a process holds one channel subscription per space, whatever the number of
// waiters, and fans every announcement out to all of them, so the spec's 256 subscriptions per channel
// never cap how many clients may wait. A waiter keeps only the highest announcement it has not taken yet
// (feed.wait only needs to know that something above its position committed; it then reads the durable
// feed), so a slow waiter costs no backlog. How many waiters a space may hold is the Feed's own bound
// (MaxWaitersPerSpace, published by describe as limits.feed_wait_waiters_max).
package livefeed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/waypost/waypost/channel"
	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/domain/port"
)

// ChannelName is the channel that carries a space's feed announcements. The spec asks for a bounded set of
// fixed names: one per space.
const ChannelName = "feed"

// Hubs returns the hub of a space.
type Hubs interface {
	HubFor(spaceID string) *channel.Hub
}

// Options configure a Feed.
type Options struct {
	// MaxWaitersPerSpace bounds the concurrent watches of one space in this process; 0 means the domain's
	// default (domain.DefaultLimits().FeedWaitWaitersMax). A watch above it is RATE_LIMITED.
	MaxWaitersPerSpace int
}

// Feed implements port.Notifier and port.FeedWatcher over in-process hubs. It is safe for concurrent use.
type Feed struct {
	hubs       Hubs
	log        *slog.Logger
	maxWaiters int

	mu     sync.Mutex
	spaces map[string]*spaceFeed // spaces with at least one waiter
}

// New returns a Feed over hubs with the default options.
func New(hubs Hubs, log *slog.Logger) *Feed { return NewWithOptions(hubs, log, Options{}) }

// NewWithOptions returns a Feed over hubs.
func NewWithOptions(hubs Hubs, log *slog.Logger, o Options) *Feed {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if o.MaxWaitersPerSpace <= 0 {
		o.MaxWaitersPerSpace = domain.DefaultLimits().FeedWaitWaitersMax
	}
	return &Feed{hubs: hubs, log: log, maxWaiters: o.MaxWaitersPerSpace, spaces: map[string]*spaceFeed{}}
}

// MaxWaitersPerSpace returns the bound on concurrent watches of one space.
func (f *Feed) MaxWaitersPerSpace() int { return f.maxWaiters }

// Waiters returns the number of watches of a space in progress.
func (f *Feed) Waiters(spaceID string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if sf := f.spaces[spaceID]; sf != nil {
		return len(sf.waiters)
	}
	return 0
}

// announcement is the text published per committed item (visible_seq as a decimal string, as on the wire).
type announcement struct {
	VisibleSeq string `json:"visible_seq"`
	ItemID     string `json:"item_id"`
}

// Encode returns the channel text announcing a committed item: the JSON object of an announcement, as
// encoding/json writes it (TestEncodeAsMarshal), written directly (every commit announces its items).
func Encode(p port.Published) string {
	b := make([]byte, 0, 48+len(p.ItemID))
	b = append(b, `{"visible_seq":"`...)
	b = strconv.AppendUint(b, p.VisibleSeq, 10)
	b = append(b, `","item_id":`...)
	b = domain.AppendJSONString(b, p.ItemID)
	return string(append(b, '}'))
}

// Decode parses an announcement text.
func Decode(spaceID, text string) (port.Published, error) {
	var a announcement
	if err := json.Unmarshal([]byte(text), &a); err != nil {
		return port.Published{}, fmt.Errorf("livefeed: decoding announcement: %w", err)
	}
	seq, err := strconv.ParseUint(a.VisibleSeq, 10, 64)
	if err != nil {
		return port.Published{}, fmt.Errorf("livefeed: announcement visible_seq: %w", err)
	}
	return port.Published{SpaceID: spaceID, VisibleSeq: seq, ItemID: a.ItemID}, nil
}

// Notify publishes each item on its space's feed channel. Failures are logged, never returned: losing an
// announcement only delays a waiter until its timeout or the next announcement.
func (f *Feed) Notify(ctx context.Context, items []port.Published) {
	for _, it := range items {
		if _, err := f.hubs.HubFor(it.SpaceID).Publish(ChannelName, Encode(it)); err != nil {
			f.log.LogAttrs(ctx, slog.LevelWarn, "livefeed: announcing failed", slog.String("space_id", it.SpaceID), slog.String("error", err.Error()))
		}
	}
}

// Watch registers a waiter of a space. The space's one channel subscription is made by its first waiter
// and ended with its last; every announcement published after Watch returns reaches this waiter.
func (f *Feed) Watch(_ context.Context, spaceID string) (port.Watch, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sf := f.spaces[spaceID]
	if sf != nil && len(sf.waiters) >= f.maxWaiters {
		return nil, domain.Errorf(domain.CodeRateLimited, "this space has %d live waiters, its limit (feed_wait_waiters_max); "+
			"retry after Retry-After or poll with inbox.read", f.maxWaiters).
			WithDetails("reason", "waiters", "limit", "feed_wait_waiters_max", "max", f.maxWaiters, "retry_after_ms", 1000)
	}
	if sf == nil {
		scope := f.hubs.HubFor(spaceID).NewScope(context.Background())
		h, err := scope.Subscribe(ChannelName)
		if err != nil {
			scope.End()
			if errors.Is(err, channel.ErrTooManySubscriptions) || errors.Is(err, channel.ErrTooManyChannels) {
				return nil, domain.Errorf(domain.CodeRateLimited, "the live feed of this space is at its channel limits; retry or poll with inbox.read").
					WithDetails("reason", "channel_limits")
			}
			return nil, fmt.Errorf("livefeed: subscribing: %w", err)
		}
		sf = &spaceFeed{feed: f, space: spaceID, scope: scope, handle: h, waiters: map[*watch]struct{}{}}
		f.spaces[spaceID] = sf
		go sf.pump()
	}
	w := &watch{sf: sf, wake: make(chan struct{}, 1)}
	sf.waiters[w] = struct{}{}
	return w, nil
}

// spaceFeed is the one channel subscription of a space and its waiters.
type spaceFeed struct {
	feed   *Feed
	space  string
	scope  *channel.Scope
	handle string
	// waiters is guarded by feed.mu.
	waiters map[*watch]struct{}
}

// pump waits on the subscription and fans each announcement out to the waiters, until the subscription
// ends: its last waiter left (the scope ended), or the channel evicted it for backlog or was closed — then
// every waiter is told the watch ended, so it reads the durable feed and watches again.
func (sf *spaceFeed) pump() {
	for {
		st, text, err := sf.scope.Wait(context.Background(), sf.handle, channel.DefaultMaxWaitTimeout)
		switch {
		case err != nil:
			sf.feed.log.Warn("livefeed: waiting on the space's subscription failed", "space_id", sf.space, "error", err.Error())
			sf.end()
			return
		case st == channel.StatusTimeout:
			continue
		case st == channel.StatusMessage:
			p, err := Decode(sf.space, text)
			if err != nil {
				sf.end() // unreadable: every waiter re-reads the durable feed
				return
			}
			sf.feed.mu.Lock()
			for w := range sf.waiters {
				w.offer(p)
			}
			sf.feed.mu.Unlock()
		default: // ended
			sf.end()
			return
		}
	}
}

// end detaches the subscription from the space (the next Watch makes a new one) and ends every waiter.
func (sf *spaceFeed) end() {
	f := sf.feed
	f.mu.Lock()
	if f.spaces[sf.space] == sf {
		delete(f.spaces, sf.space)
	}
	waiters := sf.waiters
	sf.waiters = map[*watch]struct{}{}
	f.mu.Unlock()
	sf.scope.End()
	for w := range waiters {
		w.finish()
	}
}

// watch is one waiter: the highest announcement not taken yet, and whether its space's subscription ended.
type watch struct {
	sf   *spaceFeed
	wake chan struct{} // capacity 1: "something changed"

	mu      sync.Mutex
	pending bool
	latest  port.Published
	ended   bool
	closed  bool
}

// offer records an announcement, keeping the highest sequence, and wakes the waiter.
func (w *watch) offer(p port.Published) {
	w.mu.Lock()
	if !w.pending || p.VisibleSeq > w.latest.VisibleSeq {
		w.latest = p
	}
	w.pending = true
	w.mu.Unlock()
	w.signal()
}

// finish marks the watch ended and wakes the waiter.
func (w *watch) finish() {
	w.mu.Lock()
	w.ended = true
	w.mu.Unlock()
	w.signal()
}

func (w *watch) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// take returns what is ready: the highest announcement since the last take, else the end.
func (w *watch) take() (port.Published, port.WatchStatus, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.pending:
		w.pending = false
		return w.latest, port.WatchAnnounced, true
	case w.ended:
		return port.Published{}, port.WatchEnded, true
	}
	return port.Published{}, 0, false
}

// Next waits for the next announcement (the highest one since the last Next), the timeout, or the end of
// the space's subscription.
func (w *watch) Next(ctx context.Context, timeout time.Duration) (port.Published, port.WatchStatus, error) {
	if p, st, ok := w.take(); ok {
		return p, st, nil
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return port.Published{}, port.WatchTimeout, nil
		case <-t.C:
			return port.Published{}, port.WatchTimeout, nil
		case <-w.wake:
		}
		if p, st, ok := w.take(); ok {
			return p, st, nil
		}
	}
}

// Close leaves the space; the last waiter to leave ends the space's subscription. It is idempotent.
func (w *watch) Close() {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	w.closed = true
	w.mu.Unlock()
	sf := w.sf
	f := sf.feed
	f.mu.Lock()
	delete(sf.waiters, w)
	last := len(sf.waiters) == 0 && f.spaces[sf.space] == sf
	if last {
		delete(f.spaces, sf.space)
	}
	f.mu.Unlock()
	if last {
		sf.scope.End() // the pump sees the end and exits
	}
}
