package mem_test

import (
	"testing"

	"github.com/waypost/waypost/domain/domaintest"
)

// TestDomain runs every domain suite (domaintest.RunAll: the §15, memory and webhook properties and the
// §7.4 failure matrix) on the in-memory store, with blobs in a file blob store without fsync. A restart is
// a new service over the same store (the in-memory store outlives it, as a table outlives a process).
func TestDomain(t *testing.T) {
	domaintest.RunAll(t, domaintest.MemBackend, domaintest.Features{})
}
