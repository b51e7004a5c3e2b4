package domaintest_test

import (
	"context"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/waypost/waypost/channel"
	"github.com/waypost/waypost/channel/livefeed"
	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/domain/domaintest"
	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/internal/platform"
)

// hubs is one hub per space, created on first use.
type hubs struct {
	mu     sync.Mutex
	limits channel.Limits
	m      map[string]*channel.Hub
}

func (h *hubs) HubFor(space string) *channel.Hub {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil {
		h.m = map[string]*channel.Hub{}
	}
	if h.m[space] == nil {
		h.m[space] = channel.NewHub(h.limits)
	}
	return h.m[space]
}

// dropNotifier loses every announcement.
type dropNotifier struct{}

func (dropNotifier) Notify(context.Context, []port.Published) {}

func liveFixture(t *testing.T, limits channel.Limits, lose bool) *domaintest.Fixture {
	feed := livefeed.New(&hubs{limits: limits}, nil)
	return domaintest.New(t, domaintest.MemBackend, func(c *domain.Config) {
		c.Clock = platform.Clock{} // feed.wait measures real time
		c.InlineBodyMax = 1 << 16  // one commit per send (the embedded path)
		c.Watcher, c.Notifier = feed, feed
		if lose {
			c.Notifier = dropNotifier{}
		}
	})
}

func TestFeedWaitReturnsBacklogAtOnce(t *testing.T) {
	f := liveFixture(t, channel.Limits{}, false)
	sp := f.Space()
	a, b := f.Party(sp.SpaceID), f.Party(sp.SpaceID)
	f.Send(a.P, "one", b.ActorID)
	page, err := f.Svc.WaitFeed(context.Background(), b.P, domain.WaitRequest{ConsumerID: b.ConsumerID, TimeoutMS: 5000})
	if err != nil || len(page.Items) != 1 {
		t.Fatalf("wait: %+v %v", page, err)
	}
}

func TestFeedWaitWakesOnCommit(t *testing.T) {
	f := liveFixture(t, channel.Limits{}, false)
	if took := waitForLateSend(t, f, 20000, "late"); took > 15*time.Second {
		t.Fatalf("woke only at the timeout: the announcement did not wake the waiter")
	}
}

// waitForLateSend has B wait for its feed (timeoutMS) while A sends it text 100 ms later, checks that the
// wait returned that one item and returns how long it took.
func waitForLateSend(t *testing.T, f *domaintest.Fixture, timeoutMS int, text string) time.Duration {
	t.Helper()
	sp := f.Space()
	a, b := f.Party(sp.SpaceID), f.Party(sp.SpaceID)
	go func() {
		time.Sleep(100 * time.Millisecond)
		f.Send(a.P, text, b.ActorID)
	}()
	start := time.Now()
	page, err := f.Svc.WaitFeed(context.Background(), b.P, domain.WaitRequest{ConsumerID: b.ConsumerID, TimeoutMS: timeoutMS})
	if err != nil || len(page.Items) != 1 {
		t.Fatalf("wait: %+v %v", page, err)
	}
	return time.Since(start)
}

func TestFeedWaitTimesOutEmptyAndSkipsInvisible(t *testing.T) {
	f := liveFixture(t, channel.Limits{}, false)
	sp := f.Space()
	a, b, c := f.Party(sp.SpaceID), f.Party(sp.SpaceID), f.Party(sp.SpaceID)
	f.Send(a.P, "for c", c.ActorID) // invisible to b
	start := time.Now()
	page, err := f.Svc.WaitFeed(context.Background(), b.P, domain.WaitRequest{ConsumerID: b.ConsumerID, TimeoutMS: 200})
	if err != nil || len(page.Items) != 0 || page.NextCursor == "" {
		t.Fatalf("wait: %+v %v", page, err)
	}
	if time.Since(start) < 190*time.Millisecond {
		t.Fatalf("returned before the timeout")
	}
	// The cursor moved past the invisible item: a send to b now is the next item.
	f.Send(a.P, "for b", b.ActorID)
	page, err = f.Svc.WaitFeed(context.Background(), b.P, domain.WaitRequest{ConsumerID: b.ConsumerID, Cursor: &page.NextCursor, TimeoutMS: 0})
	if err != nil || len(page.Items) != 1 || page.Items[0].VisibleSeq != "2" {
		t.Fatalf("after: %+v %v", page, err)
	}
}

func TestFeedWaitRejectsBadTimeout(t *testing.T) {
	f := liveFixture(t, channel.Limits{}, false)
	sp := f.Space()
	b := f.Party(sp.SpaceID)
	for ms, want := range map[int]domain.Code{-1: domain.CodeInvalidRequest, f.Svc.Limits().FeedWaitMaxMS + 1: domain.CodeResourceLimit} {
		_, err := f.Svc.WaitFeed(context.Background(), b.P, domain.WaitRequest{ConsumerID: b.ConsumerID, TimeoutMS: ms})
		if domain.CodeOf(err) != want {
			t.Fatalf("timeout %d: %v, want %s", ms, err, want)
		}
	}
}

func TestFeedWaitUnsupportedWithoutWatcher(t *testing.T) {
	f := domaintest.New(t, domaintest.MemBackend, nil)
	sp := f.Space()
	b := f.Party(sp.SpaceID)
	_, err := f.Svc.WaitFeed(context.Background(), b.P, domain.WaitRequest{ConsumerID: b.ConsumerID})
	if domain.CodeOf(err) != domain.CodeUnsupported {
		t.Fatalf("want UNSUPPORTED, got %v", err)
	}
}

// TestFeedWaitReplayWindow is the channel spec's conformance example 9 over the real feed: a writer commits
// (and announces) inside the waiter's subscribe/read window, over many seeds; the waiter's output holds every
// visible_seq exactly once, in order. Lost announcements and backlog eviction (tiny backlog limit) must not
// change that.
func TestFeedWaitReplayWindow(t *testing.T) {
	for _, tc := range []struct {
		name   string
		limits channel.Limits
		lose   bool
	}{
		{"announced", channel.Limits{}, false},
		{"evicted", channel.Limits{MaxBacklogBytes: 64}, false},
		{"lost", channel.Limits{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for seed := uint64(1); seed <= 10; seed++ {
				replayWindow(t, seed, tc.limits, tc.lose)
			}
		})
	}
}

func replayWindow(t *testing.T, seed uint64, limits channel.Limits, lose bool) {
	t.Helper()
	f := liveFixture(t, limits, lose)
	sp := f.Space()
	a, b := f.Party(sp.SpaceID), f.Party(sp.SpaceID)
	rng := rand.New(rand.NewPCG(seed, 7))   // the waiter's choices
	wrng := rand.New(rand.NewPCG(seed, 11)) // the writer's schedule
	const n = 20
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < n; i++ {
			if wrng.IntN(3) == 0 {
				time.Sleep(time.Duration(wrng.IntN(2000)) * time.Microsecond)
			}
			f.Send(a.P, "m"+strconv.Itoa(i), b.ActorID)
		}
	}()
	var got []string
	var cursor *string
	deadline := time.Now().Add(30 * time.Second)
	for len(got) < n && time.Now().Before(deadline) {
		timeout := 50
		if lose {
			timeout = 5 // announcements are lost: only the durable reads deliver
		}
		page, err := f.Svc.WaitFeed(context.Background(), b.P, domain.WaitRequest{ConsumerID: b.ConsumerID, Cursor: cursor, TimeoutMS: timeout, Limit: 1 + rng.IntN(5)})
		if err != nil {
			t.Fatalf("seed %d: wait: %v", seed, err)
		}
		for _, it := range page.Items {
			got = append(got, it.VisibleSeq)
		}
		c := page.NextCursor
		cursor = &c
	}
	<-done
	if len(got) != n {
		t.Fatalf("seed %d: got %d items, want %d: %v", seed, len(got), n, got)
	}
	for i, vs := range got {
		if vs != strconv.Itoa(i+1) {
			t.Fatalf("seed %d: item %d has visible_seq %s: %v", seed, i, vs, got)
		}
	}
}
