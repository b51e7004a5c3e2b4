package domaintest_test

import (
	"testing"

	"github.com/waypost/waypost/domain/domaintest"
)

// TestOperations runs the owner's operations suite (stats, verify, space deletion) on the in-memory store
// with file blobs.
func TestOperations(t *testing.T) { domaintest.RunOperations(t, rulesBackend) }
