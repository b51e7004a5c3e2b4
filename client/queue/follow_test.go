package queue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/waypost/waypost/client"
	"github.com/waypost/waypost/domain"
)

// liveFake is a fakeAPI whose feed grows while Follow runs, with a feed.wait that blocks until an item
// exists after the cursor or the timeout passes.
type liveFake struct {
	mu      sync.Mutex
	fake    *fakeAPI
	grew    chan struct{} // closed and replaced on every append
	waits   int
	waitErr error // returned by WaitFeed when set
	bogus   bool  // WaitFeed answers with an item that is not in the feed
	ackErr  func() error
}

func newLive(n int) *liveFake { return &liveFake{fake: newFake(n), grew: make(chan struct{})} }

func (l *liveFake) add(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for range n {
		i := len(l.fake.items) + 1
		l.fake.items = append(l.fake.items, domain.FeedItem{ItemID: fmt.Sprintf("it_%d", i), VisibleSeq: fmt.Sprint(i),
			ItemType: domain.ItemMessage, ResourceID: fmt.Sprintf("msg_%d", i)})
	}
	close(l.grew)
	l.grew = make(chan struct{})
}

func (l *liveFake) ReadInbox(ctx context.Context, req domain.ReadRequest) (domain.Page, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fake.ReadInbox(ctx, req)
}

func (l *liveFake) Ack(ctx context.Context, req domain.AckRequest) (domain.AckResult, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ackErr != nil {
		if err := l.ackErr(); err != nil {
			return domain.AckResult{}, err
		}
	}
	return l.fake.Ack(ctx, req)
}

func (l *liveFake) WaitFeed(ctx context.Context, req domain.WaitRequest) (domain.Page, error) {
	deadline := time.After(time.Duration(req.TimeoutMS) * time.Millisecond)
	for {
		l.mu.Lock()
		l.waits++
		if l.waitErr != nil {
			err := l.waitErr
			l.mu.Unlock()
			return domain.Page{}, err
		}
		pos := 0
		if req.Cursor != nil {
			fmt.Sscanf(*req.Cursor, "c%d", &pos)
		}
		if l.bogus {
			l.mu.Unlock()
			return domain.Page{Items: []domain.FeedItem{{ItemID: "it_bogus"}}, NextCursor: "c999"}, nil
		}
		if pos < len(l.fake.items) {
			p := domain.Page{Items: l.fake.items[pos : pos+1], NextCursor: fmt.Sprintf("c%d", pos+1), HasMore: pos+1 < len(l.fake.items)}
			l.mu.Unlock()
			return p, nil
		}
		grew := l.grew
		l.mu.Unlock()
		select {
		case <-grew:
		case <-deadline:
			return domain.Page{Items: []domain.FeedItem{}, NextCursor: fmt.Sprintf("c%d", pos)}, nil
		case <-ctx.Done():
			return domain.Page{}, ctx.Err()
		}
	}
}

// collector gathers what Follow hands over and signals when it has n item IDs.
type collector struct {
	mu   sync.Mutex
	ids  []string
	want int
	got  chan struct{}
}

func newCollector(want int) *collector { return &collector{want: want, got: make(chan struct{})} }

func (c *collector) handle(_ context.Context, items []domain.FeedItem) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, it := range items {
		c.ids = append(c.ids, it.ItemID)
	}
	if len(c.ids) >= c.want && c.want > 0 {
		c.want = 0
		close(c.got)
	}
	return nil
}

func (c *collector) list() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.ids)
}

func ids(from, to int) []string {
	var out []string
	for i := from; i <= to; i++ {
		out = append(out, fmt.Sprintf("it_%d", i))
	}
	return out
}

// runFollow runs Follow in the background and returns a stop function that waits for its result.
func runFollow(t *testing.T, q *Queue, w Waiter, opts FollowOptions, h func(context.Context, []domain.FeedItem) error) func() error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- q.Follow(ctx, w, opts, h) }()
	return func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Second):
			t.Fatal("Follow did not return within 10 s of its context ending")
			return nil
		}
	}
}

func waitFor(t *testing.T, c *collector, what string) {
	t.Helper()
	select {
	case <-c.got:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: only %v after 10 s", what, c.list())
	}
}

// stopAndWant stops a Follow and checks that c was handed exactly it_from..it_to, each once, in order.
func stopAndWant(t *testing.T, stop func() error, c *collector, from, to int) {
	t.Helper()
	if err := stop(); err != nil {
		t.Fatalf("Follow: %v", err)
	}
	if got, want := c.list(), ids(from, to); !slices.Equal(got, want) {
		t.Fatalf("delivered %v, want %v once each in order", got, want)
	}
}

func TestFollowDeliversBacklogThenLiveItemsOnce(t *testing.T) {
	api := newLive(5)
	q, path := openTest(t, api, WithAckBatch(2))
	c := newCollector(5)
	stop := runFollow(t, q, api, FollowOptions{Limit: 2, Wait: 5 * time.Second}, c.handle)
	waitFor(t, c, "backlog")
	c.mu.Lock()
	c.want, c.got = 8, make(chan struct{})
	c.mu.Unlock()
	api.add(3) // while Follow is parked in feed.wait
	waitFor(t, c, "live items")
	stopAndWant(t, stop, c, 1, 8)
	st, err := q.State()
	if err != nil {
		t.Fatal(err)
	}
	if st.Pending != 8 || st.OwedReceived != 0 || st.OwedCheckpoint || st.Cursor == nil || *st.Cursor != "c8" {
		t.Fatalf("queue state after Follow: %+v", st)
	}
	// Every item was acknowledged as received, with the checkpoint of its page.
	api.mu.Lock()
	acked := map[string]bool{}
	for _, a := range api.fake.acks {
		for _, e := range a.Items {
			if e.Stage != domain.StageReceived {
				t.Fatalf("ack stage %s", e.Stage)
			}
			acked[e.ItemID] = true
		}
	}
	api.mu.Unlock()
	if len(acked) != 8 {
		t.Fatalf("acknowledged %v", acked)
	}

	// A restart (the process died while following): nothing already in the queue is handed over again.
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	q2, err := Open(path, api, "con_b")
	if err != nil {
		t.Fatal(err)
	}
	defer q2.Close()
	c2 := newCollector(2)
	stop = runFollow(t, q2, api, FollowOptions{Wait: 5 * time.Second}, c2.handle)
	api.add(2)
	waitFor(t, c2, "after restart")
	stopAndWant(t, stop, c2, 9, 10)
}

// TestFollowIgnoresWakeUpItems checks that items come only from the durable read: an item that only
// feed.wait mentions is never handed over.
func TestFollowIgnoresWakeUpItems(t *testing.T) {
	api := newLive(2)
	api.bogus = true
	q, _ := openTest(t, api)
	c := newCollector(2)
	stop := runFollow(t, q, api, FollowOptions{Wait: time.Second}, c.handle)
	waitFor(t, c, "backlog")
	time.Sleep(100 * time.Millisecond) // several bogus wake-ups
	stopAndWant(t, stop, c, 1, 2)
}

func TestFollowPollsWithoutFeedWait(t *testing.T) {
	api := newLive(1)
	api.waitErr = &client.Error{Code: domain.CodeUnsupported, Message: "no live_feed"}
	q, _ := openTest(t, api)
	c := newCollector(3)
	stop := runFollow(t, q, api, FollowOptions{PollInterval: 20 * time.Millisecond}, c.handle)
	time.Sleep(50 * time.Millisecond)
	api.add(2)
	waitFor(t, c, "polling")
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	api.mu.Lock()
	waits := api.waits
	api.mu.Unlock()
	if waits != 1 {
		t.Fatalf("feed.wait was tried %d times after UNSUPPORTED, want once", waits)
	}
}

func TestFollowRetriesTransientFailuresAndStopsOnOthers(t *testing.T) {
	api := newLive(3)
	fails := 2
	api.ackErr = func() error {
		if fails > 0 {
			fails--
			return &client.TransportError{Method: "POST", Path: "/v0/inbox/ack", Err: errors.New("connection reset")}
		}
		return nil
	}
	q, _ := openTest(t, api)
	c := newCollector(3)
	var retries int
	var mu sync.Mutex
	stop := runFollow(t, q, api, FollowOptions{Wait: time.Second, MaxBackoff: 10 * time.Millisecond, OnRetry: func(error, time.Duration) {
		mu.Lock()
		retries++
		mu.Unlock()
	}}, c.handle)
	waitFor(t, c, "with failing acks")
	time.Sleep(50 * time.Millisecond)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	st, _ := q.State()
	mu.Lock()
	defer mu.Unlock()
	if retries == 0 || st.OwedReceived != 0 || !slices.Equal(c.list(), ids(1, 3)) {
		t.Fatalf("retries %d, state %+v, delivered %v", retries, st, c.list())
	}

	// A permanent failure stops Follow with that error.
	api2 := newLive(1)
	api2.waitErr = &client.Error{Code: domain.CodeUnauthenticated, Message: "revoked"}
	q2, _ := openTest(t, api2)
	err := q2.Follow(context.Background(), api2, FollowOptions{}, func(context.Context, []domain.FeedItem) error { return nil })
	if !client.IsCode(err, domain.CodeUnauthenticated) {
		t.Fatalf("Follow after a revoked token: %v", err)
	}
	// An error from the handler stops Follow; the items stay pending.
	api3 := newLive(2)
	q3, _ := openTest(t, api3)
	boom := errors.New("disk full")
	if err := q3.Follow(context.Background(), api3, FollowOptions{}, func(context.Context, []domain.FeedItem) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("Follow with a failing handler: %v", err)
	}
	if st, _ := q3.State(); st.Pending != 2 {
		t.Fatalf("pending after a handler failure: %+v", st)
	}
}
