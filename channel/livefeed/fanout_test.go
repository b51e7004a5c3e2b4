package livefeed_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/waypost/waypost/channel"
	"github.com/waypost/waypost/channel/chanservice"
	"github.com/waypost/waypost/channel/livefeed"
	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/domain/port"
)

// oneHub serves one hub for every space.
type oneHub struct{ h *channel.Hub }

func (o oneHub) HubFor(string) *channel.Hub { return o.h }

func count(t *testing.T, h *channel.Hub) int {
	t.Helper()
	n, err := h.Count(livefeed.ChannelName)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestWaitersShareOneSubscription: far more waiters than the channel spec's 256 subscriptions per channel
// watch one space through one subscription; one announcement wakes each of them exactly once; the
// subscription ends with the last waiter, and no goroutine is left behind.
func TestWaitersShareOneSubscription(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	hub := channel.NewHub(channel.Limits{})
	feed := livefeed.New(oneHub{hub}, nil)
	ctx := context.Background()
	const n = 2000
	watches := make([]port.Watch, n)
	for i := range watches {
		w, err := feed.Watch(ctx, "sp_1")
		if err != nil {
			t.Fatalf("watch %d: %v", i, err)
		}
		watches[i] = w
	}
	if c := count(t, hub); c != 1 {
		t.Fatalf("%d channel subscriptions for %d waiters, want 1", c, n)
	}
	if got := feed.Waiters("sp_1"); got != n {
		t.Fatalf("Waiters = %d, want %d", got, n)
	}
	feed.Notify(ctx, []port.Published{{SpaceID: "sp_1", VisibleSeq: 7, ItemID: "it_7"}})
	var wg sync.WaitGroup
	errs := make(chan string, n)
	for _, w := range watches {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, st, err := w.Next(ctx, 10*time.Second)
			if err != nil || st != port.WatchAnnounced || p.VisibleSeq != 7 || p.ItemID != "it_7" {
				errs <- "first Next: " + fmt.Sprint(st) + " " + p.ItemID
				return
			}
			if _, st, _ := w.Next(ctx, 10*time.Millisecond); st != port.WatchTimeout { // exactly once
				errs <- "second Next: " + fmt.Sprint(st)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	for _, w := range watches {
		w.Close()
		w.Close() // idempotent
	}
	if c := count(t, hub); c != 0 {
		t.Fatalf("%d subscriptions after the last waiter left", c)
	}
	if got := feed.Waiters("sp_1"); got != 0 {
		t.Fatalf("Waiters = %d after all left", got)
	}
}

// TestWaiterKeepsTheHighestAnnouncement: announcements arriving while a waiter is away are coalesced into
// the highest one; another space's announcements never reach it.
func TestWaiterKeepsTheHighestAnnouncement(t *testing.T) {
	feed := livefeed.New(spaceHubs(t), nil)
	ctx := context.Background()
	w, err := feed.Watch(ctx, "sp_1")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	feed.Notify(ctx, []port.Published{{SpaceID: "sp_1", VisibleSeq: 3, ItemID: "it_3"}, {SpaceID: "sp_1", VisibleSeq: 5, ItemID: "it_5"},
		{SpaceID: "sp_1", VisibleSeq: 4, ItemID: "it_4"}, {SpaceID: "sp_2", VisibleSeq: 9, ItemID: "it_9"}})
	deadline := time.Now().Add(5 * time.Second)
	var last port.Published
	for last.VisibleSeq != 5 && time.Now().Before(deadline) {
		p, st, err := w.Next(ctx, time.Second)
		if err != nil || st != port.WatchAnnounced {
			t.Fatalf("Next: %v %v", st, err)
		}
		if p.VisibleSeq < last.VisibleSeq || p.SpaceID != "sp_1" {
			t.Fatalf("went back or crossed spaces: %+v after %+v", p, last)
		}
		last = p
	}
	if last.ItemID != "it_5" {
		t.Fatalf("last announcement %+v, want it_5", last)
	}
}

// TestWaitersBound: a space holds at most MaxWaitersPerSpace watches; the next is RATE_LIMITED with its
// figures, and a freed place can be taken again. Other spaces are not affected.
func TestWaitersBound(t *testing.T) {
	feed := livefeed.NewWithOptions(spaceHubs(t), nil, livefeed.Options{MaxWaitersPerSpace: 3})
	ctx := context.Background()
	var ws []port.Watch
	for range 3 {
		w, err := feed.Watch(ctx, "sp_1")
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
	}
	_, err := feed.Watch(ctx, "sp_1")
	de := domain.AsError(err)
	if de == nil || de.Code != domain.CodeRateLimited || de.Details["limit"] != "feed_wait_waiters_max" || de.Details["max"] != 3 {
		t.Fatalf("fourth watch: %v", err)
	}
	other, err := feed.Watch(ctx, "sp_2")
	if err != nil {
		t.Fatalf("another space: %v", err)
	}
	other.Close()
	ws[0].Close()
	w, err := feed.Watch(ctx, "sp_1")
	if err != nil {
		t.Fatalf("after a waiter left: %v", err)
	}
	w.Close()
	for _, w := range ws[1:] {
		w.Close()
	}
	if feed.MaxWaitersPerSpace() != 3 {
		t.Fatalf("MaxWaitersPerSpace = %d", feed.MaxWaitersPerSpace())
	}
	if def := livefeed.New(spaceHubs(t), nil).MaxWaitersPerSpace(); def != domain.DefaultLimits().FeedWaitWaitersMax || def < 10000 {
		t.Fatalf("default bound %d", def)
	}
}

// TestSubscriptionEndEndsEveryWaiter: when the space's subscription ends (the channel closed, or evicted
// for backlog), every waiter is told so (it then re-reads the durable feed and watches again), and the
// next watch subscribes afresh.
func TestSubscriptionEndEndsEveryWaiter(t *testing.T) {
	hub := channel.NewHub(channel.Limits{})
	feed := livefeed.New(oneHub{hub}, nil)
	ctx := context.Background()
	a, _ := feed.Watch(ctx, "sp_1")
	b, _ := feed.Watch(ctx, "sp_1")
	if _, err := hub.Close(livefeed.ChannelName, "restart"); err != nil {
		t.Fatal(err)
	}
	for _, w := range []port.Watch{a, b} {
		if _, st, err := w.Next(ctx, 5*time.Second); err != nil || st != port.WatchEnded {
			t.Fatalf("after the channel closed: %v %v", st, err)
		}
		w.Close()
	}
	c, err := feed.Watch(ctx, "sp_1")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if n := count(t, hub); n != 1 {
		t.Fatalf("%d subscriptions after re-watching", n)
	}
	feed.Notify(ctx, []port.Published{{SpaceID: "sp_1", VisibleSeq: 1, ItemID: "it_1"}})
	if p, st, err := c.Next(ctx, 5*time.Second); err != nil || st != port.WatchAnnounced || p.VisibleSeq != 1 {
		t.Fatalf("new watch: %+v %v %v", p, st, err)
	}
}

// spaceHubs is one hub per space, created on first use: the channel service's, as the servers wire the
// live feed.
func spaceHubs(t *testing.T) *chanservice.Service {
	t.Helper()
	svc, err := chanservice.New(testSecret, channel.Limits{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return svc
}
