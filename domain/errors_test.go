package domain_test

import (
	"testing"

	"github.com/waypost/waypost/domain"
)

// TestWithDetailsCopies: refining an error shared by many callers never changes it.
func TestWithDetailsCopies(t *testing.T) {
	t.Parallel()
	shared := domain.Errorf(domain.CodeInvalidRequest, "bad").WithDetails("field", "a")
	b := shared.WithDetails("field", "b", "limit", 3)
	if shared.Details["field"] != "a" || len(shared.Details) != 1 {
		t.Errorf("the shared error changed: %v", shared.Details)
	}
	if b.Details["field"] != "b" || b.Details["limit"] != 3 || b.Code != shared.Code || b.Message != shared.Message {
		t.Errorf("the copy is %+v", b)
	}
}
