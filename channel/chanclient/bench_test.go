package chanclient_test

import (
	"context"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/waypost/waypost/channel"
	"github.com/waypost/waypost/channel/chanclient"
	"github.com/waypost/waypost/channel/chanservice"
)

// benchServer starts the service on a loopback listener with one subscriber
// on sp_1/feed that drains every message; it returns the client and a
// function that stops everything.
func benchServer(b *testing.B, onMessage func()) (*chanclient.Client, func()) {
	svc, err := chanservice.New(secret, channel.Limits{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(svc)
	c, err := chanclient.New(srv.URL, secret)
	if err != nil {
		b.Fatal(err)
	}
	hub := svc.HubFor("sp_1")
	sc := hub.NewScope(context.Background())
	h, err := sc.Subscribe("feed")
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			st, _, err := sc.Wait(context.Background(), h, time.Minute)
			if err != nil || st != channel.StatusMessage {
				return
			}
			if onMessage != nil {
				onMessage()
			}
		}
	}()
	return c, func() {
		sc.End()
		wg.Wait()
		c.CloseIdleConnections()
		srv.Close()
	}
}

// measure runs one b.N times, one after the other, and reports the latencies (ns) it returns and the rate.
func measure(b *testing.B, one func() (latency int64)) {
	lat := make([]int64, 0, b.N)
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		lat = append(lat, one())
	}
	elapsed := time.Since(start)
	b.StopTimer()
	report(b, lat, elapsed, b.N)
}

func report(b *testing.B, lat []int64, elapsed time.Duration, n int) {
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2]), "p50-ns")
		b.ReportMetric(float64(lat[len(lat)*99/100]), "p99-ns")
	}
	b.ReportMetric(float64(n)/elapsed.Seconds(), "publishes/s")
}

// BenchmarkHTTPPublish measures Publish over the internal API on loopback
// (client and server in this process, keep-alive connections): round-trip
// latency percentiles and publishes per second, from one goroutine (serial)
// and from 8 goroutines per CPU (parallel).
func BenchmarkHTTPPublish(b *testing.B) {
	b.Run("serial", func(b *testing.B) {
		c, stop := benchServer(b, nil)
		defer stop()
		ctx := context.Background()
		measure(b, func() int64 {
			t0 := time.Now()
			if n, err := c.Publish(ctx, "sp_1", "feed", `{"visible_seq":123456,"item_id":"it_01J"}`); err != nil || n != 1 {
				b.Fatalf("Publish = %d, %v", n, err)
			}
			return time.Since(t0).Nanoseconds()
		})
	})
	b.Run("parallel", func(b *testing.B) {
		c, stop := benchServer(b, nil)
		defer stop()
		ctx := context.Background()
		var mu sync.Mutex
		var lat []int64
		b.SetParallelism(8)
		b.ResetTimer()
		start := time.Now()
		b.RunParallel(func(pb *testing.PB) {
			var local []int64
			for pb.Next() {
				t0 := time.Now()
				if _, err := c.Publish(ctx, "sp_1", "feed", `{"visible_seq":123456,"item_id":"it_01J"}`); err != nil {
					b.Error(err)
					return
				}
				local = append(local, time.Since(t0).Nanoseconds())
			}
			mu.Lock()
			lat = append(lat, local...)
			mu.Unlock()
		})
		elapsed := time.Since(start)
		b.StopTimer()
		report(b, lat, elapsed, b.N)
	})
}

// BenchmarkHTTPWakeLatency measures the committer's path end to end: from
// just before Client.Publish until the in-process subscriber's Wait has
// returned the message.
func BenchmarkHTTPWakeLatency(b *testing.B) {
	var t0 atomic.Int64
	base := time.Now()
	got := make(chan int64, 1)
	c, stop := benchServer(b, func() { got <- time.Since(base).Nanoseconds() - t0.Load() })
	defer stop()
	ctx := context.Background()
	measure(b, func() int64 {
		t0.Store(time.Since(base).Nanoseconds())
		if _, err := c.Publish(ctx, "sp_1", "feed", "tick"); err != nil {
			b.Fatal(err)
		}
		return <-got
	})
}

// BenchmarkInProcessPublish is the in-process implementation of the same
// call, for comparison.
func BenchmarkInProcessPublish(b *testing.B) {
	svc, err := chanservice.New(secret, channel.Limits{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	api := chanclient.NewInProcess(svc)
	hub := svc.HubFor("sp_1")
	sc := hub.NewScope(context.Background())
	defer sc.End()
	h, _ := sc.Subscribe("feed")
	ctx := context.Background()
	b.ResetTimer()
	for i := range b.N {
		if _, err := api.Publish(ctx, "sp_1", "feed", "m"); err != nil {
			b.Fatal(err)
		}
		if i%1024 == 1023 { // drain so the backlog never evicts
			for {
				if st, _, _ := sc.Wait(ctx, h, 0); st != channel.StatusMessage {
					break
				}
			}
		}
	}
}
