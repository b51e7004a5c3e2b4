package e2e

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waypost/waypost/e2e/wire"
)

// The webhook tests run the real binary with a receiver written in JavaScript on the official Standard
// Webhooks library (npm "standardwebhooks", interop/webhooks-js/receiver.mjs): every challenge and every
// event the server sends is verified by an implementation this project did not write, over the raw bytes
// as received.

// ---- the Node receiver ----

// receiverRecord is one line the receiver printed (see receiver.mjs).
type receiverRecord struct {
	Kind         string          `json:"kind"`
	URL          string          `json:"url"`
	Mode         string          `json:"mode"`
	WebhookID    string          `json:"webhook_id"`
	VerifiedWith []int           `json:"verified_with"`
	Body         string          `json:"body"`
	Status       json.RawMessage `json:"status"` // a number, or "held"
	Error        string          `json:"error"`
	at           time.Time
}

// delivered reports whether the receiver answered the event with a 2xx.
func (r receiverRecord) delivered() bool {
	return r.Kind == "event" && len(r.Status) == 3 && r.Status[0] == '2'
}

// nodeReceiver is receiver.mjs running as a subprocess on a loopback port.
type nodeReceiver struct {
	t       *testing.T
	url     string
	stdin   io.WriteCloser
	stderr  *bytes.Buffer
	mu      sync.Mutex
	recs    []receiverRecord
	changed chan struct{}
}

// interopDir finds node and interop/<folder> with its node_modules (marker: a path under node_modules that
// its npm ci installs); like the other interop tests it skips when they are missing, unless
// WAYPOST_REQUIRE_INTEROP is set (scripts/test sets it), where it fails.
func interopDir(t *testing.T, folder, marker string) (node, dir string) {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir = filepath.Join(root, "interop", folder)
	node, lookErr := exec.LookPath("node")
	if _, statErr := os.Stat(filepath.Join(dir, "node_modules", marker)); lookErr != nil || statErr != nil {
		if os.Getenv("WAYPOST_REQUIRE_INTEROP") != "" {
			t.Fatalf("node or interop/%s/node_modules missing (run: npm ci --prefix interop/%s)", folder, folder)
		}
		t.Skipf("node or interop/%s/node_modules missing; run npm ci --prefix interop/%s (WAYPOST_REQUIRE_INTEROP=1 makes this a failure)", folder, folder)
	}
	return node, dir
}

// startReceiver starts receiver.mjs knowing the given secrets; it is stopped when the test ends.
func startReceiver(t *testing.T, secrets ...string) *nodeReceiver {
	t.Helper()
	node, dir := interopDir(t, "webhooks-js", "standardwebhooks/package.json")
	args := []string{"receiver.mjs"}
	for _, s := range secrets {
		args = append(args, "--secret", s)
	}
	cmd := exec.Command(node, args...)
	cmd.Dir = dir
	r := &nodeReceiver{t: t, stderr: &bytes.Buffer{}, changed: make(chan struct{}, 1)}
	cmd.Stderr = lockedWriter{mu: &r.mu, b: r.stderr}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if r.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting the receiver: %v", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var rec receiverRecord
			if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
				r.mu.Lock()
				fmt.Fprintf(r.stderr, "unparsable line %q\n", sc.Text())
				r.mu.Unlock()
				continue
			}
			rec.at = time.Now()
			r.mu.Lock()
			r.recs = append(r.recs, rec)
			r.mu.Unlock()
			select {
			case r.changed <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(func() {
		_ = r.stdin.Close()
		_ = cmd.Process.Kill()
		<-done
		_ = cmd.Wait()
		if t.Failed() {
			r.mu.Lock()
			t.Logf("receiver stderr:\n%s", r.stderr.String())
			for _, rec := range r.recs {
				t.Logf("receiver: %s %s %s verified_with=%v %s", rec.Kind, rec.WebhookID, rec.Status, rec.VerifiedWith, rec.Error)
			}
			r.mu.Unlock()
		}
	})
	recs := r.waitFor(30*time.Second, "the receiver listening", func(rs []receiverRecord) bool {
		return len(rs) > 0 && rs[0].Kind == "listening"
	})
	r.url = recs[0].URL
	return r
}

func (r *nodeReceiver) records() []receiverRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]receiverRecord(nil), r.recs...)
}

// waitFor waits until cond holds over the records, failing the test after timeout.
func (r *nodeReceiver) waitFor(timeout time.Duration, what string, cond func([]receiverRecord) bool) []receiverRecord {
	r.t.Helper()
	deadline := time.After(timeout)
	for {
		if recs := r.records(); cond(recs) {
			return recs
		}
		select {
		case <-r.changed:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			r.t.Fatalf("receiver: %s: not within %v", what, timeout)
		}
	}
}

// setMode changes how the receiver answers events (ok, fail, gone, hold) and waits until it has.
func (r *nodeReceiver) setMode(mode string) {
	r.t.Helper()
	n := len(r.records())
	if _, err := fmt.Fprintf(r.stdin, "mode %s\n", mode); err != nil {
		r.t.Fatalf("receiver: %v", err)
	}
	r.waitFor(10*time.Second, "mode "+mode, func(rs []receiverRecord) bool {
		for _, rec := range rs[n:] {
			if rec.Kind == "mode" && rec.Mode == mode {
				return true
			}
		}
		return false
	})
}

// events returns the event records of one webhook-id, checking that nothing was rejected.
func (r *nodeReceiver) events(id string) []receiverRecord {
	r.t.Helper()
	var out []receiverRecord
	for _, rec := range r.records() {
		if rec.Kind == "rejected" {
			r.t.Fatalf("receiver rejected a request: %+v", rec)
		}
		if rec.Kind == "event" && rec.WebhookID == id {
			out = append(out, rec)
		}
	}
	return out
}

// waitDelivered waits until the receiver answered an event with id with a 2xx and returns that record.
func (r *nodeReceiver) waitDelivered(timeout time.Duration, id string) receiverRecord {
	r.t.Helper()
	var got receiverRecord
	r.waitFor(timeout, "event "+id+" delivered", func([]receiverRecord) bool {
		for _, rec := range r.events(id) {
			if rec.delivered() {
				got = rec
				return true
			}
		}
		return false
	})
	return got
}

// ---- helpers ----

// newWebhookSecret returns a fresh "whsec_" secret (32 random bytes, standard base64).
func newWebhookSecret(t testing.TB) string {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "whsec_" + base64.StdEncoding.EncodeToString(b)
}

// subscriber is an actor whose inbox consumer may manage webhook subscriptions.
func (a *admin) subscriber(t testing.TB, name string) participant {
	t.Helper()
	p := participant{actor: a.actor(t, name)}
	p.consumer = a.consumer(t, p.actor, "inbox")
	p.token = a.token(t, p.actor, p.consumer, "message.read", "receipt.write", "subscription.manage").Token
	return p
}

func subscribeBody(rid, consumer, url, secret string) map[string]any {
	return map[string]any{"request_id": rid, "consumer_id": consumer,
		"event_types": []string{"waypost.message.committed.v1"},
		"delivery":    map[string]any{"mode": "webhook", "url": url, "secret": secret}}
}

// itemOf returns the feed item of message messageID in p's inbox.
func itemOf(t testing.TB, s *server, p participant, messageID string) wire.FeedItem {
	t.Helper()
	items, _ := readAll(t, s, p, nil)
	for _, it := range items {
		if it.ResourceID == messageID {
			return it
		}
	}
	t.Fatalf("message %s not in %s's inbox", messageID, p.actor)
	return wire.FeedItem{}
}

// checkEvent checks a delivered event against the feed item it announces.
func checkEvent(t testing.TB, rec receiverRecord, sourceURI string, it wire.FeedItem, sent wire.Send) {
	t.Helper()
	var e wire.CloudEvent
	if err := json.Unmarshal([]byte(rec.Body), &e); err != nil {
		t.Fatalf("event body %q: %v", rec.Body, err)
	}
	var data map[string]any
	if err := json.Unmarshal(e.Data, &data); err != nil {
		t.Fatalf("event data %s: %v", e.Data, err)
	}
	if e.SpecVersion != "1.0" || e.ID != it.ItemID || rec.WebhookID != it.ItemID || e.Source != sourceURI ||
		e.Type != "waypost.message.committed.v1" || e.Subject != "messages/"+sent.ResourceID || e.DataContentType != "application/json" {
		t.Errorf("event %s (webhook-id %s); want id = webhook-id = item_id %s, source %s, type waypost.message.committed.v1, subject messages/%s, datacontenttype application/json",
			rec.Body, rec.WebhookID, it.ItemID, sourceURI, sent.ResourceID)
	}
	if data["message_id"] != sent.ResourceID || data["visible_seq"] != sent.VisibleSeq || data["api_version"] != "0.1" {
		t.Errorf("event data %v; want message_id %s, visible_seq %s", data, sent.ResourceID, sent.VisibleSeq)
	}
	for _, k := range []string{"body", "subject", "text", "metadata"} {
		if _, ok := data[k]; ok {
			t.Errorf("event data carries %q: %v", k, data)
		}
	}
	if strings.Contains(rec.Body, "confidential") {
		t.Errorf("event carries message content: %s", rec.Body)
	}
}

// ---- tests ----

// TestWebhookEndToEnd: `waypost serve --allow-loopback-webhooks` warns at start; a subscription over HTTP is
// activated by a challenge the JS receiver verifies; a committed message arrives as one CloudEvent whose
// signature the JS library verifies, with id = the feed item_id and source = the space's source_uri and
// no content; a rotated secret dual-signs; a 410 gives up into a failure record that the admin plane
// redelivers; a stopped subscription gets nothing more.
func TestWebhookEndToEnd(t *testing.T) {
	t.Parallel()
	secret, rotated := newWebhookSecret(t), newWebhookSecret(t)
	rcv := startReceiver(t, secret, rotated)
	s := startServer(t, "--allow-loopback-webhooks")
	if !strings.Contains(s.tail(1<<20), "WARNING: --allow-loopback-webhooks") || !strings.Contains(s.tail(1<<20), "never use this where untrusted users") {
		t.Errorf("no loud warning at start:\n%s", s.tail(4000))
	}
	adm := newSpace(t, s, "webhooks")
	alice, bob := adm.participant(t, "alice"), adm.subscriber(t, "bob")

	d, _ := ok[struct {
		Capabilities map[string]bool `json:"capabilities"`
	}](t, s, request{Method: "GET", Path: "/v0/describe", Token: bob.token})
	if !d.Capabilities["webhook_events"] {
		t.Fatalf("describe: webhook_events is not on: %v", d.Capabilities)
	}

	// Subscribe: the challenge is verified by the JS library before the server answers.
	sub, _ := ok[wire.Subscription](t, s, request{Method: "POST", Path: "/v0/subscriptions", Token: bob.token,
		Body: subscribeBody("sub-1", bob.consumer, rcv.url, secret)})
	if sub.State != "active" || sub.Delivery.URL != rcv.url || sub.ConsumerID != bob.consumer {
		t.Fatalf("subscription %+v", sub)
	}
	// The receiver reports what it answered on its stdout, read concurrently: wait for the record.
	verifiedChallenges := func(rs []receiverRecord) int {
		n := 0
		for _, rec := range rs {
			if rec.Kind == "challenge" && len(rec.VerifiedWith) == 1 && rec.VerifiedWith[0] == 0 && strings.HasPrefix(rec.WebhookID, "wv_") {
				n++
			}
		}
		return n
	}
	rcv.waitFor(10*time.Second, "the verified challenge", func(rs []receiverRecord) bool { return verifiedChallenges(rs) >= 1 })
	if n := verifiedChallenges(rcv.records()); n != 1 {
		t.Fatalf("%d verified challenges signed with the subscription's secret; want 1", n)
	}

	// One message, one verified event.
	start := time.Now()
	sent := send(t, s, alice.token, map[string]any{"request_id": "m-1", "recipient_ids": []string{bob.actor},
		"subject": "confidential subject", "body": map[string]any{"text": "confidential body"}})
	it := itemOf(t, s, bob, sent.ResourceID)
	got := rcv.waitDelivered(10*time.Second, it.ItemID)
	t.Logf("event delivered %v after the send", got.at.Sub(start).Round(time.Millisecond))
	if len(got.VerifiedWith) != 1 || got.VerifiedWith[0] != 0 {
		t.Errorf("event verified with secrets %v; want only the subscription's secret", got.VerifiedWith)
	}
	checkEvent(t, got, adm.space.SourceURI, it, sent)

	// The subscription shows its health (recorded just after the receiver's answer).
	for deadline := time.Now().Add(10 * time.Second); ; {
		list, _ := ok[struct {
			Subscriptions []wire.Subscription `json:"subscriptions"`
		}](t, s, request{Method: "GET", Path: "/v0/subscriptions", Token: bob.token})
		if len(list.Subscriptions) != 1 || list.Subscriptions[0].Health == nil {
			t.Fatalf("subscriptions after a delivery: %+v", list)
		}
		if h := list.Subscriptions[0].Health; h.LastSuccessAt != nil && h.ConsecutiveFailures == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("health after a delivery: %+v", *list.Subscriptions[0].Health)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// Rotation: the same target with a new secret is challenged again (new secret only), then events
	// carry two signatures for up to 5 minutes: the JS library verifies the event with either secret.
	again, _ := ok[wire.Subscription](t, s, request{Method: "POST", Path: "/v0/subscriptions", Token: bob.token,
		Body: subscribeBody("sub-2", bob.consumer, rcv.url, rotated)})
	if again.SubscriptionID != sub.SubscriptionID {
		t.Fatalf("rotation made a new subscription %s (was %s)", again.SubscriptionID, sub.SubscriptionID)
	}
	sent2 := send(t, s, alice.token, map[string]any{"request_id": "m-2", "recipient_ids": []string{bob.actor},
		"subject": "confidential", "body": map[string]any{"text": "confidential"}})
	it2 := itemOf(t, s, bob, sent2.ResourceID)
	got2 := rcv.waitDelivered(10*time.Second, it2.ItemID)
	if len(got2.VerifiedWith) != 2 {
		t.Errorf("event after a rotation verified with secrets %v; want both (dual signatures)", got2.VerifiedWith)
	}
	checkEvent(t, got2, adm.space.SourceURI, it2, sent2)

	// 410 Gone: no further attempt; a failure record the admin plane lists and redelivers.
	rcv.setMode("gone")
	sent3 := send(t, s, alice.token, map[string]any{"request_id": "m-3", "recipient_ids": []string{bob.actor},
		"body": map[string]any{"text": "confidential"}})
	it3 := itemOf(t, s, bob, sent3.ResourceID)
	rcv.waitFor(10*time.Second, "the 410 answer", func([]receiverRecord) bool { return len(rcv.events(it3.ItemID)) > 0 })
	var failed wire.Delivery
	deadline := time.Now().Add(10 * time.Second)
	for {
		l, _ := ok[struct {
			Deliveries []wire.Delivery `json:"deliveries"`
		}](t, s, request{Method: "GET", Path: adm.path("/deliveries?state=failed"), Token: adminSecret})
		if len(l.Deliveries) == 1 {
			failed = l.Deliveries[0]
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("failed deliveries after a 410: %+v", l)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if failed.EventID != it3.ItemID || failed.Attempts != 1 || len(failed.Log) != 1 || failed.Log[0].StatusCode != 410 {
		t.Errorf("failure record %+v; want event %s, one attempt answered 410", failed, it3.ItemID)
	}
	rcv.setMode("ok")
	ok[wire.Delivery](t, s, request{Method: "POST", Path: adm.path("/deliveries/" + failed.DeliveryID + "/redeliver"),
		Token: adminSecret, Body: map[string]any{}})
	rcv.waitDelivered(10*time.Second, it3.ItemID)
	if n := len(rcv.events(it3.ItemID)); n != 2 {
		t.Errorf("%d requests for the redelivered event; want 2 (the 410 and the redelivery)", n)
	}

	// Stop: nothing more is sent.
	ok[map[string]any](t, s, request{Method: "POST", Path: "/v0/subscriptions/" + sub.SubscriptionID + "/stop", Token: bob.token,
		Body: map[string]any{"request_id": "stop-1"}})
	sent4 := send(t, s, alice.token, map[string]any{"request_id": "m-4", "recipient_ids": []string{bob.actor},
		"body": map[string]any{"text": "confidential"}})
	it4 := itemOf(t, s, bob, sent4.ResourceID)
	time.Sleep(1500 * time.Millisecond)
	if n := len(rcv.events(it4.ItemID)); n != 0 {
		t.Errorf("%d requests after the subscription was stopped", n)
	}
	// Each delivered event arrived exactly once: nothing was sent twice in this run.
	for _, id := range []string{it.ItemID, it2.ItemID} {
		if n := len(rcv.events(id)); n != 1 {
			t.Errorf("event %s: %d requests; want 1", id, n)
		}
	}
}

// TestWebhookDeliveredAfterCrash: a crash between the commit and a successful delivery still delivers
// after a restart on the same data directory — after a failed attempt was recorded (the receiver answered
// 503; the retry is due 1 s later) and with an attempt in flight (the receiver holds the request; the
// attempt's 30 s lease must run out). Each time the server is killed with SIGKILL.
func TestWebhookDeliveredAfterCrash(t *testing.T) {
	t.Parallel()
	secret := newWebhookSecret(t)
	rcv := startReceiver(t, secret)
	s := startServer(t, "--allow-loopback-webhooks")
	adm := newSpace(t, s, "webhook-crash")
	alice, bob := adm.participant(t, "alice"), adm.subscriber(t, "bob")
	ok[wire.Subscription](t, s, request{Method: "POST", Path: "/v0/subscriptions", Token: bob.token,
		Body: subscribeBody("sub-1", bob.consumer, rcv.url, secret)})

	for _, c := range []struct {
		mode, what string
		within     time.Duration // after the restart
	}{
		{"fail", "after a failed attempt", 15 * time.Second},
		{"hold", "with an attempt in flight", 60 * time.Second}, // the 30 s lease must run out first
	} {
		rcv.setMode(c.mode)
		sent := send(t, s, alice.token, map[string]any{"request_id": "m-" + c.mode, "recipient_ids": []string{bob.actor},
			"body": map[string]any{"text": "confidential"}})
		it := itemOf(t, s, bob, sent.ResourceID)
		rcv.waitFor(10*time.Second, "an attempt "+c.what, func([]receiverRecord) bool { return len(rcv.events(it.ItemID)) > 0 })
		if c.mode == "fail" {
			// Let the failed attempt be recorded (the next one is due 1 s later); the crash comes before it.
			waitPendingLog(t, s, adm, it.ItemID, 1)
		}
		s.kill()
		for _, rec := range rcv.events(it.ItemID) {
			if rec.delivered() {
				t.Fatalf("%s: delivered before the crash", c.what)
			}
		}
		rcv.setMode("ok")
		restarted := time.Now()
		s.restart()
		got := rcv.waitDelivered(c.within, it.ItemID)
		t.Logf("%s: delivered %v after the restart (%d requests in all)", c.what, got.at.Sub(restarted).Round(time.Millisecond), len(rcv.events(it.ItemID)))
		checkEvent(t, got, adm.space.SourceURI, it, sent)
	}
}

// waitPendingLog waits until the pending delivery of event has n attempts recorded (admin plane).
func waitPendingLog(t testing.TB, s *server, adm *admin, event string, n int) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; {
		l, _ := ok[struct {
			Deliveries []wire.Delivery `json:"deliveries"`
		}](t, s, request{Method: "GET", Path: adm.path("/deliveries?state=pending"), Token: adminSecret})
		for _, d := range l.Deliveries {
			if d.EventID == event && len(d.Log) >= n {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("pending deliveries: %+v; want %s with %d attempts recorded", l.Deliveries, event, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestWebhookLoopbackRefusedWithoutFlag: the real server without --allow-loopback-webhooks refuses
// loopback, private and link-local targets with 422 FORBIDDEN_TARGET and never contacts them.
func TestWebhookLoopbackRefusedWithoutFlag(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	hits := 0
	probe := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { mu.Lock(); hits++; mu.Unlock() }))
	defer probe.Close()
	s := startServer(t)
	if strings.Contains(s.tail(1<<20), "allow-loopback-webhooks") {
		t.Errorf("a warning about loopback webhooks without the flag:\n%s", s.tail(4000))
	}
	adm := newSpace(t, s, "ssrf")
	bob := adm.subscriber(t, "bob")
	_, port, _ := strings.Cut(strings.TrimPrefix(probe.URL, "http://"), ":")
	for i, target := range []string{
		probe.URL + "/hook",                   // plain http on loopback
		"https://127.0.0.1:" + port + "/hook", // loopback, https
		"https://localhost:" + port + "/hook", // a name that resolves to loopback
		"https://[::1]:" + port + "/hook",     // IPv6 loopback
		"https://10.0.0.1/hook",               // private
		"https://169.254.169.254/latest/meta", // link-local (cloud metadata)
		"https://[::ffff:127.0.0.1]:443/hook", // IPv4-mapped loopback
		"https://2130706433/hook",             // numeric form of 127.0.0.1
		"https://127.1:" + port + "/hook",     // short form of 127.0.0.1
	} {
		r := fail(t, s, request{Method: "POST", Path: "/v0/subscriptions", Token: bob.token,
			Body: subscribeBody(fmt.Sprint("sub-", i), bob.consumer, target, newWebhookSecret(t))}, "FORBIDDEN_TARGET")
		if r.Status != http.StatusUnprocessableEntity {
			t.Errorf("%s: HTTP %d", target, r.Status)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if hits != 0 {
		t.Errorf("a refused target was contacted %d times", hits)
	}
	l, _ := ok[struct {
		Subscriptions []wire.Subscription `json:"subscriptions"`
	}](t, s, request{Method: "GET", Path: "/v0/subscriptions", Token: bob.token})
	if len(l.Subscriptions) != 0 {
		t.Errorf("refused targets made subscriptions: %+v", l.Subscriptions)
	}
}
