package pebble_test

import (
	"path/filepath"
	"testing"

	"github.com/waypost/waypost/domain/domaintest"
	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/store/pebble"
)

// TestDomain runs every domain suite (domaintest.RunAll) on the embedded store: a fresh store in a temporary
// directory per property, check and scenario, without fsync (the faults are injected above the store; losing
// the process is TestKilledMidLoad's subject), blobs without fsync either. Opening a store and every commit
// cost real file work, so checks run fewer steps than on the in-memory store. The store can be reopened:
// every restart of the webhook suite closes it and opens its directory again, as a restarted process would.
func TestDomain(t *testing.T) {
	domaintest.RunAll(t, func(t testing.TB) domaintest.Backend {
		return domaintest.Backend{Store: openReopenable(t, filepath.Join(t.TempDir(), "items")), Blobs: domaintest.TempBlobs(t)}
	}, domaintest.Features{Steps: 6, MemorySteps: 8, WebhookSteps: 20})
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
	return reopenable{Store: openStore(t, path, pebble.Options{NoSync: true}), path: path}
}
