package dynamo_test

import (
	"testing"

	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/store/dynamo"
	"github.com/waypost/waypost/store/dynamo/dynamotest"
	"github.com/waypost/waypost/store/s3blob/s3test"
	"github.com/waypost/waypost/store/storetest"
)

// TestContract runs the port.ItemStore contract suite against the store on minidyn, one fresh table per
// subtest.
func TestContract(t *testing.T) {
	srv := dynamotest.New(t)
	storetest.RunItemStore(t, func(t *testing.T) port.ItemStore { return srv.Store(t, nil, dynamo.Options{}) })
}

// TestMain stops the S3 emulator the property tests may have started.
func TestMain(m *testing.M) { s3test.Main(m) }
