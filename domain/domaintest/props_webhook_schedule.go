package domaintest

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/domain/retry"
	"github.com/waypost/waypost/store/faulty"
)

// whScene is one subscription of B's inbox consumer to message events, with A sending to B.
type whScene struct {
	e     *whEnv
	space domain.SpaceResult
	a, b  Party
	sub   domain.SubscriptionResult
	url   string
}

// newWhScene builds a fresh backend, a service with the given retry policy, and B's subscription with ttl
// seconds (0: the default) to url.
func newWhScene(t *testing.T, nb NewBackend, policy *retry.Policy, ttl int, fake *FakeWebhooks, clock *Clock, url string) *whScene {
	t.Helper()
	if clock == nil {
		clock = NewClock()
	}
	if fake == nil {
		fake = NewFakeWebhooks(clock.Now)
	}
	e := newWhEnv(t, t, nb, clock, fake, policy)
	s := &whScene{e: e, url: url}
	s.space = e.c.Space()
	s.a, s.b = e.party(s.space.SpaceID), e.party(s.space.SpaceID)
	req := domain.UpsertSubscriptionRequest{ConsumerID: s.b.ConsumerID, EventTypes: []string{domain.EventMessageCommitted},
		Delivery: domain.SubscriptionDelivery{URL: url, Secret: whSecrets[0]}}
	if ttl > 0 {
		req.TTLSeconds = &ttl
	}
	s.sub = e.upsert(s.b.P, req)
	return s
}

// send sends a message from A to B and returns its feed item as B reads it.
func (s *whScene) send(text string) domain.FeedItem {
	s.e.t.Helper()
	r := s.e.c.Send(s.a.P, text, s.b.ActorID)
	items, _ := s.e.c.ReadAll(s.b.P, s.b.ConsumerID, nil, 100)
	for _, it := range items {
		if it.ResourceID == r.MessageID {
			return it
		}
	}
	s.e.t.Fatalf("message %s not in B's inbox", r.MessageID)
	return domain.FeedItem{}
}

// attemptTimes drives the worker from due time to due time (advancing the clock exactly to each) and
// returns the clock time of every attempt to url. Before each due time it checks that nothing is attempted
// a nanosecond early.
func (s *whScene) attemptTimes(t *testing.T, passes int) []time.Time {
	t.Helper()
	s.e.work() // dispatches what was committed and makes the attempts due now
	for range passes {
		at, ok, err := s.e.svc.NextDue(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		if d := at.Sub(s.e.clock.Now()); d > time.Nanosecond {
			s.e.clock.Advance(d - time.Nanosecond)
			before := len(s.e.fake.Deliveries(s.url))
			s.e.work()
			if n := len(s.e.fake.Deliveries(s.url)); n != before {
				t.Fatalf("an attempt was made at %s, a nanosecond before it was due (%s)", s.e.clock.Now(), at)
			}
			s.e.clock.Advance(time.Nanosecond)
		}
		s.e.work()
	}
	var out []time.Time
	for _, c := range s.e.fake.Deliveries(s.url) {
		out = append(out, c.At)
	}
	return out
}

// offsets returns the delays between consecutive times.
func offsets(ts []time.Time) []time.Duration {
	var out []time.Duration
	for i := 1; i < len(ts); i++ {
		out = append(out, ts[i].Sub(ts[i-1]))
	}
	return out
}

// whSchedule checks the attempt schedule of RFC §12.4 on a fake clock: attempts at 0 s, then 1 s, 5 s,
// 30 s and 5 min after the previous one, exactly with zero jitter and within ±10% (exactly as the random
// source dictates) with jitter; then a failure record listed by ListDeliveries(state=failed), and
// Redeliver makes it pending again with a fresh schedule that delivers.
func whSchedule(t *testing.T, nb NewBackend, _ propConfig) {
	for _, tc := range []struct {
		name   string
		jitter float64
		r      float64
	}{
		{"no jitter", 0, 0.3},
		{"jitter, low end", 0.1, 0},
		{"jitter, middle", 0.1, 0.5},
		{"jitter, high end", 0.1, 0.999999},
		{"default jitter fraction, random source", retry.DefaultJitter, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			policy := whPolicy(tc.jitter, tc.r)
			if tc.r < 0 {
				policy = &retry.Policy{Jitter: tc.jitter} // math/rand/v2: only the bounds can be checked
			}
			s := newWhScene(t, nb, policy, 0, nil, nil, "https://hooks.example.com/schedule")
			s.e.fake.Default(s.url, WebhookAnswer{Status: http.StatusServiceUnavailable})
			fi := s.send("scheduled")
			start := s.e.clock.Now()
			times := s.attemptTimes(t, 20)
			if len(times) != retry.MaxAttempts {
				t.Fatalf("%d attempts, want %d: %v", len(times), retry.MaxAttempts, times)
			}
			if !times[0].Equal(start) {
				t.Fatalf("first attempt at %s, want immediately (%s)", times[0], start)
			}
			for i, got := range offsets(times) {
				base := whBaseSchedule[i+1]
				lo, hi := time.Duration(float64(base)*(1-tc.jitter)), time.Duration(float64(base)*(1+tc.jitter))
				if got < lo || got > hi {
					t.Fatalf("delay before attempt %d is %v, outside [%v, %v]", i+2, got, lo, hi)
				}
				if tc.r >= 0 {
					if want := time.Duration(float64(base) * (1 + tc.jitter*(2*tc.r-1))); got != want {
						t.Fatalf("delay before attempt %d is %v, want exactly %v", i+2, got, want)
					}
				}
			}
			for _, c := range s.e.fake.Deliveries(s.url) {
				if c.Item.ItemID != fi.ItemID {
					t.Fatalf("an attempt announced %s, want %s every time", c.Item.ItemID, fi.ItemID)
				}
			}
			// Nothing more, however long we wait; one failure record.
			s.e.clock.Advance(time.Hour)
			s.e.work()
			if n := len(s.e.fake.Deliveries(s.url)); n != retry.MaxAttempts {
				t.Fatalf("%d attempts after waiting an hour more", n)
			}
			failed := s.e.deliveries(s.space.SpaceID, domain.DeliveryFailed)
			if len(failed) != 1 {
				t.Fatalf("ListDeliveries(failed): %+v", failed)
			}
			d := failed[0]
			if d.Attempts != 5 || !strings.HasPrefix(d.FailureReason, string(retry.StopExhausted)) || d.EventID != fi.ItemID ||
				d.SubscriptionID != s.sub.SubscriptionID || len(d.History) != 5 || d.NextAttemptAt != nil {
				t.Fatalf("failure record %+v", d)
			}
			ids := map[string]bool{}
			for i, a := range d.History {
				if ids[a.AttemptID] || a.AttemptID == "" || a.StatusCode != 503 || a.Outcome != "retry" || !a.StartedAt.Equal(times[i]) {
					t.Fatalf("attempt %d: %+v (IDs so far %v)", i+1, a, ids)
				}
				ids[a.AttemptID] = true
			}
			if p := s.e.deliveries(s.space.SpaceID, domain.DeliveryPending); len(p) != 0 {
				t.Fatalf("pending after failing: %+v", p)
			}
			h := whHealth(t, s.e, s.b.P)
			if h.ConsecutiveFailures != 5 || h.LastFailureReason == nil || *h.LastFailureReason != "status 503" || h.LastSuccessAt != nil {
				t.Fatalf("health after 5 failures: %+v", h)
			}
			// Redeliver: pending again, attempted at once, delivered, record gone.
			r, err := s.e.svc.Redeliver(context.Background(), s.space.SpaceID, d.DeliveryID)
			if err != nil || r.State != domain.DeliveryPending || r.Attempts != 0 || r.NextAttemptAt == nil || !r.NextAttemptAt.Equal(s.e.clock.Now()) {
				t.Fatalf("Redeliver: %+v, %v", r, err)
			}
			if again, err := s.e.svc.Redeliver(context.Background(), s.space.SpaceID, d.DeliveryID); err != nil || again.State != domain.DeliveryPending {
				t.Fatalf("Redeliver of a pending delivery: %+v, %v", again, err)
			}
			s.e.fake.Default(s.url, WebhookAnswer{Status: http.StatusNoContent})
			s.e.work()
			calls := s.e.fake.Deliveries(s.url)
			if len(calls) != 6 || !calls[5].At.Equal(s.e.clock.Now()) || calls[5].Item.ItemID != fi.ItemID {
				t.Fatalf("after Redeliver: %d attempts", len(calls))
			}
			for _, st := range []string{domain.DeliveryFailed, domain.DeliveryPending, domain.DeliveryCancelled} {
				if l := s.e.deliveries(s.space.SpaceID, st); len(l) != 0 {
					t.Fatalf("%s after the redelivery succeeded: %+v", st, l)
				}
			}
			if _, err := s.e.svc.Redeliver(context.Background(), s.space.SpaceID, d.DeliveryID); CodeOf(err) != domain.CodeNotFound {
				t.Fatalf("Redeliver of a delivered delivery: %v, want NOT_FOUND", err)
			}
			h = whHealth(t, s.e, s.b.P)
			if h.ConsecutiveFailures != 0 || h.LastSuccessAt == nil || !h.LastSuccessAt.Equal(s.e.clock.Now()) {
				t.Fatalf("health after the success: %+v", h)
			}
		})
	}
}

// whHealth returns the health of p's only subscription.
func whHealth(t TB, e *whEnv, p *domain.Principal) domain.DeliveryHealth {
	t.Helper()
	l := mustDo[domain.SubscriptionList](t, "ListSubscriptions")(e.svc.ListSubscriptions(context.Background(), p))
	if len(l.Subscriptions) != 1 || l.Subscriptions[0].Health == nil {
		t.Fatalf("ListSubscriptions: %+v", l)
	}
	return *l.Subscriptions[0].Health
}

// whRetryAfter checks that a valid Retry-After (delta seconds or HTTP-date) postpones the next attempt to
// the time it names when that is later than the schedule, an earlier or invalid one changes nothing, and
// one at or past the subscription's expiry ends the delivery as failed (subscription_expired) at once.
func whRetryAfter(t *testing.T, nb NewBackend, _ propConfig) {
	t0 := NewClock().Now()
	date := func(d time.Duration) string { return t0.Add(d).Format(http.TimeFormat) }
	for _, tc := range []struct {
		name       string
		ttl        int
		retryAfter string
		wantDelay  time.Duration // delay before the second attempt; 0: none (failed)
		wantReason string        // failure reason prefix when no second attempt
	}{
		{name: "seconds later than the schedule", retryAfter: "120", wantDelay: 120 * time.Second},
		{name: "seconds with spaces", retryAfter: " 7 ", wantDelay: 7 * time.Second},
		{name: "seconds earlier than the schedule", retryAfter: "0", wantDelay: time.Second},
		{name: "HTTP-date later than the schedule", retryAfter: date(10 * time.Minute), wantDelay: 10 * time.Minute},
		{name: "HTTP-date in the past", retryAfter: date(-time.Hour), wantDelay: time.Second},
		{name: "invalid", retryAfter: "soon", wantDelay: time.Second},
		{name: "negative", retryAfter: "-5", wantDelay: time.Second},
		{name: "seconds just before expiry", ttl: 600, retryAfter: "599", wantDelay: 599 * time.Second},
		{name: "seconds at expiry", ttl: 600, retryAfter: "600", wantReason: string(retry.StopExpired)},
		{name: "seconds past expiry", ttl: 600, retryAfter: "3600", wantReason: string(retry.StopExpired)},
		{name: "HTTP-date past expiry", ttl: 600, retryAfter: date(time.Hour), wantReason: string(retry.StopExpired)},
		{name: "huge seconds", retryAfter: "99999999999999999999", wantReason: string(retry.StopExpired)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newWhScene(t, nb, whPolicy(0, 0), tc.ttl, nil, nil, "https://hooks.example.com/retry-after")
			s.e.fake.Default(s.url, WebhookAnswer{Status: http.StatusServiceUnavailable})
			s.e.fake.Script(s.url, WebhookAnswer{Status: http.StatusServiceUnavailable, RetryAfter: tc.retryAfter})
			s.send("retry-after")
			times := s.attemptTimes(t, 1)
			if tc.wantReason != "" {
				s.e.clock.Advance(2 * time.Hour)
				s.e.work()
				if n := len(s.e.fake.Deliveries(s.url)); n != 1 {
					t.Fatalf("%d attempts, want 1", n)
				}
				failed := s.e.deliveries(s.space.SpaceID, domain.DeliveryFailed)
				if len(failed) != 1 || !strings.HasPrefix(failed[0].FailureReason, tc.wantReason) || failed[0].Attempts != 1 {
					t.Fatalf("failed: %+v, want one failure %q", failed, tc.wantReason)
				}
				return
			}
			if len(times) != 2 || times[1].Sub(times[0]) != tc.wantDelay {
				t.Fatalf("attempts at %v (delays %v), want the second after %v", times, offsets(times), tc.wantDelay)
			}
			if tc.ttl > 0 {
				// The third attempt (5 s later) would fall after the expiry: failed after two.
				s.attemptTimes(t, 3)
				failed := s.e.deliveries(s.space.SpaceID, domain.DeliveryFailed)
				if n := len(s.e.fake.Deliveries(s.url)); n != 2 || len(failed) != 1 || !strings.HasPrefix(failed[0].FailureReason, string(retry.StopExpired)) {
					t.Fatalf("%d attempts, failed %+v", n, failed)
				}
				return
			}
			// The schedule continues from the postponed attempt: the third comes 5 s after it.
			third := s.attemptTimes(t, 1)
			if len(third) != 3 || third[2].Sub(third[1]) != 5*time.Second {
				t.Fatalf("third attempt: %v", offsets(third))
			}
		})
	}
}

// whGoneAndExpiry checks the other ends of a delivery: 410 fails it at once; a schedule running into the
// subscription's expiry fails it (subscription_expired) without an attempt at or after expiry; and what is
// re-checked before every attempt (stop, expiry, revoked credential) cancels it without an attempt.
func whGoneAndExpiry(t *testing.T, nb NewBackend, _ propConfig) {
	t.Run("410 fails at once", func(t *testing.T) {
		s := newWhScene(t, nb, whPolicy(0, 0), 0, nil, nil, "https://hooks.example.com/gone")
		s.e.fake.Default(s.url, WebhookAnswer{Status: http.StatusGone})
		s.send("gone")
		s.attemptTimes(t, 10)
		s.e.clock.Advance(time.Hour)
		s.e.work()
		failed := s.e.deliveries(s.space.SpaceID, domain.DeliveryFailed)
		if n := len(s.e.fake.Deliveries(s.url)); n != 1 || len(failed) != 1 || failed[0].Attempts != 1 || failed[0].FailureReason != "status 410" {
			t.Fatalf("%d attempts, failed %+v", n, failed)
		}
	})
	t.Run("schedule runs into expiry", func(t *testing.T) {
		s := newWhScene(t, nb, whPolicy(0, 0), 120, nil, nil, "https://hooks.example.com/expiring")
		s.e.fake.Default(s.url, WebhookAnswer{Status: http.StatusInternalServerError})
		s.send("expiring")
		times := s.attemptTimes(t, 10)
		want := []time.Duration{time.Second, 5 * time.Second, 30 * time.Second}
		if !slices.Equal(offsets(times), want) {
			t.Fatalf("delays %v, want %v (the 5 min one would pass the expiry at 120 s)", offsets(times), want)
		}
		for _, at := range times {
			if !at.Before(s.sub.ExpiresAt) {
				t.Fatalf("an attempt at %s, at or after the expiry %s", at, s.sub.ExpiresAt)
			}
		}
		failed := s.e.deliveries(s.space.SpaceID, domain.DeliveryFailed)
		if len(failed) != 1 || failed[0].Attempts != 4 || !strings.HasPrefix(failed[0].FailureReason, string(retry.StopExpired)) {
			t.Fatalf("failed: %+v", failed)
		}
	})
	for _, tc := range []struct {
		name   string
		change func(s *whScene)
		reason string
	}{
		{"stopped", func(s *whScene) {
			Must[domain.StopSubscriptionResult](s.e.outer)(s.e.svc.StopSubscription(context.Background(), s.b.P, s.sub.SubscriptionID,
				domain.StopSubscriptionRequest{RequestID: s.e.c.RID("stop")}))
		}, "subscription_stopped"},
		{"expired", func(s *whScene) { s.e.clock.Advance(s.sub.ExpiresAt.Sub(s.e.clock.Now())) }, "subscription_expired"},
		{"credential revoked", func(s *whScene) {
			Must[domain.TokenResult](s.e.outer)(s.e.svc.RevokeToken(context.Background(), s.space.SpaceID, s.b.TokenID))
		}, "credential_invalid"},
		{"actor revoked", func(s *whScene) {
			Must[domain.ActorResult](s.e.outer)(s.e.svc.RevokeActor(context.Background(), s.space.SpaceID, s.b.ActorID))
		}, "credential_invalid"},
	} {
		t.Run("re-checked before the retry: "+tc.name, func(t *testing.T) {
			s := newWhScene(t, nb, whPolicy(0, 0), 0, nil, nil, "https://hooks.example.com/recheck")
			s.e.fake.Default(s.url, WebhookAnswer{Status: http.StatusServiceUnavailable})
			fi := s.send("recheck")
			s.e.work() // the first attempt fails; the next is due in 1 s
			tc.change(s)
			s.e.clock.Advance(time.Minute)
			s.e.work()
			if n := len(s.e.fake.Deliveries(s.url)); n != 1 {
				t.Fatalf("%d attempts, want only the one before the change", n)
			}
			c := s.e.deliveries(s.space.SpaceID, domain.DeliveryCancelled)
			if len(c) != 1 || c[0].FailureReason != tc.reason || c[0].EventID != fi.ItemID || c[0].Attempts != 1 {
				t.Fatalf("cancelled: %+v, want one with reason %s", c, tc.reason)
			}
		})
	}
}

// whCrashBeforeDispatch: items committed while no worker runs are delivered after a restart (a new service;
// the store closed and reopened when the backend can), exactly the missed ones: nothing delivered before the
// crash comes again, nothing committed is missing.
func whCrashBeforeDispatch(t *testing.T, nb NewBackend, _ propConfig) {
	clock := NewClock()
	fake := NewFakeWebhooks(clock.Now)
	s := newWhScene(t, nb, whPolicy(0, 0), 0, fake, clock, "https://hooks.example.com/b")
	// A subscribes to receipts of its messages (from B's acks).
	aURL := "https://hooks.example.com/a"
	s.e.upsert(s.a.P, domain.UpsertSubscriptionRequest{ConsumerID: s.a.ConsumerID, EventTypes: []string{domain.EventReceiptUpdated},
		Delivery: domain.SubscriptionDelivery{URL: aURL, Secret: whSecrets[1]}})
	first := s.send("before the crash")
	s.e.work()
	if got := fake.Deliveries(s.url); len(got) != 1 || got[0].Item.ItemID != first.ItemID {
		t.Fatalf("before the crash: %+v", got)
	}
	// Commits with the worker not running.
	missed := map[string]string{} // item ID → URL
	for i := range 3 {
		missed[s.send(fmt.Sprintf("missed %d", i)).ItemID] = s.url
	}
	Must[domain.AckResult](t)(s.e.svc.Ack(context.Background(), s.b.P, domain.AckRequest{RequestID: s.e.c.RID("ack"), ConsumerID: s.b.ConsumerID,
		Items: []domain.AckEntry{{ItemID: first.ItemID, Stage: domain.StageProcessed}}}))
	receipts, _ := s.e.c.ReadAll(s.a.P, s.a.ConsumerID, nil, 10)
	if len(receipts) != 1 || receipts[0].ItemType != domain.ItemReceipt {
		t.Fatalf("A's inbox: %+v", receipts)
	}
	missed[receipts[0].ItemID] = aURL
	before := len(fake.Calls())
	reopened := s.e.restart()
	t.Logf("restart: store reopened %v", reopened)
	s.e.work()
	got := map[string]string{}
	for _, c := range fake.Calls()[before:] {
		if c.Kind != "deliver" {
			continue
		}
		if _, dup := got[c.Item.ItemID]; dup {
			t.Fatalf("%s delivered twice after the restart", c.Item.ItemID)
		}
		got[c.Item.ItemID] = c.URL
		if !c.Result.Delivered {
			t.Fatalf("attempt %+v", c)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(missed) {
		t.Fatalf("delivered after the restart %v, want exactly the missed %v", got, missed)
	}
	s.e.clock.Advance(time.Hour)
	s.e.work()
	if n := len(fake.Calls()) - before; n != len(missed) {
		t.Fatalf("%d attempts after the restart, want %d", n, len(missed))
	}
}

// whCrashAfterClaim: a worker that dies after claiming an attempt (the request in flight) leaves the
// delivery to be retried when the lease ends, by a restarted service too, and never earlier; a crashed
// attempt counts, so a crash of the fifth attempt ends the delivery without a sixth.
func whCrashAfterClaim(t *testing.T, nb NewBackend, _ propConfig) {
	crash := func(t *testing.T, s *whScene) {
		t.Helper()
		if _, err := s.e.svc.DispatchPending(context.Background()); err != nil {
			t.Fatal(err)
		}
		refs, err := s.e.svc.DueDeliveries(context.Background(), 10)
		if err != nil || len(refs) != 1 {
			t.Fatalf("due: %v %v", refs, err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		s.e.fake.CrashNext(cancel)
		if _, err := s.e.svc.AttemptDelivery(ctx, refs[0]); err == nil {
			t.Fatal("an attempt whose worker died reported success")
		}
	}
	t.Run("retried after the lease", func(t *testing.T) {
		s := newWhScene(t, nb, whPolicy(0, 0), 0, nil, nil, "https://hooks.example.com/lease")
		fi := s.send("leased")
		crash(t, s)
		claimedAt := s.e.clock.Now()
		s.e.restart()
		s.e.fake.Default(s.url, WebhookAnswer{Status: http.StatusBadGateway})
		s.e.work()
		s.e.clock.Advance(whLease - time.Millisecond)
		s.e.work()
		if n := len(s.e.fake.Deliveries(s.url)); n != 1 {
			t.Fatalf("%d attempts before the lease ended, want only the crashed one", n)
		}
		pending := s.e.deliveries(s.space.SpaceID, domain.DeliveryPending)
		if len(pending) != 1 || pending[0].Attempts != 1 || pending[0].LeaseUntil == nil || !pending[0].LeaseUntil.Equal(claimedAt.Add(whLease)) {
			t.Fatalf("pending while leased: %+v", pending)
		}
		s.e.clock.Advance(time.Millisecond)
		s.e.work()
		calls := s.e.fake.Deliveries(s.url)
		if len(calls) != 2 || !calls[1].At.Equal(claimedAt.Add(whLease)) || calls[1].Item.ItemID != fi.ItemID {
			t.Fatalf("attempts %d", len(calls))
		}
		pending = s.e.deliveries(s.space.SpaceID, domain.DeliveryPending)
		if len(pending) != 1 || pending[0].Attempts != 2 || len(pending[0].History) != 1 || pending[0].LeaseUntil != nil ||
			!pending[0].NextAttemptAt.Equal(s.e.clock.Now().Add(5*time.Second)) {
			t.Fatalf("after the retry: %+v (the crashed attempt counts: the next delay is the third one, 5 s)", pending)
		}
		s.e.fake.Default(s.url, WebhookAnswer{Status: http.StatusOK})
		s.e.clock.Advance(5 * time.Second)
		s.e.work()
		calls = s.e.fake.Deliveries(s.url)
		if len(calls) != 3 || !calls[2].Result.Delivered {
			t.Fatalf("attempts %d", len(calls))
		}
		for _, st := range []string{domain.DeliveryPending, domain.DeliveryFailed} {
			if l := s.e.deliveries(s.space.SpaceID, st); len(l) != 0 {
				t.Fatalf("%s after delivery: %+v", st, l)
			}
		}
	})
	t.Run("crash of the fifth attempt", func(t *testing.T) {
		s := newWhScene(t, nb, whPolicy(0, 0), 0, nil, nil, "https://hooks.example.com/fifth")
		s.e.fake.Default(s.url, WebhookAnswer{Status: http.StatusServiceUnavailable})
		s.send("fifth")
		s.e.work()
		for range 3 {
			at, _, _ := s.e.svc.NextDue(context.Background())
			s.e.clock.Advance(at.Sub(s.e.clock.Now()))
			s.e.work()
		}
		at, _, _ := s.e.svc.NextDue(context.Background())
		s.e.clock.Advance(at.Sub(s.e.clock.Now()))
		crash(t, s)
		if n := len(s.e.fake.Deliveries(s.url)); n != 5 {
			t.Fatalf("%d attempts, want 5", n)
		}
		s.e.restart()
		s.e.clock.Advance(time.Hour)
		s.e.work()
		s.e.work()
		if n := len(s.e.fake.Deliveries(s.url)); n != 5 {
			t.Fatalf("%d attempts: a crashed fifth attempt was followed by another", n)
		}
		failed := s.e.deliveries(s.space.SpaceID, domain.DeliveryFailed)
		if len(failed) != 1 || failed[0].Attempts != 5 || !strings.HasPrefix(failed[0].FailureReason, string(retry.StopExhausted)) {
			t.Fatalf("failed: %+v", failed)
		}
	})
}

// whDualSigning uses the production sender and a receiver checking signatures with the Standard Webhooks
// reference library: before a rotation one signature by the old secret; for five minutes after it two,
// verifying with either secret; after that only the new secret's; the secrets never appear in an event.
func whDualSigning(t *testing.T, nb NewBackend, _ propConfig) {
	clock := NewClock()
	fake := NewFakeWebhooks(clock.Now)
	recv := newWhReceiver(fake, clock.Now)
	defer recv.srv.Close()
	fake.WithInner(realSender(t, clock.Now))
	url := recv.srv.URL + "/dual"
	s := newWhScene(t, nb, whPolicy(0, 0), 0, fake, clock, url)
	check := func(what string, wantOld, wantNew bool) {
		t.Helper()
		fi := s.send(what)
		s.e.work()
		for _, p := range recv.errs.Take() {
			t.Error(p)
		}
		evs := recv.events.All()
		ev := evs[len(evs)-1]
		if ev.WebhookID != fi.ItemID || ev.Status != http.StatusOK {
			t.Fatalf("%s: received %+v, want %s delivered", what, ev, fi.ItemID)
		}
		if want := map[bool]int{true: 2, false: 1}[wantOld && wantNew]; ev.Sigs != want {
			t.Fatalf("%s: %d signatures, want %d", what, ev.Sigs, want)
		}
		for i, secret := range []string{whSecrets[0], whSecrets[1]} {
			want := []bool{wantOld, wantNew}[i]
			if got := verifies(secret, ev.Body, ev.Header) == nil; got != want {
				t.Fatalf("%s: verifies with secret %d: %v, want %v", what, i, got, want)
			}
		}
		for _, secret := range whSecrets {
			if strings.Contains(string(ev.Body), strings.TrimPrefix(secret, domain.SecretPrefix)) {
				t.Fatalf("%s: a secret in the event body", what)
			}
		}
	}
	check("before the rotation", true, false)
	clock.Advance(time.Minute)
	rotated := clock.Now()
	s.e.upsert(s.b.P, domain.UpsertSubscriptionRequest{ConsumerID: s.b.ConsumerID, EventTypes: []string{domain.EventMessageCommitted},
		Delivery: domain.SubscriptionDelivery{URL: url, Secret: whSecrets[1]}})
	check("just after the rotation", true, true)
	clock.Advance(4*time.Minute + 59*time.Second)
	check("4m59s after the rotation", true, true)
	// A renewal with the same secret inside the window keeps the window's end.
	s.e.upsert(s.b.P, domain.UpsertSubscriptionRequest{ConsumerID: s.b.ConsumerID, EventTypes: []string{domain.EventMessageCommitted},
		Delivery: domain.SubscriptionDelivery{URL: url, Secret: whSecrets[1]}})
	clock.Advance(rotated.Add(5 * time.Minute).Sub(clock.Now()))
	check("5 min after the rotation", false, true)
	clock.Advance(time.Hour)
	check("an hour later", false, true)
	if n := fake.VerifyCount(url); n != 2 {
		t.Fatalf("%d challenges, want 2 (subscribe and rotate; the renewal needs none)", n)
	}
}

// whStaleWakeRedeliver: a stale wake-up of a failed delivery (an SQS duplicate, a late retry) races with
// an operator's Redeliver: the redelivery commits just after the wake-up read the failed record. The
// redelivered delivery must still be attempted by the next worker pass; a wake-up must never drop the due
// entry of a record that changed since it was read.
func whStaleWakeRedeliver(t *testing.T, nb NewBackend, _ propConfig) {
	var items *faulty.ItemStore
	s := newWhScene(t, Faulty(nb, &items, nil), whPolicy(0, 0), 0, nil, nil, "https://hooks.example.com/race")
	s.e.fake.Default(s.url, WebhookAnswer{Status: http.StatusGone})
	s.send("raced")
	s.e.work()
	failed := s.e.deliveries(s.space.SpaceID, domain.DeliveryFailed)
	if len(failed) != 1 {
		t.Fatalf("failed: %+v", failed)
	}
	ref := port.DeliveryRef{SpaceID: s.space.SpaceID, DeliveryID: failed[0].DeliveryID}
	s.e.fake.Default(s.url, WebhookAnswer{Status: http.StatusOK})
	var redelivered domain.Delivery
	var rerr error
	items.SetBeforeQuery(func(port.Query) {
		items.SetBeforeQuery(nil) // once: Redeliver reads too
		redelivered, rerr = s.e.svc.Redeliver(context.Background(), ref.SpaceID, ref.DeliveryID)
	})
	if out, err := s.e.svc.AttemptDelivery(context.Background(), ref); err != nil || !out.Done {
		t.Fatalf("stale wake-up: %+v, %v", out, err)
	}
	if rerr != nil || redelivered.State != domain.DeliveryPending {
		t.Fatalf("Redeliver during the wake-up: %+v, %v (the hook did not run where intended)", redelivered, rerr)
	}
	s.e.work()
	calls := s.e.fake.Deliveries(s.url)
	if len(calls) != 2 || !calls[1].Result.Delivered {
		t.Fatalf("%d attempts after the redelivery, want the redelivered one made", len(calls))
	}
	if p := s.e.deliveries(s.space.SpaceID, domain.DeliveryPending); len(p) != 0 {
		t.Fatalf("stuck pending: %+v", p)
	}
}
