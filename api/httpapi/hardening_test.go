package httpapi_test

import (
	"strings"
	"testing"

	"github.com/waypost/waypost/internal/testjson"
)

// TestJSONRoutesRequireJSONContentType: a JSON route answers INVALID_REQUEST naming application/json to a
// body declared as another type or not declared at all, before doing anything; application/json with
// parameters passes, and a bodiless call may omit the header.
func TestJSONRoutesRequireJSONContentType(t *testing.T) {
	t.Parallel()
	m := newM1(t)
	w := m.world()
	send := func(id string) map[string]any {
		return map[string]any{"request_id": id, "recipient_ids": []string{w.b}, "kind": "note", "body": map[string]any{"text": "hi"}}
	}
	for _, tc := range []struct {
		method, path, token string
		body                any
	}{
		{"POST", "/v0/messages", w.aTok, send("ct-1")},
		{"POST", "/v0/inbox/read", w.bTok, map[string]any{"consumer_id": w.bConsumer}},
		{"POST", "/v0/blobs", w.aTok, map[string]any{"request_id": "ct-2", "content_type": "text/plain", "size_bytes": 1, "sha256": m1SHA([]byte("x"))}},
		{"POST", "/admin/v0/spaces", m1AdminSecret, map[string]any{"request_id": "ct-3"}},
		{"POST", "/v0/collections/" + w.coll + "/revisions", w.aTok, map[string]any{"request_id": "ct-4", "mode": "delta", "expected_revision": 0, "items": []any{}}},
	} {
		raw := testjson.Marshal(t, tc.body)
		for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "application/jsonx", "", "multipart/form-data; boundary=x"} {
			h := map[string]string{}
			if ct != "" {
				h["Content-Type"] = ct
			}
			r := m.fail(tc.method, tc.path, tc.token, raw, h, "INVALID_REQUEST", 400)
			if r.detail["expected"] != "application/json" || !strings.Contains(string(r.body), "Content-Type must be application/json") {
				t.Fatalf("%s %s with Content-Type %q: %s", tc.method, tc.path, ct, r.body)
			}
		}
	}
	// Nothing was sent: the same request_id with the right type commits a fresh message.
	m.ok("send", m.do("POST", "/v0/messages", w.aTok, testjson.Marshal(t, send("ct-1")),
		map[string]string{"Content-Type": "application/json; charset=utf-8"}), "message.send.response")
	page := m1Decode[map[string]any](t, m.call("POST", "/v0/inbox/read", w.bTok, map[string]any{"consumer_id": w.bConsumer}, "inbox.read.response"))
	if n := len(page["items"].([]any)); n != 1 {
		t.Fatalf("inbox has %d items, want the one message", n)
	}
	// A revoke without a body needs no Content-Type.
	tok := m1Decode[map[string]any](t, m.call("POST", "/admin/v0/spaces/"+w.space+"/tokens", m1AdminSecret,
		map[string]any{"request_id": m.rid("tok"), "actor_id": w.c, "scopes": []string{"message.read"}}, "admin.token.response"))
	m.ok("revoke", m.do("POST", "/admin/v0/spaces/"+w.space+"/tokens/"+tok["token_id"].(string)+"/revoke", m1AdminSecret, nil, nil),
		"admin.token.revoke.response")
}

// TestBlobDownloadHeaders: blob content is never sniffed or run in the service's origin: nosniff and a
// sandbox CSP on every download, and an attachment disposition for the types a browser would render or run.
func TestBlobDownloadHeaders(t *testing.T) {
	t.Parallel()
	m := newM1(t)
	w := m.world()
	for _, tc := range []struct {
		contentType, filename, disposition string
	}{
		{"text/html", "", "attachment"},
		{"text/html; charset=utf-8", "", "attachment"},
		{"image/svg+xml", "", "attachment"},
		{"application/xhtml+xml", "", "attachment"},
		{"text/javascript", "", "attachment"},
		{"application/pdf", "", "attachment"},
		{"text/xml", "", "attachment"},
		{"application/vnd.unknown", "", "attachment"},
		{"text/plain; charset=utf-8", "", ""},
		{"image/png", "", ""},
		{"application/octet-stream", "", ""},
		{"text/html", "page.html", `attachment; filename="page.html"`},
		{"text/plain", "notes.txt", `attachment; filename="notes.txt"`},
	} {
		content := []byte("<html><script>alert(1)</script></html> " + tc.contentType + tc.filename)
		info := m.upload(w.aTok, content, tc.contentType, tc.filename)
		r := m.do("GET", "/v0/blobs/"+info["blob_id"].(string)+"/content", w.aTok, nil, nil)
		if r.status != 200 || string(r.body) != string(content) {
			t.Fatalf("%s: HTTP %d %q", tc.contentType, r.status, r.body)
		}
		if got := r.header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("%s: X-Content-Type-Options %q", tc.contentType, got)
		}
		if got := r.header.Get("Content-Security-Policy"); got != "sandbox" {
			t.Errorf("%s: Content-Security-Policy %q", tc.contentType, got)
		}
		if got := r.header.Get("Content-Disposition"); got != tc.disposition {
			t.Errorf("%s (filename %q): Content-Disposition %q, want %q", tc.contentType, tc.filename, got, tc.disposition)
		}
	}
}

// TestRateLimitOverHTTP: describe publishes the credential's rate limits; the owner sets them with PATCH
// /admin/v0/spaces/{space_id}; a credential over its bucket gets 429 RATE_LIMITED with Retry-After, and
// another credential of the space is not affected.
func TestRateLimitOverHTTP(t *testing.T) {
	t.Parallel()
	m := newM1(t)
	w := m.world()
	desc := m1Decode[map[string]any](t, m.call("GET", "/v0/describe", w.aTok, nil, "describe.response"))
	if rl := desc["rate_limits"].(map[string]any); rl["requests_per_second"] != 100.0 || rl["burst"] != 300.0 || rl["applies_to"] != "credential" {
		t.Fatalf("describe rate_limits %v", rl)
	}
	path := "/admin/v0/spaces/" + w.space
	m.fail("PATCH", path, m1AdminSecret, []byte(`{"rate_limits":{"requests_per_second":0,"burst":1}}`), map[string]string{"Content-Type": "application/json"}, "INVALID_REQUEST", 400)
	m.fail("PATCH", path, m1AdminSecret, []byte(`{}`), map[string]string{"Content-Type": "application/json"}, "INVALID_REQUEST", 400)
	m.fail("PATCH", path, w.aTok, []byte(`{"rate_limits":{"requests_per_second":1,"burst":3}}`), map[string]string{"Content-Type": "application/json"}, "UNAUTHENTICATED", 401)
	m.fail("PATCH", "/admin/v0/spaces/sp_absent", m1AdminSecret, []byte(`{"rate_limits":{"requests_per_second":1,"burst":3}}`), map[string]string{"Content-Type": "application/json"}, "NOT_FOUND", 404)
	sp := m1Decode[map[string]any](t, m.call("PATCH", path, m1AdminSecret, map[string]any{"request_id": m.rid("limits"),
		"rate_limits": map[string]any{"requests_per_second": 1, "burst": 3}}, "admin.space.get.response"))
	if rl := sp["rate_limits"].(map[string]any); rl["requests_per_second"] != 1.0 || rl["burst"] != 3.0 {
		t.Fatalf("PATCH result %v", sp)
	}
	if got := m1Decode[map[string]any](t, m.call("GET", path, m1AdminSecret, nil, "admin.space.get.response")); got["rate_limits"].(map[string]any)["burst"] != 3.0 {
		t.Fatalf("GET space %v", got)
	}
	for range 3 {
		m.call("GET", "/v0/describe", w.bTok, nil, "describe.response") // b's burst, describe included
	}
	r := m.fail("GET", "/v0/describe", w.bTok, nil, nil, "RATE_LIMITED", 429)
	if r.header.Get("Retry-After") != "1" || r.detail["reason"] != "credential_rate" {
		t.Fatalf("over the limit: %v %v", r.header, r.detail)
	}
	m.fail("POST", "/v0/inbox/read", w.bTok, map[string]any{"consumer_id": w.bConsumer}, nil, "RATE_LIMITED", 429)
	m.call("GET", "/v0/describe", w.cTok, nil, "describe.response") // another credential has its own bucket
}
