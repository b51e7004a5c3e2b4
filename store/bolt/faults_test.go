package bolt_test

import (
	"path/filepath"
	"testing"

	"github.com/waypost/waypost/domain/domaintest"
	"github.com/waypost/waypost/store/bolt"
	"github.com/waypost/waypost/store/fsblob"
)

// TestFailureMatrix runs the SUPPLEMENT §7.4 failure matrix and properties P03/P04 on the embedded store: a
// fresh file in a temporary directory per subtest and per property check, without fsync (the faults are
// injected above the store; losing the process is row 8's subject). The matrix sends one request at a time,
// so a commit never has company to wait for: a short batch delay only saves the wait.
func TestFailureMatrix(t *testing.T) {
	domaintest.RunFailureMatrix(t, func(t testing.TB) domaintest.Backend {
		dir := t.TempDir()
		st := openStore(t, filepath.Join(dir, "items.db"), bolt.Options{NoSync: true})
		blobs, err := fsblob.New(filepath.Join(dir, "blobs"))
		if err != nil {
			t.Fatalf("fsblob: %v", err)
		}
		return domaintest.Backend{Store: st, Blobs: blobs}
	})
}
