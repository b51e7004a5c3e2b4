package channel

import "errors"

// Sentinel errors. Every error returned by this package wraps exactly one of
// them; test with errors.Is. They correspond to the specification's
// "throws a 豫言 exception" cases.
var (
	// ErrInvalidName reports a channel name that is empty, longer than
	// [MaxNameBytes] bytes, or contains a byte outside A-Z a-z 0-9 . _ : -.
	ErrInvalidName = errors.New("channel: invalid channel name")

	// ErrTextTooLarge reports a published text longer than
	// [Limits.MaxTextBytes] bytes.
	ErrTextTooLarge = errors.New("channel: text too large")

	// ErrInvalidText reports a published text whose first byte is 0xFF.
	ErrInvalidText = errors.New("channel: text must not start with byte 0xFF")

	// ErrReasonTooLarge reports a close reason longer than
	// [Limits.MaxReasonBytes] bytes.
	ErrReasonTooLarge = errors.New("channel: close reason too large")

	// ErrInvalidTimeout reports a wait timeout below zero or above
	// [Limits.MaxWaitTimeout].
	ErrInvalidTimeout = errors.New("channel: wait timeout out of range")

	// ErrForeignHandle reports a subscription handle that was not issued by
	// the scope it is used with: a handle of another scope, of another hub,
	// or a string that was never a handle.
	ErrForeignHandle = errors.New("channel: subscription handle not owned by this scope")

	// ErrTooManySubscriptions reports a subscription that would exceed
	// [Limits.MaxSubscriptionsPerChannel] on its channel. It is the
	// specification's catchable exception: the caller may handle it and go on.
	ErrTooManySubscriptions = errors.New("channel: too many subscriptions on channel")

	// ErrTooManyChannels reports a subscription that would create a channel
	// beyond [Limits.MaxChannels] in the hub. The specification makes this a
	// host-level rejection that the application cannot necessarily catch (the
	// reference host aborts the run); callers should treat it as fatal for the
	// current scope (end the request with a server error) rather than retry.
	ErrTooManyChannels = errors.New("channel: too many channels (host-level rejection)")

	// ErrScopeEnded reports a subscription attempted on a scope that has
	// already ended.
	ErrScopeEnded = errors.New("channel: scope has ended")
)
