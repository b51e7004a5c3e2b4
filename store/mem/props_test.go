package mem_test

import (
	"os"
	"testing"

	"github.com/waypost/waypost/domain/domaintest"
	"github.com/waypost/waypost/store/fsblob"
	"github.com/waypost/waypost/store/mem"
)

// TestProperties runs the SUPPLEMENT §15 properties (domaintest.RunProperties) on the in-memory store, with
// message bodies in a file-system blob store.
func TestProperties(t *testing.T) {
	domaintest.RunProperties(t, func(t testing.TB) domaintest.Backend {
		blobs, err := fsblob.New(propsBlobDir(t))
		if err != nil {
			t.Fatal(err)
		}
		return domaintest.Backend{Store: mem.New(), Blobs: blobs}
	})
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
