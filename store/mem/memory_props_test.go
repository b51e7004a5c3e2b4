package mem_test

import (
	"os"
	"testing"

	"github.com/waypost/waypost/domain/domaintest"
	"github.com/waypost/waypost/store/fsblob"
	"github.com/waypost/waypost/store/mem"
)

// TestMemoryProperties runs the M1 properties P10–P13 and the memory and blob scenarios
// (domaintest.RunMemoryProperties) on the in-memory store, with blobs in a file-system blob store.
func TestMemoryProperties(t *testing.T) {
	domaintest.RunMemoryProperties(t, func(t testing.TB) domaintest.Backend {
		blobs, err := fsblob.New(memoryBlobDir(t))
		if err != nil {
			t.Fatal(err)
		}
		return domaintest.Backend{Store: mem.New(), Blobs: blobs}
	})
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
