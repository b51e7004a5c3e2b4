package server_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/waypost/waypost/api/adminauth"
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
