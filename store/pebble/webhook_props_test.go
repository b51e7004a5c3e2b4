package pebble_test

import (
	"path/filepath"
	"testing"

	"github.com/waypost/waypost/domain/domaintest"
	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/store/fsblob"
	"github.com/waypost/waypost/store/pebble"
)

// TestWebhookProperties runs P15 and the webhook delivery scenarios (domaintest.RunWebhookProperties) on
// the embedded store (no fsync, a fresh store per check). Its store can be reopened, so every restart in
// them closes the store and opens its directory again, as a restarted process would.
func TestWebhookProperties(t *testing.T) {
	domaintest.RunWebhookProperties(t, webhookBackend, domaintest.MaxSteps(20))
}

// reopenable is a store that domaintest can close and reopen on the same directory.
type reopenable struct {
	*pebble.Store
	path string
}

// Reopen closes the store and opens its directory again.
func (r reopenable) Reopen(t testing.TB) port.ItemStore {
	if err := r.Store.Close(); err != nil {
		t.Fatalf("closing %s: %v", r.path, err)
	}
	return openReopenable(t, r.path)
}

func openReopenable(t testing.TB, path string) reopenable {
	s, err := pebble.Open(path, pebble.Options{NoSync: true})
	if err != nil {
		t.Fatalf("pebble.Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() }) // closing twice is a no-op
	return reopenable{Store: s, path: path}
}

func webhookBackend(t testing.TB) domaintest.Backend {
	blobs, err := fsblob.New(propsBlobDir(t))
	if err != nil {
		t.Fatal(err)
	}
	return domaintest.Backend{Store: openReopenable(t, filepath.Join(t.TempDir(), "items")), Blobs: blobs}
}
