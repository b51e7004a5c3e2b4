package bolt_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/waypost/waypost/domain/domaintest"
	"github.com/waypost/waypost/store/bolt"
	"github.com/waypost/waypost/store/fsblob"
)

// TestMemoryProperties runs the M1 properties P10–P13 and the memory and blob scenarios
// (domaintest.RunMemoryProperties) on the embedded store without fsync (NoSync, a fresh file in a temporary
// directory per test) and with default batching. Every commit waits up to bolt.DefaultMaxBatchDelay for
// company, so the checks run fewer steps and rounds than on the in-memory store.
func TestMemoryProperties(t *testing.T) {
	domaintest.RunMemoryProperties(t, func(t testing.TB) domaintest.Backend {
		store, err := bolt.Open(filepath.Join(t.TempDir(), "items.db"), bolt.Options{NoSync: true})
		if err != nil {
			t.Fatalf("bolt.Open: %v", err)
		}
		t.Cleanup(func() {
			if err := store.Close(); err != nil {
				t.Errorf("closing the store: %v", err)
			}
		})
		blobs, err := fsblob.New(memoryBlobDir(t))
		if err != nil {
			t.Fatal(err)
		}
		return domaintest.Backend{Store: store, Blobs: blobs}
	}, domaintest.MaxSteps(8))
}

// memoryBlobDir is a fresh directory for the blob store, on tmpfs when the system has one: every memory
// publish writes its state object, and fsblob syncs each object, which on a busy disk would dominate the
// properties' running time without adding to what they check.
func memoryBlobDir(t testing.TB) string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if dir, err := os.MkdirTemp("/dev/shm", "waypost-memprops-"); err == nil {
			t.Cleanup(func() { os.RemoveAll(dir) })
			return dir
		}
	}
	return t.TempDir()
}
