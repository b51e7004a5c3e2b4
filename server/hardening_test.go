package server_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waypost/waypost/api/adminauth"
	"github.com/waypost/waypost/domain"
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

// movableClock is a wall clock that a test can move forward.
type movableClock struct {
	mu  sync.Mutex
	off time.Duration
}

func (c *movableClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.off)
}
func (c *movableClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.off += d
}

// TestServeSweepsUploads: a temporary blob file left by a crash is removed when the server opens, and a
// serving server expires unsealed uploads past their time on its schedule (their bytes deleted).
func TestServeSweepsUploads(t *testing.T) {
	dir := t.TempDir()
	orphan := filepath.Join(dir, "blobs", "ab", "cd", ".tmp-1234567")
	if err := os.MkdirAll(filepath.Dir(orphan), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(orphan, []byte("wpblob1 half an upload"), 0o600); err != nil {
		t.Fatal(err)
	}
	clk := &movableClock{}
	srv, err := server.Open(server.Config{Addr: "127.0.0.1:0", DataDir: dir, NoSync: true, Clock: clk, SweepInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if _, err := os.Stat(orphan); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the orphaned temporary file survived the start: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Error(err)
		}
	}()

	svc := srv.Service()
	sp, err := svc.CreateSpace(ctx, domain.CreateSpaceRequest{RequestID: "sp"})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := svc.CreateToken(ctx, sp.SpaceID, domain.CreateTokenRequest{RequestID: "tok", ActorID: sp.DefaultRecipientID,
		Scopes: []domain.Scope{domain.ScopeBlobWrite, domain.ScopeBlobRead}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := svc.Authenticate(ctx, tok.Token)
	if err != nil {
		t.Fatal(err)
	}
	content := []byte("never committed")
	sum := sha256.Sum256(content)
	prep, err := svc.PrepareBlob(ctx, p, domain.BlobPrepareRequest{RequestID: "prep", ContentType: "text/plain",
		SizeBytes: int64(len(content)), SHA256: hex.EncodeToString(sum[:])})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Upload(ctx, p, prep.UploadID, "text/plain", int64(len(content)), bytes.NewReader(content)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // several sweeps: the upload is not due yet
	if b, err := svc.GetBlob(ctx, p, prep.BlobID); err != nil || b.State != domain.BlobPending {
		t.Fatalf("before its time: %+v %v", b, err)
	}
	clk.advance(2 * time.Hour)
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := svc.GetBlob(ctx, p, prep.BlobID)
		if err == nil && b.State == domain.BlobExpired {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the upload was not swept: %+v %v", b, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := svc.CommitBlob(ctx, p, domain.BlobCommitRequest{RequestID: "seal", UploadID: prep.UploadID}); domain.CodeOf(err) != domain.CodeUploadExpired {
		t.Fatalf("commit after the sweep: %v", err)
	}
}
