package domaintest_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/waypost/waypost/channel/livefeed"
	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/domain/domaintest"
	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/internal/platform"
	"github.com/waypost/waypost/store/mem"
)

// heldHead is a store whose visible head can be held at a value, as a lower slot still being committed (or
// left by a writer that died) holds it on DynamoDB.
type heldHead struct {
	port.ItemStore
	mu   sync.Mutex
	held bool
	at   uint64
}

func (s *heldHead) hold(at uint64) { s.mu.Lock(); s.held, s.at = true, at; s.mu.Unlock() }
func (s *heldHead) release()       { s.mu.Lock(); s.held = false; s.mu.Unlock() }

func (s *heldHead) Head(ctx context.Context, seq port.Sequence) (uint64, error) {
	h, err := s.ItemStore.Head(ctx, seq)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held && h > s.at {
		h = s.at
	}
	return h, err
}

func gapFixture(t *testing.T, st port.ItemStore, watcher func(port.FeedWatcher) port.FeedWatcher, lose bool) *domaintest.Fixture {
	feed := livefeed.New(&hubs{}, nil)
	return domaintest.New(t, func(t testing.TB) domaintest.Backend {
		return domaintest.Backend{Store: st, Blobs: domaintest.TempBlobs(t)}
	}, func(c *domain.Config) {
		c.Clock = platform.Clock{}
		c.InlineBodyMax = 1 << 16
		c.Watcher, c.Notifier = watcher(feed), feed
		if lose {
			c.Notifier = dropNotifier{}
		}
	})
}

// TestFeedWaitRereadsWhileAnnouncedItemAboveHead: an item is announced while the head is held below it (a
// lower slot unresolved). The waiter must not return it past the head, nor sleep until its timeout: it
// re-reads, and returns the item once the head passes it, without a further announcement.
func TestFeedWaitRereadsWhileAnnouncedItemAboveHead(t *testing.T) {
	st := &heldHead{ItemStore: mem.New()}
	f := gapFixture(t, st, func(w port.FeedWatcher) port.FeedWatcher { return w }, false)
	sp := f.Space()
	a, b := f.Party(sp.SpaceID), f.Party(sp.SpaceID)
	st.hold(0)
	type result struct {
		page domain.Page
		err  error
		took time.Duration
	}
	out := make(chan result, 1)
	go func() {
		start := time.Now()
		page, err := f.Svc.WaitFeed(context.Background(), b.P, domain.WaitRequest{ConsumerID: b.ConsumerID, TimeoutMS: 60000})
		out <- result{page, err, time.Since(start)}
	}()
	time.Sleep(50 * time.Millisecond) // the waiter is waiting
	f.Send(a.P, "above the head", b.ActorID)
	time.Sleep(300 * time.Millisecond) // announced, but held above the head
	select {
	case r := <-out:
		t.Fatalf("returned %+v (%v) while the item was above the head", r.page, r.err)
	default:
	}
	st.release()
	r := <-out
	if r.err != nil || len(r.page.Items) != 1 {
		t.Fatalf("wait: %+v %v", r.page, r.err)
	}
	if r.took > 30*time.Second {
		t.Fatalf("returned after %v: only at the timeout, not on a re-read", r.took)
	}
}

// TestFeedWaitFallsBackToDurableFeed: when announcements are lost (the committers' circuit breaker open),
// a waiter over livefeed.Fallback still returns a new item within the fallback interval, not at its
// timeout.
func TestFeedWaitFallsBackToDurableFeed(t *testing.T) {
	f := gapFixture(t, mem.New(), func(w port.FeedWatcher) port.FeedWatcher {
		return livefeed.Fallback{Watcher: w, Interval: 100 * time.Millisecond}
	}, true)
	if took := waitForLateSend(t, f, 60000, "not announced"); took > 30*time.Second {
		t.Fatalf("returned after %v: only at the timeout", took)
	}
}
