package mem_test

import (
	"testing"

	"github.com/waypost/waypost/domain/domaintest"
	"github.com/waypost/waypost/store/fsblob"
	"github.com/waypost/waypost/store/mem"
)

// TestWebhookProperties runs P15 and the webhook delivery scenarios (domaintest.RunWebhookProperties) on
// the in-memory store, with blobs in a file-system blob store. A restart is a new service over the same
// store (the in-memory store outlives it, as a table outlives a process).
func TestWebhookProperties(t *testing.T) {
	domaintest.RunWebhookProperties(t, func(t testing.TB) domaintest.Backend {
		blobs, err := fsblob.New(memoryBlobDir(t))
		if err != nil {
			t.Fatal(err)
		}
		return domaintest.Backend{Store: mem.New(), Blobs: blobs}
	})
}
