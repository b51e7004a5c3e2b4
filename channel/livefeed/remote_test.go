package livefeed_test

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/waypost/waypost/channel/livefeed"
	"github.com/waypost/waypost/domain/port"
)

// fakeAPI is a channel service: Publish fails with err, or blocks until its context ends when block is set.
type fakeAPI struct {
	mu        sync.Mutex
	err       error
	block     bool
	started   chan struct{} // receives once per call when not nil
	calls     int
	deadlines []time.Duration // each call's deadline, from the start of the call
}

func (f *fakeAPI) Publish(ctx context.Context, _, _, _ string) (int, error) {
	f.mu.Lock()
	f.calls++
	d, _ := ctx.Deadline()
	f.deadlines = append(f.deadlines, time.Until(d))
	err, block, started := f.err, f.block, f.started
	f.mu.Unlock()
	if started != nil {
		started <- struct{}{}
	}
	if block {
		<-ctx.Done()
		return 0, ctx.Err()
	}
	return 1, err
}

func (f *fakeAPI) Close(context.Context, string, string, string) (int, error) { return 0, nil }
func (f *fakeAPI) Count(context.Context, string, string) (int, error)         { return 0, nil }

func (f *fakeAPI) set(err error, block bool) {
	f.mu.Lock()
	f.err, f.block = err, block
	f.mu.Unlock()
}

func (f *fakeAPI) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

var three = []port.Published{{SpaceID: "sp", VisibleSeq: 1, ItemID: "a"}, {SpaceID: "sp", VisibleSeq: 2, ItemID: "b"}, {SpaceID: "sp", VisibleSeq: 3, ItemID: "c"}}

// TestRemoteBudget: one Notify gives all its announcements one deadline, 50 ms after it starts, so a slow
// channel service holds a commit no longer than that; after the first failure the rest are not tried.
func TestRemoteBudget(t *testing.T) {
	api := &fakeAPI{block: true}
	r := livefeed.NewRemote(api, nil)
	r.Notify(context.Background(), three)
	if api.callCount() != 1 {
		t.Fatalf("%d calls; the first one timed out, so the others must not be made", api.callCount())
	}
	if d := api.deadlines[0]; d <= 0 || d > livefeed.DefaultBudget {
		t.Fatalf("the announcement's deadline was %v after it started, want within %v", d, livefeed.DefaultBudget)
	}
	// A healthy service gets every announcement under the same budget.
	api2 := &fakeAPI{}
	livefeed.NewRemote(api2, nil).Notify(context.Background(), three)
	if api2.callCount() != 3 {
		t.Fatalf("%d calls, want 3", api2.callCount())
	}
	for i, d := range api2.deadlines {
		if d > livefeed.DefaultBudget {
			t.Fatalf("call %d: deadline %v away", i, d)
		}
	}
}

// TestRemoteCircuitBreaker: after a failure no announcement is attempted for the back-off (1 s, doubling
// per failure in a row up to 30 s, ±20%); then one Notify tries, and a success closes the breaker.
func TestRemoteCircuitBreaker(t *testing.T) {
	c := &clock{now: time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)}
	api := &fakeAPI{err: errors.New("503")}
	r := livefeed.NewRemoteWith(api, nil, livefeed.RemoteOptions{Now: c.Now})
	notify := func() int {
		before := api.callCount()
		r.Notify(context.Background(), three[:1])
		return api.callCount() - before
	}
	if notify() != 1 {
		t.Fatal("a closed breaker must try")
	}
	c.add(790 * time.Millisecond) // within 0.8 × 1 s
	if notify() != 0 {
		t.Fatal("tried during the first back-off")
	}
	c.add(410 * time.Millisecond) // past 1.2 × 1 s
	if notify() != 1 {
		t.Fatal("no try after the first back-off")
	}
	c.add(1590 * time.Millisecond) // within 0.8 × 2 s: the back-off doubled
	if notify() != 0 {
		t.Fatal("tried during the second back-off")
	}
	c.add(time.Second) // past 1.2 × 2 s
	for range 10 {     // failures in a row: the back-off stops growing at 30 s
		if notify() != 1 {
			t.Fatal("no try after a back-off")
		}
		c.add(36 * time.Second)
	}
	if notify() != 1 {
		t.Fatal("no try after 36 s: the back-off must stay within 1.2 × 30 s")
	}
	c.add(36 * time.Second)
	api.set(nil, false)
	if notify() != 1 {
		t.Fatal("no try after the back-off")
	}
	for range 3 { // closed: every Notify announces, without waiting
		if notify() != 1 {
			t.Fatal("a success must close the breaker")
		}
	}
}

// TestRemoteOneProbe: when the back-off ends, one Notify tries the service; others meanwhile skip.
func TestRemoteOneProbe(t *testing.T) {
	c := &clock{now: time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)}
	api := &fakeAPI{err: errors.New("down")}
	r := livefeed.NewRemoteWith(api, nil, livefeed.RemoteOptions{Now: c.Now, Budget: 300 * time.Millisecond})
	r.Notify(context.Background(), three[:1])
	c.add(2 * time.Second)
	api.mu.Lock()
	api.block, api.started = true, make(chan struct{}, 1)
	api.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Notify(ctx, three[:1]) }()
	<-api.started // the probe is in flight
	before := api.callCount()
	r.Notify(context.Background(), three[:1])
	if api.callCount() != before {
		t.Fatal("a second Notify tried while the probe was in flight")
	}
	cancel() // Notify detaches its calls from the caller's context: the probe ends at its budget only
	select {
	case <-done:
		t.Fatal("the probe ended with its caller's context")
	case <-time.After(20 * time.Millisecond):
	}
	<-done // at its budget
}

// blank is a watcher that never announces.
type blank struct{}

func (blank) Watch(context.Context, string) (port.Watch, error) { return blankWatch{}, nil }

type blankWatch struct{}

func (blankWatch) Next(ctx context.Context, timeout time.Duration) (port.Published, port.WatchStatus, error) {
	select {
	case <-ctx.Done():
	case <-time.After(timeout):
	}
	return port.Published{}, port.WatchTimeout, nil
}

func (blankWatch) Close() {}

// TestFallbackWakesWithoutAnnouncements: a watch that hears nothing for the interval says "something may
// have committed", so feed.wait re-reads the durable feed; a timeout within the interval is a timeout.
func TestFallbackWakesWithoutAnnouncements(t *testing.T) {
	w, err := livefeed.Fallback{Watcher: blank{}, Interval: 10 * time.Millisecond}.Watch(context.Background(), "sp")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	p, st, err := w.Next(context.Background(), time.Hour)
	if err != nil || st != port.WatchAnnounced || p.VisibleSeq != math.MaxUint64 {
		t.Fatalf("after the interval: %+v %v %v, want an announcement above any position", p, st, err)
	}
	if _, st, _ := w.Next(context.Background(), 5*time.Millisecond); st != port.WatchTimeout {
		t.Fatalf("a timeout within the interval: %v", st)
	}
}
