package mem_test

import (
	"testing"

	"github.com/waypost/waypost/domain/domaintest"
	"github.com/waypost/waypost/store/fsblob"
	"github.com/waypost/waypost/store/mem"
)

// TestFailureMatrix runs the SUPPLEMENT §7.4 failure matrix and properties P03/P04 on the in-memory store
// (bodies in a file-system blob store, as the in-memory store has no blob side).
func TestFailureMatrix(t *testing.T) {
	domaintest.RunFailureMatrix(t, func(t testing.TB) domaintest.Backend {
		blobs, err := fsblob.New(t.TempDir())
		if err != nil {
			t.Fatalf("fsblob: %v", err)
		}
		return domaintest.Backend{Store: mem.New(), Blobs: blobs}
	})
}
