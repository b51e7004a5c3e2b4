package mcpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/schemas"
	"github.com/waypost/waypost/server/servertest"
)

type env struct {
	t       *testing.T
	url     string
	svc     *domain.Service
	space   domain.SpaceResult
	a, b    string // actor IDs
	cb      string // b's consumer
	tokA    string
	tokB    string
	schemas *schemas.Registry
}

// adminSecret is the control-plane secret of the test server.
const adminSecret = servertest.AdminSecret

func setup(t *testing.T) *env {
	t.Helper()
	srv, url := servertest.Start(t)
	ctx := context.Background()
	svc := srv.Service()
	e := &env{t: t, url: url, svc: svc, schemas: schemas.MustNew()}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	var err error
	e.space, err = svc.CreateSpace(ctx, domain.CreateSpaceRequest{RequestID: "sp"})
	must(err)
	ra, err := svc.CreateActor(ctx, e.space.SpaceID, domain.CreateActorRequest{RequestID: "a"})
	must(err)
	rb, err := svc.CreateActor(ctx, e.space.SpaceID, domain.CreateActorRequest{RequestID: "b"})
	must(err)
	e.a, e.b = ra.ActorID, rb.ActorID
	c, err := svc.CreateConsumer(ctx, e.space.SpaceID, domain.CreateConsumerRequest{RequestID: "cb", ActorID: e.b, View: domain.ViewInbox})
	must(err)
	e.cb = c.ConsumerID
	ta, err := svc.CreateToken(ctx, e.space.SpaceID, domain.CreateTokenRequest{RequestID: "ta", ActorID: e.a, Scopes: domain.AllScopes()})
	must(err)
	tb, err := svc.CreateToken(ctx, e.space.SpaceID, domain.CreateTokenRequest{RequestID: "tb", ActorID: e.b, Scopes: domain.AllScopes()})
	must(err)
	e.tokA, e.tokB = ta.Token, tb.Token
	return e
}

func (e *env) session(token string) *mcp.ClientSession {
	e.t.Helper()
	return servertest.MCP(e.t, e.url, token)
}

// call runs a tool and returns its envelope and whether it was a tool error.
func (e *env) call(s *mcp.ClientSession, name string, args any) (map[string]any, bool) {
	e.t.Helper()
	res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		e.t.Fatalf("%s: protocol error: %v", name, err)
	}
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		e.t.Fatal(err)
	}
	schema := "envelope.success"
	if res.IsError {
		schema = "envelope.error"
	}
	if err := e.schemas.Validate(schema, raw); err != nil {
		e.t.Fatalf("%s: structured content is not an RFC §5.2 envelope: %v\n%s", name, err, raw)
	}
	if len(res.Content) != 1 {
		e.t.Fatalf("%s: %d content blocks, want the envelope as one text block", name, len(res.Content))
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); !ok || !jsonSame(e.t, []byte(tc.Text), raw) {
		e.t.Fatalf("%s: the text content is not the structured content's JSON", name)
	}
	var env map[string]any
	_ = json.Unmarshal(raw, &env)
	return env, res.IsError
}

// http posts a JSON body with a bearer token and returns the decoded envelope and status.
func (e *env) http(method, path, token string, body any) (map[string]any, int) {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, e.url+path, rd)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var env map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		e.t.Fatal(err)
	}
	return env, resp.StatusCode
}

func TestToolsListNamesAndSchemas(t *testing.T) {
	t.Parallel()
	e := setup(t)
	s := e.session(e.tokA)
	res, err := s.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
		raw, _ := json.Marshal(tl.InputSchema)
		if bytes.Contains(raw, []byte(schemas.BaseURI)) {
			t.Errorf("%s: input schema has an external reference", tl.Name)
		}
	}
	want := []string{"waypost_ack", "waypost_blob_commit", "waypost_blob_get", "waypost_blob_prepare", "waypost_describe",
		"waypost_get_message", "waypost_inbox", "waypost_memory_export", "waypost_memory_publish", "waypost_memory_read",
		"waypost_send", "waypost_status", "waypost_subscribe", "waypost_subscriptions", "waypost_unsubscribe", "waypost_wait"}
	slices.Sort(names)
	if !slices.Equal(names, want) {
		t.Errorf("tools/list = %v\nwant %v", names, want)
	}
}

func TestUnauthenticatedIsRejected(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for _, tok := range []string{"", "wpt_not-a-real-token-000000000000000000000000000000"} {
		req, _ := http.NewRequest("POST", e.url+"/mcp", bytes.NewReader([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") == "" {
			t.Fatalf("token %q: status %d", tok, resp.StatusCode)
		}
	}
}

func TestMailboxLoopOverMCP(t *testing.T) {
	t.Parallel()
	e := setup(t)
	sa, sb := e.session(e.tokA), e.session(e.tokB)
	d, isErr := e.call(sa, "waypost_describe", map[string]any{})
	if isErr || d["data"].(map[string]any)["actor_id"] != e.a {
		t.Fatalf("describe: %v", d)
	}
	send := map[string]any{"request_id": "m1", "recipient_ids": []string{e.b}, "subject": "hi", "body": map[string]any{"text": "hello"}}
	r, isErr := e.call(sa, "waypost_send", send)
	if isErr || r["data"].(map[string]any)["submission_state"] != "committed" {
		t.Fatalf("send: %v", r)
	}
	st, isErr := e.call(sa, "waypost_status", map[string]any{"operation": "message.send", "request_id": "m1"})
	if isErr || st["data"].(map[string]any)["submission_state"] != "committed" {
		t.Fatalf("status: %v", st)
	}
	page, isErr := e.call(sb, "waypost_inbox", map[string]any{"consumer_id": e.cb, "cursor": nil})
	items := page["data"].(map[string]any)["items"].([]any)
	if isErr || len(items) != 1 {
		t.Fatalf("inbox: %v", page)
	}
	item := items[0].(map[string]any)
	ack, isErr := e.call(sb, "waypost_ack", map[string]any{"request_id": "k1", "consumer_id": e.cb,
		"items": []any{map[string]any{"item_id": item["item_id"], "stage": "received"}}, "checkpoint_cursor": page["data"].(map[string]any)["next_cursor"]})
	if isErr || !ack["data"].(map[string]any)["receipts"].([]any)[0].(map[string]any)["changed"].(bool) {
		t.Fatalf("ack: %v", ack)
	}
	msg, isErr := e.call(sb, "waypost_get_message", map[string]any{"message_id": item["resource_id"]})
	if isErr || msg["data"].(map[string]any)["body"].(map[string]any)["text"] != "hello" {
		t.Fatalf("get: %v", msg)
	}
}

// TestIdempotencyAcrossTransports is P01 across HTTP and MCP: a send retried over the other transport
// returns the original result and publishes nothing new.
func TestIdempotencyAcrossTransports(t *testing.T) {
	t.Parallel()
	e := setup(t)
	s := e.session(e.tokA)
	body := func(rid string) map[string]any {
		return map[string]any{"request_id": rid, "recipient_ids": []string{e.b}, "body": map[string]any{"text": "x"}}
	}
	h, status := e.http("POST", "/v0/messages", e.tokA, body("x1"))
	if status != 200 {
		t.Fatalf("http send: %d %v", status, h)
	}
	m, isErr := e.call(s, "waypost_send", body("x1"))
	if isErr || !jsonEqual(m["data"], h["data"]) {
		t.Fatalf("MCP retry of an HTTP send:\nhttp %v\nmcp  %v", h["data"], m["data"])
	}
	m2, isErr := e.call(s, "waypost_send", body("x2"))
	if isErr {
		t.Fatalf("mcp send: %v", m2)
	}
	h2, status := e.http("POST", "/v0/messages", e.tokA, body("x2"))
	if status != 200 || !jsonEqual(m2["data"], h2["data"]) {
		t.Fatalf("HTTP retry of an MCP send:\nmcp  %v\nhttp %v", m2["data"], h2["data"])
	}
	page, _ := e.http("POST", "/v0/inbox/read", e.tokB, map[string]any{"consumer_id": e.cb})
	if n := len(page["data"].(map[string]any)["items"].([]any)); n != 2 {
		t.Fatalf("want 2 published messages, got %d", n)
	}
}

// TestSameErrorsOverHTTPAndMCP runs one operation table through both transports and compares outcomes.
func TestSameErrorsOverHTTPAndMCP(t *testing.T) {
	t.Parallel()
	e := setup(t)
	s := e.session(e.tokA)
	e.http("POST", "/v0/messages", e.tokA, map[string]any{"request_id": "dup", "recipient_ids": []string{e.b}, "body": map[string]any{"text": "one"}})
	long := string(bytes.Repeat([]byte("s"), 600))
	cases := []struct {
		name string
		tool string
		args map[string]any
		http func() (map[string]any, int)
		code string
	}{
		{"conflict", "waypost_send", map[string]any{"request_id": "dup", "recipient_ids": []string{e.b}, "body": map[string]any{"text": "two"}}, nil, "IDEMPOTENCY_CONFLICT"},
		{"unknown recipient", "waypost_send", map[string]any{"request_id": "r2", "recipient_ids": []string{"act_nobody"}, "body": map[string]any{"text": "x"}}, nil, "NOT_FOUND"},
		{"undeclared field", "waypost_send", map[string]any{"request_id": "r3", "body": map[string]any{"text": "x"}, "bogus": 1}, nil, "INVALID_REQUEST"},
		{"subject too long", "waypost_send", map[string]any{"request_id": "r4", "subject": long, "body": map[string]any{"text": "x"}}, nil, "RESOURCE_LIMIT"},
		{"foreign consumer", "waypost_inbox", map[string]any{"consumer_id": e.cb}, nil, "NOT_FOUND"},
		{"bad cursor", "waypost_inbox", map[string]any{"consumer_id": "con_x", "cursor": "garbage"}, nil, "NOT_FOUND"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, isErr := e.call(s, c.tool, c.args)
			path := map[string]string{"waypost_send": "/v0/messages", "waypost_inbox": "/v0/inbox/read"}[c.tool]
			h, status := e.http("POST", path, e.tokA, c.args)
			mc := m["error"].(map[string]any)["code"]
			hc := h["error"].(map[string]any)["code"]
			if !isErr || mc != c.code || hc != c.code {
				t.Fatalf("want %s over both: mcp %v (isError=%v), http %v (%d)", c.code, mc, isErr, hc, status)
			}
		})
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}
