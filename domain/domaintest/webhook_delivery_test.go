package domaintest_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/domain/domaintest"
	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/domain/retry"
	"github.com/waypost/waypost/internal/syncbuf"
)

// Secrets of the rule tests ("whsec_" + standard base64 of 32 bytes).
var ruleSecrets = []string{
	"whsec_YTr7j5Bsblmx1J7PPEgB6rN9RY8vemo2Jw0lX2K5tO8=",
	"whsec_s3EctRXflDOfFw5tw26BwG+Ljc1RJXkqlxRa0/byqxs=",
}

// hooks is a fixture with webhooks served by a FakeWebhooks, logging at debug level into logs.
type hooks struct {
	f    *domaintest.Fixture
	fake *domaintest.FakeWebhooks
	logs *syncbuf.Buffer
	ctx  context.Context
	sp   domain.SpaceResult
}

func newHooks(t *testing.T, cfg func(*domain.Config)) *hooks {
	h := &hooks{logs: &syncbuf.Buffer{}, ctx: context.Background()}
	h.f = domaintest.New(t, domaintest.MemBackend, func(c *domain.Config) {
		h.fake = domaintest.NewFakeWebhooks(c.Clock.Now)
		c.Webhooks = h.fake
		c.InlineBodyMax = 16 << 10
		c.Logger = slog.New(slog.NewJSONHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		if cfg != nil {
			cfg(c)
		}
	})
	h.sp = h.f.Space()
	return h
}

func (h *hooks) req(consumer, url string, secret int) domain.UpsertSubscriptionRequest {
	return domain.UpsertSubscriptionRequest{RequestID: h.f.RID("sub"), ConsumerID: consumer, EventTypes: []string{domain.EventMessageCommitted},
		Delivery: domain.SubscriptionDelivery{Mode: domain.DeliveryModeWebhook, URL: url, Secret: ruleSecrets[secret]}}
}

func (h *hooks) upsert(t *testing.T, p *domain.Principal, req domain.UpsertSubscriptionRequest) domain.SubscriptionResult {
	t.Helper()
	r, err := h.f.Svc.UpsertSubscription(h.ctx, p, req)
	if err != nil {
		t.Fatalf("upsert %s: %v", req.Delivery.URL, err)
	}
	return r
}

// subscribed returns A, a sender, and B, subscribed at url, to which the fake answers status.
func (h *hooks) subscribed(t *testing.T, url string, status int) (a, b domaintest.Party) {
	t.Helper()
	a, b = h.f.Party(h.sp.SpaceID), h.f.Party(h.sp.SpaceID)
	h.upsert(t, b.P, h.req(b.ConsumerID, url, 0))
	h.fake.Default(url, domaintest.WebhookAnswer{Status: status})
	return a, b
}

func (h *hooks) list(t *testing.T, p *domain.Principal) []domain.SubscriptionResult {
	t.Helper()
	l, err := h.f.Svc.ListSubscriptions(h.ctx, p)
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	return l.Subscriptions
}

func (h *hooks) stop(p *domain.Principal, id string) (domain.StopSubscriptionResult, error) {
	return h.f.Svc.StopSubscription(h.ctx, p, id, domain.StopSubscriptionRequest{RequestID: h.f.RID("stop")})
}

func (h *hooks) work(t *testing.T) {
	t.Helper()
	if _, err := h.f.Svc.WorkDeliveries(h.ctx, 100); err != nil {
		t.Fatalf("WorkDeliveries: %v", err)
	}
}

// driveDue works every due attempt, advancing the clock to each, for at most passes passes.
func (h *hooks) driveDue(t *testing.T, passes int) {
	t.Helper()
	for range passes {
		h.work(t)
		at, ok, err := h.f.Svc.NextDue(h.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return
		}
		if d := at.Sub(h.f.Clock.Now()); d > 0 {
			h.f.Clock.Advance(d)
		}
	}
}

// TestRetryDueWhenLeaseEnds: without jitter the attempt after the third is due exactly 30 s after it, the
// instant the third attempt's lease ends, so recording the attempt moves its due entry onto the same key.
// The worker must record that schedule, not fail, and go on to the fifth attempt and the failure record.
func TestRetryDueWhenLeaseEnds(t *testing.T) {
	h := newHooks(t, func(c *domain.Config) { c.WebhookRetry = &retry.Policy{} })
	url := "https://hooks.example.com/lease-end"
	a, b := h.subscribed(t, url, http.StatusServiceUnavailable)
	h.f.Send(a.P, "due at the lease end", b.ActorID)
	h.driveDue(t, 20)
	calls := h.fake.Deliveries(url)
	var offsets []time.Duration
	for i := 1; i < len(calls); i++ {
		offsets = append(offsets, calls[i].At.Sub(calls[i-1].At))
	}
	if fmt.Sprint(offsets) != fmt.Sprint([]time.Duration{time.Second, 5 * time.Second, 30 * time.Second, 5 * time.Minute}) {
		t.Fatalf("delays between attempts %v", offsets)
	}
	failed, err := h.f.Svc.ListDeliveries(h.ctx, h.sp.SpaceID, domain.DeliveryFailed)
	if err != nil || len(failed.Deliveries) != 1 || failed.Deliveries[0].Attempts != 5 {
		t.Fatalf("failed: %+v, %v", failed, err)
	}
}

// TestCrashedFifthAttemptIsTheLast: a worker that dies during the fifth attempt (claimed, request in
// flight) leaves a delivery that has had its five attempts: when the lease ends it fails
// (attempts_exhausted) without a sixth.
func TestCrashedFifthAttemptIsTheLast(t *testing.T) {
	h := newHooks(t, func(c *domain.Config) { c.WebhookRetry = &retry.Policy{} })
	url := "https://hooks.example.com/fifth"
	a, b := h.subscribed(t, url, http.StatusServiceUnavailable)
	h.f.Send(a.P, "crash on the fifth", b.ActorID)
	for len(h.fake.Deliveries(url)) < 4 {
		h.driveDue(t, 1)
	}
	at, _, _ := h.f.Svc.NextDue(h.ctx)
	h.f.Clock.Advance(at.Sub(h.f.Clock.Now()))
	refs, err := h.f.Svc.DueDeliveries(h.ctx, 10)
	if err != nil || len(refs) != 1 {
		t.Fatalf("due: %v, %v", refs, err)
	}
	ctx, cancel := context.WithCancel(h.ctx)
	h.fake.CrashNext(cancel)
	if _, err := h.f.Svc.AttemptDelivery(ctx, refs[0]); err == nil {
		t.Fatal("an attempt whose worker died reported success")
	}
	cancel()
	h.f.Clock.Advance(time.Hour)
	h.work(t)
	h.work(t)
	if n := len(h.fake.Deliveries(url)); n != 5 {
		t.Fatalf("%d attempts, want 5: a crashed fifth attempt was followed by another", n)
	}
	failed, err := h.f.Svc.ListDeliveries(h.ctx, h.sp.SpaceID, domain.DeliveryFailed)
	if err != nil || len(failed.Deliveries) != 1 || failed.Deliveries[0].Attempts != 5 ||
		!strings.HasPrefix(failed.Deliveries[0].FailureReason, string(retry.StopExhausted)) {
		t.Fatalf("failed: %+v, %v", failed, err)
	}
}

// TestSubscriptionScope: a subscription announces only what its credential could read through inbox.read
// on its consumer: no message or receipt events for a credential without message.read, no memory events
// without the memory.read scope and grant; messages to other actors never.
func TestSubscriptionScope(t *testing.T) {
	h := newHooks(t, nil)
	a, b := h.f.Party(h.sp.SpaceID), h.f.Party(h.sp.SpaceID)
	all := []string{domain.EventMessageCommitted, domain.EventReceiptUpdated, domain.EventMemoryRevisionPublished}
	sub := func(name string, scopes ...domain.Scope) string {
		tok, _ := h.f.Token(h.sp.SpaceID, b.ActorID, "", scopes...)
		p := h.f.Principal(tok)
		url := "https://hooks.example.com/" + name
		req := h.req(b.ConsumerID, url, 0)
		req.EventTypes = all
		h.upsert(t, p, req)
		if _, err := h.f.Svc.ReadInbox(h.ctx, p, domain.ReadRequest{ConsumerID: b.ConsumerID}); name == "manage-only" && domaintest.CodeOf(err) != domain.CodeForbidden {
			t.Fatalf("inbox.read with only subscription.manage: %v, want FORBIDDEN", err)
		}
		return url
	}
	full := sub("full")
	manageOnly := sub("manage-only", domain.ScopeSubscriptionManage)
	other := h.f.Party(h.sp.SpaceID)
	h.f.Send(a.P, "to b", b.ActorID)
	h.f.Send(a.P, "to someone else", other.ActorID)
	h.work(t)
	if n := len(h.fake.Deliveries(full)); n != 1 {
		t.Fatalf("the full credential got %d events, want 1 (only the message to B)", n)
	}
	if n := len(h.fake.Deliveries(manageOnly)); n != 0 {
		t.Fatalf("a credential that cannot read the consumer's feed (no message.read) got %d events", n)
	}
}

// TestRepeatedDispatchAnnouncesOnce: the AWS table stream may hand the dispatcher the same feed item again
// (a retried batch) after it was delivered; the delivered marker keeps it from being announced twice until
// its retention (24 h, the stream's) ends, when the worker removes the marker.
func TestRepeatedDispatchAnnouncesOnce(t *testing.T) {
	h := newHooks(t, nil)
	a, b := h.f.Party(h.sp.SpaceID), h.f.Party(h.sp.SpaceID)
	url := "https://hooks.example.com/once"
	h.upsert(t, b.P, h.req(b.ConsumerID, url, 0))
	h.f.Send(a.P, "announce me once", b.ActorID)
	h.work(t)
	if n := len(h.fake.Deliveries(url)); n != 1 {
		t.Fatalf("%d deliveries after the first pass, want 1", n)
	}
	feed, err := h.f.Backend.Store.Query(h.ctx, port.Query{PK: "FD#" + h.sp.SpaceID})
	if err != nil || len(feed) != 1 {
		t.Fatalf("feed items %d, %v", len(feed), err)
	}
	res, err := h.f.Svc.DispatchFeedItems(h.ctx, feed) // the repeated stream batch
	if err != nil || res.Deliveries != 0 {
		t.Fatalf("repeated dispatch: %+v, %v; want no new delivery", res, err)
	}
	h.work(t)
	if n := len(h.fake.Deliveries(url)); n != 1 {
		t.Fatalf("%d deliveries after a repeated dispatch, want 1", n)
	}
	// The marker is due for removal after 24 h; once removed, the due index is empty.
	at, ok, err := h.f.Svc.NextDue(h.ctx)
	if err != nil || !ok || at.Sub(h.f.Clock.Now()) < 23*time.Hour {
		t.Fatalf("next due %v (%v, %v), want the marker's removal in about 24 h", at, ok, err)
	}
	h.f.Clock.Advance(24*time.Hour + time.Second)
	h.work(t)
	if _, ok, err := h.f.Svc.NextDue(h.ctx); err != nil || ok {
		t.Fatalf("due entries left after the marker's retention: %v, %v", ok, err)
	}
	if n := len(h.fake.Deliveries(url)); n != 1 {
		t.Fatalf("%d deliveries after the marker's removal, want 1", n)
	}
}
