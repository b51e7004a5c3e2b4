package channel_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/waypost/waypost/channel"
)

var replaySeed = flag.Uint64("replay.seed", 0, "run TestConformance9_ReplayExactlyOnce for this seed only")

// durableLog stands for the durable store: append allocates a monotonic
// sequence number.
type durableLog struct {
	mu   sync.Mutex
	seqs []int
}

func (l *durableLog) append() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	seq := len(l.seqs) + 1
	l.seqs = append(l.seqs, seq)
	return seq
}

func (l *durableLog) head() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.seqs)
}

// history returns the sequence numbers in (after, head].
func (l *durableLog) history(after, head int) []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]int(nil), l.seqs[after:head]...)
}

// jitter yields or sleeps according to rng: the seeded schedule.
func jitter(rng *rand.Rand, slow bool) {
	switch r := rng.IntN(10); {
	case r < 4:
	case r < 8:
		runtime.Gosched()
	default:
		d := time.Duration(rng.IntN(50)) * time.Microsecond
		if slow {
			d *= 10
		}
		time.Sleep(d)
	}
}

// runReplay runs the specification's replay example once and returns how
// many evictions the reader handled, or the first violation.
func runReplay(seed uint64) (evictions int, err error) {
	rng := rand.New(rand.NewPCG(seed, 0))
	limits := channel.Limits{}
	slowReader := seed%3 == 0
	if slowReader {
		limits.MaxBacklogBytes = 6 + rng.IntN(10) // a few sequence numbers
	}
	hub := channel.NewHub(limits)
	total := 30 + rng.IntN(40)
	pre := rng.IntN(4)
	window := 1 + rng.IntN(3)
	const name = "feed"
	var log durableLog

	committedEarly := make(chan struct{}) // D committed an event it has not published yet
	subscribed := make(chan struct{})     // C subscribed
	windowFilled := make(chan struct{})   // D published events inside C's window
	var writerDone atomic.Bool
	abort := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // event 丁: append then publish
		defer wg.Done()
		wr := rand.New(rand.NewPCG(seed, 1))
		publish := func(seq int) {
			if _, err := hub.Publish(name, strconv.Itoa(seq)); err != nil {
				panic(err)
			}
		}
		appendAndPublish := func() {
			seq := log.append()
			jitter(wr, false)
			publish(seq)
			jitter(wr, false)
		}
		for range pre {
			appendAndPublish()
		}
		early := log.append()
		close(committedEarly)
		select {
		case <-subscribed:
		case <-abort:
			return
		}
		publish(early)
		for range window {
			appendAndPublish()
		}
		close(windowFilled)
		for log.head() < total {
			appendAndPublish()
		}
		writerDone.Store(true)
	}()
	defer wg.Wait()
	var abortOnce sync.Once
	defer abortOnce.Do(func() { close(abort) })

	// event 丙: subscribe, read head and history, then merge live messages.
	rr := rand.New(rand.NewPCG(seed, 2))
	sc := hub.NewScope(context.Background())
	defer sc.End()
	var out []int
	last := 0
	replay := func(head int) {
		for _, seq := range log.history(last, head) {
			out = append(out, seq)
			jitter(rr, slowReader)
		}
		if head > last {
			last = head
		}
	}
	<-committedEarly
	h, err := sc.Subscribe(name)
	if err != nil {
		return 0, err
	}
	close(subscribed)
	select {
	case <-windowFilled:
	case <-time.After(10 * time.Second):
		return 0, fmt.Errorf("writer stalled")
	}
	jitter(rr, false)
	replay(log.head())

	for last < total {
		st, text, err := sc.Wait(context.Background(), h, 100*time.Millisecond)
		if err != nil {
			return evictions, err
		}
		switch st {
		case channel.StatusMessage:
			seq, err := strconv.Atoi(text)
			if err != nil {
				return evictions, fmt.Errorf("bad message %q", text)
			}
			if seq > last { // ≤ head (or already forwarded): replayed before
				out = append(out, seq)
				last = seq
			}
			jitter(rr, slowReader)
		case channel.StatusTimeout:
			if writerDone.Load() {
				// Everything has been published; a final poll must find
				// the rest or the end.
				st, _, err := sc.Wait(context.Background(), h, 0)
				if err != nil {
					return evictions, err
				}
				if st == channel.StatusTimeout && last < total {
					return evictions, fmt.Errorf("lost messages: forwarded up to %d of %d", last, total)
				}
			}
		case channel.StatusEnded:
			if text != hub.Limits().BacklogReason() {
				return evictions, fmt.Errorf("unexpected end %q", text)
			}
			evictions++
			if err := sc.Unsubscribe(h); err != nil {
				return evictions, err
			}
			if h, err = sc.Subscribe(name); err != nil {
				return evictions, err
			}
			replay(log.head()) // continue from the last forwarded seq
		}
	}
	if err := sc.Unsubscribe(h); err != nil {
		return evictions, err
	}
	if len(out) != total {
		return evictions, fmt.Errorf("output has %d entries, want %d: %v", len(out), total, out)
	}
	for i, seq := range out {
		if seq != i+1 {
			return evictions, fmt.Errorf("output[%d] = %d, want %d: %v", i, seq, i+1, out)
		}
	}
	return evictions, nil
}
