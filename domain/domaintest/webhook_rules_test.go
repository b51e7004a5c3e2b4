package domaintest_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/domain/domaintest"
	"github.com/waypost/waypost/internal/testjson"
	"github.com/waypost/waypost/webhook/sender"
)

// TestSubscriptionIdentity: an identical upsert renews the same subscription (same ID, expiry moves, no
// new challenge); the secret and the event types are not part of the identity; a different URL, filter
// or consumer is a new subscription.
func TestSubscriptionIdentity(t *testing.T) {
	h := newHooks(t, nil)
	b := h.f.Party(h.sp.SpaceID)
	url := "https://hooks.example.com/b"
	first := h.upsert(t, b.P, h.req(b.ConsumerID, url, 0))
	t0 := h.f.Clock.Now()
	if first.State != domain.SubscriptionActive || !first.ExpiresAt.Equal(t0.Add(24*time.Hour)) || !first.CreatedAt.Equal(t0) {
		t.Fatalf("first upsert: %+v", first)
	}
	h.f.Clock.Advance(time.Hour)
	renewed := h.upsert(t, b.P, h.req(b.ConsumerID, url, 0))
	if renewed.SubscriptionID != first.SubscriptionID || !renewed.ExpiresAt.Equal(t0.Add(25*time.Hour)) || !renewed.CreatedAt.Equal(t0) {
		t.Fatalf("renewal: %+v, first %+v", renewed, first)
	}
	if n := h.fake.VerifyCount(url); n != 1 {
		t.Fatalf("%d challenges: a renewal of an active subscription with the same secret needs none", n)
	}
	types := h.req(b.ConsumerID, url, 0)
	types.EventTypes = []string{domain.EventReceiptUpdated, domain.EventMessageCommitted, domain.EventReceiptUpdated}
	if r := h.upsert(t, b.P, types); r.SubscriptionID != first.SubscriptionID || strings.Join(r.EventTypes, ",") != domain.EventMessageCommitted+","+domain.EventReceiptUpdated {
		t.Fatalf("other event types: %+v (normalized, same subscription)", r)
	}
	if r := h.upsert(t, b.P, h.req(b.ConsumerID, url, 1)); r.SubscriptionID != first.SubscriptionID || h.fake.VerifyCount(url) != 2 {
		t.Fatalf("a new secret: %+v, %d challenges (a rotation of the same subscription, challenged)", r, h.fake.VerifyCount(url))
	}
	ids := map[string]bool{first.SubscriptionID: true}
	other := h.f.Consumer(h.sp.SpaceID, b.ActorID, domain.ViewInbox, nil)
	for name, req := range map[string]domain.UpsertSubscriptionRequest{
		"other URL":      h.req(b.ConsumerID, url+"/2", 0),
		"other query":    h.req(b.ConsumerID, url+"?x=1", 0),
		"other consumer": h.req(other, url, 0),
		"with a filter": func() domain.UpsertSubscriptionRequest {
			r := h.req(b.ConsumerID, url, 0)
			r.Filter = &domain.Filter{ItemTypes: []string{"message"}}
			return r
		}(),
	} {
		r := h.upsert(t, b.P, req)
		if ids[r.SubscriptionID] {
			t.Fatalf("%s: subscription %s again, want a new one", name, r.SubscriptionID)
		}
		ids[r.SubscriptionID] = true
	}
	// The same filter written differently is the same subscription.
	f1, f2 := h.req(b.ConsumerID, url+"/f", 0), h.req(b.ConsumerID, url+"/f", 0)
	f1.Filter = &domain.Filter{ProducerIDs: []string{"a1", "a2"}}
	f2.Filter = &domain.Filter{ProducerIDs: []string{"a2", "a1", "a2"}, ThreadIDs: []string{}}
	if r1, r2 := h.upsert(t, b.P, f1), h.upsert(t, b.P, f2); r1.SubscriptionID != r2.SubscriptionID {
		t.Fatalf("normalized filters: %s and %s", r1.SubscriptionID, r2.SubscriptionID)
	}
	if n := len(h.list(t, b.P)); n != len(ids)+1 {
		t.Fatalf("list has %d subscriptions, want %d", n, len(ids)+1)
	}
}

// TestSubscriptionTTL: ttl_seconds defaults to 24 h, accepts 60 s to 7 d, and rejects anything else
// without a challenge or a subscription (below 60 s INVALID_REQUEST, above subscription_ttl_max
// RESOURCE_LIMIT); refresh_before is a quarter of the TTL before expiry.
func TestSubscriptionTTL(t *testing.T) {
	h := newHooks(t, nil)
	b := h.f.Party(h.sp.SpaceID)
	for i, tc := range []struct {
		ttl  *int
		want time.Duration
		code domain.Code
	}{
		{nil, 24 * time.Hour, ""},
		{ptr(60), time.Minute, ""},
		{ptr(604800), 7 * 24 * time.Hour, ""},
		{ptr(59), 0, domain.CodeInvalidRequest},
		{ptr(0), 0, domain.CodeInvalidRequest},
		{ptr(-60), 0, domain.CodeInvalidRequest},
		{ptr(604801), 0, domain.CodeResourceLimit}, // above subscription_ttl_max (SUPPLEMENT §5.3)
	} {
		url := fmt.Sprintf("https://hooks.example.com/ttl/%d", i)
		req := h.req(b.ConsumerID, url, 0)
		req.TTLSeconds = tc.ttl
		r, err := h.f.Svc.UpsertSubscription(h.ctx, b.P, req)
		if tc.code != "" {
			domaintest.WantCode(t, fmt.Sprintf("ttl %d", *tc.ttl), err, tc.code)
			if h.fake.VerifyCount(url) != 0 {
				t.Fatalf("ttl %d: a rejected upsert sent a challenge", *tc.ttl)
			}
			continue
		}
		now := h.f.Clock.Now()
		if err != nil || !r.ExpiresAt.Equal(now.Add(tc.want)) || !r.RefreshBefore.Equal(now.Add(tc.want*3/4)) {
			t.Fatalf("ttl %v: %+v, %v; want expiry in %v", tc.ttl, r, err, tc.want)
		}
	}
	if n := len(h.list(t, b.P)); n != 3 {
		t.Fatalf("%d subscriptions, want the 3 accepted", n)
	}
}

func ptr(n int) *int { return &n }

// TestSubscriptionsPerConsumer: at most subscriptions_per_consumer (16) active subscriptions per consumer;
// the next is RESOURCE_LIMIT; a stopped or expired one frees its slot; another consumer has its own count;
// renewing one of the 16 is not a 17th.
func TestSubscriptionsPerConsumer(t *testing.T) {
	h := newHooks(t, nil)
	b := h.f.Party(h.sp.SpaceID)
	limit := h.f.Svc.Limits().SubscriptionsPerConsumer
	if limit != 16 {
		t.Fatalf("subscriptions_per_consumer = %d, want 16", limit)
	}
	url := func(i int) string { return fmt.Sprintf("https://hooks.example.com/n/%d", i) }
	var subs []domain.SubscriptionResult
	for i := range limit {
		req := h.req(b.ConsumerID, url(i), 0)
		if i == 0 {
			req.TTLSeconds = ptr(60)
		}
		subs = append(subs, h.upsert(t, b.P, req))
	}
	over := func() error {
		_, err := h.f.Svc.UpsertSubscription(h.ctx, b.P, h.req(b.ConsumerID, url(limit), 0))
		return err
	}
	err := over()
	domaintest.WantCode(t, "the 17th subscription", err, domain.CodeResourceLimit)
	if d := domain.AsError(err).Details["limit_name"]; d != "subscriptions_per_consumer" {
		t.Fatalf("details %v", domain.AsError(err).Details)
	}
	if n := h.fake.VerifyCount(url(limit)); n != 0 {
		t.Fatalf("a refused subscription sent %d challenges to its receiver, want none", n)
	}
	h.upsert(t, b.P, h.req(b.ConsumerID, url(5), 0)) // renewing one of them is fine
	other := h.f.Consumer(h.sp.SpaceID, b.ActorID, domain.ViewInbox, nil)
	h.upsert(t, b.P, h.req(other, url(100), 0))
	if _, err := h.stop(b.P, subs[3].SubscriptionID); err != nil {
		t.Fatal(err)
	}
	if err := over(); err != nil {
		t.Fatalf("after a stop: %v", err)
	}
	domaintest.WantCode(t, "full again", over2(h, b, limit+1), domain.CodeResourceLimit)
	// Re-activating the stopped one counts again: full.
	domaintest.WantCode(t, "re-activating a stopped one while full", func() error {
		_, err := h.f.Svc.UpsertSubscription(h.ctx, b.P, h.req(b.ConsumerID, url(3), 0))
		return err
	}(), domain.CodeResourceLimit)
	h.f.Clock.Advance(time.Minute) // subs[0] expires
	if err := over2(h, b, limit+1); err != nil {
		t.Fatalf("after an expiry: %v", err)
	}
}

func over2(h *hooks, b domaintest.Party, i int) error {
	_, err := h.f.Svc.UpsertSubscription(h.ctx, b.P, h.req(b.ConsumerID, fmt.Sprintf("https://hooks.example.com/n/%d", i), 0))
	return err
}

// TestSubscriptionStop: stop is idempotent and its replay answers the same; another actor's subscription,
// an unknown ID and a malformed one are NOT_FOUND, and the other actor's subscription stays active; a
// consumer-bound token sees and stops only its consumer's subscriptions and cannot subscribe for another.
func TestSubscriptionStop(t *testing.T) {
	h := newHooks(t, nil)
	b, c := h.f.Party(h.sp.SpaceID), h.f.Party(h.sp.SpaceID)
	bSub := h.upsert(t, b.P, h.req(b.ConsumerID, "https://hooks.example.com/b", 0))
	cSub := h.upsert(t, c.P, h.req(c.ConsumerID, "https://hooks.example.com/c", 0))
	for i := range 2 {
		r, err := h.stop(b.P, bSub.SubscriptionID)
		if err != nil || r.State != domain.SubscriptionStopped || r.SubscriptionID != bSub.SubscriptionID {
			t.Fatalf("stop %d: %+v, %v", i, r, err)
		}
	}
	rid := h.f.RID("stop")
	r1, err1 := h.f.Svc.StopSubscription(h.ctx, b.P, bSub.SubscriptionID, domain.StopSubscriptionRequest{RequestID: rid})
	r2, err2 := h.f.Svc.StopSubscription(h.ctx, b.P, bSub.SubscriptionID, domain.StopSubscriptionRequest{RequestID: rid})
	if err1 != nil || err2 != nil || r1 != r2 {
		t.Fatalf("replay: %+v %v / %+v %v", r1, err1, r2, err2)
	}
	_, err := h.f.Svc.StopSubscription(h.ctx, b.P, cSub.SubscriptionID, domain.StopSubscriptionRequest{RequestID: rid})
	domaintest.WantCode(t, "the same request_id for another subscription", err, domain.CodeIdempotencyConflict)
	for name, id := range map[string]string{"another actor's": cSub.SubscriptionID, "unknown": "sub_00000000000000000000000000", "malformed": "../x"} {
		_, err := h.stop(b.P, id)
		domaintest.WantCode(t, "stop of "+name, err, domain.CodeNotFound)
	}
	if l := h.list(t, c.P); len(l) != 1 || l[0].State != domain.SubscriptionActive {
		t.Fatalf("C's subscription after B's attempts: %+v", l)
	}
	if l := h.list(t, b.P); len(l) != 1 || l[0].State != domain.SubscriptionStopped || l[0].SubscriptionID != bSub.SubscriptionID {
		t.Fatalf("B's list: %+v", l)
	}

	// A consumer-bound token.
	second := h.f.Consumer(h.sp.SpaceID, b.ActorID, domain.ViewInbox, nil)
	tok, _ := h.f.Token(h.sp.SpaceID, b.ActorID, second)
	bound := h.f.Principal(tok)
	mine := h.upsert(t, bound, h.req(second, "https://hooks.example.com/bound", 0))
	other := h.upsert(t, b.P, h.req(b.ConsumerID, "https://hooks.example.com/b2", 0))
	if l := h.list(t, bound); len(l) != 1 || l[0].SubscriptionID != mine.SubscriptionID {
		t.Fatalf("the bound token lists %+v, want only its consumer's", l)
	}
	_, err = h.stop(bound, other.SubscriptionID)
	domaintest.WantCode(t, "a bound token stopping another consumer's subscription", err, domain.CodeNotFound)
	_, err = h.f.Svc.UpsertSubscription(h.ctx, bound, h.req(b.ConsumerID, "https://hooks.example.com/b3", 0))
	domaintest.WantCode(t, "a bound token subscribing for another consumer", err, domain.CodeForbidden)
	if r, err := h.stop(bound, mine.SubscriptionID); err != nil || r.State != domain.SubscriptionStopped {
		t.Fatalf("the bound token stops its own: %+v, %v", r, err)
	}
	if l := h.list(t, b.P); len(l) != 3 {
		t.Fatalf("the unbound token lists %d, want all 3 of the actor", len(l))
	}
	// Another actor's consumer is NOT_FOUND for upsert.
	_, err = h.f.Svc.UpsertSubscription(h.ctx, b.P, h.req(c.ConsumerID, "https://hooks.example.com/x", 0))
	domaintest.WantCode(t, "subscribing another actor's consumer", err, domain.CodeNotFound)
}

// TestSubscriptionChallenge: a failed challenge is WEBHOOK_VERIFICATION_FAILED and leaves no subscription;
// the failure is the stored result of its request_id (a replay answers it without a new challenge); a new
// request after the receiver is fixed succeeds; a failed rotation leaves the subscription and its secret
// as they were; a refused target is FORBIDDEN_TARGET, before any challenge when the URL alone is refused.
func TestSubscriptionChallenge(t *testing.T) {
	h := newHooks(t, nil)
	b, a := h.f.Party(h.sp.SpaceID), h.f.Party(h.sp.SpaceID)
	url := "https://hooks.example.com/verify"
	h.fake.FailVerify(url, false, "challenge not echoed")
	req := h.req(b.ConsumerID, url, 0)
	_, err := h.f.Svc.UpsertSubscription(h.ctx, b.P, req)
	domaintest.WantCode(t, "failed challenge", err, domain.CodeWebhookVerification)
	if l := h.list(t, b.P); len(l) != 0 {
		t.Fatalf("a subscription after a failed challenge: %+v", l)
	}
	h.fake.PassVerify(url)
	_, err2 := h.f.Svc.UpsertSubscription(h.ctx, b.P, req)
	if !domaintest.SameError(err, err2) || h.fake.VerifyCount(url) != 1 {
		t.Fatalf("replay of the failed request: %v (first %v), %d challenges", err2, err, h.fake.VerifyCount(url))
	}
	sub := h.upsert(t, b.P, h.req(b.ConsumerID, url, 0))
	// A failed rotation changes nothing: deliveries stay signed with the old secret only.
	h.fake.FailVerify(url, false, "challenge not echoed")
	_, err = h.f.Svc.UpsertSubscription(h.ctx, b.P, h.req(b.ConsumerID, url, 1))
	domaintest.WantCode(t, "failed rotation", err, domain.CodeWebhookVerification)
	h.f.Send(a.P, "after the failed rotation", b.ActorID)
	h.work(t)
	d := h.fake.Deliveries(url)
	if len(d) != 1 || d[0].Keys.Current != ruleSecrets[0] || d[0].Keys.Previous != "" {
		t.Fatalf("deliveries after a failed rotation: %d (keys changed: %v)", len(d), len(d) == 1 && d[0].Keys.Current != ruleSecrets[0])
	}
	if l := h.list(t, b.P); len(l) != 1 || l[0].SubscriptionID != sub.SubscriptionID || l[0].State != domain.SubscriptionActive {
		t.Fatalf("after a failed rotation: %+v", l)
	}

	// Refused targets.
	refused := "https://10.0.0.1/hook"
	h.fake.Forbid(refused, "address is not public")
	_, err = h.f.Svc.UpsertSubscription(h.ctx, b.P, h.req(b.ConsumerID, refused, 0))
	domaintest.WantCode(t, "a refused URL", err, domain.CodeForbiddenTarget)
	if h.fake.VerifyCount(refused) != 0 {
		t.Fatal("a challenge was sent to a refused URL")
	}
	rebinding := "https://rebinding.example.com/hook"
	h.fake.FailVerify(rebinding, true, "address is not public")
	_, err = h.f.Svc.UpsertSubscription(h.ctx, b.P, h.req(b.ConsumerID, rebinding, 0))
	domaintest.WantCode(t, "a target refused at dial time", err, domain.CodeForbiddenTarget)
	// The production sender with default rules: HTTPS public targets only.
	real, err := sender.New(sender.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer real.Close()
	hr := newHooks(t, func(c *domain.Config) { c.Webhooks = real })
	br := hr.f.Party(hr.sp.SpaceID)
	for _, u := range []string{"https://10.0.0.1/hook", "https://127.0.0.1/hook", "http://example.com/hook", "https://[::ffff:169.254.169.254]/",
		"https://2130706433/", "https://0x7f.1/", "https://localhost/hook"} {
		_, err := hr.f.Svc.UpsertSubscription(hr.ctx, br.P, hr.req(br.ConsumerID, u, 0))
		domaintest.WantCode(t, "production sender, "+u, err, domain.CodeForbiddenTarget)
	}
	if l := hr.list(t, br.P); len(l) != 0 {
		t.Fatalf("subscriptions to refused targets: %+v", l)
	}
}

// TestSubscriptionReplay: a replayed upsert or stop returns the first result, unchanged by later changes,
// without a challenge; the same request_id with another request is IDEMPOTENCY_CONFLICT.
func TestSubscriptionReplay(t *testing.T) {
	h := newHooks(t, nil)
	b := h.f.Party(h.sp.SpaceID)
	url := "https://hooks.example.com/replay"
	req := h.req(b.ConsumerID, url, 0)
	first := h.upsert(t, b.P, req)
	h.f.Clock.Advance(2 * time.Hour)
	h.upsert(t, b.P, h.req(b.ConsumerID, url, 1)) // rotation
	if _, err := h.stop(b.P, first.SubscriptionID); err != nil {
		t.Fatal(err)
	}
	again := h.upsert(t, b.P, req)
	if a, f := string(testjson.Marshal(t, again)), string(testjson.Marshal(t, first)); a != f || h.fake.VerifyCount(url) != 2 {
		t.Fatalf("replay %s\nfirst  %s\n%d challenges", a, f, h.fake.VerifyCount(url))
	}
	changed := req
	changed.Delivery.Secret = ruleSecrets[1]
	_, err := h.f.Svc.UpsertSubscription(h.ctx, b.P, changed)
	domaintest.WantCode(t, "same request_id, other secret", err, domain.CodeIdempotencyConflict)
	if l := h.list(t, b.P); len(l) != 1 || l[0].State != domain.SubscriptionStopped {
		t.Fatalf("a replay changed the subscription: %+v", l)
	}
}

// TestSubscriptionValidation: malformed upserts are INVALID_REQUEST with no challenge and no subscription;
// a token without subscription.manage is FORBIDDEN for every subscription operation; a deployment without
// webhooks answers UNSUPPORTED.
func TestSubscriptionValidation(t *testing.T) {
	h := newHooks(t, nil)
	b := h.f.Party(h.sp.SpaceID)
	for name, mutate := range map[string]func(r *domain.UpsertSubscriptionRequest){
		"no event types":         func(r *domain.UpsertSubscriptionRequest) { r.EventTypes = nil },
		"unknown event type":     func(r *domain.UpsertSubscriptionRequest) { r.EventTypes = []string{"waypost.message.deleted.v1"} },
		"mode":                   func(r *domain.UpsertSubscriptionRequest) { r.Delivery.Mode = "sqs" },
		"relative URL":           func(r *domain.UpsertSubscriptionRequest) { r.Delivery.URL = "/hook" },
		"credentials in the URL": func(r *domain.UpsertSubscriptionRequest) { r.Delivery.URL = "https://u:p@hooks.example.com/" },
		"fragment":               func(r *domain.UpsertSubscriptionRequest) { r.Delivery.URL = "https://hooks.example.com/#x" },
		"long URL": func(r *domain.UpsertSubscriptionRequest) {
			r.Delivery.URL = "https://hooks.example.com/" + strings.Repeat("a", 2048)
		},
		"no secret": func(r *domain.UpsertSubscriptionRequest) { r.Delivery.Secret = "" },
		"secret without prefix": func(r *domain.UpsertSubscriptionRequest) {
			r.Delivery.Secret = strings.TrimPrefix(ruleSecrets[0], "whsec_")
		},
		"short secret": func(r *domain.UpsertSubscriptionRequest) {
			r.Delivery.Secret = "whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYX"
		},
		"url-safe base64 secret": func(r *domain.UpsertSubscriptionRequest) {
			r.Delivery.Secret = strings.ReplaceAll(ruleSecrets[1], "/", "_")
		},
		"no request_id":           func(r *domain.UpsertSubscriptionRequest) { r.RequestID = "" },
		"filter with a bad field": func(r *domain.UpsertSubscriptionRequest) { r.Filter = &domain.Filter{ItemTypes: []string{"nope"}} },
	} {
		req := h.req(b.ConsumerID, "https://hooks.example.com/valid", 0)
		mutate(&req)
		_, err := h.f.Svc.UpsertSubscription(h.ctx, b.P, req)
		domaintest.WantCode(t, name, err, domain.CodeInvalidRequest)
	}
	if h.fake.VerifyCount("https://hooks.example.com/valid") != 0 || len(h.list(t, b.P)) != 0 {
		t.Fatal("a rejected upsert sent a challenge or left a subscription")
	}
	sub := h.upsert(t, b.P, h.req(b.ConsumerID, "https://hooks.example.com/valid", 0))
	var scopes []domain.Scope
	for _, s := range domain.AllScopes() {
		if s != domain.ScopeSubscriptionManage {
			scopes = append(scopes, s)
		}
	}
	tok, _ := h.f.Token(h.sp.SpaceID, b.ActorID, "", scopes...)
	p := h.f.Principal(tok)
	_, err := h.f.Svc.UpsertSubscription(h.ctx, p, h.req(b.ConsumerID, "https://hooks.example.com/scope", 0))
	domaintest.WantCode(t, "upsert without subscription.manage", err, domain.CodeForbidden)
	_, err = h.f.Svc.ListSubscriptions(h.ctx, p)
	domaintest.WantCode(t, "list without subscription.manage", err, domain.CodeForbidden)
	_, err = h.stop(p, sub.SubscriptionID)
	domaintest.WantCode(t, "stop without subscription.manage", err, domain.CodeForbidden)

	off := domaintest.New(t, domaintest.MemBackend, nil)
	osp := off.Space()
	ob := off.Party(osp.SpaceID)
	_, err = off.Svc.UpsertSubscription(h.ctx, ob.P, h.req(ob.ConsumerID, "https://hooks.example.com/off", 0))
	domaintest.WantCode(t, "upsert without webhooks", err, domain.CodeUnsupported)
	_, err = off.Svc.ListSubscriptions(h.ctx, ob.P)
	domaintest.WantCode(t, "list without webhooks", err, domain.CodeUnsupported)
	_, err = off.Svc.StopSubscription(h.ctx, ob.P, sub.SubscriptionID, domain.StopSubscriptionRequest{RequestID: "r"})
	domaintest.WantCode(t, "stop without webhooks", err, domain.CodeUnsupported)
	_, err = off.Svc.Redeliver(h.ctx, osp.SpaceID, "dl_x")
	domaintest.WantCode(t, "redeliver without webhooks", err, domain.CodeUnsupported)
	if n, err := off.Svc.WorkDeliveries(h.ctx, 10); n != 0 || err != nil {
		t.Fatalf("WorkDeliveries without webhooks: %d, %v", n, err)
	}
}

// TestSecretsNeverShown: no result, delivery record, error or log line ever contains a webhook secret
// (checked over subscribe, rotation, a failed challenge, failed and successful deliveries, list, stop,
// the admin delivery list and redelivery).
func TestSecretsNeverShown(t *testing.T) {
	h := newHooks(t, nil)
	a, b := h.f.Party(h.sp.SpaceID), h.f.Party(h.sp.SpaceID)
	url := "https://hooks.example.com/secret"
	var out []any
	sub := h.upsert(t, b.P, h.req(b.ConsumerID, url, 0))
	out = append(out, sub, h.upsert(t, b.P, h.req(b.ConsumerID, url, 1)))
	h.fake.FailVerify(url, false, "challenge not echoed")
	_, err := h.f.Svc.UpsertSubscription(h.ctx, b.P, h.req(b.ConsumerID, url, 0))
	out = append(out, err.Error(), domain.AsError(err).Wire())
	h.fake.Default(url, domaintest.WebhookAnswer{Status: http.StatusGone})
	h.f.Send(a.P, "one", b.ActorID)
	h.work(t)
	failed, err := h.f.Svc.ListDeliveries(h.ctx, h.sp.SpaceID, domain.DeliveryFailed)
	if err != nil || len(failed.Deliveries) != 1 {
		t.Fatalf("failed: %+v %v", failed, err)
	}
	out = append(out, failed)
	h.fake.Default(url, domaintest.WebhookAnswer{Status: http.StatusOK})
	r, err := h.f.Svc.Redeliver(h.ctx, h.sp.SpaceID, failed.Deliveries[0].DeliveryID)
	out = append(out, r, err)
	h.work(t)
	l, _ := h.f.Svc.ListSubscriptions(h.ctx, b.P)
	st, _ := h.stop(b.P, sub.SubscriptionID)
	out = append(out, l, st)
	if n := len(h.fake.Deliveries(url)); n != 2 || !h.fake.Deliveries(url)[1].Result.Delivered {
		t.Fatalf("%d attempts", n)
	}
	text := string(testjson.Marshal(t, out)) + "\n" + h.logs.String()
	if !strings.Contains(h.logs.String(), "webhook delivery attempt") {
		t.Fatal("no delivery attempt was logged: the log check proves nothing")
	}
	for _, s := range ruleSecrets {
		raw := strings.TrimPrefix(s, "whsec_")
		if strings.Contains(text, raw) || strings.Contains(text, s) {
			t.Fatalf("a secret appears in results or logs")
		}
	}
}
