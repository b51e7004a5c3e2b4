package domaintest_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/domain/domaintest"
	"github.com/waypost/waypost/domain/port"
)

// presigningStore is a blob store that offers port.BlobPresigner with fake URLs, recording what it signed;
// with expired set it refuses every expiry as already passed (the store's clock ahead of the service's).
type presigningStore struct {
	port.BlobStore
	mu      sync.Mutex
	expired bool
	puts    []string // "key size sha type"
}

func (s *presigningStore) PresignPut(_ context.Context, key string, size int64, sha, ct string, exp time.Time) (port.PresignedRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.expired {
		return port.PresignedRequest{}, port.ErrPresignExpiry
	}
	s.puts = append(s.puts, strings.Join([]string{key, itoa(size), sha, ct}, " "))
	return port.PresignedRequest{Method: "PUT", URL: "https://store.example/" + key + "?sig=put", Headers: map[string]string{
		"Content-Type": ct, "If-None-Match": "*", "X-Amz-Checksum-Sha256": "x", "Content-Length": itoa(size)}, ExpiresAt: exp}, nil
}

func (s *presigningStore) PresignGet(_ context.Context, key, ct, name string, exp time.Time) (port.PresignedRequest, error) {
	if s.expired {
		return port.PresignedRequest{}, port.ErrPresignExpiry
	}
	return port.PresignedRequest{Method: "GET", URL: "https://store.example/" + key + "?sig=get", ExpiresAt: exp}, nil
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// Where the blob store presigns (issue 17), blob.prepare answers a presigned PUT of the blob's own key,
// signed for the declared size, digest and type and expiring with the upload, signed afresh on a replay and
// never stored; blob.get answers a presigned GET while commit's stored result keeps the service path; a
// store that cannot sign for that expiry leaves the service's own routes.
func TestDirectTransferDecisions(t *testing.T) {
	var store *presigningStore
	f := domaintest.New(t, func(t testing.TB) domaintest.Backend {
		b := domaintest.MemBackend(t)
		store = &presigningStore{BlobStore: b.Blobs}
		b.Blobs = store
		return b
	}, nil)
	sp := f.Space()
	a := f.Party(sp.SpaceID)
	ctx := context.Background()
	content := []byte("direct bytes")
	sum := sha256.Sum256(content)
	req := domain.BlobPrepareRequest{RequestID: "prep-1", ContentType: "text/plain", SizeBytes: int64(len(content)), SHA256: hex.EncodeToString(sum[:])}
	prep, err := f.Svc.PrepareBlob(ctx, a.P, req)
	if err != nil {
		t.Fatal(err)
	}
	key := "spaces/" + sp.SpaceID + "/blobs/" + prep.BlobID
	if prep.UploadURL != "https://store.example/"+key+"?sig=put" || prep.UploadHeaders["If-None-Match"] != "*" || prep.UploadMethod != "PUT" {
		t.Fatalf("prepare: %+v", prep)
	}
	if want := key + " " + itoa(int64(len(content))) + " " + req.SHA256 + " text/plain"; len(store.puts) != 1 || store.puts[0] != want {
		t.Fatalf("signed %q, want %q", store.puts, want)
	}
	again, err := f.Svc.PrepareBlob(ctx, a.P, req)
	if err != nil || again.UploadURL != prep.UploadURL || again.BlobID != prep.BlobID || len(store.puts) != 2 {
		t.Fatalf("replayed prepare: %+v %v (signed %d times)", again, err, len(store.puts))
	}
	// The client PUTs to the store (here: straight into the wrapped store), then commits.
	if _, err := store.Put(ctx, key, int64(len(content)), req.SHA256, bytes.NewReader(content)); err != nil {
		t.Fatal(err)
	}
	info, err := f.Svc.CommitBlob(ctx, a.P, domain.BlobCommitRequest{RequestID: "seal-1", UploadID: prep.UploadID})
	if err != nil || info.DownloadURL != "/v0/blobs/"+prep.BlobID+"/content" || info.DownloadExpiresAt != nil {
		t.Fatalf("commit: %+v %v", info, err)
	}
	got, err := f.Svc.GetBlob(ctx, a.P, prep.BlobID)
	if err != nil || got.DownloadURL != "https://store.example/"+key+"?sig=get" || got.DownloadExpiresAt == nil ||
		!got.DownloadExpiresAt.Equal(f.Clock.Now().Add(domain.DownloadLinkTTL)) {
		t.Fatalf("blob.get: %+v %v", got, err)
	}
	link, _, ok, err := f.Svc.BlobDownloadLink(ctx, a.P, prep.BlobID)
	if err != nil || !ok || link.URL != got.DownloadURL {
		t.Fatalf("download link: %+v %v %v", link, ok, err)
	}

	// The store's clock is past the expiry: the service's routes serve instead, and nothing fails.
	store.expired = true
	late, err := f.Svc.PrepareBlob(ctx, a.P, domain.BlobPrepareRequest{RequestID: "prep-2", ContentType: "text/plain", SizeBytes: 1,
		SHA256: hex.EncodeToString(sha256.New().Sum(nil))})
	if err != nil || late.UploadURL != "/v0/uploads/"+late.UploadID+"/content" {
		t.Fatalf("prepare with the store's clock ahead: %+v %v", late, err)
	}
	if got, err := f.Svc.GetBlob(ctx, a.P, prep.BlobID); err != nil || got.DownloadURL != "/v0/blobs/"+prep.BlobID+"/content" || got.DownloadExpiresAt != nil {
		t.Fatalf("blob.get with the store's clock ahead: %+v %v", got, err)
	}
	if _, _, ok, err := f.Svc.BlobDownloadLink(ctx, a.P, prep.BlobID); err != nil || ok {
		t.Fatalf("download link with the store's clock ahead: %v %v", ok, err)
	}
}
