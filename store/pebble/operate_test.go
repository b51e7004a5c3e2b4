package pebble_test

import (
	"testing"

	"github.com/waypost/waypost/domain/domaintest"
)

// TestOperations runs the owner's operations suite (stats, verify, space deletion) on pebble with file blobs.
func TestOperations(t *testing.T) { domaintest.RunOperations(t, propsBackend) }
