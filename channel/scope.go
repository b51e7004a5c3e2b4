package channel

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Scope is the specification's "event": one request or connection that owns
// subscriptions. Handles returned by [Scope.Subscribe] are valid only with the
// scope that issued them. A Scope is safe for concurrent use by the
// goroutines of its request. Create it with [Hub.NewScope] and end it with
// [Scope.End].
type Scope struct {
	hub    *Hub
	prefix string // handle prefix: hub nonce and scope id

	// ended is guarded by hub.mu.
	ended bool

	// mu guards stop, subs and nextSub. subs keeps every subscription the scope
	// created, including ended ones (a small record: handle and reason), so
	// that a later Wait reports the same end reason; it is released with the
	// scope.
	mu      sync.Mutex
	subs    map[string]*subscription
	nextSub uint64
	stop    func() bool // unregisters the context.AfterFunc, if any
}

// Subscribe subscribes the scope to the named channel, creating the channel
// if needed, and returns an opaque handle. Every message published after
// Subscribe returns is queued for the handle until it ends.
//
// Errors wrap ErrInvalidName, ErrScopeEnded, ErrTooManySubscriptions (the
// specification's catchable error) or ErrTooManyChannels (the
// specification's host-level rejection).
func (s *Scope) Subscribe(name string) (string, error) {
	if err := validName(name); err != nil {
		return "", fmt.Errorf("channel: subscribe: %w", err)
	}
	return s.hub.subscribe(s, name)
}

// Wait waits up to timeout for the next message of the subscription and
// returns:
//
//   - (StatusMessage, text, nil) when a message is available;
//   - (StatusTimeout, "", nil) when timeout elapses first; a zero timeout
//     polls without blocking;
//   - (StatusEnded, reason, nil) once the subscription has ended and its
//     queue is drained. After a close, messages queued before the close are
//     returned first. StatusEnded is final: later waits return it again with
//     the same reason.
//
// timeout must lie in [0, Limits.MaxWaitTimeout] (ErrInvalidTimeout); handle
// must have been issued by this scope (ErrForeignHandle).
//
// If ctx is done before a result is available, Wait returns (0, "", err) with
// err wrapping ctx.Err(); the status and text are then meaningless and no
// message is consumed. A ctx that is already done is reported before
// looking at the queue, so a loop on a cancelled context always stops.
func (s *Scope) Wait(ctx context.Context, handle string, timeout time.Duration) (Status, string, error) {
	if timeout < 0 || timeout > s.hub.limits.MaxWaitTimeout {
		return 0, "", fmt.Errorf("channel: wait: timeout %v not in [0, %v]: %w",
			timeout, s.hub.limits.MaxWaitTimeout, ErrInvalidTimeout)
	}
	sub, err := s.lookup("wait", handle)
	if err != nil {
		return 0, "", err
	}
	if err := ctx.Err(); err != nil {
		return 0, "", fmt.Errorf("channel: wait: %w", err)
	}
	if st, text, ok := sub.take(); ok {
		return st, text, nil
	}
	if timeout == 0 {
		return StatusTimeout, "", nil
	}
	timer := sub.getTimer(timeout)
	defer sub.putTimer(timer)
	done := ctx.Done()
	for {
		if done == nil {
			select {
			case <-sub.wake:
			case <-sub.done:
			case <-timer.C:
				return StatusTimeout, "", nil
			}
		} else {
			select {
			case <-sub.wake:
			case <-sub.done:
			case <-timer.C:
				return StatusTimeout, "", nil
			case <-done:
				return 0, "", fmt.Errorf("channel: wait: %w", ctx.Err())
			}
		}
		if st, text, ok := sub.take(); ok {
			return st, text, nil
		}
	}
}

// Unsubscribe cancels the subscription and releases its queue. It is
// idempotent. Later waits return (StatusEnded, ReasonUnsubscribed), unless
// the subscription had already ended (closed or evicted), in which case they
// keep returning that first reason. The handle must have been issued by this
// scope (ErrForeignHandle).
func (s *Scope) Unsubscribe(handle string) error {
	sub, err := s.lookup("unsubscribe", handle)
	if err != nil {
		return err
	}
	s.hub.mu.Lock()
	s.hub.detachLocked(sub, ReasonUnsubscribed)
	s.hub.mu.Unlock()
	return nil
}

// End ends the scope: every subscription it still holds is cancelled
// (waiters receive StatusEnded with ReasonScopeEnded), and later Subscribe
// calls fail with ErrScopeEnded. Waits and Unsubscribe on its handles keep
// working and report the end reason. End is idempotent.
func (s *Scope) End() {
	s.mu.Lock()
	stop := s.stop
	s.mu.Unlock()
	if stop != nil {
		stop()
	}
	h := s.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	if s.ended {
		return
	}
	s.ended = true
	s.mu.Lock()
	subs := make([]*subscription, 0, len(s.subs))
	for _, sub := range s.subs {
		subs = append(subs, sub)
	}
	s.mu.Unlock()
	for _, sub := range subs {
		h.detachLocked(sub, ReasonScopeEnded)
	}
}

// lookup returns the subscription of handle if this scope issued it.
func (s *Scope) lookup(op, handle string) (*subscription, error) {
	s.mu.Lock()
	sub := s.subs[handle]
	s.mu.Unlock()
	if sub == nil {
		return nil, fmt.Errorf("channel: %s: handle %s: %w", op, quote(handle), ErrForeignHandle)
	}
	return sub, nil
}

// subscription is one subscription's queue and end state.
type subscription struct {
	handle string
	// ch is the channel the subscription is attached to, nil once it has
	// ended. Guarded by Hub.mu. Invariant: ch != nil exactly while the
	// subscription has not ended.
	ch *channelState

	wake chan struct{} // capacity 1: "the queue may be non-empty"
	done chan struct{} // closed when the subscription ends

	// timer is a stopped timer kept for the next blocking Wait, so that
	// the common case of one waiter per handle allocates no timer.
	timer atomic.Pointer[time.Timer]

	mu     sync.Mutex
	queue  []string // queue[head:] are the unread messages
	head   int
	bytes  int // text bytes in queue[head:]
	ended  bool
	reason string
}

func newSubscription(ch *channelState) *subscription {
	return &subscription{
		ch:   ch,
		wake: make(chan struct{}, 1),
		done: make(chan struct{}),
	}
}

// getTimer returns a timer started for d, reusing the cached one if free.
func (sub *subscription) getTimer(d time.Duration) *time.Timer {
	if t := sub.timer.Swap(nil); t != nil {
		t.Reset(d) // stopped, so no stale value can be received (Go 1.23+ timers)
		return t
	}
	return time.NewTimer(d)
}

// putTimer stops t and caches it for the next Wait.
func (sub *subscription) putTimer(t *time.Timer) {
	t.Stop()
	sub.timer.Store(t)
}

// push queues text unless that would make the backlog exceed limit (in bytes
// or in messages); then the subscription is evicted with reason instead and
// push returns false. Called with Hub.mu held on an attached subscription.
func (sub *subscription) push(text string, limit int, reason string) bool {
	sub.mu.Lock()
	n := len(sub.queue) - sub.head
	if sub.bytes+len(text) > limit || n+1 > limit {
		sub.endLocked(reason, true)
		sub.mu.Unlock()
		return false
	}
	if sub.head > 0 && sub.head >= len(sub.queue)/2 && len(sub.queue) == cap(sub.queue) {
		// Reuse the consumed front instead of growing.
		m := copy(sub.queue, sub.queue[sub.head:])
		clear(sub.queue[m:])
		sub.queue = sub.queue[:m]
		sub.head = 0
	}
	sub.queue = append(sub.queue, text)
	sub.bytes += len(text)
	sub.mu.Unlock()
	select {
	case sub.wake <- struct{}{}:
	default:
	}
	return true
}

// take returns the next result that is available without waiting: a queued
// message, or the end reason once the queue is drained. ok is false when the
// caller has to wait.
func (sub *subscription) take() (st Status, text string, ok bool) {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	if sub.head < len(sub.queue) {
		text = sub.queue[sub.head]
		sub.queue[sub.head] = ""
		sub.head++
		sub.bytes -= len(text)
		if sub.head == len(sub.queue) {
			sub.queue = sub.queue[:0]
			sub.head = 0
		} else {
			// More is queued: pass the wake-up on to any other waiter
			// on the same handle.
			select {
			case sub.wake <- struct{}{}:
			default:
			}
		}
		return StatusMessage, text, true
	}
	if sub.ended {
		return StatusEnded, sub.reason, true
	}
	return 0, "", false
}

// end ends the subscription with reason unless it has already ended. With
// drop, queued messages are discarded (and the queue released even if the
// subscription had already ended); otherwise they stay readable.
func (sub *subscription) end(reason string, drop bool) {
	sub.mu.Lock()
	sub.endLocked(reason, drop)
	sub.mu.Unlock()
}

func (sub *subscription) endLocked(reason string, drop bool) {
	if drop {
		sub.queue = nil
		sub.head = 0
		sub.bytes = 0
	}
	if sub.ended {
		return
	}
	sub.ended = true
	sub.reason = reason
	close(sub.done)
}
