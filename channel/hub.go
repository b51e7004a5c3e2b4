package channel

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"sync"
)

// Status is the outcome of [Scope.Wait]. Its numeric values are the
// specification's wait statuses.
type Status int

// Wait statuses.
const (
	// StatusMessage (0): a message was received; the text is the message.
	StatusMessage Status = 0
	// StatusTimeout (1): the timeout elapsed without a message; the text is
	// empty.
	StatusTimeout Status = 1
	// StatusEnded (2): the subscription has ended (channel closed, backlog
	// eviction, unsubscribed or scope ended); the text is the reason. It is
	// final: every later wait returns it again with the same reason.
	StatusEnded Status = 2
)

// String returns a short name for the status.
func (s Status) String() string {
	switch s {
	case StatusMessage:
		return "message"
	case StatusTimeout:
		return "timeout"
	case StatusEnded:
		return "ended"
	}
	return fmt.Sprintf("Status(%d)", int(s))
}

// Hub is one in-process channel namespace: the specification's "instance".
// Waypost creates one Hub per space. A Hub is safe for concurrent use; its
// zero value is not usable, create it with [NewHub].
type Hub struct {
	limits        Limits
	backlogReason string
	nonce         string // distinguishes handles of different hubs

	// mu guards channels, every channelState, every subscription's channel
	// link, the scopes' ended flags and nextScope. Lock order:
	// Hub.mu → Scope.mu → subscription.mu. Nothing blocks while it is held.
	mu        sync.Mutex
	channels  map[string]*channelState
	nextScope uint64
}

// channelState is one live channel: its subscriptions in subscription order.
// It exists only while it has at least one subscription.
type channelState struct {
	name string
	subs []*subscription
}

// NewHub returns an empty hub with the given limits; zero fields take the
// specification defaults (see [Limits]).
func NewHub(limits Limits) *Hub {
	limits = limits.withDefaults()
	var b [6]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand panics instead)
	return &Hub{
		limits:        limits,
		backlogReason: limits.BacklogReason(),
		nonce:         hex.EncodeToString(b[:]),
		channels:      make(map[string]*channelState),
	}
}

// Limits returns the hub's limits with defaults applied.
func (h *Hub) Limits() Limits { return h.limits }

// NewScope returns a new scope (the specification's "event"): the owner of
// the subscriptions it creates. Call [Scope.End] when the request or
// connection is over; End is also run automatically once ctx is done, so
// passing the request context guarantees leftover subscriptions are
// cancelled. A nil ctx is treated as context.Background().
func (h *Hub) NewScope(ctx context.Context) *Scope {
	h.mu.Lock()
	h.nextScope++
	id := h.nextScope
	h.mu.Unlock()
	s := &Scope{
		hub:    h,
		prefix: fmt.Sprintf("ch.%s.%x.", h.nonce, id),
		subs:   make(map[string]*subscription),
	}
	if ctx != nil && ctx.Done() != nil {
		stop := context.AfterFunc(ctx, s.End) // may run at once
		s.mu.Lock()
		s.stop = stop
		s.mu.Unlock()
	}
	return s
}

// Publish delivers text to every current subscription of the named channel,
// in subscription order, and returns the number of subscriptions it was
// queued for. It returns 0 when the channel does not exist. A subscription
// whose backlog would exceed [Limits.MaxBacklogBytes] is evicted instead
// (its queued messages are dropped, it ends with [Limits.BacklogReason]) and
// is not counted. Text may be empty; it must be at most
// [Limits.MaxTextBytes] bytes and must not start with byte 0xFF.
func (h *Hub) Publish(name, text string) (int, error) {
	if err := validName(name); err != nil {
		return 0, fmt.Errorf("channel: publish: %w", err)
	}
	if err := h.validText(text); err != nil {
		return 0, fmt.Errorf("channel: publish to %s: %w", quote(name), err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	ch := h.channels[name]
	if ch == nil {
		return 0, nil
	}
	delivered := 0
	for _, sub := range ch.subs {
		if sub.push(text, h.limits.MaxBacklogBytes, h.backlogReason) {
			delivered++
		} else {
			sub.ch = nil // evicted; removed from ch.subs below
		}
	}
	if delivered < len(ch.subs) {
		ch.subs = slices.DeleteFunc(ch.subs, func(sub *subscription) bool { return sub.ch == nil })
		if len(ch.subs) == 0 {
			delete(h.channels, name)
		}
	}
	return delivered, nil
}

// Close closes the named channel: every subscription first receives the
// messages queued before the close, then ends with reason (at most
// [Limits.MaxReasonBytes] bytes, may be empty). It returns the number of
// subscriptions closed, 0 when the channel does not exist. The name can be
// subscribed again at once; the new channel is unrelated to the old
// subscriptions.
func (h *Hub) Close(name, reason string) (int, error) {
	if err := validName(name); err != nil {
		return 0, fmt.Errorf("channel: close: %w", err)
	}
	if len(reason) > h.limits.MaxReasonBytes {
		return 0, fmt.Errorf("channel: close %s: reason is %d bytes, limit %d: %w",
			quote(name), len(reason), h.limits.MaxReasonBytes, ErrReasonTooLarge)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	ch := h.channels[name]
	if ch == nil {
		return 0, nil
	}
	delete(h.channels, name)
	for _, sub := range ch.subs {
		sub.ch = nil
		sub.end(reason, false)
	}
	return len(ch.subs), nil
}

// Count returns the number of current subscriptions of the named channel, 0
// when it does not exist. It has no side effect on subscriptions or waits.
func (h *Hub) Count(name string) (int, error) {
	if err := validName(name); err != nil {
		return 0, fmt.Errorf("channel: count: %w", err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if ch := h.channels[name]; ch != nil {
		return len(ch.subs), nil
	}
	return 0, nil
}

// subscribe attaches a new subscription for scope s. Called by Scope.Subscribe.
func (h *Hub) subscribe(s *Scope, name string) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s.ended {
		return "", fmt.Errorf("channel: subscribe %q: %w", name, ErrScopeEnded)
	}
	ch := h.channels[name]
	if ch == nil {
		if len(h.channels) >= h.limits.MaxChannels {
			return "", fmt.Errorf("channel: subscribe %q: %d channels exist: %w",
				name, len(h.channels), ErrTooManyChannels)
		}
		ch = &channelState{name: name}
		h.channels[name] = ch
	} else if len(ch.subs) >= h.limits.MaxSubscriptionsPerChannel {
		return "", fmt.Errorf("channel: subscribe %q: %d subscriptions exist: %w",
			name, len(ch.subs), ErrTooManySubscriptions)
	}
	sub := newSubscription(ch)
	ch.subs = append(ch.subs, sub)
	s.mu.Lock()
	s.nextSub++
	sub.handle = fmt.Sprintf("%s%x", s.prefix, s.nextSub)
	s.subs[sub.handle] = sub
	s.mu.Unlock()
	return sub.handle, nil
}

// detachLocked removes sub from its channel (deleting the channel when it
// becomes empty) and ends it with reason, dropping its queue. A subscription
// that has already ended keeps its first reason but still releases its queue.
// h.mu must be held.
func (h *Hub) detachLocked(sub *subscription, reason string) {
	if ch := sub.ch; ch != nil {
		sub.ch = nil
		if i := slices.Index(ch.subs, sub); i >= 0 {
			ch.subs = slices.Delete(ch.subs, i, i+1)
		}
		if len(ch.subs) == 0 {
			delete(h.channels, ch.name)
		}
	}
	sub.end(reason, true)
}

// validName checks the channel name grammar.
func validName(name string) error {
	if len(name) == 0 || len(name) > MaxNameBytes {
		return fmt.Errorf("name is %d bytes, want 1 to %d: %w", len(name), MaxNameBytes, ErrInvalidName)
	}
	for i := 0; i < len(name); i++ {
		if !nameByte(name[i]) {
			return fmt.Errorf("name %s has byte 0x%02x at offset %d: %w", quote(name), name[i], i, ErrInvalidName)
		}
	}
	return nil
}

// nameByte reports whether c may appear in a channel name.
func nameByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	case c == '.', c == '_', c == ':', c == '-':
		return true
	}
	return false
}

// validText checks a text to publish.
func (h *Hub) validText(text string) error {
	if len(text) > h.limits.MaxTextBytes {
		return fmt.Errorf("text is %d bytes, limit %d: %w", len(text), h.limits.MaxTextBytes, ErrTextTooLarge)
	}
	if len(text) > 0 && text[0] == 0xFF {
		return ErrInvalidText
	}
	return nil
}

// quote formats a caller-supplied string for an error message, truncated so
// that a huge invalid input does not produce a huge error.
func quote(s string) string {
	const max = 80
	if len(s) > max {
		return fmt.Sprintf("%q...(%d bytes)", s[:max], len(s))
	}
	return fmt.Sprintf("%q", s)
}
