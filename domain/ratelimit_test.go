package domain_test

import (
	"context"
	"testing"
	"time"

	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/domain/domaintest"
	"github.com/waypost/waypost/internal/platform"
)

// TestAdmitSeesOwnerChangeWithinSpaceCacheTTL: another process (a Lambda instance) that read the space
// before the owner changed its rate limits enforces the new limits 10 s after the change, like describe,
// also when it admitted a request shortly before (Admit reads the limits through the one space cache).
func TestAdmitSeesOwnerChangeWithinSpaceCacheTTL(t *testing.T) {
	f := domaintest.New(t, domaintest.MemBackend, nil)
	ctx := context.Background()
	sp := f.Space()
	a := f.Party(sp.SpaceID)
	other, err := domain.New(domain.Config{Store: f.Backend.Store, Blobs: f.Backend.Blobs, Clock: f.Clock, IDs: platform.IDs{},
		CursorKey: []byte("0123456789abcdef0123456789abcdef-test-key")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Describe(ctx, a.P); err != nil { // the other process reads the space
		t.Fatal(err)
	}
	f.Clock.Advance(time.Second)
	tight := domain.RateLimits{RequestsPerSecond: 1, Burst: 2}
	if _, err := f.Svc.UpdateSpace(ctx, sp.SpaceID, domain.UpdateSpaceRequest{RateLimits: &tight}); err != nil {
		t.Fatal(err)
	}
	f.Clock.Advance(8 * time.Second) // its record is 9 s old: still the defaults there
	if err := other.Admit(ctx, a.P); err != nil {
		t.Fatalf("admit under the defaults: %v", err)
	}
	f.Clock.Advance(2 * time.Second) // 10 s after the change
	for i := range tight.Burst {
		if err := other.Admit(ctx, a.P); err != nil {
			t.Fatalf("request %d of the new burst: %v", i+1, err)
		}
	}
	err = other.Admit(ctx, a.P)
	if de := domain.AsError(err); de == nil || de.Code != domain.CodeRateLimited || de.Details["burst"] != tight.Burst {
		t.Fatalf("10 s after the owner's change, the other process still admits under the old limits: %v", err)
	}
}
