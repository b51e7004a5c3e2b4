package channel

import (
	"fmt"
	"time"
)

// MaxNameBytes is the maximum length of a channel name in bytes. It is part
// of the name grammar, not a tunable limit.
const MaxNameBytes = 64

// Specification defaults for [Limits].
const (
	DefaultMaxChannels                = 64
	DefaultMaxSubscriptionsPerChannel = 256
	DefaultMaxBacklogBytes            = 1 << 20 // 1 MiB
	DefaultMaxTextBytes               = 65536
	DefaultMaxReasonBytes             = 1024
	DefaultMaxWaitTimeout             = 3_600_000 * time.Millisecond
)

// Limits holds the numeric limits of one hub. A zero or negative field means
// the specification default. The specification requires hosts to use values
// not lower than the defaults or to report the deviation explicitly; lower
// values are accepted (tests use them) and are the caller's responsibility to
// report.
type Limits struct {
	// MaxChannels is the maximum number of channels that exist at once in
	// the hub (default 64). Exceeding it yields ErrTooManyChannels.
	MaxChannels int
	// MaxSubscriptionsPerChannel is the maximum number of live
	// subscriptions on one channel (default 256). Exceeding it yields
	// ErrTooManySubscriptions.
	MaxSubscriptionsPerChannel int
	// MaxBacklogBytes is the largest unread backlog, in text bytes, a
	// subscription may hold (default 1 MiB). A publish that would make the
	// backlog exceed it evicts the subscription instead. The same number
	// also bounds the count of queued messages (only reachable with empty
	// messages).
	MaxBacklogBytes int
	// MaxTextBytes is the largest publishable text in bytes (default 65536).
	MaxTextBytes int
	// MaxReasonBytes is the longest close reason in bytes (default 1024).
	MaxReasonBytes int
	// MaxWaitTimeout is the longest wait timeout (default 3,600,000 ms).
	MaxWaitTimeout time.Duration
}

// DefaultLimits returns the specification's limits.
func DefaultLimits() Limits {
	return Limits{
		MaxChannels:                DefaultMaxChannels,
		MaxSubscriptionsPerChannel: DefaultMaxSubscriptionsPerChannel,
		MaxBacklogBytes:            DefaultMaxBacklogBytes,
		MaxTextBytes:               DefaultMaxTextBytes,
		MaxReasonBytes:             DefaultMaxReasonBytes,
		MaxWaitTimeout:             DefaultMaxWaitTimeout,
	}
}

// withDefaults replaces every zero or negative field by its default.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	orDefault(&l.MaxChannels, d.MaxChannels)
	orDefault(&l.MaxSubscriptionsPerChannel, d.MaxSubscriptionsPerChannel)
	orDefault(&l.MaxBacklogBytes, d.MaxBacklogBytes)
	orDefault(&l.MaxTextBytes, d.MaxTextBytes)
	orDefault(&l.MaxReasonBytes, d.MaxReasonBytes)
	orDefault(&l.MaxWaitTimeout, d.MaxWaitTimeout)
	return l
}

// orDefault replaces a zero or negative limit by its default.
func orDefault[T ~int | ~int64](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// BacklogReason returns the end reason reported by Wait for a subscription
// evicted because its backlog exceeded MaxBacklogBytes (after defaults are
// applied): the specification's words (订阅因积压超过 1 MiB 被断开) with an
// English gloss. With the default limit it is
// "订阅因积压超过 1 MiB 被断开 (evicted: backlog exceeded 1 MiB)". Every such
// reason starts with [ReasonBacklogPrefix].
func (l Limits) BacklogReason() string {
	n := l.withDefaults().MaxBacklogBytes
	size := fmt.Sprintf("%d bytes", n)
	if n%(1<<20) == 0 {
		size = fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%s%s 被断开 (evicted: backlog exceeded %s)", ReasonBacklogPrefix, size, size)
}

// End reasons produced by the hub itself, in the specification's words
// followed by an English gloss. Close reasons are chosen by the caller of
// [Hub.Close].
const (
	// ReasonUnsubscribed is reported for a subscription cancelled with
	// [Scope.Unsubscribe]: the specification's reason 订阅已取消.
	ReasonUnsubscribed = "订阅已取消 (unsubscribed)"
	// ReasonScopeEnded is reported for a subscription cancelled because its
	// scope ended with leftover subscriptions.
	ReasonScopeEnded = "订阅已取消 (unsubscribed: scope ended)"
	// ReasonBacklogPrefix starts every backlog-eviction reason; see
	// [Limits.BacklogReason]. It holds the specification's 积压 (backlog).
	ReasonBacklogPrefix = "订阅因积压超过 "
)
