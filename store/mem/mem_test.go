package mem_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/store/mem"
	"github.com/waypost/waypost/store/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestContract(t *testing.T) {
	storetest.RunItemStore(t, func(t *testing.T) port.ItemStore { return mem.New() })
}

func TestMaxOps(t *testing.T) {
	if got := mem.New().MaxOps(); got != 100 {
		t.Fatalf("MaxOps %d, want DynamoDB's 100", got)
	}
}
