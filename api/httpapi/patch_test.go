package httpapi_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/waypost/waypost/domain"
)

// TestPatchSpaceIsAMergePatch (issue 30): PATCH /admin/v0/spaces/{id} is a JSON Merge Patch (RFC 7396),
// declared as application/json or application/merge-patch+json: {"quotas": {"max_items": 100}} sets
// max_items and keeps max_stored_bytes as it was (the default, then the owner's own value), and likewise
// within rate_limits; null, an explicit 0 and an empty member object are refused, and a PATCH may not
// declare another media type.
func TestPatchSpaceIsAMergePatch(t *testing.T) {
	t.Parallel()
	m := newM1(t)
	w := m.world()
	path := "/admin/v0/spaces/" + w.space
	type space struct {
		Quotas     domain.Quotas     `json:"quotas"`
		RateLimits domain.RateLimits `json:"rate_limits"`
	}
	patch := func(body, contentType string) space {
		t.Helper()
		r := m.ok("PATCH "+body, m.do("PATCH", path, m1AdminSecret, []byte(body),
			map[string]string{"Content-Type": contentType}), "admin.space.get.response")
		var sp space
		if err := json.Unmarshal(r.data, &sp); err != nil {
			t.Fatal(err)
		}
		got := m1Decode[space](t, m.call("GET", path, m1AdminSecret, nil, "admin.space.get.response"))
		if got != sp {
			t.Fatalf("PATCH %s answered %+v, GET reads %+v", body, sp, got)
		}
		return sp
	}
	def := domain.DefaultQuotas()
	sp := patch(`{"quotas": {"max_items": 100}}`, "application/json")
	if want := (domain.Quotas{MaxStoredBytes: def.MaxStoredBytes, MaxItems: 100}); sp.Quotas != want {
		t.Fatalf("after max_items alone: %+v, want %+v", sp.Quotas, want)
	}
	sp = patch(`{"quotas": {"max_stored_bytes": 123456}}`, "application/merge-patch+json")
	if want := (domain.Quotas{MaxStoredBytes: 123456, MaxItems: 100}); sp.Quotas != want {
		t.Fatalf("after max_stored_bytes alone: %+v, want %+v", sp.Quotas, want)
	}
	sp = patch(`{"rate_limits": {"burst": 9}}`, "application/merge-patch+json; charset=utf-8")
	if want := (domain.RateLimits{RequestsPerSecond: domain.DefaultRequestsPerSecond, Burst: 9}); sp.RateLimits != want {
		t.Fatalf("after burst alone: %+v, want %+v", sp.RateLimits, want)
	}
	if want := (domain.Quotas{MaxStoredBytes: 123456, MaxItems: 100}); sp.Quotas != want {
		t.Fatalf("a rate-limits patch changed the quotas: %+v, want %+v", sp.Quotas, want)
	}
	for _, bad := range []string{`{"quotas": {"max_items": null}}`, `{"quotas": null}`, `{"quotas": {"max_items": 0}}`, `{"quotas": {}}`} {
		m.fail("PATCH", path, m1AdminSecret, []byte(bad), map[string]string{"Content-Type": "application/merge-patch+json"}, "INVALID_REQUEST", http.StatusBadRequest)
	}
	m.fail("PATCH", path, m1AdminSecret, []byte(`{"quotas": {"max_items": 5}}`), map[string]string{"Content-Type": "text/plain"}, "INVALID_REQUEST", http.StatusBadRequest)
	m.fail("POST", path+"/actors", m1AdminSecret, []byte(`{"request_id": "a-1"}`), map[string]string{"Content-Type": "application/merge-patch+json"}, "INVALID_REQUEST", http.StatusBadRequest)
	if got := m1Decode[space](t, m.call("GET", path, m1AdminSecret, nil, "admin.space.get.response")); got.Quotas.MaxItems != 100 {
		t.Fatalf("a refused PATCH changed the quotas: %+v", got.Quotas)
	}
}
