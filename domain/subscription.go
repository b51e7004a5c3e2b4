package domain

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/waypost/waypost/domain/port"
)

// Idempotency operation names of the subscription writes (SUPPLEMENT §11.1).
const (
	OpSubscriptionUpsert = "subscription.upsert"
	OpSubscriptionStop   = "subscription.stop"
)

// CloudEvents types of the feed item types (RFC §12.2).
const (
	EventMessageCommitted        = "waypost.message.committed.v1"
	EventMemoryRevisionPublished = "waypost.memory.revision.published.v1"
	EventReceiptUpdated          = "waypost.receipt.updated.v1"
)

// EventTypeOf returns the event type announcing a feed item of type t ("" for none).
func EventTypeOf(t ItemType) string {
	switch t {
	case ItemMessage:
		return EventMessageCommitted
	case ItemMemoryRevision:
		return EventMemoryRevisionPublished
	case ItemReceipt:
		return EventReceiptUpdated
	}
	return ""
}

// Subscription states as published.
const (
	SubscriptionActive  = "active"
	SubscriptionStopped = "stopped"
	SubscriptionExpired = "expired"
)

// Webhook rules (RFC §12.3, §12.4).
const (
	// DeliveryModeWebhook is the only delivery mode.
	DeliveryModeWebhook = "webhook"
	// SecretPrefix starts every webhook secret: "whsec_" + standard base64 of 32 random bytes.
	SecretPrefix = "whsec_"
	// SecretDualWindow is how long the previous secret keeps signing after a rotation.
	SecretDualWindow = 5 * time.Minute
	// SubscriptionTTLMin is the shortest TTL accepted (a choice: docs/webhooks.md).
	SubscriptionTTLMin = 60
	// webhookURLMax bounds a delivery URL.
	webhookURLMax = 2048
)

// SubscriptionDelivery is the delivery member of an upsert: where to send and the receiver's secret.
type SubscriptionDelivery struct {
	Mode   string `json:"mode"`
	URL    string `json:"url"`
	Secret string `json:"secret,omitempty"`
}

// UpsertSubscriptionRequest is the body of subscription.upsert (RFC §12.3).
type UpsertSubscriptionRequest struct {
	RequestID  string               `json:"request_id"`
	ConsumerID string               `json:"consumer_id"`
	EventTypes []string             `json:"event_types"`
	Filter     *Filter              `json:"filter,omitempty"`
	Delivery   SubscriptionDelivery `json:"delivery"`
	TTLSeconds *int                 `json:"ttl_seconds,omitempty"`
}

// StopSubscriptionRequest is the body of subscription.stop.
type StopSubscriptionRequest struct {
	RequestID string `json:"request_id"`
}

// DeliveryTarget is the published form of a subscription's delivery: never the secret.
type DeliveryTarget struct {
	Mode string `json:"mode"`
	URL  string `json:"url"`
}

// DeliveryHealth is how deliveries to a subscription have gone lately.
type DeliveryHealth struct {
	LastSuccessAt       *time.Time `json:"last_success_at"`
	LastFailureAt       *time.Time `json:"last_failure_at"`
	LastFailureReason   *string    `json:"last_failure_reason"`
	ConsecutiveFailures int        `json:"consecutive_failures"`
}

// SubscriptionResult is a subscription as returned by upsert and list (list adds Health).
type SubscriptionResult struct {
	SubscriptionID string          `json:"subscription_id"`
	State          string          `json:"state"`
	ConsumerID     string          `json:"consumer_id"`
	EventTypes     []string        `json:"event_types"`
	Filter         Filter          `json:"filter"`
	Delivery       DeliveryTarget  `json:"delivery"`
	CreatedAt      time.Time       `json:"created_at"`
	ExpiresAt      time.Time       `json:"expires_at"`
	RefreshBefore  time.Time       `json:"refresh_before"`
	Health         *DeliveryHealth `json:"health,omitempty"`
}

// StopSubscriptionResult is the result of subscription.stop.
type StopSubscriptionResult struct {
	SubscriptionID string `json:"subscription_id"`
	State          string `json:"state"`
}

// SubscriptionList is the result of subscription.list.
type SubscriptionList struct {
	Subscriptions []SubscriptionResult `json:"subscriptions"`
}

// Subscription is the stored webhook subscription. Its ID is derived from its identity (space, actor,
// consumer, normalized filter, target URL), so an identical upsert always finds it again.
type Subscription struct {
	SubscriptionID string    `json:"subscription_id"`
	SpaceID        string    `json:"space_id"`
	ActorID        string    `json:"actor_id"`
	TokenID        string    `json:"token_id"` // the credential whose rights every attempt re-checks
	ConsumerID     string    `json:"consumer_id"`
	EventTypes     []string  `json:"event_types"`
	Filter         Filter    `json:"filter"`
	URL            string    `json:"url"`
	Secret         string    `json:"secret"`
	PrevSecret     string    `json:"prev_secret,omitempty"`
	PrevUntil      time.Time `json:"prev_until"`
	State          string    `json:"state"` // active or stopped; expiry is derived from ExpiresAt
	CreatedAt      time.Time `json:"created_at"`
	RenewedAt      time.Time `json:"renewed_at"`
	TTLSeconds     int       `json:"ttl_seconds"`
	ExpiresAt      time.Time `json:"expires_at"`
	// FromSeq: only items with a higher visible_seq are announced (the head when it was activated).
	FromSeq uint64 `json:"from_seq"`
}

// stateAt is the published state at now.
func (sub Subscription) stateAt(now time.Time) string {
	if sub.State == SubscriptionStopped {
		return SubscriptionStopped
	}
	if !now.Before(sub.ExpiresAt) {
		return SubscriptionExpired
	}
	return SubscriptionActive
}

// keys returns the signing keys at now.
func (sub Subscription) keys(now time.Time) port.WebhookKeys {
	k := port.WebhookKeys{Current: sub.Secret}
	if sub.PrevSecret != "" && now.Before(sub.PrevUntil) {
		k.Previous, k.PreviousUntil = sub.PrevSecret, sub.PrevUntil
	}
	return k
}

func (sub Subscription) result(now time.Time) SubscriptionResult {
	ttl := time.Duration(sub.TTLSeconds) * time.Second
	return SubscriptionResult{
		SubscriptionID: sub.SubscriptionID, State: sub.stateAt(now), ConsumerID: sub.ConsumerID,
		EventTypes: slices.Clone(sub.EventTypes), Filter: sub.Filter,
		Delivery:  DeliveryTarget{Mode: DeliveryModeWebhook, URL: sub.URL},
		CreatedAt: sub.CreatedAt, ExpiresAt: sub.ExpiresAt,
		RefreshBefore: sub.ExpiresAt.Add(-ttl / 4),
	}
}

// consumerSubs is the index of a consumer's subscriptions that count against subscriptions_per_consumer.
type consumerSubs struct {
	IDs []string `json:"ids"`
}

// validSecret reports whether s is "whsec_" + the standard base64 of exactly 32 bytes.
func validSecret(s string) bool {
	raw, ok := strings.CutPrefix(s, SecretPrefix)
	if !ok {
		return false
	}
	b, err := base64.StdEncoding.Strict().DecodeString(raw)
	return err == nil && len(b) == 32
}

var subIDEncoding = base32.NewEncoding("0123456789abcdefghjkmnpqrstvwxyz").WithPadding(base32.NoPadding)

// derivedID returns prefix + "_" + 26 base32 characters of the SHA-256 of parts.
func derivedID(prefix string, parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:%s|", len(p), p)
	}
	return prefix + "_" + subIDEncoding.EncodeToString(h.Sum(nil))[:26]
}

func (s *Service) webhooksOn() error {
	if s.webhooks == nil {
		return Errorf(CodeUnsupported, "this deployment does not offer webhook_events")
	}
	return nil
}

// checkUpsert validates an upsert and returns its normalized event types and filter and its TTL.
func (s *Service) checkUpsert(req *UpsertSubscriptionRequest) ([]string, Filter, int, error) {
	if err := checkRequestID(req.RequestID); err != nil {
		return nil, Filter{}, 0, err
	}
	if len(req.EventTypes) == 0 {
		return nil, Filter{}, 0, Errorf(CodeInvalidRequest, "event_types must name at least one event type").WithDetails("field", "event_types")
	}
	types := normalizeSet(req.EventTypes)
	for _, t := range types {
		if t != EventMessageCommitted && t != EventMemoryRevisionPublished && t != EventReceiptUpdated {
			return nil, Filter{}, 0, Errorf(CodeInvalidRequest, "event_types has an unknown event type").WithDetails("field", "event_types")
		}
	}
	if err := checkFilter(req.Filter); err != nil {
		return nil, Filter{}, 0, err
	}
	var f Filter
	if req.Filter != nil {
		f = *req.Filter
	}
	if req.Delivery.Mode != DeliveryModeWebhook {
		return nil, Filter{}, 0, Errorf(CodeInvalidRequest, `delivery.mode must be "webhook"`).WithDetails("field", "delivery.mode")
	}
	if u, err := url.Parse(req.Delivery.URL); err != nil || !u.IsAbs() || u.Host == "" || len(req.Delivery.URL) > webhookURLMax || u.User != nil || u.Fragment != "" {
		return nil, Filter{}, 0, Errorf(CodeInvalidRequest, "delivery.url must be an absolute http(s) URL without credentials or fragment, at most %d bytes", webhookURLMax).WithDetails("field", "delivery.url")
	}
	if !validSecret(req.Delivery.Secret) {
		return nil, Filter{}, 0, Errorf(CodeInvalidRequest, `delivery.secret must be "whsec_" + the standard base64 of 32 random bytes`).WithDetails("field", "delivery.secret")
	}
	ttl := s.limits.SubscriptionTTLDefault
	if req.TTLSeconds != nil {
		ttl = *req.TTLSeconds
	}
	if ttl < SubscriptionTTLMin {
		return nil, Filter{}, 0, Errorf(CodeInvalidRequest, "ttl_seconds must be at least %d", SubscriptionTTLMin).WithDetails("field", "ttl_seconds")
	}
	if ttl > s.limits.SubscriptionTTLMax {
		return nil, Filter{}, 0, Errorf(CodeResourceLimit, "ttl_seconds is above subscription_ttl_max (%d)", s.limits.SubscriptionTTLMax).
			WithDetails("field", "ttl_seconds", "limit_name", "subscription_ttl_max", "limit", s.limits.SubscriptionTTLMax)
	}
	return types, f.Normalize(), ttl, nil
}

// UpsertSubscription creates or renews a webhook subscription (subscription.upsert, RFC §12.3). A new or
// re-activated target, or a new secret, must first pass the verification challenge (RFC §12.4); a renewal of
// an active subscription with the same secret only extends it. An identical upsert renews the same
// subscription and never creates a second one.
func (s *Service) UpsertSubscription(ctx context.Context, p *Principal, req UpsertSubscriptionRequest) (SubscriptionResult, error) {
	if err := s.webhooksOn(); err != nil {
		return SubscriptionResult{}, err
	}
	types, filter, ttl, err := s.checkUpsert(&req)
	if err != nil {
		return SubscriptionResult{}, err
	}
	fs, err := s.consumerScope(ctx, p, req.ConsumerID, ScopeSubscriptionManage)
	if err != nil {
		return SubscriptionResult{}, err
	}
	if err := s.webhooks.CheckTarget(req.Delivery.URL); err != nil {
		return SubscriptionResult{}, verifyFailure(err)
	}
	norm := req
	norm.EventTypes, norm.Filter = types, &filter
	fp, err := fingerprintOf(OpSubscriptionUpsert, norm)
	if err != nil {
		return SubscriptionResult{}, err
	}
	ffp, err := Fingerprint(filter)
	if err != nil {
		return SubscriptionResult{}, fmt.Errorf("subscription filter: %w", err)
	}
	subID := derivedID("sub", p.SpaceID, p.ActorID, fs.consumer.ConsumerID, ffp, req.Delivery.URL)
	key := keySubmission(p.SpaceID, p.ActorID, OpSubscriptionUpsert, req.RequestID)

	if sub, _, found, err := getRecord[Submission](ctx, s.store, key); err != nil {
		return SubscriptionResult{}, err
	} else if found {
		return decodeResult[SubscriptionResult](replay(sub, fp))
	}
	cur, _, found, err := getRecord[Subscription](ctx, s.store, keySubscription(p.SpaceID, subID))
	if err != nil {
		return SubscriptionResult{}, err
	}
	now := s.clock.Now().UTC()
	// The limit is checked before the challenge too (no request to a receiver that would be refused), and
	// again in the commit.
	idx, _, _, err := getRecord[consumerSubs](ctx, s.store, keyConsumerSubs(p.SpaceID, req.ConsumerID))
	if err != nil {
		return SubscriptionResult{}, err
	}
	if _, err := s.liveSubscriptions(ctx, p.SpaceID, idx, subID, now); err != nil {
		return SubscriptionResult{}, err
	}
	if !found || cur.stateAt(now) != SubscriptionActive || cur.Secret != req.Delivery.Secret {
		if err := s.webhooks.Verify(ctx, req.Delivery.URL, port.WebhookKeys{Current: req.Delivery.Secret}); err != nil {
			de := verifyFailure(err)
			var we *port.WebhookVerifyError
			if errors.As(err, &we) {
				s.log.InfoContext(ctx, "webhook verification failed", "space_id", p.SpaceID, "subscription_id", subID, "reason", we.Reason)
				if ferr := s.failSubmission(ctx, key, OpSubscriptionUpsert, req.RequestID, fp, subID, de); ferr != nil {
					return SubscriptionResult{}, ferr
				}
			}
			return SubscriptionResult{}, de
		}
	}
	raw, _, err := s.runOnce(ctx, onceSpec{key: key, operation: OpSubscriptionUpsert, requestID: req.RequestID, fingerprint: fp,
		prepare: func(ctx context.Context) (*onceTx, error) {
			fresh, err := s.refresh(ctx, p)
			if err != nil {
				return nil, err
			}
			return s.prepareUpsert(ctx, fresh, subID, req, types, filter, ttl)
		}})
	return decodeResult[SubscriptionResult](raw, err)
}

// verifyFailure maps a failed challenge or target check to its error code.
func verifyFailure(err error) error {
	var we *port.WebhookVerifyError
	if !errors.As(err, &we) {
		return fmt.Errorf("webhook verification: %w", err)
	}
	if we.Forbidden {
		return Errorf(CodeForbiddenTarget, "the delivery target is not allowed: %s", we.Reason).WithDetails("field", "delivery.url")
	}
	return Errorf(CodeWebhookVerification, "the delivery target did not answer the verification challenge: %s", we.Reason).WithDetails("field", "delivery.url")
}

func (s *Service) prepareUpsert(ctx context.Context, p *Principal, subID string, req UpsertSubscriptionRequest, types []string, filter Filter, ttl int) (*onceTx, error) {
	now := s.clock.Now().UTC()
	cur, curItem, found, err := getRecord[Subscription](ctx, s.store, keySubscription(p.SpaceID, subID))
	if err != nil {
		return nil, err
	}
	idx, idxItem, idxFound, err := getRecord[consumerSubs](ctx, s.store, keyConsumerSubs(p.SpaceID, req.ConsumerID))
	if err != nil {
		return nil, err
	}
	live, err := s.liveSubscriptions(ctx, p.SpaceID, idx, subID, now)
	if err != nil {
		return nil, err
	}
	head, err := s.head(ctx, p.SpaceID)
	if err != nil {
		return nil, err
	}
	sub := Subscription{SubscriptionID: subID, SpaceID: p.SpaceID, ActorID: p.ActorID, TokenID: p.TokenID,
		ConsumerID: req.ConsumerID, EventTypes: types, Filter: filter, URL: req.Delivery.URL, Secret: req.Delivery.Secret,
		State: SubscriptionActive, CreatedAt: now, RenewedAt: now, TTLSeconds: ttl,
		ExpiresAt: now.Add(time.Duration(ttl) * time.Second), FromSeq: head}
	subCond := port.NotExists()
	if found {
		subCond = port.AttrEquals(attrVersion, curItem.Attr(attrVersion))
		sub.CreatedAt = cur.CreatedAt
		if cur.stateAt(now) == SubscriptionActive {
			sub.FromSeq = cur.FromSeq // a renewal keeps announcing from where it was
			if cur.Secret != sub.Secret {
				sub.PrevSecret, sub.PrevUntil = cur.Secret, now.Add(SecretDualWindow)
			} else if cur.PrevSecret != "" && now.Before(cur.PrevUntil) {
				sub.PrevSecret, sub.PrevUntil = cur.PrevSecret, cur.PrevUntil
			}
		}
	}
	idxCond := port.NotExists()
	if idxFound {
		idxCond = port.AttrEquals(attrVersion, idxItem.Attr(attrVersion))
	}
	ops := []port.Op{
		genCheck(p),
		port.Put(item(keySubscription(p.SpaceID, subID), sub, attrVersion, itoa(attrInt(curItem, attrVersion)+1)), subCond),
		port.Put(item(keyConsumerSubs(p.SpaceID, req.ConsumerID), consumerSubs{IDs: append(live, subID)},
			attrVersion, itoa(attrInt(idxItem, attrVersion)+1)), idxCond),
	}
	// A dispatch position is created once per space (one kept from before the index was sharded still works).
	_, marked, err := s.store.Get(ctx, keyDispatch(p.SpaceID))
	if err == nil && !marked {
		_, marked, err = s.store.Get(ctx, keyDispatchUnsharded(p.SpaceID))
	}
	if err != nil {
		return nil, fmt.Errorf("reading dispatch position: %w", err)
	}
	if !marked {
		ops = append(ops, port.Put(port.Item{Key: keyDispatch(p.SpaceID), Attrs: map[string]string{attrPos: fmt.Sprint(head)}}, port.NotExists()))
	}
	res := sub.result(now)
	return &onceTx{resourceID: subID, build: func(uint64) ([]port.Op, any, []port.Published) { return ops, res, nil }}, nil
}

// liveSubscriptions returns the IDs in a consumer's index that still count against
// subscriptions_per_consumer (active, other than subID), or RESOURCE_LIMIT when subID would pass the limit.
func (s *Service) liveSubscriptions(ctx context.Context, space string, idx consumerSubs, subID string, now time.Time) ([]string, error) {
	var others []string
	var keys []port.Key
	for _, id := range idx.IDs {
		if id != subID {
			others, keys = append(others, id), append(keys, keySubscription(space, id))
		}
	}
	subs, found, err := getRecords[Subscription](ctx, s.store, keys)
	if err != nil {
		return nil, err
	}
	var live []string
	for i, id := range others {
		if found[i] && subs[i].stateAt(now) == SubscriptionActive {
			live = append(live, id)
		}
	}
	if len(live)+1 > s.limits.SubscriptionsPerConsumer {
		return nil, Errorf(CodeResourceLimit, "the consumer already has %d active subscriptions", len(live)).
			WithDetails("limit_name", "subscriptions_per_consumer", "limit", s.limits.SubscriptionsPerConsumer)
	}
	return live, nil
}

// ownSubscription reads a subscription of the principal's actor; any other is NOT_FOUND.
func (s *Service) ownSubscription(ctx context.Context, p *Principal, subID string) (Subscription, port.Item, error) {
	notFound := Errorf(CodeNotFound, "no such subscription").WithDetails("subscription_id", subID)
	sub, it, found, err := getNamed[Subscription](ctx, s.store, subID, keySubscription(p.SpaceID, subID))
	if err != nil {
		return Subscription{}, port.Item{}, err
	}
	if !found || sub.ActorID != p.ActorID || (p.ConsumerID != "" && p.ConsumerID != sub.ConsumerID) {
		return Subscription{}, port.Item{}, notFound
	}
	return sub, it, nil
}

// StopSubscription stops a subscription (subscription.stop). Future attempts stop; requests already in
// flight may still reach the receiver. Stopping a stopped subscription succeeds again.
func (s *Service) StopSubscription(ctx context.Context, p *Principal, subID string, req StopSubscriptionRequest) (StopSubscriptionResult, error) {
	if err := s.webhooksOn(); err != nil {
		return StopSubscriptionResult{}, err
	}
	if err := requireScope(p, ScopeSubscriptionManage); err != nil {
		return StopSubscriptionResult{}, err
	}
	if err := checkRequestID(req.RequestID); err != nil {
		return StopSubscriptionResult{}, err
	}
	fp, err := fingerprintOf(OpSubscriptionStop, map[string]string{"subscription_id": subID})
	if err != nil {
		return StopSubscriptionResult{}, err
	}
	key := keySubmission(p.SpaceID, p.ActorID, OpSubscriptionStop, req.RequestID)
	raw, _, err := s.runOnce(ctx, onceSpec{key: key, operation: OpSubscriptionStop, requestID: req.RequestID, fingerprint: fp,
		prepare: func(ctx context.Context) (*onceTx, error) {
			sub, it, err := s.ownSubscription(ctx, p, subID)
			if err != nil {
				return nil, err
			}
			res := StopSubscriptionResult{SubscriptionID: subID, State: SubscriptionStopped}
			var ops []port.Op
			if sub.State != SubscriptionStopped {
				sub.State = SubscriptionStopped
				ops = append(ops, port.Put(item(it.Key, sub, attrVersion, itoa(attrInt(it, attrVersion)+1)),
					port.AttrEquals(attrVersion, it.Attr(attrVersion))))
			}
			return &onceTx{resourceID: subID, build: func(uint64) ([]port.Op, any, []port.Published) { return ops, res, nil }}, nil
		}})
	return decodeResult[StopSubscriptionResult](raw, err)
}

// ListSubscriptions lists the principal's subscriptions with their delivery health (subscription.list).
func (s *Service) ListSubscriptions(ctx context.Context, p *Principal) (SubscriptionList, error) {
	if err := s.webhooksOn(); err != nil {
		return SubscriptionList{}, err
	}
	if err := requireScope(p, ScopeSubscriptionManage); err != nil {
		return SubscriptionList{}, err
	}
	subs, err := s.subscriptions(ctx, p.SpaceID)
	if err != nil {
		return SubscriptionList{}, err
	}
	now := s.clock.Now().UTC()
	out := SubscriptionList{Subscriptions: []SubscriptionResult{}}
	var own []Subscription
	var keys []port.Key
	for _, sub := range subs {
		if sub.ActorID == p.ActorID && (p.ConsumerID == "" || p.ConsumerID == sub.ConsumerID) {
			own, keys = append(own, sub), append(keys, keySubHealth(p.SpaceID, sub.SubscriptionID))
		}
	}
	health, _, err := getRecords[DeliveryHealth](ctx, s.store, keys) // absent: no attempt yet, zero health
	if err != nil {
		return SubscriptionList{}, err
	}
	for i, sub := range own {
		r := sub.result(now)
		r.Health = &health[i]
		out.Subscriptions = append(out.Subscriptions, r)
	}
	return out, nil
}

// subscriptions reads every subscription of a space.
func (s *Service) subscriptions(ctx context.Context, space string) ([]Subscription, error) {
	var out []Subscription
	for items, err := range s.pages(ctx, port.Query{PK: pkSubscriptions(space), After: "S#", UpTo: "S#~", Limit: 200}) {
		if err != nil {
			return nil, fmt.Errorf("reading subscriptions: %w", err)
		}
		for _, it := range items {
			sub, err := decodeItem[Subscription](it)
			if err != nil {
				return nil, err
			}
			out = append(out, sub)
		}
	}
	return out, nil
}
