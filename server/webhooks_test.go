package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/waypost/waypost/domain"
)

// The webhook worker is tested through the embedded server's public behaviour: an in-process server over a
// temporary data directory, a receiver that checks every signature with the Standard Webhooks Go library,
// subscriptions made through the domain, messages sent through the HTTP handler.

const whAdmin = "wpa_webhook_test_0123456789abcdefghijklmnopqrstuv"

// whSecret is the receiver's secret ("whsec_" + base64 of 32 bytes).
const whSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw/4h7y8rz5ac="

// received is one request a receiver accepted.
type received struct {
	at      time.Time
	id      string // webhook-id
	body    []byte
	status  int
	isEvent bool
}

// receiver is a webhook receiver: it verifies every request (401 when the signature does not verify),
// answers challenges, and answers events with status(id, n) for the n-th attempt (from 1) of that event
// id; a status of 0 holds the request until the client goes away.
type receiver struct {
	t      testing.TB
	srv    *httptest.Server
	wh     *standardwebhooks.Webhook
	status func(id string, n int) int

	mu       sync.Mutex
	got      []received
	attempts map[string]int
	bad      int
	changed  chan struct{}
	quit     chan struct{} // closed when the test ends: held requests are let go
}

func newReceiver(t testing.TB, status func(id string, n int) int) *receiver {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(whSecret)
	if err != nil {
		t.Fatal(err)
	}
	r := &receiver{t: t, wh: wh, status: status, attempts: map[string]int{}, changed: make(chan struct{}, 1),
		quit: make(chan struct{})}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(func() { close(r.quit); r.srv.Close() })
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return
	}
	if err := r.wh.Verify(body, req.Header); err != nil {
		r.mu.Lock()
		r.bad++
		r.mu.Unlock()
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	id := req.Header.Get("webhook-id")
	var msg struct {
		Type      string `json:"type"`
		Challenge string `json:"challenge"`
	}
	_ = json.Unmarshal(body, &msg)
	if msg.Type == "verification" {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"challenge": msg.Challenge})
		return
	}
	r.mu.Lock()
	r.attempts[id]++
	status := r.status(id, r.attempts[id])
	r.got = append(r.got, received{at: time.Now(), id: id, body: body, status: status, isEvent: true})
	r.mu.Unlock()
	select {
	case r.changed <- struct{}{}:
	default:
	}
	if status == 0 {
		select {
		case <-req.Context().Done():
		case <-r.quit:
			panic(http.ErrAbortHandler) // never a 2xx for a held request
		}
		return
	}
	w.WriteHeader(status)
}

// events returns the event requests so far.
func (r *receiver) events() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.bad > 0 {
		r.t.Errorf("receiver: %d requests whose signature did not verify", r.bad)
	}
	return append([]received(nil), r.got...)
}

// waitFor waits until cond holds over the events received, or fails the test after timeout.
func (r *receiver) waitFor(timeout time.Duration, what string, cond func([]received) bool) []received {
	r.t.Helper()
	deadline := time.After(timeout)
	for {
		if ev := r.events(); cond(ev) {
			return ev
		}
		select {
		case <-r.changed:
		case <-time.After(20 * time.Millisecond):
		case <-deadline:
			r.t.Fatalf("receiver: %s: not within %v (got %d requests)", what, timeout, len(r.events()))
		}
	}
}

// whFixture is an embedded server with a space, a sender and a recipient whose inbox consumer may manage
// subscriptions.
type whFixture struct {
	t        testing.TB
	dir      string
	srv      *Server
	space    string
	source   string
	sender   string // token
	subToken string // recipient's token with subscription.manage
	consumer string
	n        int
}

func openWH(t testing.TB, dir string, wc WebhookConfig) *Server {
	t.Helper()
	_, fsync := t.(*testing.B) // benchmarks measure the production setting
	srv, err := Open(Config{DataDir: dir, NoSync: !fsync, AdminSecret: whAdmin, Webhooks: wc})
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

func newWHFixture(t testing.TB, wc WebhookConfig) *whFixture {
	t.Helper()
	f := &whFixture{t: t, dir: t.TempDir()}
	f.srv = openWH(t, f.dir, wc)
	t.Cleanup(func() { f.close() })
	var sp struct {
		SpaceID            string `json:"space_id"`
		DefaultRecipientID string `json:"default_recipient_id"`
		SourceURI          string `json:"source_uri"`
	}
	f.must("POST", "/admin/v0/spaces", whAdmin, map[string]any{"request_id": "space"}, &sp)
	f.space, f.source = sp.SpaceID, sp.SourceURI
	base := "/admin/v0/spaces/" + sp.SpaceID
	var a struct {
		ActorID string `json:"actor_id"`
	}
	f.must("POST", base+"/actors", whAdmin, map[string]any{"request_id": "sender"}, &a)
	var tok struct {
		Token string `json:"token"`
	}
	f.must("POST", base+"/tokens", whAdmin, map[string]any{"request_id": "sender-token", "actor_id": a.ActorID, "scopes": []string{"message.send"}}, &tok)
	f.sender = tok.Token
	var c struct {
		ConsumerID string `json:"consumer_id"`
	}
	f.must("POST", base+"/consumers", whAdmin, map[string]any{"request_id": "inbox", "actor_id": sp.DefaultRecipientID, "view": "inbox"}, &c)
	f.consumer = c.ConsumerID
	f.must("POST", base+"/tokens", whAdmin, map[string]any{"request_id": "sub-token", "actor_id": sp.DefaultRecipientID,
		"consumer_id": c.ConsumerID, "scopes": []string{"message.read", "subscription.manage"}}, &tok)
	f.subToken = tok.Token
	return f
}

func (f *whFixture) close() {
	if f.srv != nil {
		if err := f.srv.Close(); err != nil {
			f.t.Errorf("close: %v", err)
		}
		f.srv = nil
	}
}

// reopen closes the server and opens it again on the same data directory with wc.
func (f *whFixture) reopen(wc WebhookConfig) {
	f.close()
	f.srv = openWH(f.t, f.dir, wc)
}

func (f *whFixture) must(method, path, token string, body, out any) {
	f.t.Helper()
	raw, err := json.Marshal(body)
	if err != nil {
		f.t.Fatal(err)
	}
	req := httptest.NewRequest(method, path, bytes.NewReader(raw))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	f.srv.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		f.t.Fatalf("%s %s: %d %s", method, path, rec.Code, rec.Body.Bytes())
	}
	var env struct {
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &env); err != nil {
		f.t.Fatal(err)
	}
	if out != nil {
		if err := json.Unmarshal(env.Data, out); err != nil {
			f.t.Fatal(err)
		}
	}
}

// subscribe subscribes the recipient's consumer to message events at url.
func (f *whFixture) subscribe(url string) domain.SubscriptionResult {
	f.t.Helper()
	ctx := context.Background()
	p, err := f.srv.Service().Authenticate(ctx, f.subToken)
	if err != nil {
		f.t.Fatal(err)
	}
	f.n++
	sub, err := f.srv.Service().UpsertSubscription(ctx, p, domain.UpsertSubscriptionRequest{
		RequestID: fmt.Sprintf("sub-%d", f.n), ConsumerID: f.consumer, EventTypes: []string{domain.EventMessageCommitted},
		Delivery: domain.SubscriptionDelivery{Mode: domain.DeliveryModeWebhook, URL: url, Secret: whSecret}})
	if err != nil {
		f.t.Fatalf("subscribe %s: %v", url, err)
	}
	return sub
}

// send sends a message to the default recipient and returns its feed item_id.
func (f *whFixture) send() string {
	f.t.Helper()
	f.n++
	var res struct {
		ResourceID string `json:"resource_id"`
		VisibleSeq string `json:"visible_seq"`
	}
	f.must("POST", "/v0/messages", f.sender, map[string]any{"request_id": fmt.Sprintf("msg-%d", f.n),
		"subject": "secret subject", "body": map[string]any{"text": "secret body"}}, &res)
	// The feed item of the message: read it as the recipient.
	var page struct {
		Items []struct {
			ItemID     string `json:"item_id"`
			ResourceID string `json:"resource_id"`
		} `json:"items"`
	}
	f.must("POST", "/v0/inbox/read", f.subToken, map[string]any{"consumer_id": f.consumer, "cursor": nil, "limit": 200}, &page)
	for _, it := range page.Items {
		if it.ResourceID == res.ResourceID {
			return it.ItemID
		}
	}
	f.t.Fatalf("message %s not in the recipient's inbox", res.ResourceID)
	return ""
}

// cloudEvent is the part of an event the tests look at.
type cloudEvent struct {
	ID     string         `json:"id"`
	Source string         `json:"source"`
	Type   string         `json:"type"`
	Data   map[string]any `json:"data"`
}

func decodeEvent(t testing.TB, body []byte) cloudEvent {
	t.Helper()
	var e cloudEvent
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("event %s: %v", body, err)
	}
	return e
}

func countID(ev []received, id string) int {
	n := 0
	for _, e := range ev {
		if e.id == id {
			n++
		}
	}
	return n
}

// TestWebhookWorkerWakesOnCommitAndOnDue: with the safety poll set to an hour, a committed message is
// delivered promptly (the commit notifier wakes the worker) and a retry is made when it is due (the worker
// sleeps until the due index's next entry), not an hour later.
func TestWebhookWorkerWakesOnCommitAndOnDue(t *testing.T) {
	f := newWHFixture(t, WebhookConfig{AllowLoopback: true, poll: time.Hour})
	rcv := newReceiver(t, func(_ string, n int) int {
		if n == 1 {
			return http.StatusServiceUnavailable
		}
		return http.StatusNoContent
	})
	f.subscribe(rcv.srv.URL + "/hook")
	sent := time.Now()
	itemID := f.send()
	ev := rcv.waitFor(10*time.Second, "two attempts", func(ev []received) bool { return countID(ev, itemID) >= 2 })
	first, second := ev[0], ev[1]
	t.Logf("first attempt %v after the send, second %v after the first", first.at.Sub(sent), second.at.Sub(first.at))
	if first.id != itemID || second.id != itemID {
		t.Fatalf("webhook-id %q, %q; want the item_id %q on every attempt", first.id, second.id, itemID)
	}
	if d := first.at.Sub(sent); d > 5*time.Second {
		t.Errorf("first attempt %v after the send: the commit did not wake the worker", d)
	}
	// The second attempt is due 1 s ±10% after the first ended.
	if d := second.at.Sub(first.at); d < 850*time.Millisecond || d > 5*time.Second {
		t.Errorf("second attempt %v after the first; want about 1 s", d)
	}
	e := decodeEvent(t, second.body)
	if e.ID != itemID || e.Source != f.source || e.Type != domain.EventMessageCommitted {
		t.Errorf("event %+v; want id %s, source %s, type %s", e, itemID, f.source, domain.EventMessageCommitted)
	}
	if _, ok := e.Data["body"]; ok || bytes.Contains(second.body, []byte("secret")) {
		t.Errorf("event carries content: %s", second.body)
	}
	// Delivered: no further attempt, and the subscription's health says so.
	time.Sleep(1500 * time.Millisecond)
	if n := countID(rcv.events(), itemID); n != 2 {
		t.Errorf("%d attempts after a 2xx; want 2", n)
	}
	p, _ := f.srv.Service().Authenticate(context.Background(), f.subToken)
	l, err := f.srv.Service().ListSubscriptions(context.Background(), p)
	if err != nil || len(l.Subscriptions) != 1 || l.Subscriptions[0].Health.LastSuccessAt == nil ||
		l.Subscriptions[0].Health.ConsecutiveFailures != 0 || l.Subscriptions[0].Health.LastFailureAt == nil {
		t.Errorf("health after a failure and a success: %+v %v", l, err)
	}
}

// TestWebhookSlowReceiverDoesNotHoldOthers: a receiver that never answers (the attempt runs into the 10 s
// limit) does not delay another subscription's delivery of the same event.
func TestWebhookSlowReceiverDoesNotHoldOthers(t *testing.T) {
	f := newWHFixture(t, WebhookConfig{AllowLoopback: true, stopGrace: 100 * time.Millisecond})
	slow := newReceiver(t, func(string, int) int { return 0 })
	fast := newReceiver(t, func(string, int) int { return http.StatusOK })
	f.subscribe(slow.srv.URL + "/slow")
	f.subscribe(fast.srv.URL + "/fast")
	var ids []string
	for range 3 {
		ids = append(ids, f.send())
	}
	start := time.Now()
	fast.waitFor(5*time.Second, "the fast receiver's events", func(ev []received) bool {
		for _, id := range ids {
			if countID(ev, id) == 0 {
				return false
			}
		}
		return true
	})
	t.Logf("fast receiver had all %d events %v after the last send; slow receiver holds %d requests",
		len(ids), time.Since(start), len(slow.events()))
	if len(slow.events()) == 0 {
		t.Errorf("the slow receiver got no attempt")
	}
}

// TestWebhookCommitWhileWorkerAwayIsDelivered: a message committed while no worker runs (the server was
// started with webhooks off, as after a crash between the commit and its dispatch) is delivered once a
// worker runs again: the dispatch position per space is durable.
func TestWebhookCommitWhileWorkerAwayIsDelivered(t *testing.T) {
	rcv := newReceiver(t, func(string, int) int { return http.StatusOK })
	f := newWHFixture(t, WebhookConfig{AllowLoopback: true})
	f.subscribe(rcv.srv.URL + "/hook")
	f.reopen(WebhookConfig{Disabled: true})
	if f.srv.Service().Capabilities().WebhookEvents {
		t.Fatal("webhooks disabled, yet describe says webhook_events")
	}
	itemID := f.send()
	time.Sleep(300 * time.Millisecond)
	if n := len(rcv.events()); n != 0 {
		t.Fatalf("%d events delivered while webhooks were off", n)
	}
	f.reopen(WebhookConfig{AllowLoopback: true})
	if !f.srv.Service().Capabilities().WebhookEvents {
		t.Fatal("describe does not say webhook_events")
	}
	ev := rcv.waitFor(10*time.Second, "the event committed while away", func(ev []received) bool { return countID(ev, itemID) > 0 })
	if e := decodeEvent(t, ev[0].body); e.ID != itemID || e.Source != f.source {
		t.Fatalf("event %+v", e)
	}
}

// TestWebhookStopCutsSlowAttemptsShort: closing the server does not wait for a receiver that never answers
// longer than the grace period.
func TestWebhookStopCutsSlowAttemptsShort(t *testing.T) {
	f := newWHFixture(t, WebhookConfig{AllowLoopback: true, stopGrace: 200 * time.Millisecond})
	slow := newReceiver(t, func(string, int) int { return 0 })
	f.subscribe(slow.srv.URL + "/slow")
	id := f.send()
	slow.waitFor(5*time.Second, "an attempt", func(ev []received) bool { return countID(ev, id) > 0 })
	start := time.Now()
	f.close()
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Close took %v with an attempt in flight; want about the 200 ms grace", d)
	}
}

// TestWebhooksOffByConfig: a server with webhooks disabled says so and refuses subscriptions.
func TestWebhooksOffByConfig(t *testing.T) {
	f := newWHFixture(t, WebhookConfig{Disabled: true})
	p, err := f.srv.Service().Authenticate(context.Background(), f.subToken)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.srv.Service().UpsertSubscription(context.Background(), p, domain.UpsertSubscriptionRequest{RequestID: "s",
		ConsumerID: f.consumer, EventTypes: []string{domain.EventMessageCommitted},
		Delivery: domain.SubscriptionDelivery{Mode: domain.DeliveryModeWebhook, URL: "https://example.com/hook", Secret: whSecret}})
	if domain.AsError(err).Code != domain.CodeUnsupported {
		t.Fatalf("upsert with webhooks off: %v; want UNSUPPORTED", err)
	}
}

// TestWebhookDefaultRefusesLoopback: without AllowLoopback, a loopback target is FORBIDDEN_TARGET and
// never receives a request.
func TestWebhookDefaultRefusesLoopback(t *testing.T) {
	rcv := newReceiver(t, func(string, int) int { return http.StatusOK })
	hits := 0
	var mu sync.Mutex
	probe := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { mu.Lock(); hits++; mu.Unlock() }))
	defer probe.Close()
	f := newWHFixture(t, WebhookConfig{})
	p, _ := f.srv.Service().Authenticate(context.Background(), f.subToken)
	for i, url := range []string{rcv.srv.URL + "/hook", probe.URL, "https://127.0.0.1:443/hook", "https://localhost/hook"} {
		_, err := f.srv.Service().UpsertSubscription(context.Background(), p, domain.UpsertSubscriptionRequest{RequestID: fmt.Sprint("s", i),
			ConsumerID: f.consumer, EventTypes: []string{domain.EventMessageCommitted},
			Delivery: domain.SubscriptionDelivery{Mode: domain.DeliveryModeWebhook, URL: url, Secret: whSecret}})
		if domain.AsError(err).Code != domain.CodeForbiddenTarget {
			t.Errorf("upsert to %s: %v; want FORBIDDEN_TARGET", url, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if hits != 0 || len(rcv.events()) != 0 {
		t.Errorf("a refused target was contacted")
	}
}

// BenchmarkWebhookDelivery measures the embedded worker end to end, fsync on, with one subscription whose
// local receiver verifies each signature and answers 204; messages are sent through the HTTP handler.
//
//   - burst: 8 clients send as fast as they can. deliveries/s is the worker's throughput under saturation
//     (the latency figures then mostly measure the backlog).
//
//   - paced: one client sends every 20 ms (50/s). p50-ms and p99-ms are the latency from a send's answer to
//     the event's arrival at the receiver.
//
//     go test ./server -run '^$' -bench WebhookDelivery -benchtime 2000x
func BenchmarkWebhookDelivery(b *testing.B) {
	b.Run("burst", func(b *testing.B) { benchDelivery(b, 8, 0) })
	b.Run("paced", func(b *testing.B) { benchDelivery(b, 1, 20*time.Millisecond) })
}

func benchDelivery(b *testing.B, clients int, pace time.Duration) {
	f := newWHFixture(b, WebhookConfig{AllowLoopback: true})
	var mu sync.Mutex
	sentAt := map[string]time.Time{}
	var lat []time.Duration
	done := make(chan struct{})
	rcv := newReceiver(b, func(string, int) int { return http.StatusNoContent })
	f.subscribe(rcv.srv.URL + "/hook")
	b.ResetTimer()
	start := time.Now()
	go func() {
		defer close(done)
		seen := 0
		for seen < b.N {
			ev := rcv.events()
			for _, e := range ev[seen:] {
				var ce struct {
					Data struct {
						MessageID string `json:"message_id"`
					} `json:"data"`
				}
				_ = json.Unmarshal(e.body, &ce)
				for {
					mu.Lock()
					t0, ok := sentAt[ce.Data.MessageID]
					mu.Unlock()
					if ok {
						lat = append(lat, e.at.Sub(t0))
						break
					}
					time.Sleep(time.Millisecond) // the send's answer is still on its way
				}
			}
			seen = len(ev)
			if seen < b.N {
				select {
				case <-rcv.changed:
				case <-time.After(10 * time.Millisecond):
				}
			}
		}
	}()
	var wg sync.WaitGroup
	var next atomic.Int64
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				if pace > 0 {
					time.Sleep(time.Until(start.Add(time.Duration(i-1) * pace)))
				}
				body := fmt.Appendf(nil, `{"request_id":"b-%d","body":{"text":"x"}}`, i)
				req := httptest.NewRequest("POST", "/v0/messages", bytes.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+f.sender)
				req.Header.Set("Content-Type", "application/json")
				rec := httptest.NewRecorder()
				f.srv.Handler().ServeHTTP(rec, req)
				var env struct {
					Data struct {
						ResourceID string `json:"resource_id"`
					} `json:"data"`
				}
				if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &env) != nil {
					b.Errorf("send: %d %s", rec.Code, rec.Body.Bytes())
					return
				}
				mu.Lock()
				sentAt[env.Data.ResourceID] = time.Now()
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		b.Fatalf("only %d of %d events delivered", len(rcv.events()), b.N)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "deliveries/s")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}
