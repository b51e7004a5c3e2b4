package mcpapi_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/waypost/waypost/domain"
)

// party is one more actor of the env's space, with a token of every scope and an inbox consumer.
type party struct {
	id, token, consumer string
}

func (e *env) party(name string) party {
	e.t.Helper()
	ctx := context.Background()
	a, err := e.svc.CreateActor(ctx, e.space.SpaceID, domain.CreateActorRequest{RequestID: "actor-" + name})
	if err != nil {
		e.t.Fatal(err)
	}
	c, err := e.svc.CreateConsumer(ctx, e.space.SpaceID, domain.CreateConsumerRequest{RequestID: "con-" + name, ActorID: a.ActorID, View: domain.ViewInbox})
	if err != nil {
		e.t.Fatal(err)
	}
	tok, err := e.svc.CreateToken(ctx, e.space.SpaceID, domain.CreateTokenRequest{RequestID: "tok-" + name, ActorID: a.ActorID, Scopes: domain.AllScopes()})
	if err != nil {
		e.t.Fatal(err)
	}
	return party{id: a.ActorID, token: tok.Token, consumer: c.ConsumerID}
}

// raw sends a request with a raw body and returns the status and the body.
func (e *env) raw(method, path, token string, body []byte) (int, []byte) {
	e.t.Helper()
	req, _ := http.NewRequest(method, e.url+path, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// errCode returns the error code of an envelope ("" for a success).
func errCode(env map[string]any) string {
	er, _ := env["error"].(map[string]any)
	c, _ := er["code"].(string)
	return c
}

// uploadBlob puts content into a sealed blob of token's actor over HTTP and returns its ID.
func (e *env) uploadBlob(token, rid string, content []byte, ctype string) string {
	e.t.Helper()
	sum := sha256.Sum256(content)
	prep, status := e.http("POST", "/v0/blobs", token, map[string]any{"request_id": rid, "content_type": ctype,
		"size_bytes": len(content), "sha256": hex.EncodeToString(sum[:])})
	if status != 200 {
		e.t.Fatalf("prepare: %d %v", status, prep)
	}
	d := prep["data"].(map[string]any)
	req, _ := http.NewRequest("PUT", e.url+d["upload_url"].(string), bytes.NewReader(content))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", ctype)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		e.t.Fatalf("upload: %v %v", err, resp)
	}
	resp.Body.Close()
	if c, status := e.http("POST", "/v0/blobs/commit", token, map[string]any{"request_id": rid + "-seal", "upload_id": d["upload_id"]}); status != 200 {
		e.t.Fatalf("commit: %d %v", status, c)
	}
	return d["blob_id"].(string)
}

func (e *env) inboxCount(token, consumer string) int {
	e.t.Helper()
	page, status := e.http("POST", "/v0/inbox/read", token, map[string]any{"consumer_id": consumer, "limit": 200})
	if status != 200 {
		e.t.Fatalf("inbox: %d %v", status, page)
	}
	return len(page["data"].(map[string]any)["items"].([]any))
}

// TestIssue13_JoiningAThreadNeedsAccess (issue 13 item 9, RFC §6): a client-chosen thread_id that names an
// existing thread may be used only by an actor that can see a message of it; anyone else is FORBIDDEN over
// HTTP and MCP and nothing is published. A recipient may continue the thread; a new thread_id starts one.
func TestIssue13_JoiningAThreadNeedsAccess(t *testing.T) {
	t.Parallel()
	e := setup(t)
	c := e.party("c")
	sc, sb := e.session(c.token), e.session(e.tokB)
	send := func(rid, thread string, to string) map[string]any {
		m := map[string]any{"request_id": rid, "recipient_ids": []string{to}, "body": map[string]any{"text": rid}}
		if thread != "" {
			m["thread_id"] = thread
		}
		return m
	}
	first, status := e.http("POST", "/v0/messages", e.tokA, send("t-1", "proj-x", e.b))
	if status != 200 {
		t.Fatalf("starting thread proj-x: %d %v", status, first)
	}
	started, status := e.http("POST", "/v0/messages", e.tokA, send("t-2", "", e.b))
	if status != 200 {
		t.Fatalf("starting a thread: %d %v", status, started)
	}
	generated := started["data"].(map[string]any)["thread_id"].(string)
	before := e.inboxCount(e.tokB, e.cb)
	for i, thread := range []string{"proj-x", generated} {
		rid := fmt.Sprintf("c-join-%d", i)
		h, status := e.http("POST", "/v0/messages", c.token, send(rid, thread, e.b))
		if status != http.StatusForbidden || errCode(h) != "FORBIDDEN" {
			t.Fatalf("HTTP: an outsider joins thread %s: %d %v", thread, status, h)
		}
		m, isErr := e.call(sc, "waypost_send", send(rid+"-mcp", thread, e.b))
		if !isErr || errCode(m) != "FORBIDDEN" {
			t.Fatalf("MCP: an outsider joins thread %s: %v", thread, m)
		}
		for _, r := range []string{rid, rid + "-mcp"} {
			if st, _ := e.http("GET", "/v0/status?operation=message.send&request_id="+r, c.token, nil); errCode(st) != "NOT_FOUND" {
				t.Fatalf("a refused join left a submission: %v", st)
			}
		}
	}
	if after := e.inboxCount(e.tokB, e.cb); after != before {
		t.Fatalf("refused joins published: %d items before, %d after", before, after)
	}
	// The recipient continues both threads; the outsider starts its own.
	for i, thread := range []string{"proj-x", generated} {
		if m, isErr := e.call(sb, "waypost_send", send(fmt.Sprint("b-join-", i), thread, e.a)); isErr || m["data"].(map[string]any)["thread_id"] != thread {
			t.Fatalf("the recipient continues thread %s: %v", thread, m)
		}
	}
	if h, status := e.http("POST", "/v0/messages", c.token, send("c-own", "proj-c", e.b)); status != 200 {
		t.Fatalf("a new thread_id: %d %v", status, h)
	}
}

// TestIssue13_SourceSeesOwnRevisions (issue 13 item 10, RFC §4/§8): the inbox view of a collection's source
// actor includes the collection's revisions (it may read them), over HTTP and MCP.
func TestIssue13_SourceSeesOwnRevisions(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	ca, err := e.svc.CreateConsumer(ctx, e.space.SpaceID, domain.CreateConsumerRequest{RequestID: "ca", ActorID: e.a, View: domain.ViewInbox})
	if err != nil {
		t.Fatal(err)
	}
	coll := e.collection("coll-a")
	blob := e.uploadBlob(e.tokA, "b1", []byte("note"), "text/plain")
	if r, status := e.http("POST", "/v0/collections/"+coll.CollectionID+"/revisions", e.tokA, map[string]any{"request_id": "p1",
		"expected_revision": 0, "mode": "snapshot", "items": []any{map[string]any{"item_id": "n1", "blob_id": blob, "path": "n1.txt"}}}); status != 200 {
		t.Fatalf("publish: %d %v", status, r)
	}
	has := func(page map[string]any) bool {
		for _, it := range page["data"].(map[string]any)["items"].([]any) {
			if m := it.(map[string]any); m["item_type"] == "memory_revision" && m["resource_id"] == coll.CollectionID {
				return true
			}
		}
		return false
	}
	h, _ := e.http("POST", "/v0/inbox/read", e.tokA, map[string]any{"consumer_id": ca.ConsumerID})
	m, isErr := e.call(e.session(e.tokA), "waypost_inbox", map[string]any{"consumer_id": ca.ConsumerID})
	if !has(h) || isErr || !has(m) {
		t.Fatalf("the source's inbox lacks its revision:\nHTTP %v\nMCP  %v", h, m)
	}
}

// TestIssue13_MemoryCursorKeepsParameters (issue 13 item 11): a memory.read cursor fixes include_tombstones
// (and the revision): a later page without the flag continues with the cursor's value; a different explicit
// value is INVALID_CURSOR. Over HTTP and MCP.
func TestIssue13_MemoryCursorKeepsParameters(t *testing.T) {
	t.Parallel()
	e := setup(t)
	coll := e.collection("coll-t")
	blob := e.uploadBlob(e.tokA, "b1", []byte("x"), "text/plain")
	items := []any{}
	for _, id := range []string{"a", "b", "c"} {
		items = append(items, map[string]any{"item_id": id, "blob_id": blob, "path": id + ".txt"})
	}
	base := "/v0/collections/" + coll.CollectionID
	e.http("POST", base+"/revisions", e.tokA, map[string]any{"request_id": "p1", "expected_revision": 0, "mode": "snapshot", "items": items})
	e.http("POST", base+"/revisions", e.tokA, map[string]any{"request_id": "p2", "expected_revision": 1, "mode": "delta", "delete_ids": []string{"a", "b"}})
	// With tombstones, the revision holds a (tombstone), b (tombstone), c: three pages of one.
	s := e.session(e.tokA)
	h1, _ := e.http("GET", base+"/items?limit=1&include_tombstones=true", e.tokA, nil)
	m1, _ := e.call(s, "waypost_memory_read", map[string]any{"collection_id": coll.CollectionID, "limit": 1, "include_tombstones": true})
	for name, first := range map[string]map[string]any{"HTTP": h1, "MCP": m1} {
		cursor := first["data"].(map[string]any)["next_cursor"].(string)
		var page map[string]any
		if name == "HTTP" {
			page, _ = e.http("GET", base+"/items?limit=1&cursor="+cursor, e.tokA, nil)
		} else {
			page, _ = e.call(s, "waypost_memory_read", map[string]any{"collection_id": coll.CollectionID, "limit": 1, "cursor": cursor})
		}
		d, _ := page["data"].(map[string]any)
		its, _ := d["items"].([]any)
		if len(its) != 1 || its[0].(map[string]any)["item_id"] != "b" || its[0].(map[string]any)["state"] != "tombstone" {
			t.Fatalf("%s: page 2 without include_tombstones: %v; want the tombstone b", name, page)
		}
		var wrong map[string]any
		if name == "HTTP" {
			wrong, _ = e.http("GET", base+"/items?limit=1&include_tombstones=false&cursor="+cursor, e.tokA, nil)
		} else {
			wrong, _ = e.call(s, "waypost_memory_read", map[string]any{"collection_id": coll.CollectionID, "limit": 1, "cursor": cursor, "include_tombstones": false})
		}
		if errCode(wrong) != "INVALID_CURSOR" {
			t.Fatalf("%s: the other include_tombstones with the cursor: %v", name, wrong)
		}
	}
}

// TestIssue13_BlobReadableFromOldRevisions (issue 13 item 12): a blob stays readable by the collection's
// readers for as long as a readable revision references it, however many revisions followed.
func TestIssue13_BlobReadableFromOldRevisions(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	coll := e.collection("coll-old")
	if _, err := e.svc.CreateGrant(ctx, e.space.SpaceID, domain.CreateGrantRequest{RequestID: "g", ActorID: e.b, Permission: domain.PermMemoryRead, CollectionID: coll.CollectionID}); err != nil {
		t.Fatal(err)
	}
	pa, err := e.svc.Authenticate(ctx, e.tokA)
	if err != nil {
		t.Fatal(err)
	}
	old := e.uploadBlob(e.tokA, "old", []byte("first version"), "text/plain")
	newer := e.uploadBlob(e.tokA, "new", []byte("second version"), "text/plain")
	publish := func(rev int64, blob string) {
		t.Helper()
		if _, err := e.svc.PublishMemory(ctx, pa, coll.CollectionID, domain.MemoryPublishRequest{RequestID: fmt.Sprint("p", rev), ExpectedRevision: &rev,
			Mode: domain.ModeSnapshot, Items: []domain.MemoryItemInput{{ItemID: "doc", BlobID: blob, Path: "doc.txt"}}}); err != nil {
			t.Fatal(err)
		}
	}
	publish(0, old) // revision 1 holds the old blob
	for rev := int64(1); rev <= 120; rev++ {
		blob := newer
		if rev%2 == 0 { // alternate the path so that every revision changes something, never back to old
			blob = e.uploadBlob(e.tokA, fmt.Sprint("v", rev), []byte(fmt.Sprint("version ", rev)), "text/plain")
		}
		publish(rev, blob)
	}
	if r, _ := e.http("GET", "/v0/collections/"+coll.CollectionID+"/items?revision=1", e.tokB, nil); errCode(r) != "" {
		t.Fatalf("revision 1 is not readable: %v", r)
	}
	status, body := e.raw("GET", "/v0/blobs/"+old+"/content", e.tokB, nil)
	if status != 200 || string(body) != "first version" {
		t.Fatalf("HTTP: a reader downloads the blob of revision 1 (head 121): %d %s", status, body)
	}
	if m, isErr := e.call(e.session(e.tokB), "waypost_blob_get", map[string]any{"blob_id": old}); isErr {
		t.Fatalf("MCP: blob_get of revision 1's blob: %v", m)
	}
	c := e.party("outsider")
	if status, _ := e.raw("GET", "/v0/blobs/"+old+"/content", c.token, nil); status != 404 {
		t.Fatalf("an actor without the grant reads the blob: %d", status)
	}
}

// TestIssue13_LimitsAnswerResourceLimit (issue 13 item 13, SUPPLEMENT §5.3): feed.wait timeout_ms above
// feed_wait_max_ms and a manifest over memory_manifest_changes_max are RESOURCE_LIMIT, over HTTP and MCP.
func TestIssue13_LimitsAnswerResourceLimit(t *testing.T) {
	t.Parallel()
	e := setup(t)
	s := e.session(e.tokB)
	max := e.svc.Limits().FeedWaitMaxMS
	h, status := e.http("GET", fmt.Sprintf("/v0/feed/wait?consumer_id=%s&timeout_ms=%d", e.cb, max+1), e.tokB, nil)
	m, _ := e.call(s, "waypost_wait", map[string]any{"consumer_id": e.cb, "timeout_ms": max + 1})
	if status != 422 || errCode(h) != "RESOURCE_LIMIT" || errCode(m) != "RESOURCE_LIMIT" {
		t.Fatalf("timeout_ms %d: HTTP %d %v; MCP %v", max+1, status, h, m)
	}

	coll := e.collection("coll-big")
	var ids []string
	for i := range e.svc.Limits().MemoryManifestChangesMax + 1 {
		ids = append(ids, fmt.Sprintf("\"d%d\"", i))
	}
	manifest := e.uploadBlob(e.tokA, "manifest", []byte(`{"items":[],"delete_ids":[`+strings.Join(ids, ",")+`]}`), "application/json")
	req := func(rid string) map[string]any {
		return map[string]any{"request_id": rid, "collection_id": coll.CollectionID, "expected_revision": 0, "mode": "delta", "manifest_blob_id": manifest}
	}
	h, status = e.http("POST", "/v0/collections/"+coll.CollectionID+"/revisions", e.tokA, req("big-1"))
	m, _ = e.call(e.session(e.tokA), "waypost_memory_publish", req("big-2"))
	if status != 422 || errCode(h) != "RESOURCE_LIMIT" || errCode(m) != "RESOURCE_LIMIT" {
		t.Fatalf("a manifest of %d changes: HTTP %d %v; MCP %v", len(ids), status, h, m)
	}
}

// TestIssue13_MalformedPathIDsAndEchoes (issue 13 item 14): a malformed ID in a URL path (too long, a bad
// character) is INVALID_REQUEST (400) naming the parameter, not NOT_FOUND; and no error repeats more than the
// first 100 bytes of a caller's value, wherever the value is (path, query, member name, argument).
func TestIssue13_MalformedPathIDsAndEchoes(t *testing.T) {
	t.Parallel()
	e := setup(t)
	long := strings.Repeat("z", 97)
	sp := "/admin/v0/spaces/" + e.space.SpaceID
	for _, c := range []struct{ method, path, token, field string }{
		{"GET", "/v0/messages/" + long, e.tokA, "message_id"},
		{"GET", "/v0/messages/bad%21id", e.tokA, "message_id"},
		{"GET", "/v0/blobs/" + long, e.tokA, "blob_id"},
		{"GET", "/v0/blobs/bad.id/content", e.tokA, "blob_id"},
		{"PUT", "/v0/uploads/" + long + "/content", e.tokA, "upload_id"},
		{"GET", "/v0/collections/" + long + "/items", e.tokA, "collection_id"},
		{"GET", "/v0/collections/bad%20id/export", e.tokA, "collection_id"},
		{"POST", "/v0/collections/" + long + "/revisions", e.tokA, "collection_id"},
		{"POST", "/v0/subscriptions/" + long + "/stop", e.tokA, "subscription_id"},
		{"GET", "/admin/v0/spaces/" + long, adminSecret, "space_id"},
		{"POST", sp + "/actors/" + long + "/revoke", adminSecret, "actor_id"},
		{"PATCH", sp + "/consumers/bad%2Fid", adminSecret, "consumer_id"},
		{"POST", sp + "/grants/" + long + "/revoke", adminSecret, "grant_id"},
		{"POST", sp + "/tokens/" + long + "/rotate", adminSecret, "token_id"},
		{"POST", sp + "/deliveries/" + long + "/redeliver", adminSecret, "delivery_id"},
		{"GET", "/v0/feed/wait?consumer_id=" + long, e.tokB, "consumer_id"},
	} {
		var body []byte
		if c.method != "GET" {
			body = []byte(`{"request_id":"r1","view":"inbox"}`)
		}
		status, raw := e.raw(c.method, c.path, c.token, body)
		if status != 400 || !bytes.Contains(raw, []byte(`"code":"INVALID_REQUEST"`)) || !bytes.Contains(raw, []byte(`"field":"`+c.field+`"`)) {
			t.Errorf("%s %.60s: %d %s; want 400 INVALID_REQUEST naming %s", c.method, c.path, status, raw, c.field)
		}
	}
	// Well-formed IDs that do not exist stay NOT_FOUND.
	if status, _ := e.raw("GET", "/v0/messages/msg_none", e.tokA, nil); status != 404 {
		t.Errorf("a well-formed unknown message ID: %d", status)
	}

	huge := strings.Repeat("q", 5000)
	tooMuch := []byte(strings.Repeat("q", 101))
	for _, c := range []struct {
		name, method, path, token string
		body                      []byte
	}{
		{"unknown route", "GET", "/v0/" + huge, e.tokA, nil},
		{"feed.wait consumer_id", "GET", "/v0/feed/wait?consumer_id=" + huge, e.tokB, nil},
		{"undeclared member", "POST", "/v0/messages", e.tokA, []byte(`{"request_id":"e1","body":{"text":"x"},"` + huge + `":1}`)},
		{"nested undeclared member", "POST", "/v0/messages", e.tokA, []byte(`{"request_id":"e2","body":{"text":"x","` + huge + `":1}}`)},
		{"duplicate member", "POST", "/v0/messages", e.tokA, []byte(`{"request_id":"e3","body":{"text":"x"},"metadata":{"` + huge + `":1,"` + huge + `":2}}`)},
		{"bad recipient", "POST", "/v0/messages", e.tokA, []byte(`{"request_id":"e4","recipient_ids":["` + huge + `"],"body":{"text":"x"}}`)},
		{"bad status request_id", "GET", "/v0/status?operation=message.send&request_id=" + huge, e.tokA, nil},
		{"admin unknown scope", "POST", sp + "/tokens", adminSecret, []byte(`{"request_id":"t1","actor_id":"` + e.a + `","scopes":["` + huge + `"]}`)},
	} {
		status, raw := e.raw(c.method, c.path, c.token, c.body)
		if status < 400 || bytes.Contains(raw, tooMuch) {
			t.Errorf("%s: %d; the error repeats more than 100 bytes of the caller's value (%d bytes of body)", c.name, status, len(raw))
		}
	}
	// The same over MCP: an undeclared argument name and an over-long ID argument.
	s := e.session(e.tokA)
	for _, args := range []map[string]any{
		{"message_id": huge},
		{"message_id": "msg_x", huge: 1},
	} {
		env, isErr := e.call(s, "waypost_get_message", args)
		raw := fmt.Sprint(env)
		if !isErr || strings.Contains(raw, string(tooMuch)) {
			t.Errorf("MCP get_message: the error repeats more than 100 bytes of the caller's value: %.300s", raw)
		}
	}
}

// TestIssue13_EmptyRecipientIDsRefused (issue 13 item 16): the docs, the schema and the code agree with the
// RFC (§4.2: a message that omits recipient_ids goes to the default recipient): an empty recipient_ids names
// no one and is INVALID_REQUEST over HTTP, over MCP and in the domain itself; omitting it reaches the default.
func TestIssue13_EmptyRecipientIDsRefused(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	body := map[string]any{"request_id": "empty-1", "recipient_ids": []string{}, "body": map[string]any{"text": "x"}}
	h, status := e.http("POST", "/v0/messages", e.tokA, body)
	m, _ := e.call(e.session(e.tokA), "waypost_send", body)
	pa, err := e.svc.Authenticate(ctx, e.tokA)
	if err != nil {
		t.Fatal(err)
	}
	_, derr := e.svc.SendMessage(ctx, pa, domain.SendRequest{RequestID: "empty-2", RecipientIDs: []string{}, Body: &domain.MessageBody{Text: "x"}})
	if status != 400 || errCode(h) != "INVALID_REQUEST" || errCode(m) != "INVALID_REQUEST" || domain.CodeOf(derr) != domain.CodeInvalidRequest {
		t.Fatalf("empty recipient_ids: HTTP %d %v; MCP %v; domain %v", status, h, m, derr)
	}
	if r, status := e.http("POST", "/v0/messages", e.tokA, map[string]any{"request_id": "omitted", "body": map[string]any{"text": "x"}}); status != 200 {
		t.Fatalf("omitted recipient_ids: %d %v", status, r)
	}
	doc, err := os.ReadFile("../../docs/decisions.md")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(doc), "Omitted or empty `recipient_ids`") {
		t.Fatalf("docs/decisions.md still says an empty recipient_ids means the default recipient")
	}
}
