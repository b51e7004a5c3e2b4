package domaintest_test

import (
	"context"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/waypost/waypost/channel"
	"github.com/waypost/waypost/channel/chanservice"
	"github.com/waypost/waypost/channel/livefeed"
	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/domain/domaintest"
	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/internal/platform"
	"github.com/waypost/waypost/store/faulty"
	"github.com/waypost/waypost/store/mem"
)

// dropNotifier loses every announcement.
type dropNotifier struct{}

func (dropNotifier) Notify(context.Context, []port.Published) {}

// liveFixture is a service over the in-memory store whose feed.waits are woken by the announcements of a
// live feed with limits (lose: every announcement is lost).
func liveFixture(t *testing.T, limits channel.Limits, lose bool) *domaintest.Fixture {
	return feedFixture(t, mem.New(), limits, nil, lose)
}

// feedFixture is liveFixture over st, with the live feed's watcher wrapped by watcher (nil: as it is).
func feedFixture(t *testing.T, st port.ItemStore, limits channel.Limits, watcher func(port.FeedWatcher) port.FeedWatcher, lose bool) *domaintest.Fixture {
	hubs, err := chanservice.New("domaintest-channel-secret", limits, nil) // one hub per space, as the servers wire it
	if err != nil {
		t.Fatal(err)
	}
	feed := livefeed.New(hubs, nil)
	var w port.FeedWatcher = feed
	if watcher != nil {
		w = watcher(feed)
	}
	return domaintest.New(t, func(t testing.TB) domaintest.Backend {
		return domaintest.Backend{Store: st, Blobs: domaintest.TempBlobs(t)}
	}, func(c *domain.Config) {
		c.Clock = platform.Clock{} // feed.wait measures real time
		c.InlineBodyMax = 1 << 16  // one commit per send (the embedded path)
		c.Watcher, c.Notifier = w, feed
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

// capFixture is a service on clock whose feed.waits poll the durable feed every interval (as the MCP
// function's) and whose space holds at most n waits at once; its store can fail writes on demand.
func capFixture(t *testing.T, clock port.Clock, interval time.Duration, n int) (*domaintest.Fixture, *faulty.ItemStore) {
	t.Helper()
	var items *faulty.ItemStore
	f := domaintest.New(t, domaintest.Faulty(domaintest.MemBackend, &items, nil), func(c *domain.Config) {
		c.Clock = clock
		c.Watcher = livefeed.Poller{Interval: interval}
		c.WaitsPerSpace = n
	})
	return f, items
}

// The per-space cap on concurrent feed.waits (issue 17): n waits of a space proceed, one more answers
// RATE_LIMITED at once without waiting, another space is not affected, and a slot is free again as soon as
// a wait ends.
func TestFeedWaitPerSpaceCap(t *testing.T) {
	f, _ := capFixture(t, platform.Clock{}, 20*time.Millisecond, 2)
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
	f, items := capFixture(t, clock, 5*time.Millisecond, 1)
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

// TestFeedWaitRereadsWhileAnnouncedItemAboveHead: an item is announced while the head is held below it (a
// lower slot unresolved). The waiter must not return it past the head, nor sleep until its timeout: it
// re-reads, and returns the item once the head passes it, without a further announcement.
func TestFeedWaitRereadsWhileAnnouncedItemAboveHead(t *testing.T) {
	st := &heldHead{ItemStore: mem.New()}
	f := feedFixture(t, st, channel.Limits{}, nil, false)
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
	f := feedFixture(t, mem.New(), channel.Limits{}, func(w port.FeedWatcher) port.FeedWatcher {
		return livefeed.Fallback{Watcher: w, Interval: 100 * time.Millisecond}
	}, true)
	if took := waitForLateSend(t, f, 60000, "not announced"); took > 30*time.Second {
		t.Fatalf("returned after %v: only at the timeout", took)
	}
}
