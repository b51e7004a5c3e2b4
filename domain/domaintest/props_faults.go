package domaintest

import (
	"testing"

	"github.com/waypost/waypost/store/faulty"
)

// Faulty wraps the item and blob stores of the backend nb makes with store/faulty, for a test to arm
// faults and hooks on; *items and *blobs (either may be nil) are set each time a fixture builds a backend.
func Faulty(nb NewBackend, items **faulty.ItemStore, blobs **faulty.BlobStore) NewBackend {
	return func(t testing.TB) Backend {
		b := nb(t)
		fi, fb := faulty.NewItemStore(b.Store), faulty.NewBlobStore(b.Blobs)
		if items != nil {
			*items = fi
		}
		if blobs != nil {
			*blobs = fb
		}
		return Backend{Store: fi, Blobs: fb}
	}
}

// withRandomFaults wraps the backend nb makes with store/faulty, failing calls at random as r says.
func withRandomFaults(nb NewBackend, r *faulty.Random) NewBackend {
	return func(t testing.TB) Backend {
		var items *faulty.ItemStore
		var blobs *faulty.BlobStore
		b := Faulty(nb, &items, &blobs)(t)
		items.SetRandom(r)
		blobs.SetRandom(r)
		return b
	}
}
