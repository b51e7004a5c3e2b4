package channel_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/waypost/waypost/channel"
)

// BenchmarkWakeLatency measures publish→wake latency: the time from just
// before Publish until each subscriber's blocked Wait has returned the
// message, over all subscribers and iterations. One iteration is one publish
// followed by every subscriber receiving it.
func BenchmarkWakeLatency(b *testing.B) {
	for _, subs := range []int{1, 256} {
		b.Run(fmt.Sprintf("subs=%d", subs), func(b *testing.B) { benchWake(b, subs) })
	}
}

func benchWake(b *testing.B, subs int) {
	hub := channel.NewHub(channel.Limits{})
	base := time.Now()
	var t0 atomic.Int64
	lat := make([][]int64, subs)
	var remaining atomic.Int64
	allArrived := make(chan struct{}, 1)
	done := subscribe(b, hub, subs, func(i int) {
		lat[i] = append(lat[i], time.Since(base).Nanoseconds()-t0.Load())
		if remaining.Add(-1) == 0 {
			allArrived <- struct{}{}
		}
	})
	b.ResetTimer()
	for range b.N {
		runtime.Gosched() // let the last receiver park again
		remaining.Store(int64(subs))
		t0.Store(time.Since(base).Nanoseconds())
		if n, err := hub.Publish("c", "tick"); err != nil || n != subs {
			b.Fatalf("Publish = %d, %v", n, err)
		}
		<-allArrived
	}
	b.StopTimer()
	if _, err := hub.Close("c", "done"); err != nil {
		b.Fatal(err)
	}
	done.Wait()
	all := slices.Concat(lat...)
	slices.Sort(all)
	if len(all) > 0 {
		b.ReportMetric(float64(all[len(all)/2]), "p50-ns")
		b.ReportMetric(float64(all[len(all)*99/100]), "p99-ns")
		b.ReportMetric(float64(all[len(all)-1]), "max-ns")
	}
}

// subscribe starts subs subscribers of channel "c", each on its own scope, calling received with its index
// (0 to subs-1) as each message comes back from Wait, until the channel ends. It returns once all are
// subscribed; the returned group is done when they have all stopped.
func subscribe(b *testing.B, hub *channel.Hub, subs int, received func(i int)) *sync.WaitGroup {
	var ready, done sync.WaitGroup
	for i := range subs {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			sc := hub.NewScope(context.Background())
			defer sc.End()
			h, err := sc.Subscribe("c")
			ready.Done()
			if err != nil {
				b.Error(err)
				return
			}
			for {
				st, _, err := sc.Wait(context.Background(), h, time.Minute)
				if err != nil || st != channel.StatusMessage {
					return
				}
				received(i)
			}
		}()
	}
	ready.Wait()
	return &done
}

// BenchmarkPublish measures sustained publishes per second into one channel
// whose subscribers drain concurrently (64-byte messages). The publisher
// publishes a window of messages and then waits until every subscriber has
// consumed them, so backlogs stay far below 1 MiB and nothing is evicted:
// the figure is the rate at which messages actually reach all subscribers.
func BenchmarkPublish(b *testing.B) {
	for _, subs := range []int{1, 256} {
		b.Run(fmt.Sprintf("subs=%d", subs), func(b *testing.B) { benchPublish(b, subs) })
	}
}

func benchPublish(b *testing.B, subs int) {
	hub := channel.NewHub(channel.Limits{})
	msg := strings.Repeat("m", 64)
	window := 256
	if subs > 1 {
		window = 64
	}
	var remaining atomic.Int64
	allConsumed := make(chan struct{}, 1)
	done := subscribe(b, hub, subs, func(int) {
		if remaining.Add(-1) == 0 {
			allConsumed <- struct{}{}
		}
	})
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i += window {
		k := min(window, b.N-i)
		remaining.Store(int64(k * subs))
		for range k {
			if n, err := hub.Publish("c", msg); err != nil || n != subs {
				b.Fatalf("Publish = %d, %v; want %d", n, err, subs)
			}
		}
		<-allConsumed
	}
	elapsed := time.Since(start)
	b.StopTimer()
	if _, err := hub.Close("c", "done"); err != nil {
		b.Fatal(err)
	}
	done.Wait()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "publishes/s")
	b.ReportMetric(float64(b.N*subs)/elapsed.Seconds(), "deliveries/s")
}

// BenchmarkPublishCost measures the publisher's side alone: one Publish into
// a channel with 256 subscriptions that nobody is waiting on (their queues
// are drained outside the timer).
func BenchmarkPublishCost(b *testing.B) {
	hub, sc := newScope(b)
	handles := make([]string, 256)
	for i := range handles {
		handles[i] = mustSubscribe(b, sc, "c")
	}
	b.ResetTimer()
	for i := range b.N {
		if n, err := hub.Publish("c", "m"); err != nil || n != 256 {
			b.Fatalf("Publish = %d, %v", n, err)
		}
		if i%4096 == 4095 {
			b.StopTimer()
			for _, h := range handles {
				for {
					if st, _, _ := sc.Wait(context.Background(), h, 0); st != channel.StatusMessage {
						break
					}
				}
			}
			b.StartTimer()
		}
	}
}
