package channel_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waypost/waypost/channel"
)

func TestUnsubscribeIsIdempotentAndEnds(t *testing.T) {
	hub, sc := newScope(t)
	h := mustSubscribe(t, sc, "c")
	h2 := mustSubscribe(t, sc, "c")
	if n := mustPublish(t, hub, "c", "queued"); n != 2 {
		t.Fatalf("Publish = %d, want 2", n)
	}
	blocked := make(chan result, 1)
	go func() {
		st, text, _ := sc.Wait(context.Background(), h2, time.Minute)
		blocked <- result{st, text}
	}()
	// Drain h2's copy of "queued" happens in the goroutine; unsubscribe h.
	for range 3 {
		if err := sc.Unsubscribe(h); err != nil {
			t.Fatalf("Unsubscribe: %v", err)
		}
	}
	want(t, wait(t, sc, h, 0), channel.StatusEnded, channel.ReasonUnsubscribed) // queue dropped
	want(t, wait(t, sc, h, time.Second), channel.StatusEnded, channel.ReasonUnsubscribed)
	want(t, recv(t, blocked), channel.StatusMessage, "queued")
	if c := mustCount(t, hub, "c"); c != 1 {
		t.Fatalf("Count = %d, want 1", c)
	}
	// A waiter blocked on a handle that is unsubscribed wakes with status 2.
	w := asyncWait(sc, h2, time.Minute)
	time.Sleep(2 * time.Millisecond)
	if err := sc.Unsubscribe(h2); err != nil {
		t.Fatal(err)
	}
	want(t, recv(t, w), channel.StatusEnded, channel.ReasonUnsubscribed)
	if c := mustCount(t, hub, "c"); c != 0 {
		t.Fatalf("Count = %d, want 0", c)
	}
	if n := mustPublish(t, hub, "c", "x"); n != 0 {
		t.Fatalf("Publish = %d, want 0", n)
	}
}

func TestScopeEndCancelsLeftoverSubscriptions(t *testing.T) {
	hub := channel.NewHub(channel.Limits{})
	sc := hub.NewScope(context.Background())
	h1 := mustSubscribe(t, sc, "a")
	h2 := mustSubscribe(t, sc, "b")
	other := addScope(t, hub)
	ho := mustSubscribe(t, other, "a")
	mustPublish(t, hub, "a", "m")
	w := asyncWait(sc, h2, time.Minute)
	time.Sleep(2 * time.Millisecond)

	sc.End()
	sc.End() // idempotent
	want(t, recv(t, w), channel.StatusEnded, channel.ReasonScopeEnded)
	want(t, wait(t, sc, h1, 0), channel.StatusEnded, channel.ReasonScopeEnded) // queue dropped
	if err := sc.Unsubscribe(h1); err != nil {
		t.Fatalf("Unsubscribe after End: %v", err)
	}
	want(t, wait(t, sc, h1, 0), channel.StatusEnded, channel.ReasonScopeEnded)
	if c := mustCount(t, hub, "a"); c != 1 {
		t.Fatalf("Count(a) = %d, want 1 (the other scope)", c)
	}
	if c := mustCount(t, hub, "b"); c != 0 {
		t.Fatalf("Count(b) = %d, want 0", c)
	}
	if _, err := sc.Subscribe("a"); !errors.Is(err, channel.ErrScopeEnded) {
		t.Fatalf("Subscribe after End: %v, want ErrScopeEnded", err)
	}
	want(t, wait(t, other, ho, 0), channel.StatusMessage, "m")
}

func TestScopeEndsWithItsContext(t *testing.T) {
	hub := channel.NewHub(channel.Limits{})
	ctx, cancel := context.WithCancel(context.Background())
	sc := hub.NewScope(ctx)
	h := mustSubscribe(t, sc, "c")
	w := asyncWait(sc, h, time.Minute)
	cancel()
	want(t, recv(t, w), channel.StatusEnded, channel.ReasonScopeEnded)
	if c := mustCount(t, hub, "c"); c != 0 {
		t.Fatalf("Count = %d after the scope's context ended", c)
	}
	if _, err := sc.Subscribe("c"); !errors.Is(err, channel.ErrScopeEnded) {
		t.Fatalf("Subscribe: %v, want ErrScopeEnded", err)
	}

	// A scope whose context is already done ends at once.
	done, cancelDone := context.WithCancel(context.Background())
	cancelDone()
	sc3 := hub.NewScope(done)
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := sc3.Subscribe("c")
		if errors.Is(err, channel.ErrScopeEnded) {
			break
		}
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("scope with a done context still subscribes: %v", err)
		}
		time.Sleep(time.Millisecond)
	}
	if c := mustCount(t, hub, "c"); c != 0 {
		t.Fatalf("Count = %d after the scope with a done context ended", c)
	}

	// A scope ended explicitly no longer reacts to its context.
	ctx2, cancel2 := context.WithCancel(context.Background())
	sc2 := hub.NewScope(ctx2)
	sc2.End()
	cancel2()
}

func TestWaitReturnsWhenContextDone(t *testing.T) {
	hub, sc := newScope(t)
	h := mustSubscribe(t, sc, "c")

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, _, err := sc.Wait(ctx, h, time.Hour)
		errc <- err
	}()
	time.Sleep(2 * time.Millisecond)
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Wait: %v, want context.Canceled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Wait ignored its context")
	}

	// An already-done context is reported first and consumes nothing.
	mustPublish(t, hub, "c", "kept")
	if _, _, err := sc.Wait(ctx, h, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait(done ctx): %v, want context.Canceled", err)
	}
	dctx, dcancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer dcancel()
	<-dctx.Done()
	if _, _, err := sc.Wait(dctx, h, time.Second); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait(expired ctx): %v, want DeadlineExceeded", err)
	}
	want(t, wait(t, sc, h, 0), channel.StatusMessage, "kept")
	// The subscription is still live.
	if c := mustCount(t, hub, "c"); c != 1 {
		t.Fatalf("Count = %d, want 1", c)
	}
}

// A scope blocked in Wait must not block any other scope's operations.
func TestWaitDoesNotBlockOtherScopes(t *testing.T) {
	hub, a := newScope(t)
	ha := mustSubscribe(t, a, "quiet")
	blocked := asyncWait(a, ha, 20*time.Second)
	time.Sleep(5 * time.Millisecond)

	b := hub.NewScope(context.Background())
	hb := mustSubscribe(t, b, "busy")
	mustSubscribe(t, b, "quiet")
	for i := range 100 {
		mustPublish(t, hub, "busy", strconv.Itoa(i))
		want(t, wait(t, b, hb, time.Second), channel.StatusMessage, strconv.Itoa(i))
	}
	mustCount(t, hub, "quiet")
	if _, err := hub.Close("busy", "done"); err != nil {
		t.Fatal(err)
	}
	b.End()
	select {
	case r := <-blocked:
		t.Fatalf("A's wait returned %v before B finished; B's operations must not need it", r)
	default:
	}
	mustPublish(t, hub, "quiet", "wake")
	want(t, recv(t, blocked), channel.StatusMessage, "wake")
}

// Several goroutines waiting on one handle share its messages without losing
// any.
func TestConcurrentWaitersOnOneHandle(t *testing.T) {
	hub, sc := newScope(t)
	h := mustSubscribe(t, sc, "c")
	const waiters, msgs = 4, 2000
	got := make(chan string, msgs)
	var wg sync.WaitGroup
	for range waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				st, text, err := sc.Wait(context.Background(), h, 10*time.Second)
				if err != nil || st != channel.StatusMessage {
					return
				}
				got <- text
			}
		}()
	}
	for i := range msgs {
		mustPublish(t, hub, "c", strconv.Itoa(i))
	}
	seen := make(map[string]bool)
	for range msgs {
		select {
		case m := <-got:
			if seen[m] {
				t.Fatalf("message %s received twice", m)
			}
			seen[m] = true
		case <-time.After(30 * time.Second):
			t.Fatalf("only %d of %d messages received", len(seen), msgs)
		}
	}
	if _, err := hub.Close("c", "end"); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
}

// TestConcurrentScopes runs publisher and subscriber scopes in parallel (run
// it with -race). Every subscriber subscribes before the publishers start,
// so it must receive every message, in each publisher's order; the sum of
// the publishers' delivered counts must equal the messages received.
func TestConcurrentScopes(t *testing.T) {
	const (
		channels    = 3
		subsPerChan = 5
		publishers  = 4
		perPub      = 300
	)
	hub := channel.NewHub(channel.Limits{})
	type tally struct {
		received int
		err      error
	}
	ready := make(chan string, channels*subsPerChan)
	results := make(chan tally, channels*subsPerChan)
	var subWG sync.WaitGroup
	for c := range channels {
		name := fmt.Sprintf("c%d", c)
		for range subsPerChan {
			subWG.Add(1)
			go func() {
				defer subWG.Done()
				sc := addScope(t, hub)
				h, err := sc.Subscribe(name)
				if err != nil {
					results <- tally{err: err}
					return
				}
				ready <- h
				next := make([]int, publishers)
				n := 0
				for {
					st, text, err := sc.Wait(context.Background(), h, 20*time.Second)
					if err != nil {
						results <- tally{n, err}
						return
					}
					switch st {
					case channel.StatusTimeout:
						results <- tally{n, fmt.Errorf("%s: timeout after %d messages", name, n)}
						return
					case channel.StatusEnded:
						if text != "done" {
							err = fmt.Errorf("%s: ended %q", name, text)
						}
						for p, k := range next {
							if k != perPub && err == nil {
								err = fmt.Errorf("%s: publisher %d: got %d of %d", name, p, k, perPub)
							}
						}
						results <- tally{n, err}
						return
					}
					var p, k int
					if _, err := fmt.Sscanf(text, "%d/%d", &p, &k); err != nil {
						results <- tally{n, fmt.Errorf("bad message %q", text)}
						return
					}
					if k != next[p] {
						results <- tally{n, fmt.Errorf("%s: publisher %d: got #%d, want #%d", name, p, k, next[p])}
						return
					}
					next[p]++
					n++
				}
			}()
		}
	}
	for range channels * subsPerChan {
		<-ready
	}
	var delivered [publishers]int
	var pubWG sync.WaitGroup
	for p := range publishers {
		pubWG.Add(1)
		go func() {
			defer pubWG.Done()
			for k := range perPub {
				// Each message goes to every channel so order can be
				// checked per publisher on every subscription.
				for c := range channels {
					n, err := hub.Publish(fmt.Sprintf("c%d", c), fmt.Sprintf("%d/%d", p, k))
					if err != nil {
						t.Error(err)
						return
					}
					delivered[p] += n
				}
			}
		}()
	}
	pubWG.Wait()
	for c := range channels {
		if n, err := hub.Close(fmt.Sprintf("c%d", c), "done"); err != nil || n != subsPerChan {
			t.Fatalf("Close = %d, %v; want %d", n, err, subsPerChan)
		}
	}
	subWG.Wait()
	close(results)
	received := 0
	for r := range results {
		if r.err != nil {
			t.Error(r.err)
		}
		received += r.received
	}
	sum := 0
	for _, d := range delivered {
		sum += d
	}
	wantTotal := channels * subsPerChan * publishers * perPub
	if sum != wantTotal || received != wantTotal {
		t.Fatalf("delivered %d, received %d, want %d", sum, received, wantTotal)
	}
}

// TestConcurrentChurn mixes subscribe, unsubscribe, close, publish, count and
// scope ends from many goroutines, with a small backlog so evictions happen,
// and checks the hub's invariants afterwards: the race detector checks the
// locking, and every Count returns to 0.
func TestConcurrentChurn(t *testing.T) {
	hub := channel.NewHub(channel.Limits{MaxBacklogBytes: 64, MaxSubscriptionsPerChannel: 8, MaxChannels: 4})
	names := []string{"a", "b", "c", "d", "e"}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 400 {
				name := names[(g+i)%len(names)]
				switch i % 7 {
				case 0, 1:
					sc := hub.NewScope(context.Background())
					h, err := sc.Subscribe(name)
					if err == nil {
						_, _, _ = sc.Wait(context.Background(), h, 0)
						if i%2 == 0 {
							_ = sc.Unsubscribe(h)
						}
					} else if !errors.Is(err, channel.ErrTooManyChannels) && !errors.Is(err, channel.ErrTooManySubscriptions) {
						t.Error(err)
					}
					sc.End()
				case 2, 3, 4:
					if _, err := hub.Publish(name, strings.Repeat("x", i%40)); err != nil {
						t.Error(err)
					}
				case 5:
					if _, err := hub.Close(name, "churn"); err != nil {
						t.Error(err)
					}
				case 6:
					if n, err := hub.Count(name); err != nil || n < 0 || n > 8 {
						t.Errorf("Count = %d, %v", n, err)
					}
				}
			}
		}()
	}
	wg.Wait()
	for _, name := range names {
		if c := mustCount(t, hub, name); c != 0 {
			t.Errorf("Count(%s) = %d after every scope ended", name, c)
		}
	}
	// All channel slots are free again.
	sc := addScope(t, hub)
	for _, name := range names[:4] {
		mustSubscribe(t, sc, name)
	}
}
