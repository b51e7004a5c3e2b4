// Package sender is the webhook adapter of the domain's port.WebhookSender: it builds the CloudEvent of a
// feed item (package event), signs exactly the bytes it sends (package sign, Standard Webhooks), and posts
// through the SSRF-safe client of package dial, which checks every resolved address when it connects and
// never follows redirects. One Sender serves the embedded worker and the AWS deliverer alike.
package sender

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/webhook/deliver"
	"github.com/waypost/waypost/webhook/dial"
	"github.com/waypost/waypost/webhook/event"
	"github.com/waypost/waypost/webhook/sign"
)

// Sender implements port.WebhookSender over a dial.Client.
type Sender struct {
	client   *dial.Client
	now      func() time.Time
	verifier deliver.Verifier
}

// Options configure a Sender.
type Options struct {
	// Dial configures the address rules and timeouts (dial.Options; the zero value admits public HTTPS
	// targets on port 443 only).
	Dial dial.Options
	// Now is the clock used for signing; nil means time.Now.
	Now func() time.Time
	// VerifyTimeout may shorten the 10 s answer limit of a challenge (tests); 0 means the RFC's 10 s.
	VerifyTimeout time.Duration
}

// New returns a Sender.
func New(o Options) (*Sender, error) {
	c, err := dial.NewClient(o.Dial)
	if err != nil {
		return nil, fmt.Errorf("webhook sender: %w", err)
	}
	now := o.Now
	if now == nil {
		now = time.Now
	}
	return &Sender{client: c, now: now, verifier: deliver.Verifier{Now: now, Timeout: o.VerifyTimeout}}, nil
}

// CheckTarget applies the URL rules (scheme, port, literal addresses) before any network use.
func (s *Sender) CheckTarget(target string) error {
	if _, err := s.client.CheckURL(target); err != nil {
		return &port.WebhookVerifyError{Forbidden: true, Reason: err.Error()}
	}
	return nil
}

// Verify runs the verification challenge (RFC §12.4) signed with keys.Current.
func (s *Sender) Verify(ctx context.Context, target string, keys port.WebhookKeys) error {
	secret, err := sign.ParseSecret(keys.Current)
	if err != nil {
		return fmt.Errorf("webhook secret: %w", err)
	}
	err = s.verifier.Verify(ctx, s.client, target, secret)
	var ve *deliver.VerifyError
	if errors.As(err, &ve) {
		return &port.WebhookVerifyError{Forbidden: ve.Failure == deliver.FailForbiddenTarget, Reason: ve.Error()}
	}
	return err
}

// signer returns the signer of keys: the previous secret also signs until keys.PreviousUntil.
func (s *Sender) signer(keys port.WebhookKeys) (*sign.Signer, error) {
	cur, err := sign.ParseSecret(keys.Current)
	if err != nil {
		return nil, fmt.Errorf("webhook secret: %w", err)
	}
	k := sign.Keys{Current: cur}
	if keys.Previous != "" {
		prev, err := sign.ParseSecret(keys.Previous)
		if err != nil {
			return nil, fmt.Errorf("previous webhook secret: %w", err)
		}
		k.Previous, k.RotatedAt = prev, keys.PreviousUntil.Add(-sign.MaxDualWindow)
	}
	return sign.NewSigner(k, sign.WithClock(s.now))
}

// Deliver makes one signed attempt of the event of ev.FeedItem. An event that cannot be built (over 8 KiB)
// is a give-up result, not an error.
func (s *Sender) Deliver(ctx context.Context, target string, keys port.WebhookKeys, ev port.WebhookEvent) (port.WebhookResult, error) {
	var fi domain.FeedItem
	if err := json.Unmarshal(ev.FeedItem, &fi); err != nil {
		return port.WebhookResult{}, fmt.Errorf("decoding feed item: %w", err)
	}
	e, err := event.FromFeedItem(ev.SourceURI, fi)
	if err != nil {
		return port.WebhookResult{GiveUp: true, Reason: "event not built: " + err.Error()}, nil
	}
	signer, err := s.signer(keys)
	if err != nil {
		return port.WebhookResult{}, err
	}
	out, err := deliver.Send(ctx, s.client, target, signer, e)
	if err != nil {
		return port.WebhookResult{}, err
	}
	var te *dial.TargetError
	return port.WebhookResult{
		Delivered: out.Class == deliver.Delivered, GiveUp: out.Class == deliver.GiveUp,
		Forbidden: errors.As(out.Err, &te), StatusCode: out.StatusCode, RetryAfter: out.RetryAfter, Reason: out.Reason,
	}, nil
}

// Close releases idle connections.
func (s *Sender) Close() { s.client.CloseIdleConnections() }
