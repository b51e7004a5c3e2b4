// Package deliver makes single webhook requests: one delivery attempt of an event (Send) and the
// subscription verification challenge (Verify), RFC §12.4. Scheduling further attempts is the caller's,
// with package retry; durable delivery records are the domain's.
package deliver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/waypost/waypost/webhook/dial"
	"github.com/waypost/waypost/webhook/event"
	"github.com/waypost/waypost/webhook/sign"
)

// Poster posts one request and returns the (size-capped) response; *dial.Client implements it. A target
// refused by the address rules must be reported as a *dial.TargetError.
type Poster interface {
	Post(ctx context.Context, target string, header http.Header, body []byte) (*dial.Response, error)
}

// Class is the classification of one attempt.
type Class int

// The classes.
const (
	// Delivered: the receiver answered 2xx.
	Delivered Class = iota + 1
	// Retry: the attempt failed in a way a later attempt may not (non-2xx status, network error, timeout).
	Retry
	// GiveUp: no further attempt should be made: 410 Gone (the receiver asks to stop; the caller may stop the
	// subscription) or a target the address rules refuse.
	GiveUp
)

func (c Class) String() string {
	switch c {
	case Delivered:
		return "delivered"
	case Retry:
		return "retry"
	case GiveUp:
		return "give_up"
	default:
		return fmt.Sprintf("Class(%d)", int(c))
	}
}

// ClassifyStatus classifies an HTTP status: 2xx delivered, 410 give up, anything else (including 3xx,
// since redirects are not followed) retry.
func ClassifyStatus(code int) Class {
	switch {
	case code >= 200 && code <= 299:
		return Delivered
	case code == http.StatusGone:
		return GiveUp
	default:
		return Retry
	}
}

// Outcome describes one attempt.
type Outcome struct {
	Class Class
	// StatusCode is the response status, 0 when no response was received.
	StatusCode int
	// RetryAfter is the raw Retry-After header of the response ("" when absent), for retry.Policy.Next.
	RetryAfter string
	// WebhookID and Timestamp are the signed webhook-id and webhook-timestamp of the attempt.
	WebhookID string
	Timestamp time.Time
	// Reason is a short, log-safe description: "status 503", "timeout", "forbidden target", ….
	Reason string
	// Err is the transport error when no status was received.
	Err error
}

// Send makes one delivery attempt of ev to target: it signs ev.Bytes, exactly the bytes sent, and posts
// them with Content-Type application/cloudevents+json. Delivery failures are reported in the Outcome, not
// as an error; the error is for an attempt that could not be made (bad arguments, signing) or was cut
// short by ctx, in which case the receiver may or may not have received it.
func Send(ctx context.Context, client Poster, target string, signer *sign.Signer, ev event.Event) (Outcome, error) {
	if client == nil || signer == nil {
		return Outcome{}, errors.New("deliver: Send needs a client and a signer")
	}
	if len(ev.Bytes) == 0 {
		return Outcome{}, fmt.Errorf("deliver: event %q has no encoding", ev.ID)
	}
	sh, err := signer.Sign(ev.ID, ev.Bytes)
	if err != nil {
		return Outcome{}, fmt.Errorf("deliver: event %q: %w", ev.ID, err)
	}
	h := http.Header{}
	h.Set("Content-Type", event.ContentType)
	sh.Set(h)
	out := Outcome{WebhookID: sh.ID, Timestamp: sh.Timestamp}
	resp, err := client.Post(ctx, target, h, ev.Bytes)
	if resp != nil {
		// A status line was received; an error reading the body does not change what the receiver said.
		out.StatusCode, out.RetryAfter = resp.StatusCode, resp.Header.Get("Retry-After")
		out.Class, out.Reason = ClassifyStatus(resp.StatusCode), fmt.Sprintf("status %d", resp.StatusCode)
		return out, nil
	}
	out.Err = err
	if cerr := ctx.Err(); cerr != nil {
		out.Class, out.Reason = Retry, "canceled"
		return out, fmt.Errorf("deliver: event %q: attempt cut short: %w", ev.ID, cerr)
	}
	if _, ok := errors.AsType[*dial.TargetError](err); ok {
		out.Class, out.Reason = GiveUp, "forbidden target"
		return out, nil
	}
	out.Class, out.Reason = Retry, "network error"
	if dial.IsTimeout(err) {
		out.Reason = "timeout"
	}
	return out, nil
}
