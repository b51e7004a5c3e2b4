// Package servertest starts the embedded deployment (package server) for tests of what runs against it —
// clients, the Skill's scenarios, third-party clients: a fresh data directory without fsync and a fixed
// admin secret, served by httptest, both closed when the test ends (a failure to close fails the test).
package servertest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/waypost/waypost/server"
)

// AdminSecret is the control-plane secret of every server Start opens.
const AdminSecret = "test-admin-secret-0123456789abcdefghijklmnopqrstuvwxyz"

// MCP connects an MCP client to the server at baseURL (its /mcp endpoint) with the bearer token; the session
// is closed when the test ends.
func MCP(t testing.TB, baseURL, token string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "waypost-test", Version: "1"}, nil)
	s, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: baseURL + "/mcp",
		HTTPClient: &http.Client{Transport: bearer(token)}}, nil)
	if err != nil {
		t.Fatalf("servertest: connecting to %s/mcp: %v", baseURL, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// bearer sends every request with its token.
type bearer string

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

// Start opens a server in a temporary directory and serves it; it returns the server and its base URL.
func Start(t testing.TB) (*server.Server, string) {
	t.Helper()
	srv, err := server.Open(server.Config{DataDir: t.TempDir(), NoSync: true, NoSyncBlobs: true, AdminSecret: AdminSecret})
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
