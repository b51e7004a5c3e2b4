package domaintest

import (
	"context"
	"testing"
	"time"

	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/domain/retry"
	"github.com/waypost/waypost/internal/platform"
)

// RunWebhookProperties runs property P15 (SUPPLEMENT §15: webhook events) and the deterministic delivery
// scenarios of RFC §12.4 through the service's public operations against the adapter nb makes:
//
//   - P15_Model: a rapid model-based check of random interleavings of sends, memory publishes, acks,
//     subscription upserts (identical repeats, rotations, failed challenges), stops, token revocations,
//     clock advances, worker passes, receiver behaviours, service restarts and duplicated, reordered,
//     lost and concurrent wake-ups, against a fake sender (FakeWebhooks) that checks every attempt when
//     it is made;
//   - P15_ModelRealSender: the same model with the production sender (webhook/sender) posting to an
//     httptest receiver that verifies every signature with the independent Standard Webhooks library;
//   - Schedule, RetryAfter, GoneAndExpiry: the attempt schedule on a fake clock;
//   - CrashBeforeDispatch, CrashAfterClaim: a restart between commit and delivery, and a worker that dies
//     holding an attempt's lease;
//   - DualSigning: both secrets sign for five minutes after a rotation, then only the new one.
//
// Every check builds a fresh backend with nb, so checks do not see each other's subscriptions. When the
// backend's item store implements Reopener, a "restart" closes it and opens it again (store/pebble: the same directory);
// otherwise a restart is a new Service over the same adapter. A failing rapid check prints its seed
// (-rapid.seed=N). MaxSteps bounds the random operations of one check.
func RunWebhookProperties(t *testing.T, nb NewBackend, opts ...PropOption) {
	runProperties(t, nb, withOptions(propConfig{steps: 40, concurrency: 4}, opts), []property{
		{"P15_Model", func(t *testing.T, nb NewBackend, cfg propConfig) { whP15(t, nb, cfg, false) }},
		{"P15_ModelRealSender", func(t *testing.T, nb NewBackend, cfg propConfig) { whP15(t, nb, cfg, true) }},
		{"Schedule", whSchedule},
		{"RetryAfter", whRetryAfter},
		{"GoneAndExpiry", whGoneAndExpiry},
		{"CrashBeforeDispatch", whCrashBeforeDispatch},
		{"CrashAfterClaim", whCrashAfterClaim},
		{"StaleWakeRacesRedeliver", whStaleWakeRedeliver},
		{"DualSigning", whDualSigning},
	})
}

// Reopener is implemented by a test backend's item store that can be closed and opened again on the same
// durable storage, as a restarted process finds it (store/pebble: the same directory). The old store must not be used
// afterwards.
type Reopener interface {
	Reopen(t testing.TB) port.ItemStore
}

// ---------------------------------------------------------------------------------------------------------
// Environment shared by the webhook properties and scenarios.

// whPolicy returns a retry policy with ±jitter whose random source always answers r.
func whPolicy(jitter, r float64) *retry.Policy {
	return &retry.Policy{Jitter: jitter, Rand: func() float64 { return r }}
}

// whBaseSchedule is the RFC §12.4 base schedule, written out independently of package retry (never modified).
var whBaseSchedule = []time.Duration{0, time.Second, 5 * time.Second, 30 * time.Second, 5 * time.Minute}

// whDelay is the base delay before attempt n+1 (n attempts made) scaled by factor.
func whDelay(n int, factor float64) time.Duration {
	return time.Duration(float64(whBaseSchedule[n]) * factor)
}

// whEnv is one backend with a service that can be restarted over it.
type whEnv struct {
	t       TB
	outer   testing.TB
	backend Backend
	cfg     domain.Config
	svc     *domain.Service
	clock   *Clock
	fake    *FakeWebhooks
	queue   *FakeQueue
	c       *Client
	rids    *Fixture // request IDs and the Client's fixture; its Svc follows restarts
}

// newWhEnv builds a fresh backend (with outer, which outlives a rapid check) and a service with webhooks
// from fake, wake-ups into a FakeQueue and the given retry policy; t receives failures. Message bodies
// commit inline, so only memory needs the blob store.
func newWhEnv(t TB, outer testing.TB, nb NewBackend, clock *Clock, fake *FakeWebhooks, policy *retry.Policy) *whEnv {
	b := nb(outer)
	e := &whEnv{t: t, outer: outer, backend: b, clock: clock, fake: fake, queue: &FakeQueue{}}
	e.cfg = domain.Config{Store: b.Store, Blobs: b.Blobs, Clock: clock, IDs: platform.IDs{},
		CursorKey: []byte("0123456789abcdef0123456789abcdef-test-key"), InlineBodyMax: 16 << 10,
		Webhooks: fake, DeliveryQueue: e.queue, WebhookRetry: policy}
	e.rids = &Fixture{T: outer, Clock: clock, Backend: b}
	e.start()
	return e
}

func (e *whEnv) start() {
	svc, err := domain.New(e.cfg)
	if err != nil {
		e.t.Fatalf("domain.New: %v", err)
	}
	e.svc = svc
	e.rids.Svc = svc
	e.c = &Client{T: e.t, F: e.rids, Svc: svc, Ctx: context.Background()}
}

// restart replaces the service by a new one, as a restarted process: nothing in memory survives; the
// store is closed and reopened when it can be. It reports whether the store was reopened.
func (e *whEnv) restart() bool {
	reopened := false
	if r, ok := e.cfg.Store.(Reopener); ok {
		e.cfg.Store = r.Reopen(e.outer)
		e.backend.Store = e.cfg.Store
		reopened = true
	}
	e.start()
	return reopened
}

// work runs one worker pass and fails on error.
func (e *whEnv) work() int {
	e.t.Helper()
	n, err := e.svc.WorkDeliveries(context.Background(), 100)
	if err != nil {
		e.t.Fatalf("WorkDeliveries: %v", err)
	}
	return n
}

// party creates an actor with an inbox consumer and an all-scopes token.
func (e *whEnv) party(space string) Party { e.t.Helper(); return e.c.Party(space) }

// upsert subscribes with the given principal and fails on error.
func (e *whEnv) upsert(p *domain.Principal, req domain.UpsertSubscriptionRequest) domain.SubscriptionResult {
	e.t.Helper()
	if req.RequestID == "" {
		req.RequestID = e.c.RID("sub")
	}
	if req.Delivery.Mode == "" {
		req.Delivery.Mode = domain.DeliveryModeWebhook
	}
	r, err := e.svc.UpsertSubscription(context.Background(), p, req)
	if err != nil {
		e.t.Fatalf("UpsertSubscription %s: %v", req.Delivery.URL, err)
	}
	return r
}

// deliveries lists the space's delivery records in state.
func (e *whEnv) deliveries(space, state string) []domain.Delivery {
	e.t.Helper()
	l, err := e.svc.ListDeliveries(context.Background(), space, state)
	if err != nil {
		e.t.Fatalf("ListDeliveries %s: %v", state, err)
	}
	return l.Deliveries
}

// whSecrets are the secrets of the webhook tests: "whsec_" + standard base64 of 32 bytes (never modified).
var whSecrets = []string{
	"whsec_YTr7j5Bsblmx1J7PPEgB6rN9RY8vemo2Jw0lX2K5tO8=",
	"whsec_s3EctRXflDOfFw5tw26BwG+Ljc1RJXkqlxRa0/byqxs=",
	"whsec_oMWHXa7eCj4QJir8dSiGNBUs/ViPfMdkuZPRTxMhU3I=",
	"whsec_fgRaw7af2tsfkBf6+dAPA1FMsf348XGb4A0jsHiHR80=",
}
