package mcpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/schemas"
)

// rpc posts one raw JSON-RPC message to /mcp with a bearer token (and a protocol version header when
// version is not empty) and returns the status, the Content-Type and the body.
func (e *env) rpc(token, version string, body []byte) (int, string, []byte) {
	e.t.Helper()
	req, _ := http.NewRequest("POST", e.url+"/mcp", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if version != "" {
		req.Header.Set("MCP-Protocol-Version", version)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), out
}

// rpcError decodes a JSON-RPC error response; it fails the test when the body is not one.
func (e *env) rpcError(what string, ctype string, body []byte) (id any, code int, message string) {
	e.t.Helper()
	var resp struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if !strings.HasPrefix(ctype, "application/json") || json.Unmarshal(body, &resp) != nil || resp.JSONRPC != "2.0" || resp.Error == nil {
		e.t.Fatalf("%s: not a JSON-RPC error object (Content-Type %q): %s", what, ctype, body)
	}
	_ = json.Unmarshal(resp.ID, &id)
	return id, resp.Error.Code, resp.Error.Message
}

// outputSchemas compiles every tool's advertised outputSchema.
func (e *env) outputSchemas(s *mcp.ClientSession) map[string]*schemas.Schema {
	e.t.Helper()
	res, err := s.ListTools(context.Background(), nil)
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]*schemas.Schema{}
	for _, tl := range res.Tools {
		if tl.OutputSchema == nil {
			e.t.Errorf("%s: no outputSchema", tl.Name)
			continue
		}
		raw, _ := json.Marshal(tl.OutputSchema)
		c, err := e.schemas.Compile(tl.Name+" output", raw)
		if err != nil {
			e.t.Fatalf("%s: outputSchema does not compile: %v\n%s", tl.Name, err, raw)
		}
		out[tl.Name] = c
	}
	return out
}

// everyToolCall calls every tool once with arguments that succeed where the fixture allows it, and once
// with arguments that fail, and returns the results by "tool ok|error".
func (e *env) everyToolCall(sa, sb *mcp.ClientSession) map[string]*mcp.CallToolResult {
	e.t.Helper()
	out := map[string]*mcp.CallToolResult{}
	call := func(s *mcp.ClientSession, name string, args map[string]any) map[string]any {
		res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			e.t.Fatalf("%s: protocol error: %v", name, err)
		}
		label := name + " ok"
		if res.IsError {
			label = name + " error"
		}
		out[label] = res
		raw, _ := json.Marshal(res.StructuredContent)
		var env map[string]any
		_ = json.Unmarshal(raw, &env)
		return env
	}
	data := func(env map[string]any) map[string]any { d, _ := env["data"].(map[string]any); return d }
	call(sa, "waypost_describe", map[string]any{})
	call(sa, "waypost_describe", map[string]any{"bogus": true})
	sent := data(call(sa, "waypost_send", map[string]any{"request_id": "every-1", "recipient_ids": []string{e.b}, "subject": "s <b>",
		"body": map[string]any{"text": "the body a host must show"}}))
	call(sa, "waypost_send", map[string]any{"request_id": "every-1", "body": map[string]any{"text": "other"}})
	call(sa, "waypost_status", map[string]any{"operation": "message.send", "request_id": "every-1"})
	call(sa, "waypost_status", map[string]any{"operation": "message.send", "request_id": "never"})
	call(sb, "waypost_get_message", map[string]any{"message_id": sent["message_id"]})
	call(sb, "waypost_get_message", map[string]any{"message_id": "msg_none"})
	page := data(call(sb, "waypost_inbox", map[string]any{"consumer_id": e.cb}))
	call(sa, "waypost_inbox", map[string]any{"consumer_id": e.cb})
	items, _ := page["items"].([]any)
	if len(items) == 0 {
		e.t.Fatalf("inbox: no item")
	}
	call(sb, "waypost_ack", map[string]any{"request_id": "every-ack", "consumer_id": e.cb,
		"items": []any{map[string]any{"item_id": items[0].(map[string]any)["item_id"], "stage": "received"}}})
	call(sb, "waypost_ack", map[string]any{"request_id": "every-ack-2", "consumer_id": "con_none", "items": []any{}})
	call(sa, "waypost_wait", map[string]any{"consumer_id": e.cb, "timeout_ms": 0})
	call(sb, "waypost_wait", map[string]any{"consumer_id": e.cb, "timeout_ms": 0, "cursor": page["next_cursor"]})
	prep := data(call(sa, "waypost_blob_prepare", map[string]any{"request_id": "every-blob", "content_type": "text/plain", "size_bytes": 0,
		"sha256": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"}))
	call(sa, "waypost_blob_prepare", map[string]any{"request_id": "every-blob-2", "content_type": "text/plain", "size_bytes": 1, "sha256": "00"})
	put, _ := http.NewRequest("PUT", prep["upload_url"].(string), nil)
	put.Header.Set("Authorization", "Bearer "+e.tokA)
	put.Header.Set("Content-Type", "text/plain")
	if resp, err := http.DefaultClient.Do(put); err != nil || resp.StatusCode != 200 {
		e.t.Fatalf("upload: %v %v", err, resp)
	} else {
		resp.Body.Close()
	}
	call(sa, "waypost_blob_commit", map[string]any{"request_id": "every-commit", "upload_id": prep["upload_id"]})
	call(sa, "waypost_blob_commit", map[string]any{"request_id": "every-commit-2", "upload_id": "upl_none"})
	call(sa, "waypost_blob_get", map[string]any{"blob_id": prep["blob_id"]})
	call(sa, "waypost_blob_get", map[string]any{"blob_id": "blb_none"})
	coll := e.collection("every-coll")
	call(sa, "waypost_memory_publish", map[string]any{"request_id": "every-pub", "collection_id": coll.CollectionID, "expected_revision": 0,
		"mode": "snapshot", "items": []any{map[string]any{"item_id": "i1", "blob_id": prep["blob_id"], "path": "a.txt"}}})
	call(sa, "waypost_memory_publish", map[string]any{"request_id": "every-pub-2", "collection_id": coll.CollectionID, "expected_revision": 0,
		"mode": "snapshot", "items": []any{}})
	call(sa, "waypost_memory_read", map[string]any{"collection_id": coll.CollectionID, "revision": nil})
	call(sa, "waypost_memory_read", map[string]any{"collection_id": "col_none"})
	call(sa, "waypost_memory_export", map[string]any{"collection_id": coll.CollectionID})
	call(sa, "waypost_memory_export", map[string]any{"collection_id": coll.CollectionID, "revision": 9})
	call(sa, "waypost_subscriptions", map[string]any{})
	call(sa, "waypost_subscribe", map[string]any{"request_id": "every-sub", "consumer_id": e.cb, "event_types": []string{"waypost.feed.item.created"},
		"delivery": map[string]any{"mode": "webhook", "url": "https://127.0.0.1:1/hook", "secret": "whsec_" + strings.Repeat("A", 43) + "="}})
	call(sa, "waypost_unsubscribe", map[string]any{"subscription_id": "sub_none", "request_id": "every-unsub"})
	return out
}

// TestIssue13_MCPContentCarriesJSON (issue 13 item 1): every tool result, success or tool error, carries
// its envelope serialized in a text block that parses as the same JSON as structuredContent, so a host that
// shows the model only content (or a client before 2025-06-18) sees message bodies and inbox items.
func TestIssue13_MCPContentCarriesJSON(t *testing.T) {
	t.Parallel()
	e := setup(t)
	sa, sb := e.session(e.tokA), e.session(e.tokB)
	results := e.everyToolCall(sa, sb)
	for label, res := range results {
		structured, _ := json.Marshal(res.StructuredContent)
		var found bool
		for _, c := range res.Content {
			tc, ok := c.(*mcp.TextContent)
			if ok && jsonSame(t, []byte(tc.Text), structured) {
				found = true
			}
		}
		if !found {
			raw, _ := json.Marshal(res.Content)
			t.Errorf("%s: no text block holds the structured content\ncontent:    %s\nstructured: %s", label, raw, structured)
		}
	}
	// A client of protocol version 2024-11-05 (no structuredContent in its schema) reads the body from content.
	var msgID string
	for _, r := range results {
		if env, ok := r.StructuredContent.(map[string]any); ok {
			if d, ok := env["data"].(map[string]any); ok && d["message_id"] != nil && d["submission_state"] != nil {
				msgID = d["message_id"].(string)
			}
		}
	}
	_, _, body := e.rpc(e.tokB, "2024-11-05", []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"waypost_get_message","arguments":{"message_id":"`+msgID+`"}}}`))
	var resp struct {
		Result struct {
			Content []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
		} `json:"result"`
	}
	if err := json.Unmarshal(body, &resp); err != nil || len(resp.Result.Content) == 0 ||
		!strings.Contains(resp.Result.Content[0].Text, `"text":"the body a host must show"`) {
		t.Fatalf("2024-11-05 client: the message body is not in the first text block: %s", body)
	}
}

// TestIssue13_MCPToolSchemas (issue 13 item 2): every tool declares an outputSchema built from the response
// schemas in schemas/, every result validates against it, and no input schema uses a JSON Schema type
// array (["string","null"]), which several hosts reject.
func TestIssue13_MCPToolSchemas(t *testing.T) {
	t.Parallel()
	e := setup(t)
	sa, sb := e.session(e.tokA), e.session(e.tokB)
	res, err := sa.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range res.Tools {
		in, _ := json.Marshal(tl.InputSchema)
		if path, ok := typeArray(in); ok {
			t.Errorf("%s: input schema has a type array at %s", tl.Name, path)
		}
		out, _ := json.Marshal(tl.OutputSchema)
		var root map[string]any
		if err := json.Unmarshal(out, &root); err != nil || root["type"] != "object" {
			t.Errorf("%s: outputSchema is not an object schema: %s", tl.Name, out)
		}
		if path, ok := typeArray(out); ok {
			t.Errorf("%s: output schema has a type array at %s", tl.Name, path)
		}
	}
	compiled := e.outputSchemas(sa)
	results := e.everyToolCall(sa, sb)
	var names []string
	for label, r := range results {
		name, _, _ := strings.Cut(label, " ")
		names = append(names, name)
		raw, _ := json.Marshal(r.StructuredContent)
		if err := compiled[name].Validate(raw); err != nil {
			t.Errorf("%s: structured content does not match the declared outputSchema: %v\n%s", label, err, raw)
		}
	}
	for _, tl := range res.Tools {
		if !slices.Contains(names, tl.Name) {
			t.Errorf("%s: not exercised", tl.Name)
		}
	}
}

// typeArray finds a "type" keyword whose value is an array.
func typeArray(raw []byte) (string, bool) {
	var doc any
	if json.Unmarshal(raw, &doc) != nil {
		return "", false
	}
	var walk func(path string, n any) (string, bool)
	walk = func(path string, n any) (string, bool) {
		switch v := n.(type) {
		case map[string]any:
			if _, ok := v["type"].([]any); ok {
				return path, true
			}
			for k, c := range v {
				if p, ok := walk(path+"/"+k, c); ok {
					return p, true
				}
			}
		case []any:
			for i, c := range v {
				if p, ok := walk(path+"/"+string(rune('0'+i%10)), c); ok {
					return p, true
				}
			}
		}
		return "", false
	}
	return walk("", doc)
}

// TestIssue13_MCPStrictJSONRPC (issue 13 item 3): a JSON-RPC message with trailing data, a duplicate member
// name or invalid UTF-8 is a JSON-RPC parse error (-32700) in a JSON body, and the send it carries is not
// committed; an unknown method is a JSON-RPC error object (-32601) with the request's ID.
func TestIssue13_MCPStrictJSONRPC(t *testing.T) {
	t.Parallel()
	e := setup(t)
	send := func(rid string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"waypost_send","arguments":{"request_id":"` + rid +
			`","recipient_ids":["` + e.b + `"],"body":{"text":"x"}}}}`
	}
	cases := []struct {
		name, rid string
		body      []byte
	}{
		{"trailing data", "strict-1", []byte(send("strict-1") + ` {"x":1}`)},
		{"trailing garbage", "strict-2", []byte(send("strict-2") + `garbage`)},
		{"duplicate id", "strict-3", []byte(strings.Replace(send("strict-3"), `"id":1,`, `"id":1,"id":2,`, 1))},
		{"duplicate argument", "strict-4", []byte(strings.Replace(send("strict-4"), `"body":{"text":"x"}`, `"body":{"text":"x"},"body":{"text":"y"}`, 1))},
		{"invalid UTF-8", "strict-5", []byte(strings.Replace(send("strict-5"), `"text":"x"`, "\"text\":\"x\xff\"", 1))},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e.t = t
			status, ctype, body := e.rpc(e.tokA, "", c.body)
			_, code, msg := e.rpcError(c.name, ctype, body)
			if code != -32700 || status != http.StatusBadRequest {
				t.Fatalf("%s: HTTP %d, JSON-RPC code %d (%s), want 400 and -32700", c.name, status, code, msg)
			}
			st, _ := e.http("GET", "/v0/status?operation=message.send&request_id="+c.rid, e.tokA, nil)
			if st["ok"] != false {
				t.Fatalf("%s: the send was processed: %v", c.name, st)
			}
		})
	}
	e.t = t
	status, ctype, body := e.rpc(e.tokA, "", []byte(`{"jsonrpc":"2.0","id":"abc","method":"tools/frobnicate","params":{}}`))
	id, code, msg := e.rpcError("unknown method", ctype, body)
	if code != -32601 || id != "abc" || !strings.Contains(msg, "tools/frobnicate") {
		t.Fatalf("unknown method: HTTP %d, id %v, code %d, message %q; want -32601 with id \"abc\"", status, id, code, msg)
	}
	// A well-formed message still works.
	if _, _, body := e.rpc(e.tokA, "", []byte(send("strict-ok"))); !strings.Contains(string(body), `"committed"`) {
		t.Fatalf("a strict message was not served: %s", body)
	}
}

// TestIssue13_MCPIDArgumentErrorsNameTheField (issue 13 item 4): an empty or malformed ID argument of a
// tool whose HTTP form takes it from the path or query is INVALID_REQUEST naming the field, in the message
// and in details.field, like the tools validated by the schemas in schemas/.
func TestIssue13_MCPIDArgumentErrorsNameTheField(t *testing.T) {
	t.Parallel()
	e := setup(t)
	s := e.session(e.tokA)
	long := strings.Repeat("x", 129) // over max_id_bytes and max_request_id_bytes
	cases := []struct {
		tool, field string
		args        map[string]any
	}{
		{"waypost_get_message", "message_id", map[string]any{}},
		{"waypost_blob_get", "blob_id", map[string]any{}},
		{"waypost_memory_read", "collection_id", map[string]any{}},
		{"waypost_memory_export", "collection_id", map[string]any{}},
		{"waypost_wait", "consumer_id", map[string]any{}},
		{"waypost_unsubscribe", "subscription_id", map[string]any{"request_id": "u1"}},
		{"waypost_status", "request_id", map[string]any{"operation": "message.send"}},
	}
	for _, c := range cases {
		for _, v := range []any{"", "bad id!", long, nil} {
			args := map[string]any{}
			for k, x := range c.args {
				args[k] = x
			}
			if v != nil {
				args[c.field] = v
			}
			env, isErr := e.call(s, c.tool, args)
			er, _ := env["error"].(map[string]any)
			details, _ := er["details"].(map[string]any)
			if !isErr || er["code"] != "INVALID_REQUEST" || details["field"] != c.field || !strings.Contains(er["message"].(string), c.field) {
				t.Errorf("%s with %s=%v: %v; want INVALID_REQUEST naming %s", c.tool, c.field, v, env, c.field)
			}
		}
	}
}

func jsonSame(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return jsonEqual(x, y)
}

// collection creates a collection whose source is A, failing the test if it cannot.
func (e *env) collection(rid string) domain.CollectionResult {
	e.t.Helper()
	coll, err := e.svc.CreateCollection(context.Background(), e.space.SpaceID,
		domain.CreateCollectionRequest{RequestID: rid, SourceActorID: e.a, Scope: "test collection"})
	if err != nil {
		e.t.Fatal(err)
	}
	return coll
}
