package pebble_test

import (
	"path/filepath"
	"testing"

	"github.com/waypost/waypost/domain/domaintest"
	"github.com/waypost/waypost/store/fsblob"
	"github.com/waypost/waypost/store/pebble"
)

// TestFailureMatrix runs the SUPPLEMENT §7.4 failure matrix and properties P03/P04 on the embedded store: a
// fresh store in a temporary directory per subtest and per property check, without fsync (the faults are
// injected above the store; losing the process is row 8's subject: TestKilledMidLoad).
func TestFailureMatrix(t *testing.T) {
	domaintest.RunFailureMatrix(t, func(t testing.TB) domaintest.Backend {
		dir := t.TempDir()
		st := openStore(t, filepath.Join(dir, "items"), pebble.Options{NoSync: true})
		blobs, err := fsblob.New(filepath.Join(dir, "blobs"))
		if err != nil {
			t.Fatalf("fsblob: %v", err)
		}
		return domaintest.Backend{Store: st, Blobs: blobs}
	})
}
