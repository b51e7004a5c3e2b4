package port

import (
	"context"
	"encoding/json"
	"time"
)

// WebhookKeys are the signing secrets of one request: Current always signs; Previous ("" when none) also
// signs until PreviousUntil, the dual-signature window after a rotation (RFC §12.4, at most 5 minutes).
// The values are "whsec_…" texts and must never be logged.
type WebhookKeys struct {
	Current       string
	Previous      string
	PreviousUntil time.Time
}

// WebhookEvent is what one delivery attempt sends: the committed feed item (the domain's FeedItem as JSON)
// and the space's stable source URI; the adapter turns it into a CloudEvent and signs exactly the bytes it
// sends.
type WebhookEvent struct {
	SourceURI string
	FeedItem  json.RawMessage
}

// WebhookResult is the outcome of one delivery attempt.
type WebhookResult struct {
	// Delivered: the receiver answered 2xx.
	Delivered bool
	// GiveUp: no further attempt may help (410 Gone, a target the address rules refuse, an event that
	// cannot be built). Neither Delivered nor GiveUp means "retry".
	GiveUp bool
	// Forbidden: the address rules refused the target when dialing.
	Forbidden bool
	// StatusCode is the receiver's HTTP status (0 when none arrived).
	StatusCode int
	// RetryAfter is the raw Retry-After header of the answer ("" when absent).
	RetryAfter string
	// Reason is a short, log-safe description of a failure ("status 503", "timeout", …).
	Reason string
}

// WebhookVerifyError is a failed verification challenge. Forbidden reports that the address rules refused
// the target (FORBIDDEN_TARGET); otherwise the receiver did not prove control (WEBHOOK_VERIFICATION_FAILED).
type WebhookVerifyError struct {
	Forbidden bool
	Reason    string
}

func (e *WebhookVerifyError) Error() string { return "webhook verification failed: " + e.Reason }

// WebhookSender reaches webhook receivers: it runs verification challenges and makes delivery attempts.
// Implementations enforce the address rules at dial time (public HTTPS targets only unless configured
// otherwise) and never follow redirects.
type WebhookSender interface {
	// CheckTarget validates a target URL syntactically and against the scheme rules before any network use;
	// a refused target is a *WebhookVerifyError with Forbidden set.
	CheckTarget(url string) error
	// Verify sends a signed {"type":"verification","challenge":…} and requires the echo within 10 s.
	// Failures are *WebhookVerifyError; other errors mean the check could not run.
	Verify(ctx context.Context, url string, keys WebhookKeys) error
	// Deliver makes one signed delivery attempt of ev to url (webhook-id = the feed item_id, the same on
	// every attempt). Delivery failures are reported in the result; an error means the attempt could not be
	// made at all.
	Deliver(ctx context.Context, url string, keys WebhookKeys, ev WebhookEvent) (WebhookResult, error)
}

// DeliveryQueue wakes whoever makes delivery attempts (the SQS queue of the deliverer on AWS; the embedded
// worker needs none, it polls the store's due index). Enqueue is best effort: the store's due index is the
// durable record, so a lost wake-up only delays an attempt until the next sweep of due deliveries.
type DeliveryQueue interface {
	Enqueue(ctx context.Context, ref DeliveryRef, notBefore time.Time) error
}

// DeliveryRef names one delivery record.
type DeliveryRef struct {
	SpaceID    string `json:"space_id"`
	DeliveryID string `json:"delivery_id"`
}
