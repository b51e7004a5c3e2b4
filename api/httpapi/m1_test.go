package httpapi_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/waypost/waypost/api/apitest"
	"github.com/waypost/waypost/internal/testzip"
	"github.com/waypost/waypost/schemas"
	"github.com/waypost/waypost/server/servertest"
)

// m1AdminSecret is the control-plane secret of the test servers.
const m1AdminSecret = servertest.AdminSecret

// m1 is one embedded server behind httptest, with a client that validates every JSON response against the
// published schemas: the RFC §5.2 envelope, and its data against the operation's response schema.
type m1 struct {
	t   *testing.T
	url string
	reg *schemas.Registry
	seq atomic.Int64
	// http checks every answer against the OpenAPI document (apitest.Client).
	http *http.Client
}

func newM1(t *testing.T) *m1 {
	t.Helper()
	_, url := servertest.Start(t)
	reg, err := schemas.New()
	if err != nil {
		t.Fatalf("schemas.New: %v", err)
	}
	return &m1{t: t, url: url, reg: reg, http: apitest.Client(t)}
}

func (m *m1) rid(prefix string) string { return fmt.Sprintf("%s-%d", prefix, m.seq.Add(1)) }

// m1Resp is a decoded response.
type m1Resp struct {
	status int
	header http.Header
	body   []byte
	data   json.RawMessage
	code   string         // error code of a failure envelope
	detail map[string]any // its details
}

// do sends a request; body may be nil, a []byte (sent as is) or a value (sent as JSON).
func (m *m1) do(method, path, token string, body any, header map[string]string) m1Resp {
	m.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			m.t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, m.url+path, rd)
	if err != nil {
		m.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if _, ok := body.([]byte); !ok && body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := m.http.Do(req)
	if err != nil {
		m.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		m.t.Fatalf("%s %s: reading the body: %v", method, path, err)
	}
	return m1Resp{status: res.StatusCode, header: res.Header, body: raw}
}

// call sends a JSON request and requires a success envelope whose data matches schema (and HTTP 200).
func (m *m1) call(method, path, token string, body any, schema string) m1Resp {
	m.t.Helper()
	r := m.do(method, path, token, body, nil)
	return m.ok(method+" "+path, r, schema)
}

func (m *m1) ok(what string, r m1Resp, schema string) m1Resp {
	m.t.Helper()
	if r.status != http.StatusOK {
		m.t.Fatalf("%s: HTTP %d: %s", what, r.status, r.body)
	}
	if err := m.reg.Validate("envelope.success", r.body); err != nil {
		m.t.Fatalf("%s: the envelope does not match envelope.success: %v\n%s", what, err, r.body)
	}
	var env struct {
		OK   bool            `json:"ok"`
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(r.body, &env); err != nil || !env.OK {
		m.t.Fatalf("%s: %v %s", what, err, r.body)
	}
	if err := m.reg.Validate(schema, env.Data); err != nil {
		m.t.Fatalf("%s: data does not match %s: %v\n%s", what, schema, err, env.Data)
	}
	r.data = env.Data
	return r
}

// fail sends a request and requires a failure envelope with code and the code's HTTP status.
func (m *m1) fail(method, path, token string, body any, header map[string]string, code string, status int) m1Resp {
	m.t.Helper()
	r := m.do(method, path, token, body, header)
	if err := m.reg.Validate("envelope.error", r.body); err != nil {
		m.t.Fatalf("%s %s: the envelope does not match envelope.error: %v\n%s", method, path, err, r.body)
	}
	var env struct {
		Error struct {
			Code    string         `json:"code"`
			Details map[string]any `json:"details"`
		} `json:"error"`
	}
	if err := json.Unmarshal(r.body, &env); err != nil {
		m.t.Fatal(err)
	}
	if env.Error.Code != code || r.status != status {
		m.t.Fatalf("%s %s: HTTP %d %s, want %d %s: %s", method, path, r.status, env.Error.Code, status, code, r.body)
	}
	r.code, r.detail = env.Error.Code, env.Error.Details
	return r
}

func m1Decode[T any](t *testing.T, r m1Resp) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(r.data, &v); err != nil {
		t.Fatalf("decoding %s: %v", r.data, err)
	}
	return v
}

// m1World is a space with actors A (source of a collection), B (memory.read grant) and C (no grant).
type m1World struct {
	space, coll        string
	a, b, c            string // actor IDs
	aTok, bTok, cTok   string
	bConsumer          string
	aNoMemoryTok       string
	aConsumer, bNoRead string
}

func (m *m1) world() m1World {
	m.t.Helper()
	var w m1World
	adm := func(path string, body map[string]any, schema string) map[string]any {
		body["request_id"] = m.rid("adm")
		return m1Decode[map[string]any](m.t, m.call("POST", "/admin/v0"+path, m1AdminSecret, body, schema))
	}
	w.space = adm("/spaces", map[string]any{}, "admin.space.create.response")["space_id"].(string)
	sp := "/spaces/" + w.space
	actor := func() string {
		return adm(sp+"/actors", map[string]any{}, "admin.actor.create.response")["actor_id"].(string)
	}
	consumer := func(actor string) string {
		return adm(sp+"/consumers", map[string]any{"actor_id": actor, "view": "inbox"}, "admin.consumer.response")["consumer_id"].(string)
	}
	token := func(actor string, scopes ...string) string {
		return adm(sp+"/tokens", map[string]any{"actor_id": actor, "scopes": scopes}, "admin.token.response")["token"].(string)
	}
	all := []string{"message.send", "message.read", "receipt.write", "blob.write", "blob.read", "memory.read", "memory.write"}
	w.a, w.b, w.c = actor(), actor(), actor()
	w.aConsumer, w.bConsumer = consumer(w.a), consumer(w.b)
	w.coll = adm(sp+"/collections", map[string]any{"source_actor_id": w.a, "scope": "Project A notes"}, "admin.collection.create.response")["collection_id"].(string)
	adm(sp+"/grants", map[string]any{"actor_id": w.b, "permission": "memory.read", "collection_id": w.coll}, "admin.grant.create.response")
	w.aTok, w.bTok, w.cTok = token(w.a, all...), token(w.b, all...), token(w.c, all...)
	w.aNoMemoryTok = token(w.a, "message.read", "blob.read")
	w.bNoRead = token(w.b, "message.read", "memory.read")
	return w
}

func m1SHA(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// upload prepares, PUTs and commits content as token and returns the sealed blob's info (as JSON object).
func (m *m1) upload(token string, content []byte, contentType, filename string) map[string]any {
	m.t.Helper()
	prep := m1Decode[map[string]any](m.t, m.call("POST", "/v0/blobs", token, map[string]any{"request_id": m.rid("prep"),
		"content_type": contentType, "size_bytes": len(content), "sha256": m1SHA(content), "filename": filename}, "blob.prepare.response"))
	headers := map[string]string{}
	for k, v := range prep["upload_headers"].(map[string]any) {
		headers[k] = v.(string)
	}
	r := m.do(prep["upload_method"].(string), prep["upload_url"].(string), token, content, headers)
	m.ok("PUT upload", r, "upload.response")
	return m1Decode[map[string]any](m.t, m.call("POST", "/v0/blobs/commit", token, map[string]any{"request_id": m.rid("seal"),
		"upload_id": prep["upload_id"]}, "blob.info"))
}

// TestM1BlobRoutes walks RFC §9 over HTTP: prepare, the PUT with Content-Type and Content-Length (repeated,
// conflicting, after seal), commit and its replay, metadata and the content with its ETag, and the errors
// of each step, every response checked against its schema.
func TestM1BlobRoutes(t *testing.T) {
	t.Parallel()
	m := newM1(t)
	w := m.world()
	content := []byte("# Decision\n\nShip the mailbox first.\n")
	prepReq := map[string]any{"request_id": m.rid("prep"), "content_type": "text/markdown; charset=utf-8",
		"size_bytes": len(content), "sha256": m1SHA(content), "filename": "decision.md"}
	prep := m1Decode[map[string]any](t, m.call("POST", "/v0/blobs", w.aTok, prepReq, "blob.prepare.response"))
	again := m1Decode[map[string]any](t, m.call("POST", "/v0/blobs", w.aTok, prepReq, "blob.prepare.response"))
	if again["upload_id"] != prep["upload_id"] || prep["state"] != "pending" || prep["upload_method"] != "PUT" {
		t.Fatalf("prepare %v, replay %v", prep, again)
	}
	uploadURL := prep["upload_url"].(string)
	blobID := prep["blob_id"].(string)
	ct := prep["upload_headers"].(map[string]any)["Content-Type"].(string)
	hdr := map[string]string{"Content-Type": ct}

	m.fail("POST", "/v0/blobs/commit", w.aTok, map[string]any{"request_id": m.rid("seal"), "upload_id": prep["upload_id"]}, nil, "INVALID_BLOB", 422)
	wrong := bytes.ToUpper(content)
	m.fail("PUT", uploadURL, w.aTok, wrong, hdr, "CHECKSUM_MISMATCH", 422)
	m.fail("PUT", uploadURL, w.aTok, content, map[string]string{"Content-Type": "application/pdf"}, "INVALID_BLOB", 422)
	m.fail("PUT", uploadURL, w.aTok, content[:10], hdr, "INVALID_BLOB", 422)
	m.fail("PUT", uploadURL, w.bTok, content, hdr, "NOT_FOUND", 404)
	m.fail("PUT", uploadURL, "", content, hdr, "UNAUTHENTICATED", 401)

	first := m1Decode[map[string]any](t, m.ok("PUT", m.do("PUT", uploadURL, w.aTok, content, hdr), "upload.response"))
	if first["already_uploaded"] != false || first["blob_id"] != blobID {
		t.Fatalf("first PUT: %v", first)
	}
	// Streamed without a declared length (chunked): the bytes are still verified.
	req, _ := http.NewRequest("PUT", m.url+uploadURL, io.NopCloser(bytes.NewReader(content)))
	req.Header.Set("Authorization", "Bearer "+w.aTok)
	req.Header.Set("Content-Type", ct)
	req.ContentLength = -1
	res, err := m.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(res.Body)
	res.Body.Close()
	repeated := m1Decode[map[string]any](t, m.ok("chunked PUT", m1Resp{status: res.StatusCode, body: raw}, "upload.response"))
	if repeated["already_uploaded"] != true {
		t.Fatalf("repeated PUT: %v", repeated)
	}
	m.fail("PUT", uploadURL, w.aTok, wrong, hdr, "UPLOAD_CONTENT_CONFLICT", 409)

	commitReq := map[string]any{"request_id": m.rid("seal"), "upload_id": prep["upload_id"]}
	info := m1Decode[map[string]any](t, m.call("POST", "/v0/blobs/commit", w.aTok, commitReq, "blob.info"))
	if info["state"] != "sealed" || info["sha256"] != m1SHA(content) || info["size_bytes"] != float64(len(content)) || info["filename"] != "decision.md" {
		t.Fatalf("commit: %v", info)
	}
	if replay := m1Decode[map[string]any](t, m.call("POST", "/v0/blobs/commit", w.aTok, commitReq, "blob.info")); replay["sealed_at"] != info["sealed_at"] {
		t.Fatalf("replayed commit %v, first %v", replay, info)
	}
	m.fail("PUT", uploadURL, w.aTok, content, hdr, "UPLOAD_SEALED", 409)
	m.fail("POST", "/v0/blobs/commit", w.aTok, map[string]any{"request_id": commitReq["request_id"], "upload_id": "upl_other"}, nil, "IDEMPOTENCY_CONFLICT", 409)

	got := m1Decode[map[string]any](t, m.call("GET", "/v0/blobs/"+blobID, w.aTok, nil, "blob.info"))
	if got["state"] != "sealed" || got["download_url"] != "/v0/blobs/"+blobID+"/content" || got["owner_id"] != w.a {
		t.Fatalf("blob.get: %v", got)
	}
	dl := m.do("GET", got["download_url"].(string), w.aTok, nil, nil)
	if dl.status != 200 || !bytes.Equal(dl.body, content) || dl.header.Get("ETag") != `"`+m1SHA(content)+`"` ||
		dl.header.Get("Content-Type") != ct || dl.header.Get("Content-Length") != strconv.Itoa(len(content)) {
		t.Fatalf("content: HTTP %d %q %v", dl.status, dl.body, dl.header)
	}
	if cd := dl.header.Get("Content-Disposition"); !strings.Contains(cd, `filename="decision.md"`) {
		t.Errorf("Content-Disposition %q", cd)
	}
	// Nobody else reads it: B and C are not recipients of anything that references it.
	m.fail("GET", "/v0/blobs/"+blobID, w.cTok, nil, nil, "NOT_FOUND", 404)
	m.fail("GET", "/v0/blobs/"+blobID+"/content", w.cTok, nil, nil, "NOT_FOUND", 404)
	m.fail("GET", "/v0/blobs/blob_absent", w.aTok, nil, nil, "NOT_FOUND", 404)

	// Request shapes the schemas refuse.
	m.fail("POST", "/v0/blobs", w.aTok, map[string]any{"request_id": m.rid("prep"), "content_type": "text/plain", "size_bytes": 1,
		"sha256": strings.ToUpper(m1SHA([]byte("x")))}, nil, "INVALID_REQUEST", 400)
	m.fail("POST", "/v0/blobs", w.aTok, map[string]any{"request_id": m.rid("prep"), "content_type": "text/plain", "size_bytes": 0,
		"sha256": m1SHA(nil), "bucket": "b"}, nil, "INVALID_REQUEST", 400)
	m.fail("POST", "/v0/blobs", w.aNoMemoryTok, map[string]any{"request_id": m.rid("prep"), "content_type": "text/plain", "size_bytes": 0,
		"sha256": m1SHA(nil)}, nil, "FORBIDDEN", 403)

	// A zero-byte blob.
	empty := m.upload(w.aTok, nil, "application/octet-stream", "")
	if e := m.do("GET", "/v0/blobs/"+empty["blob_id"].(string)+"/content", w.aTok, nil, nil); e.status != 200 || len(e.body) != 0 ||
		e.header.Get("ETag") != `"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"` {
		t.Fatalf("empty blob: %d %q %v", e.status, e.body, e.header)
	}
	m.call("GET", "/v0/status?operation=blob.commit&request_id="+url.QueryEscape(commitReq["request_id"].(string)), w.aTok, nil, "status.response")
}

// TestM1MemoryRoutes walks RFC §10 over HTTP: publish (snapshot, no change, delta, conflict, rejected
// shapes), read with paging pinned to a revision and tombstones, export as JSON, Markdown and ZIP (files at
// their paths), status, and the memory_revision item in the grant holder's inbox and feed.wait page.
func TestM1MemoryRoutes(t *testing.T) {
	t.Parallel()
	m := newM1(t)
	w := m.world()
	files := map[string][]byte{
		"notes/a.md":     []byte("alpha\n"),
		"notes/b.md":     []byte("bravo\n"),
		"decisions/c.md": []byte("charlie\n"),
	}
	blobs := map[string]string{}
	for path, content := range files {
		blobs[path] = m.upload(w.aTok, content, "text/markdown", "")["blob_id"].(string)
	}
	revs := "/v0/collections/" + w.coll + "/revisions"
	items := "/v0/collections/" + w.coll + "/items"
	item := func(id, path string, md map[string]any) map[string]any {
		it := map[string]any{"item_id": id, "blob_id": blobs[path], "path": path}
		if md != nil {
			it["metadata"] = md
		}
		return it
	}
	snapshot := map[string]any{"request_id": m.rid("mem"), "collection_id": w.coll, "expected_revision": 0, "mode": "snapshot",
		"items": []any{item("a", "notes/a.md", map[string]any{"origin": "user_explicit"}), item("b", "notes/b.md", nil)}, "delete_ids": []any{}}
	r1 := m1Decode[map[string]any](t, m.call("POST", revs, w.aTok, snapshot, "memory.publish.response"))
	if r1["revision"] != float64(1) || r1["changed"] != true || r1["submission_state"] != "committed" {
		t.Fatalf("snapshot: %v", r1)
	}
	if again := m1Decode[map[string]any](t, m.call("POST", revs, w.aTok, snapshot, "memory.publish.response")); again["visible_seq"] != r1["visible_seq"] {
		t.Fatalf("replayed snapshot %v, first %v", again, r1)
	}
	same := map[string]any{"request_id": m.rid("mem"), "expected_revision": 1, "mode": "snapshot",
		"items": []any{item("b", "notes/b.md", nil), item("a", "notes/a.md", map[string]any{"origin": "user_explicit"})}}
	if nc := m1Decode[map[string]any](t, m.call("POST", revs, w.aTok, same, "memory.publish.response")); nc["changed"] != false || nc["revision"] != float64(1) {
		t.Fatalf("no-change snapshot: %v", nc)
	}
	delta := map[string]any{"request_id": m.rid("mem"), "expected_revision": 1, "mode": "delta",
		"items": []any{item("c", "decisions/c.md", nil)}, "delete_ids": []any{"b", "never-there"}}
	if r2 := m1Decode[map[string]any](t, m.call("POST", revs, w.aTok, delta, "memory.publish.response")); r2["revision"] != float64(2) || r2["deleted"] != float64(1) {
		t.Fatalf("delta: %v", r2)
	}
	stale := map[string]any{"request_id": m.rid("mem"), "expected_revision": 1, "mode": "delta", "delete_ids": []any{"a"}}
	if c := m.fail("POST", revs, w.aTok, stale, nil, "REVISION_CONFLICT", 409); c.detail["current_revision"] != float64(2) {
		t.Fatalf("conflict details %v", c.detail)
	}
	if c := m.fail("POST", revs, w.aTok, stale, nil, "REVISION_CONFLICT", 409); c.detail["current_revision"] != float64(2) {
		t.Fatalf("retried conflict details %v", c.detail)
	}
	m.fail("POST", revs, w.aTok, map[string]any{"request_id": m.rid("mem"), "expected_revision": 2, "mode": "delta", "revision": 3}, nil, "INVALID_REQUEST", 400)
	m.fail("POST", revs, w.aTok, map[string]any{"request_id": m.rid("mem"), "mode": "delta"}, nil, "INVALID_REQUEST", 400)
	m.fail("POST", revs, w.aTok, map[string]any{"request_id": m.rid("mem"), "expected_revision": 2, "mode": "snapshot", "delete_ids": []any{"a"}}, nil, "INVALID_REQUEST", 400)
	m.fail("POST", revs, w.aTok, map[string]any{"request_id": m.rid("mem"), "expected_revision": 2, "mode": "delta",
		"items": []any{map[string]any{"item_id": "x", "blob_id": blobs["notes/a.md"], "path": "/abs.md"}}}, nil, "INVALID_REQUEST", 400)
	many := make([]any, 501)
	for i := range many {
		many[i] = map[string]any{"item_id": fmt.Sprintf("i%d", i), "blob_id": blobs["notes/a.md"], "path": fmt.Sprintf("m/%d.md", i)}
	}
	m.fail("POST", revs, w.aTok, map[string]any{"request_id": m.rid("mem"), "expected_revision": 2, "mode": "delta", "items": many}, nil, "RESOURCE_LIMIT", 422)
	m.fail("POST", revs, w.bTok, map[string]any{"request_id": m.rid("mem"), "expected_revision": 2, "mode": "delta", "delete_ids": []any{"a"}}, nil, "FORBIDDEN", 403)
	m.fail("POST", "/v0/collections/col_absent/revisions", w.aTok, map[string]any{"request_id": m.rid("mem"), "expected_revision": 0, "mode": "delta"}, nil, "NOT_FOUND", 404)
	st := m1Decode[map[string]any](t, m.call("GET", "/v0/status?operation=memory.publish&request_id="+url.QueryEscape(stale["request_id"].(string)), w.aTok, nil, "status.response"))
	if st["submission_state"] != "failed" {
		t.Fatalf("status of the conflict: %v", st)
	}

	// Read: head (revision 2) page by page; tombstones only when asked; an older revision; the cursor pins.
	type page struct {
		Revision int64 `json:"revision"`
		Items    []struct {
			ItemID  string `json:"item_id"`
			Path    string `json:"path"`
			State   string `json:"state"`
			Deleted *int64 `json:"deleted_in_revision"`
		} `json:"items"`
		NextCursor *string `json:"next_cursor"`
		HasMore    bool    `json:"has_more"`
	}
	readAll := func(token, query string) (int64, []string) {
		t.Helper()
		var ids []string
		rev := int64(-1)
		q := query
		for range 20 {
			p := m1Decode[page](t, m.call("GET", items+"?"+q, token, nil, "memory.read.response"))
			if rev >= 0 && p.Revision != rev {
				t.Fatalf("page at revision %d after %d", p.Revision, rev)
			}
			rev = p.Revision
			for _, it := range p.Items {
				ids = append(ids, it.ItemID+":"+it.State)
			}
			if !p.HasMore {
				return rev, ids
			}
			q = query + "&cursor=" + url.QueryEscape(*p.NextCursor)
		}
		t.Fatal("too many pages")
		return 0, nil
	}
	if rev, ids := readAll(w.aTok, "limit=1"); rev != 2 || strings.Join(ids, ",") != "a:active,c:active" {
		t.Fatalf("read of the head: %d %v", rev, ids)
	}
	if rev, ids := readAll(w.bTok, "limit=2&include_tombstones=true"); rev != 2 || strings.Join(ids, ",") != "a:active,b:tombstone,c:active" {
		t.Fatalf("read with tombstones as the grant holder: %d %v", rev, ids)
	}
	if rev, ids := readAll(w.bTok, "revision=1&limit=1"); rev != 1 || strings.Join(ids, ",") != "a:active,b:active" {
		t.Fatalf("read of revision 1: %d %v", rev, ids)
	}
	first := m1Decode[page](t, m.call("GET", items+"?limit=1", w.aTok, nil, "memory.read.response"))
	m.call("POST", revs, w.aTok, map[string]any{"request_id": m.rid("mem"), "expected_revision": 2, "mode": "delta",
		"items": []any{item("b", "notes/b.md", nil)}}, "memory.publish.response")
	next := m1Decode[page](t, m.call("GET", items+"?limit=1&cursor="+url.QueryEscape(*first.NextCursor), w.aTok, nil, "memory.read.response"))
	if next.Revision != 2 || len(next.Items) != 1 || next.Items[0].ItemID != "c" {
		t.Fatalf("the cursor's page after a publish: %+v", next)
	}
	m.fail("GET", items+"?limit=1&revision=3&cursor="+url.QueryEscape(*first.NextCursor), w.aTok, nil, nil, "INVALID_CURSOR", 400)
	m.fail("GET", items+"?limit=1&cursor=not-a-cursor", w.aTok, nil, nil, "INVALID_CURSOR", 400)
	m.fail("GET", items+"?limit=501", w.aTok, nil, nil, "RESOURCE_LIMIT", 422)
	m.fail("GET", items+"?revision=9", w.aTok, nil, nil, "NOT_FOUND", 404)
	m.fail("GET", items, w.cTok, nil, nil, "NOT_FOUND", 404)
	m.fail("GET", items, w.aNoMemoryTok, nil, nil, "FORBIDDEN", 403)

	// Export of revision 3 (a, b, c active): JSON, Markdown and ZIP, for the source and the grant holder.
	export := "/v0/collections/" + w.coll + "/export"
	ex := m1Decode[map[string]any](t, m.call("GET", export, w.aTok, nil, "memory.export.response"))
	if ex["revision"] != float64(3) || len(ex["items"].([]any)) != 3 || ex["collection_id"] != w.coll || ex["source_actor_id"] != w.a {
		t.Fatalf("export: %v", ex)
	}
	if old := m1Decode[map[string]any](t, m.call("GET", export+"?revision=2", w.bTok, nil, "memory.export.response")); len(old["tombstones"].([]any)) != 1 {
		t.Fatalf("export of revision 2: %v", old)
	}
	if strings.Contains(string(m.do("GET", export, w.aTok, nil, nil).body), "wpt_") {
		t.Error("the export carries a token")
	}
	md := m.do("GET", export+"?format=markdown", w.bTok, nil, nil)
	if md.status != 200 || !strings.HasPrefix(md.header.Get("Content-Type"), "text/markdown") {
		t.Fatalf("markdown export: %d %v", md.status, md.header)
	}
	for path := range files {
		if !strings.Contains(string(md.body), path) {
			t.Errorf("markdown export lacks %s:\n%s", path, md.body)
		}
	}
	for _, token := range []string{w.aTok, w.bTok} {
		z := m.do("GET", export+"?format=zip", token, nil, nil)
		if z.status != 200 || z.header.Get("Content-Type") != "application/zip" {
			t.Fatalf("zip export: %d %v %s", z.status, z.header, z.body)
		}
		got := testzip.Entries(t, z.body)
		if err := m.reg.Validate("memory.export.response", got["manifest.json"]); err != nil {
			t.Errorf("manifest.json: %v", err)
		}
		if len(got["README.md"]) == 0 {
			t.Error("zip export without README.md")
		}
		for path, content := range files {
			if !bytes.Equal(got["files/"+path], content) {
				t.Errorf("zip export files/%s = %q, want %q", path, got["files/"+path], content)
			}
		}
		if len(got) != len(files)+2 {
			names := make([]string, 0, len(got))
			for n := range got {
				names = append(names, n)
			}
			t.Errorf("zip export entries %v", names)
		}
	}
	m.fail("GET", export+"?format=pdf", w.aTok, nil, nil, "INVALID_REQUEST", 400)
	m.fail("GET", export, w.cTok, nil, nil, "NOT_FOUND", 404)

	// The grant holder reads a blob of the collection; the revisions are in its inbox and feed.wait page.
	if b := m.do("GET", "/v0/blobs/"+blobs["notes/a.md"]+"/content", w.bTok, nil, nil); b.status != 200 || !bytes.Equal(b.body, files["notes/a.md"]) {
		t.Fatalf("grant holder reads an item's blob: %d %s", b.status, b.body)
	}
	m.fail("GET", "/v0/blobs/"+blobs["notes/a.md"]+"/content", w.cTok, nil, nil, "NOT_FOUND", 404)
	inbox := m1Decode[map[string]any](t, m.call("POST", "/v0/inbox/read", w.bTok, map[string]any{"consumer_id": w.bConsumer}, "inbox.read.response"))
	if n := len(inbox["items"].([]any)); n != 3 {
		t.Fatalf("grant holder's inbox has %d items, want the 3 memory revisions: %v", n, inbox)
	}
	wait := m1Decode[map[string]any](t, m.call("GET", "/v0/feed/wait?timeout_ms=0&consumer_id="+w.bConsumer, w.bTok, nil, "inbox.read.response"))
	if n := len(wait["items"].([]any)); n != 3 {
		t.Fatalf("feed.wait page has %d items, want 3: %v", n, wait)
	}
	// The source reads its own collection, so its inbox view has the revisions too (RFC §4, §8).
	if src := m1Decode[map[string]any](t, m.call("POST", "/v0/inbox/read", w.aTok, map[string]any{"consumer_id": w.aConsumer}, "inbox.read.response")); len(src["items"].([]any)) != 3 {
		t.Fatalf("the source's inbox has %v, want the 3 memory revisions", src)
	}
}

// TestM1Attachments: a message with an unsealed attachment is BLOB_NOT_SEALED over HTTP and publishes
// nothing; once sealed, the recipient with blob.read downloads it and a recipient without it gets NOT_FOUND.
func TestM1Attachments(t *testing.T) {
	t.Parallel()
	m := newM1(t)
	w := m.world()
	content := []byte("attachment")
	prep := m1Decode[map[string]any](t, m.call("POST", "/v0/blobs", w.aTok, map[string]any{"request_id": m.rid("prep"),
		"content_type": "text/plain", "size_bytes": len(content), "sha256": m1SHA(content)}, "blob.prepare.response"))
	m.ok("PUT", m.do("PUT", prep["upload_url"].(string), w.aTok, content, map[string]string{"Content-Type": "text/plain"}), "upload.response")
	send := func() m1Resp {
		return m.do("POST", "/v0/messages", w.aTok, map[string]any{"request_id": m.rid("send"), "recipient_ids": []any{w.b},
			"body": map[string]any{"text": "see attached"}, "attachment_ids": []any{prep["blob_id"]}}, nil)
	}
	if r := send(); r.status != 409 || !strings.Contains(string(r.body), "BLOB_NOT_SEALED") {
		t.Fatalf("send with an unsealed attachment: %d %s", r.status, r.body)
	}
	if in := m1Decode[map[string]any](t, m.call("POST", "/v0/inbox/read", w.bTok, map[string]any{"consumer_id": w.bConsumer}, "inbox.read.response")); len(in["items"].([]any)) != 0 {
		t.Fatalf("a rejected send published %v", in)
	}
	m.call("POST", "/v0/blobs/commit", w.aTok, map[string]any{"request_id": m.rid("seal"), "upload_id": prep["upload_id"]}, "blob.info")
	m.ok("send", send(), "message.send.response")
	if b := m.do("GET", "/v0/blobs/"+prep["blob_id"].(string)+"/content", w.bTok, nil, nil); b.status != 200 || !bytes.Equal(b.body, content) {
		t.Fatalf("recipient downloads: %d %s", b.status, b.body)
	}
	m.call("GET", "/v0/blobs/"+prep["blob_id"].(string), w.bTok, nil, "blob.info")
	m.fail("GET", "/v0/blobs/"+prep["blob_id"].(string), w.bNoRead, nil, nil, "NOT_FOUND", 404)
	m.fail("GET", "/v0/blobs/"+prep["blob_id"].(string)+"/content", w.cTok, nil, nil, "NOT_FOUND", 404)
}
