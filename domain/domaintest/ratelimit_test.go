package domaintest_test

import (
	"context"
	"testing"
	"time"

	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/domain/domaintest"
)

// TestRateLimitPerCredential: each credential has its own token bucket (the space's rate limits): a full
// bucket admits a burst, then RATE_LIMITED says how long to wait; the bucket refills at the rate; another
// credential of the same actor is not affected.
func TestRateLimitPerCredential(t *testing.T) {
	f := domaintest.New(t, domaintest.MemBackend, func(c *domain.Config) {
		c.RateLimits = &domain.RateLimits{RequestsPerSecond: 10, Burst: 5}
	})
	ctx := context.Background()
	sp := f.Space()
	a := f.Party(sp.SpaceID)
	other, _ := f.Token(sp.SpaceID, a.ActorID, "")
	for i := range 5 {
		if err := f.Svc.Admit(ctx, a.P); err != nil {
			t.Fatalf("request %d of the burst: %v", i+1, err)
		}
	}
	err := f.Svc.Admit(ctx, a.P)
	de := domain.AsError(err)
	if de == nil || de.Code != domain.CodeRateLimited || !de.Code.Retryable() || de.Details["retry_after_ms"] != int64(100) ||
		de.Details["requests_per_second"] != 10 || de.Details["burst"] != 5 {
		t.Fatalf("over the burst: %v %v", err, de.Details)
	}
	if err := f.Svc.Admit(ctx, f.Principal(other)); err != nil {
		t.Fatalf("another credential: %v", err)
	}
	f.Clock.Advance(99 * time.Millisecond)
	if err := f.Svc.Admit(ctx, a.P); domain.CodeOf(err) != domain.CodeRateLimited {
		t.Fatalf("before the refill: %v", err)
	}
	f.Clock.Advance(time.Millisecond)
	if err := f.Svc.Admit(ctx, a.P); err != nil {
		t.Fatalf("after 100 ms at 10/s: %v", err)
	}
	f.Clock.Advance(time.Hour) // a long pause refills the bucket to its burst, no more
	for i := range 5 {
		if err := f.Svc.Admit(ctx, a.P); err != nil {
			t.Fatalf("refilled burst, request %d: %v", i+1, err)
		}
	}
	if err := f.Svc.Admit(ctx, a.P); domain.CodeOf(err) != domain.CodeRateLimited {
		t.Fatalf("the bucket held more than its burst: %v", err)
	}
}

// TestRateLimitsSetByTheOwner: describe and the space publish the defaults; the owner's PATCH changes them
// for every credential of the space at once (invalid values are refused and change nothing).
func TestRateLimitsSetByTheOwner(t *testing.T) {
	f := domaintest.New(t, domaintest.MemBackend, nil)
	ctx := context.Background()
	sp := f.Space()
	a := f.Party(sp.SpaceID)
	d, err := f.Svc.Describe(ctx, a.P)
	if err != nil || d.RateLimits.RateLimits != domain.DefaultRateLimits() || d.RateLimits.AppliesTo != "credential" {
		t.Fatalf("describe: %+v %v", d.RateLimits, err)
	}
	if g, err := f.Svc.GetSpace(ctx, sp.SpaceID); err != nil || *g.RateLimits != domain.DefaultRateLimits() {
		t.Fatalf("space: %+v %v", g.RateLimits, err)
	}
	for _, bad := range []domain.RateLimits{{RequestsPerSecond: -1, Burst: 0}, {RequestsPerSecond: 0, Burst: -1},
		{RequestsPerSecond: domain.MaxRequestsPerSecond + 1, Burst: 1}, {RequestsPerSecond: 1, Burst: domain.MaxBurst + 1}, {RequestsPerSecond: -1, Burst: 5}} {
		l := bad
		if _, err := f.Svc.UpdateSpace(ctx, sp.SpaceID, domain.UpdateSpaceRequest{RateLimits: &l}); domain.CodeOf(err) != domain.CodeInvalidRequest {
			t.Fatalf("UpdateSpace(%+v) = %v", bad, err)
		}
	}
	if _, err := f.Svc.UpdateSpace(ctx, "sp_absent", domain.UpdateSpaceRequest{RateLimits: &domain.RateLimits{RequestsPerSecond: 1, Burst: 1}}); domain.CodeOf(err) != domain.CodeNotFound {
		t.Fatalf("unknown space: %v", err)
	}
	tight := domain.RateLimits{RequestsPerSecond: 1, Burst: 2}
	res, err := f.Svc.UpdateSpace(ctx, sp.SpaceID, domain.UpdateSpaceRequest{RequestID: "limits-1", RateLimits: &tight})
	if err != nil || *res.RateLimits != tight || res.SpaceID != sp.SpaceID {
		t.Fatalf("UpdateSpace: %+v %v", res, err)
	}
	if d, _ := f.Svc.Describe(ctx, a.P); d.RateLimits.RateLimits != tight {
		t.Fatalf("describe after the change: %+v", d.RateLimits)
	}
	for i := range 2 {
		if err := f.Svc.Admit(ctx, a.P); err != nil {
			t.Fatalf("request %d: %v", i+1, err)
		}
	}
	if err := f.Svc.Admit(ctx, a.P); domain.CodeOf(err) != domain.CodeRateLimited || domain.AsError(err).Details["retry_after_ms"] != int64(1000) {
		t.Fatalf("third request at 1/s burst 2: %v", err)
	}
	// Another space keeps the defaults.
	sp2 := f.Space()
	b := f.Party(sp2.SpaceID)
	if d, _ := f.Svc.Describe(ctx, b.P); d.RateLimits.RateLimits != domain.DefaultRateLimits() {
		t.Fatalf("another space: %+v", d.RateLimits)
	}
}

// TestRateLimitsReachOtherProcesses: a second service over the same store (another process, such as a Lambda
// instance) that has already read the space serves its cached record for at most 10 s, then the owner's change.
func TestRateLimitsReachOtherProcesses(t *testing.T) {
	f := domaintest.New(t, domaintest.MemBackend, nil)
	ctx := context.Background()
	sp := f.Space()
	a := f.Party(sp.SpaceID)
	other := f.OtherProcess()
	if d, err := other.Describe(ctx, a.P); err != nil || d.RateLimits.RateLimits != domain.DefaultRateLimits() {
		t.Fatalf("describe in the other process: %+v %v", d.RateLimits, err)
	}
	tight := domain.RateLimits{RequestsPerSecond: 1, Burst: 2}
	if _, err := f.Svc.UpdateSpace(ctx, sp.SpaceID, domain.UpdateSpaceRequest{RateLimits: &tight}); err != nil {
		t.Fatal(err)
	}
	f.Clock.Advance(10 * time.Second)
	if d, _ := f.Svc.Describe(ctx, a.P); d.RateLimits.RateLimits != tight {
		t.Fatalf("describe in the changing process: %+v", d.RateLimits)
	}
	if d, _ := other.Describe(ctx, a.P); d.RateLimits.RateLimits != tight {
		t.Fatalf("describe in the other process 10 s after the change: %+v", d.RateLimits)
	}
	// The owner's GET always reads the store.
	looser := domain.RateLimits{RequestsPerSecond: 50, Burst: 60}
	if _, err := f.Svc.UpdateSpace(ctx, sp.SpaceID, domain.UpdateSpaceRequest{RateLimits: &looser}); err != nil {
		t.Fatal(err)
	}
	if g, err := other.GetSpace(ctx, sp.SpaceID); err != nil || *g.RateLimits != looser {
		t.Fatalf("the owner's GET in the other process: %+v %v", g.RateLimits, err)
	}
}

// TestAdmitSeesOwnerChangeWithinSpaceCacheTTL: another process (a Lambda instance) that read the space
// before the owner changed its rate limits enforces the new limits 10 s after the change, like describe,
// also when it admitted a request shortly before (Admit reads the limits through the one space cache).
func TestAdmitSeesOwnerChangeWithinSpaceCacheTTL(t *testing.T) {
	f := domaintest.New(t, domaintest.MemBackend, nil)
	ctx := context.Background()
	sp := f.Space()
	a := f.Party(sp.SpaceID)
	other := f.OtherProcess()
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
	err := other.Admit(ctx, a.P)
	if de := domain.AsError(err); de == nil || de.Code != domain.CodeRateLimited || de.Details["burst"] != tight.Burst {
		t.Fatalf("10 s after the owner's change, the other process still admits under the old limits: %v", err)
	}
}
