package pebble_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/waypost/waypost/domain/domaintest"
	"github.com/waypost/waypost/store/fsblob"
	"github.com/waypost/waypost/store/pebble"
)

// TestProperties runs the SUPPLEMENT §15 properties (domaintest.RunProperties) on the embedded store, without
// fsync (NoSync, a fresh store in a temporary directory per property) and with default batching. Opening a
// store and every commit cost real file work, so checks run fewer steps than on the in-memory store.
func TestProperties(t *testing.T) {
	domaintest.RunProperties(t, propsBackend, domaintest.MaxSteps(6))
}

// propsBackend is a fresh embedded backend for one property: the store without fsync in a temporary
// directory, and the blob store on tmpfs when there is one.
func propsBackend(t testing.TB) domaintest.Backend {
	store, err := pebble.Open(filepath.Join(t.TempDir(), "items"), pebble.Options{NoSync: true})
	if err != nil {
		t.Fatalf("pebble.Open: %v", err)
	}
	t.Cleanup(func() {
		if err := store.Close(); err != nil {
			t.Errorf("closing the store: %v", err)
		}
	})
	blobs, err := fsblob.New(propsBlobDir(t))
	if err != nil {
		t.Fatal(err)
	}
	return domaintest.Backend{Store: store, Blobs: blobs}
}

// propsBlobDir is a fresh directory for the blob store, on tmpfs when the system has one: fsblob syncs every
// object and its directory, which on a busy disk would dominate the properties' running time without adding
// to what they check.
func propsBlobDir(t testing.TB) string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if dir, err := os.MkdirTemp("/dev/shm", "waypost-props-"); err == nil {
			t.Cleanup(func() { _ = os.RemoveAll(dir) })
			return dir
		}
	}
	return t.TempDir()
}
