package domaintest_test

import (
	"context"
	"testing"
	"time"

	"github.com/waypost/waypost/channel/livefeed"
	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/domain/domaintest"
	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/internal/platform"
	"github.com/waypost/waypost/store/faulty"
)

// capFixture is a service whose feed.waits poll the durable feed (as the MCP function's) and whose space
// holds at most n waits at once; its store can lose writes on demand.
func capFixture(t *testing.T, n int) (*domaintest.Fixture, *faulty.ItemStore) {
	t.Helper()
	var items *faulty.ItemStore
	f := domaintest.New(t, domaintest.Faulty(domaintest.MemBackend, &items, nil), func(c *domain.Config) {
		c.Clock = platform.Clock{}
		c.Watcher = livefeed.Poller{Interval: 20 * time.Millisecond}
		c.WaitsPerSpace = n
	})
	return f, items
}

// The per-space cap on concurrent feed.waits (issue 17): n waits of a space proceed, one more answers
// RATE_LIMITED at once without waiting, another space is not affected, and a slot is free again as soon as
// a wait ends.
func TestFeedWaitPerSpaceCap(t *testing.T) {
	f, _ := capFixture(t, 2)
	sp, other := f.Space(), f.Space()
	a, b := f.Party(sp.SpaceID), f.Party(sp.SpaceID)
	c := f.Party(other.SpaceID)
	ctx := context.Background()
	type result struct {
		page domain.Page
		err  error
	}
	done := make(chan result, 2)
	for range 2 {
		go func() {
			for { // refused only while the probe below holds a slot for an instant
				p, err := f.Svc.WaitFeed(ctx, b.P, domain.WaitRequest{ConsumerID: b.ConsumerID, TimeoutMS: 10000})
				if domain.CodeOf(err) != domain.CodeRateLimited {
					done <- result{p, err}
					return
				}
			}
		}()
	}
	// A third wait of the space is refused once both hold their slots (a quick one passes before then), and
	// a refused wait of 5 s answers at once.
	deadline := time.Now().Add(5 * time.Second)
	for {
		start := time.Now()
		_, err := f.Svc.WaitFeed(ctx, b.P, domain.WaitRequest{ConsumerID: b.ConsumerID, TimeoutMS: 0})
		if domain.CodeOf(err) == domain.CodeRateLimited {
			if _, err := f.Svc.WaitFeed(ctx, b.P, domain.WaitRequest{ConsumerID: b.ConsumerID, TimeoutMS: 5000}); domain.CodeOf(err) != domain.CodeRateLimited || time.Since(start) > 2*time.Second {
				t.Fatalf("a refused wait of 5 s: %v after %v", err, time.Since(start))
			}
			break
		}
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("third wait of the space: %v (never refused)", err)
		}
	}
	// Another space has slots of its own.
	if _, err := f.Svc.WaitFeed(ctx, c.P, domain.WaitRequest{ConsumerID: c.ConsumerID, TimeoutMS: 0}); err != nil {
		t.Fatalf("a wait of another space: %v", err)
	}
	// A commit ends both waits; their slots are free again.
	f.Send(a.P, "wake", b.ActorID)
	for range 2 {
		select {
		case r := <-done:
			if r.err != nil || len(r.page.Items) != 1 {
				t.Fatalf("a held wait: %+v %v", r.page, r.err)
			}
		case <-time.After(8 * time.Second):
			t.Fatal("a held wait did not wake on the commit")
		}
	}
	if _, err := f.Svc.WaitFeed(ctx, b.P, domain.WaitRequest{ConsumerID: b.ConsumerID, TimeoutMS: 0}); err != nil {
		t.Fatalf("a wait after the others ended: %v", err)
	}
}

// A slot whose holder never freed it (the process died) is taken over once its lease expired: the wait's
// deadline plus a slack, never earlier.
func TestFeedWaitSlotOfADeadHolder(t *testing.T) {
	clock := domaintest.NewClock()
	var items *faulty.ItemStore
	f := domaintest.New(t, domaintest.Faulty(domaintest.MemBackend, &items, nil), func(c *domain.Config) {
		c.Clock = clock
		c.Watcher = livefeed.Poller{Interval: 5 * time.Millisecond}
		c.WaitsPerSpace = 1
	})
	sp := f.Space()
	b := f.Party(sp.SpaceID)
	ctx := context.Background()
	// The release of the first wait is lost (a delete of its slot fails).
	items.FailCommit(faulty.CommitFault{Match: func(ops []port.Op) bool {
		return len(ops) == 1 && ops[0].Kind == port.OpDelete
	}})
	if _, err := f.Svc.WaitFeed(ctx, b.P, domain.WaitRequest{ConsumerID: b.ConsumerID, TimeoutMS: 0}); err != nil {
		t.Fatalf("first wait: %v", err)
	}
	if _, err := f.Svc.WaitFeed(ctx, b.P, domain.WaitRequest{ConsumerID: b.ConsumerID, TimeoutMS: 0}); domain.CodeOf(err) != domain.CodeRateLimited {
		t.Fatalf("a wait while the dead holder's lease runs: %v", err)
	}
	clock.Advance(29 * time.Second)
	if _, err := f.Svc.WaitFeed(ctx, b.P, domain.WaitRequest{ConsumerID: b.ConsumerID, TimeoutMS: 0}); domain.CodeOf(err) != domain.CodeRateLimited {
		t.Fatalf("a wait just before the lease expires: %v", err)
	}
	clock.Advance(2 * time.Second)
	if _, err := f.Svc.WaitFeed(ctx, b.P, domain.WaitRequest{ConsumerID: b.ConsumerID, TimeoutMS: 0}); err != nil {
		t.Fatalf("a wait after the lease expired: %v", err)
	}
}
