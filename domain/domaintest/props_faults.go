package domaintest

import (
	"testing"

	"github.com/waypost/waypost/store/faulty"
)

// withFaultyBlobs wraps the blob store of the backend nb makes with store/faulty, so that a check can fail
// a chosen blob put (*blobs is set when the fixture builds its backend).
func withFaultyBlobs(nb NewBackend, blobs **faulty.BlobStore) NewBackend {
	return func(t testing.TB) Backend {
		b := nb(t)
		*blobs = faulty.NewBlobStore(b.Blobs)
		return Backend{Store: b.Store, Blobs: *blobs}
	}
}

// withRandomFaults wraps the backend nb makes with store/faulty, failing calls at random as r says.
func withRandomFaults(nb NewBackend, r *faulty.Random) NewBackend {
	return func(t testing.TB) Backend {
		b := nb(t)
		items, blobs := faulty.NewItemStore(b.Store), faulty.NewBlobStore(b.Blobs)
		items.SetRandom(r)
		blobs.SetRandom(r)
		return Backend{Store: items, Blobs: blobs}
	}
}
