// Package servertest starts the embedded deployment (package server) for tests of what runs against it —
// clients, the Skill's scenarios, third-party clients: a fresh data directory without fsync and a fixed
// admin secret, served by httptest, both closed when the test ends (a failure to close fails the test).
package servertest

import (
	"net/http/httptest"
	"testing"

	"github.com/waypost/waypost/server"
)

// AdminSecret is the control-plane secret of every server Start opens.
const AdminSecret = "test-admin-secret-0123456789abcdefghijklmnopqrstuvwxyz"

// Start opens a server in a temporary directory and serves it; it returns the server and its base URL.
func Start(t testing.TB) (*server.Server, string) {
	t.Helper()
	srv, err := server.Open(server.Config{DataDir: t.TempDir(), NoSync: true, AdminSecret: AdminSecret})
	if err != nil {
		t.Fatalf("servertest: %v", err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		hs.Close()
		if err := srv.Close(); err != nil {
			t.Errorf("servertest: closing the server: %v", err)
		}
	})
	return srv, hs.URL
}
