package server_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/waypost/waypost/api/adminauth"
	"github.com/waypost/waypost/schemas"
	"github.com/waypost/waypost/server"
)

// TestOpenRefusesWeakAdminSecret: an admin secret with less than 32 random bytes of entropy, from the
// environment or in the data directory's file, stops the server from starting with a message that says
// how to generate one; a generated secret passes.
func TestOpenRefusesWeakAdminSecret(t *testing.T) {
	for _, weak := range []string{"short", "test-admin-secret-0123456789abcdef", strings.Repeat("x", 64)} {
		_, err := server.Open(server.Config{DataDir: t.TempDir(), NoSync: true, AdminSecret: weak})
		if !errors.Is(err, adminauth.ErrWeakSecret) || !strings.Contains(err.Error(), "WAYPOST_ADMIN_SECRET") ||
			!strings.Contains(err.Error(), "openssl rand -base64 32") {
			t.Fatalf("Open with admin secret %q: %v", weak, err)
		}
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "admin-secret"), []byte("wpa_short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := server.Open(server.Config{DataDir: dir, NoSync: true}); !errors.Is(err, adminauth.ErrWeakSecret) ||
		!strings.Contains(err.Error(), "admin-secret") {
		t.Fatalf("Open with a weak admin-secret file: %v", err)
	}
	srv, err := server.Open(server.Config{DataDir: t.TempDir(), NoSync: true}) // generates one
	if err != nil {
		t.Fatalf("Open with a generated secret: %v", err)
	}
	srv.Close()
}

// TestInternalRoutesNotServed: the channel service's internal API is not on serve's listener: with or
// without the channel secret, /internal/v0/* is NOT_FOUND in the standard envelope and publishes nothing.
func TestInternalRoutesNotServed(t *testing.T) {
	dir := t.TempDir()
	srv, err := server.Open(server.Config{DataDir: dir, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	secret, err := os.ReadFile(filepath.Join(dir, "channel-secret"))
	if err != nil {
		t.Fatal(err)
	}
	reg, err := schemas.New()
	if err != nil {
		t.Fatal(err)
	}
	for _, auth := range []string{"", "Bearer " + strings.TrimSpace(string(secret))} {
		for _, rq := range []struct{ method, path, body string }{
			{"POST", "/internal/v0/spaces/sp_x/channels/feed/publish", `{"text":"{\"visible_seq\":\"1\",\"item_id\":\"it_1\"}"}`},
			{"GET", "/internal/v0/spaces/sp_x/channels/feed/count", ""},
			{"GET", "/internal/v0/unknown", ""},
		} {
			req, _ := http.NewRequest(rq.method, hs.URL+rq.path, strings.NewReader(rq.body))
			req.Header.Set("Content-Type", "application/json")
			if auth != "" {
				req.Header.Set("Authorization", auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusNotFound || reg.Validate("envelope.error", body) != nil ||
				!strings.Contains(string(body), `"code":"NOT_FOUND"`) {
				t.Fatalf("%s %s (auth %v): HTTP %d %s", rq.method, rq.path, auth != "", resp.StatusCode, body)
			}
		}
	}
}
