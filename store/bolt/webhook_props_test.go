package bolt_test

import (
	"path/filepath"
	"testing"

	"github.com/waypost/waypost/domain/domaintest"
	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/store/bolt"
	"github.com/waypost/waypost/store/fsblob"
)

// TestWebhookProperties runs P15 and the webhook delivery scenarios (domaintest.RunWebhookProperties) on
// the embedded store (no fsync, a fresh file per check). Its store can be reopened, so every restart in
// them closes the bbolt file and opens it again, as a restarted process would.
func TestWebhookProperties(t *testing.T) {
	domaintest.RunWebhookProperties(t, webhookBackend, domaintest.MaxSteps(20))
}

// reopenable is a bbolt store that domaintest can close and reopen on the same file.
type reopenable struct {
	*bolt.Store
	path string
}

// Reopen closes the store and opens its file again.
func (r reopenable) Reopen(t testing.TB) port.ItemStore {
	if err := r.Store.Close(); err != nil {
		t.Fatalf("closing %s: %v", r.path, err)
	}
	return openReopenable(t, r.path)
}

func openReopenable(t testing.TB, path string) reopenable {
	s, err := bolt.Open(path, bolt.Options{NoSync: true})
	if err != nil {
		t.Fatalf("bolt.Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() }) // closing twice is a no-op
	return reopenable{Store: s, path: path}
}

func webhookBackend(t testing.TB) domaintest.Backend {
	blobs, err := fsblob.New(propsBlobDir(t))
	if err != nil {
		t.Fatal(err)
	}
	return domaintest.Backend{Store: openReopenable(t, filepath.Join(t.TempDir(), "items.db")), Blobs: blobs}
}
