package domaintest_test

import (
	"testing"

	"github.com/waypost/waypost/domain/domaintest"
)

// TestSmokeLoop is the smoke flow (send, read, ack, receipt, get) on the in-memory store.
func TestSmokeLoop(t *testing.T) {
	domaintest.SmokeLoop(t, domaintest.New(t, domaintest.MemBackend, nil), "hello")
}
