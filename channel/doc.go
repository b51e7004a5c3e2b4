// Package channel implements Waypost's in-process channel hub: named text
// channels on which one scope subscribes and waits while another publishes.
//
// It follows the seed "持久频道接口规范 0.1.0" (durable channel interface
// specification) exactly; docs/channel.md records the choices made where the
// specification is ambiguous. The vocabulary maps as follows:
//
//   - the specification's "instance" is one [Hub]; Waypost creates one hub per
//     space, so every limit applies per space;
//   - the specification's "event" is one [Scope] (one request or connection);
//     subscription handles are owned by the scope that created them;
//   - "throws a 豫言 exception" is a returned Go error wrapping one of the
//     sentinel errors of this package, to be tested with [errors.Is];
//   - the recoverable outcomes of waiting (timeout, channel closed, backlog
//     eviction, unsubscribed) are [Status] values, never errors.
//
// # Channels and subscriptions
//
// A channel is named by 1 to 64 bytes of A-Z a-z 0-9 . _ : - (case-sensitive).
// It exists from its first subscription until its last subscription
// disappears (unsubscribed, closed, evicted, or its scope ended). A hub holds
// at most [Limits.MaxChannels] channels and a channel at most
// [Limits.MaxSubscriptionsPerChannel] subscriptions.
//
// Every message published after [Scope.Subscribe] returns is queued for that
// subscription; messages published earlier are never replayed. Each
// subscription receives messages in the order the hub accepted them
// ([Hub.Publish] calls on one hub are linearizable), so messages of one
// publisher arrive in the order it published them.
//
// # Waiting
//
// [Scope.Wait] returns (StatusMessage, text), (StatusTimeout, "") or
// (StatusEnded, reason). Queued messages always win over the end of a closed
// subscription: a closed subscription first drains what was queued before the
// close. Once StatusEnded has been returned, every later Wait on that handle
// returns StatusEnded with the same reason. Waiting never holds a lock that
// other scopes need.
//
// # Beyond the specification
//
// The specification asks hosts to cancel a scope's leftover subscriptions when
// the scope ends; this package does so in [Scope.End], which [Hub.NewScope]
// also arranges to run when the scope's context is done.
//
// A backlog is also evicted when its message count exceeds
// [Limits.MaxBacklogBytes]; with non-empty messages the byte rule always fires
// first, so this only bounds memory for streams of empty messages.
//
// The hub starts no goroutines and performs no I/O.
package channel
