package mcpapi_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/waypost/waypost/api/apitest"
	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/schemas"
)

// hookEnv is an env over an apitest stack (webhook_events on when a sender is given).
func hookEnv(t *testing.T, o apitest.Options) (*env, apitest.World) {
	t.Helper()
	st := apitest.New(t, o)
	w := st.World(t)
	return &env{t: t, url: st.URL, svc: st.Svc, a: w.A, b: w.B, cb: w.CB, tokA: w.TokA, tokB: w.TokB, schemas: schemas.MustNew()}, w
}

// rawCall runs a tool and returns the whole result as JSON (structured and text content).
func (e *env) rawCall(s *mcp.ClientSession, name string, args any) []byte {
	e.t.Helper()
	res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		e.t.Fatalf("%s: %v", name, err)
	}
	raw, err := json.Marshal(res)
	if err != nil {
		e.t.Fatal(err)
	}
	return raw
}

func (e *env) data(env map[string]any, schema string) map[string]any {
	e.t.Helper()
	raw, err := json.Marshal(env["data"])
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.schemas.Validate(schema, raw); err != nil {
		e.t.Fatalf("data does not match %s: %v\n%s", schema, err, raw)
	}
	return env["data"].(map[string]any)
}

// TestSubscriptionToolsOverMCP: subscribe, list, status and unsubscribe through MCP against a real
// receiver, each result checked against the same schema as over HTTP; no tool result carries the secret.
func TestSubscriptionToolsOverMCP(t *testing.T) {
	t.Parallel()
	e, w := hookEnv(t, apitest.Options{Webhooks: apitest.Sender(t, true)})
	recv := apitest.NewReceiver(t)
	s := e.session(w.TokB)
	secret := apitest.NewSecret(t)
	args := map[string]any{"request_id": "sub-1", "consumer_id": w.CB, "event_types": []string{domain.EventReceiptUpdated},
		"filter": map[string]any{"producer_ids": []string{w.A}}, "delivery": map[string]any{"mode": "webhook", "url": recv.URL + "/mcp-hook", "secret": secret}}
	res, isErr := e.call(s, "waypost_subscribe", args)
	if isErr {
		t.Fatalf("subscribe: %v", res)
	}
	sub := e.data(res, "subscription.upsert.response")
	if sub["state"] != "active" || recv.Challenges() != 1 {
		t.Fatalf("subscribe: %v (challenges %d)", sub, recv.Challenges())
	}
	// The same subscription over HTTP with the same request_id is the same result (one idempotency key).
	h, status := e.http("POST", "/v0/subscriptions", w.TokB, args)
	if status != 200 || !jsonEqual(h["data"], res["data"]) || recv.Challenges() != 1 {
		t.Fatalf("HTTP replay of an MCP subscribe: %d %v", status, h)
	}
	list, isErr := e.call(s, "waypost_subscriptions", map[string]any{})
	if subs := e.data(list, "subscription.list.response")["subscriptions"].([]any); isErr || len(subs) != 1 {
		t.Fatalf("list: %v", list)
	}
	st, isErr := e.call(s, "waypost_status", map[string]any{"operation": "subscription.upsert", "request_id": "sub-1"})
	if isErr || e.data(st, "status.response")["submission_state"] != "committed" {
		t.Fatalf("status: %v", st)
	}
	stop, isErr := e.call(s, "waypost_unsubscribe", map[string]any{"subscription_id": sub["subscription_id"], "request_id": "stop-1"})
	if isErr || e.data(stop, "subscription.stop.response")["state"] != "stopped" {
		t.Fatalf("unsubscribe: %v", stop)
	}
	if again, isErr := e.call(s, "waypost_unsubscribe", map[string]any{"subscription_id": sub["subscription_id"], "request_id": "stop-2"}); isErr {
		t.Fatalf("second unsubscribe: %v", again)
	}
	if st, _ := e.call(s, "waypost_status", map[string]any{"operation": "subscription.stop", "request_id": "stop-1"}); e.data(st, "status.response")["submission_state"] != "committed" {
		t.Fatalf("status of the stop: %v", st)
	}
	for _, raw := range [][]byte{
		e.rawCall(s, "waypost_subscribe", args),
		e.rawCall(s, "waypost_subscriptions", map[string]any{}),
		e.rawCall(s, "waypost_status", map[string]any{"operation": "subscription.upsert", "request_id": "sub-1"}),
	} {
		if strings.Contains(string(raw), strings.TrimPrefix(secret, domain.SecretPrefix)) {
			t.Fatalf("a tool result carries the secret: %s", raw)
		}
	}
}

// TestSubscriptionToolsListedAndDescribed: the three tools are listed with or without webhook_events, their
// descriptions say when they answer UNSUPPORTED, and waypost_subscribe's input schema is the HTTP body
// schema with the secret pattern.
func TestSubscriptionToolsListedAndDescribed(t *testing.T) {
	t.Parallel()
	for _, on := range []bool{true, false} {
		o := apitest.Options{}
		if on {
			o.Webhooks = apitest.Sender(t, true)
		}
		e, w := hookEnv(t, o)
		res, err := e.session(w.TokB).ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		found := 0
		for _, tl := range res.Tools {
			switch tl.Name {
			case "waypost_subscriptions", "waypost_subscribe", "waypost_unsubscribe":
				found++
				if !strings.Contains(tl.Description, "UNSUPPORTED") || !strings.Contains(tl.Description, "webhook_events") {
					t.Errorf("%s: the description does not say when it is UNSUPPORTED: %s", tl.Name, tl.Description)
				}
			}
			if open := tl.Annotations != nil && tl.Annotations.OpenWorldHint != nil && *tl.Annotations.OpenWorldHint; open != (tl.Name == "waypost_subscribe") {
				t.Errorf("%s: openWorldHint %v", tl.Name, open)
			}
			if tl.Name == "waypost_subscribe" {
				raw, _ := json.Marshal(tl.InputSchema)
				if !strings.Contains(string(raw), `^whsec_[A-Za-z0-9+/]{43}=$`) {
					t.Errorf("waypost_subscribe input schema lacks the secret pattern: %s", raw)
				}
			}
		}
		if found != 3 {
			t.Errorf("webhook_events=%v: %d of the 3 subscription tools listed", on, found)
		}
	}
}

// TestSameSubscriptionErrorsOverHTTPAndMCP runs the subscription error table through both transports.
func TestSameSubscriptionErrorsOverHTTPAndMCP(t *testing.T) {
	t.Parallel()
	e, w := hookEnv(t, apitest.Options{Webhooks: apitest.Sender(t, true)})
	off, wOff := hookEnv(t, apitest.Options{})
	strictEnv, wStrict := hookEnv(t, apitest.Options{Webhooks: apitest.Sender(t, false)})
	good, mute := apitest.NewReceiver(t), apitest.NewReceiver(t)
	mute.SetEcho(false)
	readOnly, err := e.svc.CreateToken(context.Background(), w.SpaceID, domain.CreateTokenRequest{RequestID: "ro", ActorID: w.B,
		Scopes: []domain.Scope{domain.ScopeMessageRead}})
	if err != nil {
		t.Fatal(err)
	}
	secret := apitest.NewSecret(t)
	n := 0
	upsert := func(consumer, target, secret string, extra map[string]any) map[string]any {
		n++
		a := map[string]any{"request_id": "sub-" + string(rune('a'+n)), "consumer_id": consumer, "event_types": []string{domain.EventMessageCommitted},
			"delivery": map[string]any{"mode": "webhook", "url": target, "secret": secret}}
		for k, v := range extra {
			a[k] = v
		}
		return a
	}
	stop := func(id string, extra map[string]any) map[string]any {
		a := map[string]any{"subscription_id": id, "request_id": "stop-" + id}
		for k, v := range extra {
			a[k] = v
		}
		return a
	}
	cases := []struct {
		name  string
		env   *env
		token string
		tool  string
		args  map[string]any
		code  string
	}{
		{"verification failed", e, w.TokB, "waypost_subscribe", upsert(w.CB, mute.URL+"/x", secret, nil), "WEBHOOK_VERIFICATION_FAILED"},
		{"private target", e, w.TokB, "waypost_subscribe", upsert(w.CB, "https://10.0.0.1/x", secret, nil), "FORBIDDEN_TARGET"},
		{"http target", strictEnv, wStrict.TokB, "waypost_subscribe", upsert(wStrict.CB, good.URL+"/x", secret, nil), "FORBIDDEN_TARGET"},
		{"bad secret", e, w.TokB, "waypost_subscribe", upsert(w.CB, good.URL+"/x", "whsec_c2VjcmV0", nil), "INVALID_REQUEST"},
		{"undeclared field", e, w.TokB, "waypost_subscribe", upsert(w.CB, good.URL+"/x", secret, map[string]any{"bogus": 1}), "INVALID_REQUEST"},
		{"ttl over the limit", e, w.TokB, "waypost_subscribe", upsert(w.CB, good.URL+"/x", secret, map[string]any{"ttl_seconds": 604801}), "RESOURCE_LIMIT"},
		{"unknown consumer", e, w.TokB, "waypost_subscribe", upsert("con_absent", good.URL+"/x", secret, nil), "NOT_FOUND"},
		{"no scope", e, readOnly.Token, "waypost_subscribe", upsert(w.CB, good.URL+"/x", secret, nil), "FORBIDDEN"},
		{"no scope to list", e, readOnly.Token, "waypost_subscriptions", map[string]any{}, "FORBIDDEN"},
		{"unknown subscription", e, w.TokB, "waypost_unsubscribe", stop("sub_absent", nil), "NOT_FOUND"},
		{"unsupported subscribe", off, wOff.TokB, "waypost_subscribe", upsert(wOff.CB, good.URL+"/x", secret, nil), "UNSUPPORTED"},
		{"unsupported list", off, wOff.TokB, "waypost_subscriptions", map[string]any{}, "UNSUPPORTED"},
		{"unsupported stop", off, wOff.TokB, "waypost_unsubscribe", stop("sub_x", nil), "UNSUPPORTED"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ce := *c.env
			ce.t = t
			m, isErr := ce.call(ce.session(c.token), c.tool, c.args)
			var h map[string]any
			var status int
			switch c.tool {
			case "waypost_subscribe":
				h, status = ce.http("POST", "/v0/subscriptions", c.token, c.args)
			case "waypost_subscriptions":
				h, status = ce.http("GET", "/v0/subscriptions", c.token, nil)
			case "waypost_unsubscribe":
				h, status = ce.http("POST", "/v0/subscriptions/"+c.args["subscription_id"].(string)+"/stop", c.token,
					map[string]any{"request_id": c.args["request_id"]})
			}
			if !isErr || h["ok"] != false {
				t.Fatalf("want %s over both: mcp %v, http %d %v", c.code, m, status, h)
			}
			mc := m["error"].(map[string]any)["code"]
			hc := h["error"].(map[string]any)["code"]
			if mc != c.code || hc != c.code || status != domain.Code(c.code).HTTPStatus() {
				t.Fatalf("want %s over both: mcp %v, http %v (%d)", c.code, mc, hc, status)
			}
		})
	}
	// The MCP unsubscribe without a request_id is refused by its input schema, like the HTTP body.
	m, isErr := e.call(e.session(w.TokB), "waypost_unsubscribe", map[string]any{"subscription_id": "sub_x"})
	h, _ := e.http("POST", "/v0/subscriptions/sub_x/stop", w.TokB, map[string]any{})
	if !isErr || m["error"].(map[string]any)["code"] != "INVALID_REQUEST" || h["error"].(map[string]any)["code"] != "INVALID_REQUEST" {
		t.Fatalf("missing request_id: mcp %v, http %v", m, h)
	}
}
