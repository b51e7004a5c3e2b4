package s3blob_test

import (
	"testing"

	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/store/s3blob"
	"github.com/waypost/waypost/store/s3blob/s3test"
	"github.com/waypost/waypost/store/storetest"
)

func TestMain(m *testing.M) { s3test.Main(m) }

func newStore(t *testing.T) *s3blob.Store {
	t.Helper()
	e := s3test.Require(t)
	st, err := s3blob.New(e.Client(), e.Bucket(t), s3blob.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestContract runs the port.BlobStore contract suite against versitygw (posix backend), one bucket per
// subtest.
func TestContract(t *testing.T) {
	s3test.Require(t)
	storetest.RunBlobStore(t, func(t *testing.T) port.BlobStore { return newStore(t) })
}
