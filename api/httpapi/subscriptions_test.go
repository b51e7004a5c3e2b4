package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/waypost/waypost/api/apitest"
	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/schemas"
)

// hooks drives the webhook routes of one stack. Every response it sees is checked for the secrets it was
// given: no response body may ever contain one.
type hooks struct {
	*m1
	stack   *apitest.Stack
	w       apitest.World
	secrets []string
}

func newHooks(t *testing.T, o apitest.Options) *hooks {
	t.Helper()
	st := apitest.New(t, o)
	return &hooks{m1: &m1{t: t, url: st.URL, reg: schemas.MustNew(), http: st.Client(t)}, stack: st, w: st.World(t)}
}

// secret returns a fresh webhook secret that no response may contain.
func (h *hooks) secret() string {
	s := apitest.NewSecret(h.t)
	h.secrets = append(h.secrets, s)
	return s
}

func (h *hooks) noSecret(what string, r m1Resp) {
	h.t.Helper()
	for _, s := range h.secrets {
		if bytes.Contains(r.body, []byte(s)) || bytes.Contains(r.body, []byte(strings.TrimPrefix(s, domain.SecretPrefix))) {
			h.t.Fatalf("%s: the response contains a webhook secret: %s", what, r.body)
		}
	}
}

func (h *hooks) call(method, path, token string, body any, schema string) m1Resp {
	h.t.Helper()
	r := h.do(method, path, token, body, nil)
	h.noSecret(method+" "+path, r)
	return h.ok(method+" "+path, r, schema)
}

func (h *hooks) fail(method, path, token string, body any, code string, status int) m1Resp {
	h.t.Helper()
	r := h.m1.fail(method, path, token, body, nil, code, status)
	h.noSecret(method+" "+path, r)
	return r
}

// upsert is a subscription.upsert body for B's consumer.
func (h *hooks) upsert(rid, target, secret string) map[string]any {
	return map[string]any{"request_id": rid, "consumer_id": h.w.CB, "event_types": []string{domain.EventMessageCommitted},
		"delivery": map[string]any{"mode": "webhook", "url": target, "secret": secret}}
}

// sendToB commits a message from A to B.
func (h *hooks) sendToB(text string) {
	h.t.Helper()
	h.call("POST", "/v0/messages", h.w.TokA, map[string]any{"request_id": h.rid("send"), "recipient_ids": []string{h.w.B},
		"body": map[string]any{"text": text}}, "message.send.response")
}

// work runs the embedded delivery worker once and returns how many attempts it made.
func (h *hooks) work() int {
	h.t.Helper()
	n, err := h.stack.Svc.WorkDeliveries(context.Background(), 100)
	if err != nil {
		h.t.Fatalf("WorkDeliveries: %v", err)
	}
	return n
}

type wireSub struct {
	SubscriptionID string   `json:"subscription_id"`
	State          string   `json:"state"`
	ConsumerID     string   `json:"consumer_id"`
	EventTypes     []string `json:"event_types"`
	Delivery       struct {
		Mode string `json:"mode"`
		URL  string `json:"url"`
	} `json:"delivery"`
	CreatedAt     time.Time              `json:"created_at"`
	ExpiresAt     time.Time              `json:"expires_at"`
	RefreshBefore time.Time              `json:"refresh_before"`
	Health        *domain.DeliveryHealth `json:"health"`
}

// TestSubscriptionRoutes walks subscription.upsert, list and stop over HTTP against a real receiver that
// answers the challenge: activation, replay, renewal, health after a delivery, status, idempotent stop, and
// the errors of each call; no response and no log line carries the secret.
func TestSubscriptionRoutes(t *testing.T) {
	t.Parallel()
	logs := &apitest.LogBuffer{}
	h := newHooks(t, apitest.Options{Webhooks: apitest.Sender(t, true), Log: logs})
	recv := apitest.NewReceiver(t)
	secret := h.secret()
	target := recv.URL + "/hook?tenant=b"

	req := h.upsert(h.rid("sub"), target, secret)
	req["ttl_seconds"] = 3600
	sub := m1Decode[wireSub](t, h.call("POST", "/v0/subscriptions", h.w.TokB, req, "subscription.upsert.response"))
	if sub.State != "active" || sub.ConsumerID != h.w.CB || sub.Delivery.URL != target || sub.Delivery.Mode != "webhook" ||
		len(sub.EventTypes) != 1 || sub.EventTypes[0] != domain.EventMessageCommitted || sub.Health != nil {
		t.Fatalf("upsert: %+v", sub)
	}
	if ttl := sub.ExpiresAt.Sub(sub.CreatedAt); ttl != time.Hour {
		t.Errorf("expires_at - created_at = %v, want the requested 1h", ttl)
	}
	if !sub.RefreshBefore.After(sub.CreatedAt) || !sub.RefreshBefore.Before(sub.ExpiresAt) {
		t.Errorf("refresh_before %v is not between created_at %v and expires_at %v", sub.RefreshBefore, sub.CreatedAt, sub.ExpiresAt)
	}
	if recv.Challenges() != 1 {
		t.Fatalf("the receiver saw %d challenges, want 1", recv.Challenges())
	}
	// The same request again is a replay: same result, no second challenge.
	again := m1Decode[wireSub](t, h.call("POST", "/v0/subscriptions", h.w.TokB, req, "subscription.upsert.response"))
	if again.SubscriptionID != sub.SubscriptionID || !again.ExpiresAt.Equal(sub.ExpiresAt) || recv.Challenges() != 1 {
		t.Fatalf("replay: %+v (challenges %d), first %+v", again, recv.Challenges(), sub)
	}
	// An identical upsert with a new request_id renews the same subscription without a new challenge.
	renew := m1Decode[wireSub](t, h.call("POST", "/v0/subscriptions", h.w.TokB, h.upsert(h.rid("sub"), target, secret), "subscription.upsert.response"))
	if renew.SubscriptionID != sub.SubscriptionID || !renew.CreatedAt.Equal(sub.CreatedAt) || recv.Challenges() != 1 {
		t.Fatalf("renewal: %+v (challenges %d), first %+v", renew, recv.Challenges(), sub)
	}
	if d := renew.ExpiresAt.Sub(renew.CreatedAt); d < 23*time.Hour {
		t.Errorf("a renewal without ttl_seconds lasts %v, want the 24 h default", d)
	}
	st := m1Decode[map[string]any](t, h.call("GET", "/v0/status?operation=subscription.upsert&request_id="+url.QueryEscape(req["request_id"].(string)),
		h.w.TokB, nil, "status.response"))
	if st["submission_state"] != "committed" || st["resource_id"] != sub.SubscriptionID {
		t.Fatalf("status of the upsert: %v", st)
	}
	if err := h.reg.ValidateValue("subscription.upsert.response", st["result"]); err != nil {
		t.Fatalf("status result: %v", err)
	}

	list := m1Decode[struct{ Subscriptions []wireSub }](t, h.call("GET", "/v0/subscriptions", h.w.TokB, nil, "subscription.list.response"))
	if len(list.Subscriptions) != 1 || list.Subscriptions[0].SubscriptionID != sub.SubscriptionID || list.Subscriptions[0].Health == nil ||
		list.Subscriptions[0].Health.LastSuccessAt != nil || list.Subscriptions[0].Health.ConsecutiveFailures != 0 {
		t.Fatalf("list before any delivery: %+v", list)
	}
	// A's subscriptions are not B's.
	if other := m1Decode[struct{ Subscriptions []wireSub }](t, h.call("GET", "/v0/subscriptions", h.w.TokA, nil, "subscription.list.response")); len(other.Subscriptions) != 0 {
		t.Fatalf("A lists B's subscription: %+v", other)
	}

	h.sendToB("hello")
	if n := h.work(); n != 1 || len(recv.Events()) != 1 {
		t.Fatalf("delivery: %d attempts, %d events", n, len(recv.Events()))
	}
	if ev := recv.Events()[0]; ev["type"] != domain.EventMessageCommitted || bytes.Contains(recv.RawEvents()[0], []byte("hello")) {
		t.Fatalf("event %v", ev)
	}
	list = m1Decode[struct{ Subscriptions []wireSub }](t, h.call("GET", "/v0/subscriptions", h.w.TokB, nil, "subscription.list.response"))
	if hl := list.Subscriptions[0].Health; hl == nil || hl.LastSuccessAt == nil || hl.ConsecutiveFailures != 0 {
		t.Fatalf("health after a delivery: %+v", hl)
	}

	// Stop: idempotent by request_id, and stopping a stopped subscription succeeds again.
	stopPath := "/v0/subscriptions/" + sub.SubscriptionID + "/stop"
	stopReq := map[string]any{"request_id": h.rid("stop")}
	for range 2 {
		s := m1Decode[map[string]any](t, h.call("POST", stopPath, h.w.TokB, stopReq, "subscription.stop.response"))
		if s["subscription_id"] != sub.SubscriptionID || s["state"] != "stopped" {
			t.Fatalf("stop: %v", s)
		}
	}
	h.call("POST", stopPath, h.w.TokB, map[string]any{"request_id": h.rid("stop")}, "subscription.stop.response")
	list = m1Decode[struct{ Subscriptions []wireSub }](t, h.call("GET", "/v0/subscriptions", h.w.TokB, nil, "subscription.list.response"))
	if len(list.Subscriptions) != 1 || list.Subscriptions[0].State != "stopped" {
		t.Fatalf("list after stop: %+v", list)
	}
	h.call("GET", "/v0/status?operation=subscription.stop&request_id="+stopReq["request_id"].(string), h.w.TokB, nil, "status.response")
	h.sendToB("after the stop")
	h.work()
	if n := len(recv.Events()); n != 1 {
		t.Fatalf("%d events after the stop, want still 1", n)
	}

	// Errors.
	h.fail("POST", "/v0/subscriptions/sub_absent/stop", h.w.TokB, map[string]any{"request_id": h.rid("stop")}, "NOT_FOUND", 404)
	h.fail("POST", stopPath, h.w.TokA, map[string]any{"request_id": h.rid("stop")}, "NOT_FOUND", 404)
	h.fail("POST", stopPath, h.w.TokB, map[string]any{}, "INVALID_REQUEST", 400)
	h.fail("POST", stopPath, "", map[string]any{"request_id": h.rid("stop")}, "UNAUTHENTICATED", 401)
	h.fail("POST", "/v0/subscriptions", h.w.TokA, h.upsert(h.rid("sub"), target, secret), "NOT_FOUND", 404) // B's consumer
	bad := h.upsert(h.rid("sub"), target, secret[:len(secret)-2]+"==")
	if r := h.fail("POST", "/v0/subscriptions", h.w.TokB, bad, "INVALID_REQUEST", 400); bytes.Contains(r.body, []byte(secret[:20])) {
		t.Fatalf("the error echoes the secret: %s", r.body)
	}
	extra := h.upsert(h.rid("sub"), target, secret)
	extra["delivery"].(map[string]any)["headers"] = map[string]any{"x": "y"}
	h.fail("POST", "/v0/subscriptions", h.w.TokB, extra, "INVALID_REQUEST", 400)
	long := h.upsert(h.rid("sub"), target, secret)
	long["ttl_seconds"] = 604801
	if r := h.fail("POST", "/v0/subscriptions", h.w.TokB, long, "RESOURCE_LIMIT", 422); r.detail["limit_name"] != "subscription_ttl_max" {
		t.Fatalf("ttl over the limit: %v", r.detail)
	}
	h.fail("POST", "/v0/subscriptions", h.w.TokB, []byte(`{"request_id":"dup","request_id":"dup"}`), "INVALID_REQUEST", 400)
	ctx := context.Background()
	readOnly, err := h.stack.Svc.CreateToken(ctx, h.w.SpaceID, domain.CreateTokenRequest{RequestID: "ro", ActorID: h.w.B,
		Scopes: []domain.Scope{domain.ScopeMessageRead}})
	if err != nil {
		t.Fatal(err)
	}
	h.fail("GET", "/v0/subscriptions", readOnly.Token, nil, "FORBIDDEN", 403)
	h.fail("POST", "/v0/subscriptions", readOnly.Token, h.upsert(h.rid("sub"), target, secret), "FORBIDDEN", 403)
	h.fail("POST", stopPath, readOnly.Token, map[string]any{"request_id": h.rid("stop")}, "FORBIDDEN", 403)

	h.noSecretInLogs(logs)
}

// noSecretInLogs fails when a secret the test used appears in the logs (which must not be empty).
func (h *hooks) noSecretInLogs(logs *apitest.LogBuffer) {
	h.t.Helper()
	for _, s := range h.secrets {
		if strings.Contains(logs.String(), strings.TrimPrefix(s, domain.SecretPrefix)) {
			h.t.Fatalf("a webhook secret is in the logs:\n%s", logs.String())
		}
	}
	if !strings.Contains(logs.String(), "/v0/subscriptions") {
		h.t.Fatal("the request log is empty: the log check checked nothing")
	}
}

// TestSubscriptionVerificationFailed: a receiver that does not echo the challenge gets
// WEBHOOK_VERIFICATION_FAILED (422, not retryable); the same request_id replays that failure without a
// second challenge, and status reports it.
func TestSubscriptionVerificationFailed(t *testing.T) {
	t.Parallel()
	logs := &apitest.LogBuffer{}
	h := newHooks(t, apitest.Options{Webhooks: apitest.Sender(t, true), Log: logs})
	recv := apitest.NewReceiver(t)
	recv.SetEcho(false)
	req := h.upsert(h.rid("sub"), recv.URL+"/hook", h.secret())
	first := h.fail("POST", "/v0/subscriptions", h.w.TokB, req, "WEBHOOK_VERIFICATION_FAILED", 422)
	if first.detail["field"] != "delivery.url" || !strings.Contains(string(first.body), `"retryable":false`) {
		t.Fatalf("failure: %s", first.body)
	}
	if recv.Challenges() != 1 {
		t.Fatalf("%d challenges, want 1", recv.Challenges())
	}
	recv.SetEcho(true) // the replay must not try again
	replay := h.fail("POST", "/v0/subscriptions", h.w.TokB, req, "WEBHOOK_VERIFICATION_FAILED", 422)
	if recv.Challenges() != 1 || !bytes.Equal(errorOf(t, replay.body), errorOf(t, first.body)) {
		t.Fatalf("replay: %d challenges, %s\nfirst %s", recv.Challenges(), replay.body, first.body)
	}
	st := m1Decode[map[string]any](t, h.call("GET", "/v0/status?operation=subscription.upsert&request_id="+req["request_id"].(string), h.w.TokB, nil, "status.response"))
	if st["submission_state"] != "failed" || st["error"].(map[string]any)["code"] != "WEBHOOK_VERIFICATION_FAILED" {
		t.Fatalf("status: %v", st)
	}
	list := m1Decode[struct{ Subscriptions []wireSub }](t, h.call("GET", "/v0/subscriptions", h.w.TokB, nil, "subscription.list.response"))
	if len(list.Subscriptions) != 0 {
		t.Fatalf("a failed verification left a subscription: %+v", list)
	}
	// A new request_id tries again and succeeds now that the receiver echoes.
	req["request_id"] = h.rid("sub")
	if s := m1Decode[wireSub](t, h.call("POST", "/v0/subscriptions", h.w.TokB, req, "subscription.upsert.response")); s.State != "active" || recv.Challenges() != 2 {
		t.Fatalf("after fixing the receiver: %+v, %d challenges", s, recv.Challenges())
	}
	if !strings.Contains(logs.String(), "webhook verification failed") {
		t.Fatalf("the failed verification is not logged:\n%s", logs.String())
	}
	h.noSecretInLogs(logs)
}

// errorOf returns the error object of an error envelope, re-encoded.
func errorOf(t *testing.T, body []byte) []byte {
	t.Helper()
	var env struct {
		Error map[string]any `json:"error"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(env.Error)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSubscriptionForbiddenTargets: targets the address rules refuse are FORBIDDEN_TARGET (422) before any
// connection: a private address even when loopback is allowed, and http:// unless AllowHTTP is set.
func TestSubscriptionForbiddenTargets(t *testing.T) {
	t.Parallel()
	recv := apitest.NewReceiver(t)
	loose := newHooks(t, apitest.Options{Webhooks: apitest.Sender(t, true)})
	for _, target := range []string{"https://10.0.0.1/hook", "http://10.0.0.1/hook", "https://169.254.169.254/latest",
		"https://[::ffff:10.0.0.1]/hook", "https://100.64.0.1/hook", "https://[fd00::1]/hook"} {
		r := loose.fail("POST", "/v0/subscriptions", loose.w.TokB, loose.upsert(loose.rid("sub"), target, loose.secret()), "FORBIDDEN_TARGET", 422)
		if r.detail["field"] != "delivery.url" || !strings.Contains(string(r.body), `"retryable":false`) {
			t.Fatalf("%s: %s", target, r.body)
		}
	}
	strict := newHooks(t, apitest.Options{Webhooks: apitest.Sender(t, false)})
	strict.fail("POST", "/v0/subscriptions", strict.w.TokB, strict.upsert(strict.rid("sub"), recv.URL+"/hook", strict.secret()), "FORBIDDEN_TARGET", 422)
	if recv.Challenges() != 0 {
		t.Fatalf("a refused target was contacted %d times", recv.Challenges())
	}
}

// TestSubscriptionsUnsupported: without a webhook sender, describe says webhook_events=false and every
// subscription call answers UNSUPPORTED; so does redelivery on the admin plane.
func TestSubscriptionsUnsupported(t *testing.T) {
	t.Parallel()
	h := newHooks(t, apitest.Options{})
	d := m1Decode[domain.DescribeResult](t, h.call("GET", "/v0/describe", h.w.TokB, nil, "describe.response"))
	if d.Capabilities.WebhookEvents {
		t.Fatal("describe says webhook_events without a sender")
	}
	h.fail("GET", "/v0/subscriptions", h.w.TokB, nil, "UNSUPPORTED", 400)
	h.fail("POST", "/v0/subscriptions", h.w.TokB, h.upsert(h.rid("sub"), "https://hooks.example.com/", h.secret()), "UNSUPPORTED", 400)
	h.fail("POST", "/v0/subscriptions/sub_x/stop", h.w.TokB, map[string]any{"request_id": h.rid("stop")}, "UNSUPPORTED", 400)
	h.fail("POST", "/admin/v0/spaces/"+h.w.SpaceID+"/deliveries/dl_x/redeliver", apitest.AdminSecret, nil, "UNSUPPORTED", 400)
	// The records (none here) stay listable: an operator may switch the capability off with failures on file.
	h.call("GET", "/admin/v0/spaces/"+h.w.SpaceID+"/deliveries", apitest.AdminSecret, nil, "admin.deliveries.response")
}

type wireDelivery struct {
	DeliveryID     string  `json:"delivery_id"`
	SubscriptionID string  `json:"subscription_id"`
	EventID        string  `json:"event_id"`
	State          string  `json:"state"`
	Attempts       int     `json:"attempts"`
	NextAttemptAt  *string `json:"next_attempt_at"`
	FailureReason  string  `json:"failure_reason"`
	AttemptsLog    []struct {
		StatusCode int    `json:"status_code"`
		Outcome    string `json:"outcome"`
	} `json:"attempts_log"`
}

// TestAdminDeliveries: a receiver answering 410 Gone turns the delivery into a failure record, listed by
// the admin plane; redelivery makes it pending with a fresh schedule, and the next worker pass delivers the
// same event (same id) once the receiver accepts it.
func TestAdminDeliveries(t *testing.T) {
	t.Parallel()
	h := newHooks(t, apitest.Options{Webhooks: apitest.Sender(t, true)})
	recv := apitest.NewReceiver(t)
	recv.SetStatus(http.StatusGone)
	sub := m1Decode[wireSub](t, h.call("POST", "/v0/subscriptions", h.w.TokB, h.upsert(h.rid("sub"), recv.URL+"/hook", h.secret()), "subscription.upsert.response"))
	h.sendToB("hello")
	if n := h.work(); n != 1 {
		t.Fatalf("%d attempts, want 1", n)
	}
	base := "/admin/v0/spaces/" + h.w.SpaceID + "/deliveries"
	type list struct{ Deliveries []wireDelivery }
	failed := m1Decode[list](t, h.call("GET", base, apitest.AdminSecret, nil, "admin.deliveries.response"))
	if len(failed.Deliveries) != 1 {
		t.Fatalf("failed deliveries: %+v", failed)
	}
	d := failed.Deliveries[0]
	if d.State != "failed" || d.SubscriptionID != sub.SubscriptionID || d.Attempts != 1 || d.NextAttemptAt != nil || d.FailureReason == "" ||
		len(d.AttemptsLog) != 1 || d.AttemptsLog[0].StatusCode != 410 || d.AttemptsLog[0].Outcome != "give_up" {
		t.Fatalf("failure record: %+v", d)
	}
	if id := recv.Events()[0]["id"]; id != d.EventID {
		t.Fatalf("event id %v, delivery event_id %s", id, d.EventID)
	}
	if same := m1Decode[list](t, h.call("GET", base+"?state=failed", apitest.AdminSecret, nil, "admin.deliveries.response")); len(same.Deliveries) != 1 {
		t.Fatalf("state=failed: %+v", same)
	}
	for _, state := range []string{"pending", "cancelled"} {
		if l := m1Decode[list](t, h.call("GET", base+"?state="+state, apitest.AdminSecret, nil, "admin.deliveries.response")); len(l.Deliveries) != 0 {
			t.Fatalf("state=%s: %+v", state, l)
		}
	}
	h.fail("GET", base+"?state=delivered", apitest.AdminSecret, nil, "INVALID_REQUEST", 400)
	h.fail("GET", base, "wrong-admin-secret", nil, "UNAUTHENTICATED", 401)
	h.fail("GET", base, h.w.TokB, nil, "UNAUTHENTICATED", 401)
	h.fail("GET", "/admin/v0/spaces/sp_absent/deliveries", apitest.AdminSecret, nil, "NOT_FOUND", 404)

	redeliver := base + "/" + d.DeliveryID + "/redeliver"
	re := m1Decode[wireDelivery](t, h.call("POST", redeliver, apitest.AdminSecret, nil, "admin.delivery.response"))
	if re.State != "pending" || re.Attempts != 0 || re.NextAttemptAt == nil || re.DeliveryID != d.DeliveryID {
		t.Fatalf("redeliver: %+v", re)
	}
	if again := m1Decode[wireDelivery](t, h.call("POST", redeliver, apitest.AdminSecret, map[string]any{"request_id": "re-2"}, "admin.delivery.response")); again.State != "pending" {
		t.Fatalf("second redeliver: %+v", again)
	}
	if l := m1Decode[list](t, h.call("GET", base+"?state=pending", apitest.AdminSecret, nil, "admin.deliveries.response")); len(l.Deliveries) != 1 {
		t.Fatalf("pending after redeliver: %+v", l)
	}
	h.fail("POST", base+"/dl_absent/redeliver", apitest.AdminSecret, nil, "NOT_FOUND", 404)
	h.fail("POST", redeliver, apitest.AdminSecret, map[string]any{"force": true}, "INVALID_REQUEST", 400)

	recv.SetStatus(http.StatusNoContent)
	if n := h.work(); n != 1 {
		t.Fatalf("%d attempts after redeliver, want 1", n)
	}
	evs := recv.Events()
	if len(evs) != 2 || evs[1]["id"] != evs[0]["id"] {
		t.Fatalf("redelivered events: %v", evs)
	}
	for _, state := range []string{"pending", "failed"} {
		if l := m1Decode[list](t, h.call("GET", base+"?state="+state, apitest.AdminSecret, nil, "admin.deliveries.response")); len(l.Deliveries) != 0 {
			t.Fatalf("state=%s after delivery: %+v", state, l)
		}
	}
}
