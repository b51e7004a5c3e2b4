package client

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"

	"github.com/waypost/waypost/domain"
)

// Webhook subscriptions (RFC §12.3) and the delivery records of the control plane (SUPPLEMENT §11.3).

// NewWebhookSecret returns a fresh webhook signing secret: "whsec_" + the standard base64 of 32 random bytes
// (RFC §12.3). Configure it in the receiver first, then pass it in an upsert; the service never shows it
// again.
func NewWebhookSecret() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("client: reading random bytes: %w", err)
	}
	return domain.SecretPrefix + base64.StdEncoding.EncodeToString(b[:]), nil
}

// ListSubscriptions returns the caller's webhook subscriptions with their delivery health
// (GET /v0/subscriptions, subscription.list). UNSUPPORTED where the deployment has no webhook_events.
func (c *Client) ListSubscriptions(ctx context.Context) (domain.SubscriptionList, error) {
	return callList(ctx, &c.t, http.MethodGet, "/v0/subscriptions", nil, nil,
		func(l *domain.SubscriptionList) *[]domain.SubscriptionResult { return &l.Subscriptions })
}

// UpsertSubscription creates or renews a webhook subscription for one of the caller's consumers
// (POST /v0/subscriptions, subscription.upsert). req.RequestID must be set; an empty Delivery.Mode means
// "webhook", the only mode. The service runs the verification challenge against Delivery.URL before it
// answers: WEBHOOK_VERIFICATION_FAILED when the receiver does not echo it, FORBIDDEN_TARGET when the address
// rules refuse the URL. The same consumer, filter and URL with a new request_id renew the subscription; a new
// secret rotates it. The secret is sent once and never returned.
func (c *Client) UpsertSubscription(ctx context.Context, req domain.UpsertSubscriptionRequest) (domain.SubscriptionResult, error) {
	if req.Delivery.Mode == "" {
		req.Delivery.Mode = domain.DeliveryModeWebhook
	}
	req.Filter = normalizedFilter(req.Filter)
	return call[domain.SubscriptionResult](ctx, &c.t, http.MethodPost, "/v0/subscriptions", nil, req)
}

// StopSubscription stops a webhook subscription (POST /v0/subscriptions/{subscription_id}/stop,
// subscription.stop). req.RequestID must be set. Stopping a stopped subscription succeeds again; a request
// already in flight may still reach the receiver.
func (c *Client) StopSubscription(ctx context.Context, subscriptionID string, req domain.StopSubscriptionRequest) (domain.StopSubscriptionResult, error) {
	return call[domain.StopSubscriptionResult](ctx, &c.t, http.MethodPost, "/v0/subscriptions/"+seg(subscriptionID)+"/stop", nil, req)
}

// ListDeliveries lists a space's webhook delivery records in one state: "failed" (also for ""), "pending"
// or "cancelled" (GET …/deliveries?state=).
func (a *Admin) ListDeliveries(ctx context.Context, spaceID, state string) (domain.DeliveryList, error) {
	var q url.Values
	if state != "" {
		q = url.Values{"state": {state}}
	}
	return callList(ctx, &a.t, http.MethodGet, spacePath(spaceID)+"/deliveries", q, nil,
		func(l *domain.DeliveryList) *[]domain.Delivery { return &l.Deliveries })
}

// Redeliver makes a failed or cancelled delivery pending again with a fresh schedule of attempts
// (POST …/deliveries/{delivery_id}/redeliver). The subscription, its credential and the target are
// re-checked before the attempt; a pending delivery is returned unchanged.
func (a *Admin) Redeliver(ctx context.Context, spaceID, deliveryID string) (domain.Delivery, error) {
	return call[domain.Delivery](ctx, &a.t, http.MethodPost, spacePath(spaceID)+"/deliveries/"+seg(deliveryID)+"/redeliver", nil, emptyBody{})
}
