package pebble_test

import (
	"testing"

	"github.com/waypost/waypost/domain/domaintest"
)

// TestMemoryProperties runs the M1 properties P10–P13 and the memory and blob scenarios
// (domaintest.RunMemoryProperties) on the embedded store, with the same backend as TestProperties (no fsync,
// a fresh store per test, blobs on tmpfs when there is one); the checks run fewer steps than on the in-memory
// store because each commit is real file work.
func TestMemoryProperties(t *testing.T) {
	domaintest.RunMemoryProperties(t, propsBackend, domaintest.MaxSteps(8))
}
