package httpapi_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"
)

// admin posts to the control plane and decodes the success data.
func (m *m1) admin(method, path string, body map[string]any, schema string) map[string]any {
	m.t.Helper()
	return m1Decode[map[string]any](m.t, m.call(method, "/admin/v0"+path, m1AdminSecret, body, schema))
}

// TestIssue13_DuplicateCollectionIDIsNotRetryable (issue 13 item 5): creating a collection with an ID that
// exists is INVALID_REQUEST (400, retryable false, details.field collection_id), not a retryable 503; the
// replay of the first create still returns its result.
func TestIssue13_DuplicateCollectionIDIsNotRetryable(t *testing.T) {
	t.Parallel()
	m := newM1(t)
	w := m.world()
	sp := "/spaces/" + w.space
	body := map[string]any{"request_id": "col-1", "source_actor_id": w.a, "collection_id": "notes", "scope": "notes"}
	first := m.admin("POST", sp+"/collections", body, "admin.collection.create.response")
	again := m.admin("POST", sp+"/collections", body, "admin.collection.create.response")
	if first["collection_id"] != "notes" || !jsonEq(first, again) {
		t.Fatalf("create %v, replay %v", first, again)
	}
	for _, rid := range []string{"col-2", "col-3"} {
		r := m.fail("POST", "/admin/v0"+sp+"/collections", m1AdminSecret,
			map[string]any{"request_id": rid, "source_actor_id": w.b, "collection_id": "notes", "scope": "other"}, nil, "INVALID_REQUEST", http.StatusBadRequest)
		var env struct {
			Error struct {
				Retryable bool `json:"retryable"`
			} `json:"error"`
		}
		_ = json.Unmarshal(r.body, &env)
		if env.Error.Retryable || r.detail["field"] != "collection_id" {
			t.Fatalf("duplicate collection_id: %s", r.body)
		}
	}
}

// TestIssue13_AdminChangesHonourRequestID (issue 13 item 6): PATCH of a consumer, token rotate and token
// revoke with a request_id replay their first result (a retried rotate does not rotate twice; the same
// request_id with other content is IDEMPOTENCY_CONFLICT), and a PATCH that changes nothing keeps
// view_revision and every cursor.
func TestIssue13_AdminChangesHonourRequestID(t *testing.T) {
	t.Parallel()
	m := newM1(t)
	w := m.world()
	sp := "/spaces/" + w.space
	con := sp + "/consumers/" + w.bConsumer

	// PATCH with a request_id: one view change, however often it is retried.
	patch := map[string]any{"request_id": "patch-1", "filter": map[string]any{"producer_ids": []string{w.a}}}
	p1 := m.admin("PATCH", con, patch, "admin.consumer.response")
	p2 := m.admin("PATCH", con, patch, "admin.consumer.response")
	if p1["view_revision"] != float64(2) || !jsonEq(p1, p2) {
		t.Fatalf("PATCH %v, retried %v: want one bump to view_revision 2", p1, p2)
	}
	m.fail("PATCH", "/admin/v0"+con, m1AdminSecret, map[string]any{"request_id": "patch-1", "view": "space_log"}, nil, "IDEMPOTENCY_CONFLICT", http.StatusConflict)

	// A PATCH that changes nothing keeps view_revision, so a cursor taken before it still reads.
	m.call("POST", "/v0/messages", w.aTok, map[string]any{"request_id": m.rid("send"), "recipient_ids": []string{w.b}, "body": map[string]any{"text": "hi"}}, "message.send.response")
	page := m1Decode[map[string]any](t, m.call("POST", "/v0/inbox/read", w.bTok, map[string]any{"consumer_id": w.bConsumer, "limit": 1}, "inbox.read.response"))
	for _, body := range []map[string]any{
		{"filter": map[string]any{"producer_ids": []string{w.a}}},
		{"view": "inbox"},
		{"request_id": "patch-noop", "view": "inbox", "filter": map[string]any{"producer_ids": []string{w.a}}},
	} {
		if got := m.admin("PATCH", con, body, "admin.consumer.response"); got["view_revision"] != float64(2) {
			t.Fatalf("no-op PATCH %v raised view_revision: %v", body, got)
		}
	}
	m.call("POST", "/v0/inbox/read", w.bTok, map[string]any{"consumer_id": w.bConsumer, "cursor": page["next_cursor"]}, "inbox.read.response")

	// Rotate with a request_id: the retry returns the first result without a secret and rotates nothing.
	tok := m.admin("POST", sp+"/tokens", map[string]any{"request_id": "tok-1", "actor_id": w.c, "scopes": []string{"message.read"}}, "admin.token.response")
	tokPath := sp + "/tokens/" + tok["token_id"].(string)
	r1 := m.admin("POST", tokPath+"/rotate", map[string]any{"request_id": "rot-1"}, "admin.token.response")
	secret, _ := r1["token"].(string)
	if secret == "" || secret == tok["token"] {
		t.Fatalf("rotate: %v", r1)
	}
	r2 := m.admin("POST", tokPath+"/rotate", map[string]any{"request_id": "rot-1"}, "admin.token.response")
	if r2["token"] != nil || r2["token_id"] != r1["token_id"] {
		t.Fatalf("retried rotate: %v", r2)
	}
	m.call("GET", "/v0/describe", secret, nil, "describe.response") // the first rotation's secret still works
	m.fail("GET", "/v0/describe", tok["token"].(string), nil, nil, "UNAUTHENTICATED", http.StatusUnauthorized)

	// Revoke with a request_id: the retry returns the first result; reusing it for another token conflicts.
	v1 := m.admin("POST", tokPath+"/revoke", map[string]any{"request_id": "rev-1"}, "admin.token.revoke.response")
	v2 := m.admin("POST", tokPath+"/revoke", map[string]any{"request_id": "rev-1"}, "admin.token.revoke.response")
	if v1["revoked"] != true || !jsonEq(v1, v2) {
		t.Fatalf("revoke %v, retried %v", v1, v2)
	}
	other := m.admin("POST", sp+"/tokens", map[string]any{"request_id": "tok-2", "actor_id": w.c, "scopes": []string{"message.read"}}, "admin.token.response")
	m.fail("POST", "/admin/v0"+sp+"/tokens/"+other["token_id"].(string)+"/revoke", m1AdminSecret, map[string]any{"request_id": "rev-1"}, nil,
		"IDEMPOTENCY_CONFLICT", http.StatusConflict)
	m.call("GET", "/v0/describe", other["token"].(string), nil, "describe.response") // not revoked
}

// TestIssue13_DefaultRecipientCannotBeRevoked (issue 13 item 7): revoking the space's default recipient is
// refused with a clear INVALID_REQUEST, and describe never advertises a revoked actor.
func TestIssue13_DefaultRecipientCannotBeRevoked(t *testing.T) {
	t.Parallel()
	m := newM1(t)
	w := m.world()
	sp := "/spaces/" + w.space
	space := m.admin("GET", sp, nil, "admin.space.get.response")
	def := space["default_recipient_id"].(string)
	r := m.fail("POST", "/admin/v0"+sp+"/actors/"+def+"/revoke", m1AdminSecret, map[string]any{}, nil, "INVALID_REQUEST", http.StatusBadRequest)
	if r.detail["actor_id"] != def {
		t.Fatalf("revoking the default recipient: %s", r.body)
	}
	m.admin("POST", sp+"/actors/"+w.c+"/revoke", map[string]any{}, "admin.actor.revoke.response")
	d := m1Decode[map[string]any](t, m.call("GET", "/v0/describe", w.aTok, nil, "describe.response"))
	var allowed []string
	for _, id := range d["allowed_recipient_ids"].([]any) {
		allowed = append(allowed, id.(string))
	}
	if d["default_recipient_id"] != def || !slices.Contains(allowed, def) || slices.Contains(allowed, w.c) {
		t.Fatalf("describe: default %v, allowed %v (revoked %s)", d["default_recipient_id"], allowed, w.c)
	}
	// A message without recipient_ids still reaches the default recipient.
	m.call("POST", "/v0/messages", w.aTok, map[string]any{"request_id": m.rid("send"), "body": map[string]any{"text": "to the default"}}, "message.send.response")
}

// TestIssue13_TokenExpiryAndBlobGrantChecked (issue 13 item 8): a token whose expires_at is not in the
// future is INVALID_REQUEST (details.field expires_at), and a blob.reference grant on a blob that does not
// exist is NOT_FOUND; neither is created.
func TestIssue13_TokenExpiryAndBlobGrantChecked(t *testing.T) {
	t.Parallel()
	m := newM1(t)
	w := m.world()
	sp := "/admin/v0/spaces/" + w.space
	for _, at := range []time.Time{time.Now().Add(-time.Hour), time.Now()} {
		r := m.fail("POST", sp+"/tokens", m1AdminSecret, map[string]any{"request_id": m.rid("tok"), "actor_id": w.a, "scopes": []string{"message.read"},
			"expires_at": at.UTC().Format(time.RFC3339)}, nil, "INVALID_REQUEST", http.StatusBadRequest)
		if r.detail["field"] != "expires_at" {
			t.Fatalf("expires_at %s: %s", at, r.body)
		}
	}
	m.admin("POST", "/spaces/"+w.space+"/tokens", map[string]any{"request_id": m.rid("tok"), "actor_id": w.a, "scopes": []string{"message.read"},
		"expires_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}, "admin.token.response")

	m.fail("POST", sp+"/grants", m1AdminSecret, map[string]any{"request_id": "g-missing", "actor_id": w.b, "permission": "blob.reference",
		"blob_id": "blb_does_not_exist"}, nil, "NOT_FOUND", http.StatusNotFound)
	blob := m.upload(w.aTok, []byte("shared"), "text/plain", "")
	m.admin("POST", "/spaces/"+w.space+"/grants", map[string]any{"request_id": "g-ok", "actor_id": w.b, "permission": "blob.reference",
		"blob_id": blob["blob_id"]}, "admin.grant.create.response")
}

func jsonEq(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}
