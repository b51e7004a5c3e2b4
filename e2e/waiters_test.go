package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/waypost/waypost/e2e/wire"
)

// waiterRun is the outcome of one run of many feed.wait requests woken by one commit.
type waiterRun struct {
	waiters int
	// wake is, per waiter, the time from the start of the waking send to the waiter's answer.
	wake []time.Duration
	// send is the latency of the waking send itself.
	send time.Duration
	// ramp is how long it took until every waiter was waiting.
	ramp time.Duration
	// repolls counts waits that ran out before the commit and were asked again (a slow ramp).
	repolls int64
	// serverCPU and clientCPU are the CPU time the server process and this process used from the start
	// of the waking send until every waiter was answered (0 when unknown).
	serverCPU, clientCPU time.Duration
}

// processCPU returns the user+system CPU time of a process from /proc (Linux; 0 elsewhere).
func processCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces; the fields after its closing parenthesis are fixed.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * (time.Second / 100) // USER_HZ
}

func (r waiterRun) percentile(p float64) time.Duration {
	w := slices.Clone(r.wake)
	slices.Sort(w)
	return w[min(len(w)-1, int(p*float64(len(w))))]
}

// runWaiters holds n concurrent feed.wait requests on one space of a server started with
// --max-waiters-per-space n, over n connections from this process, then commits one message visible to all
// of them and collects every answer. The waiters belong to n/100 agents' tokens (one consumer), each
// within its credential's rate limit. Every waiter must be answered exactly once, after that commit, with
// exactly the committed message (a wait that ran out before the commit is asked again, as a long-polling
// client does; on a machine fast enough to ramp within a wait's 60 s none does). Failures are reported
// through tb.
func runWaiters(tb testing.TB, s *server, n int) waiterRun {
	adm := newSpace(tb, s, fmt.Sprintf("waiters-%d-%d", n, time.Now().UnixNano()))
	sender := adm.participant(tb, "sender")
	agent := adm.actor(tb, "agents")
	consumer := adm.consumer(tb, agent, "inbox")
	tokens := make([]string, (n+99)/100)
	for i := range tokens {
		tokens[i] = adm.token(tb, agent, consumer, "message.read").Token
	}
	probeToken := adm.token(tb, agent, consumer, "message.read").Token
	hc := &http.Client{Transport: &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: -1, // one request per connection: no pool to hold them
		DisableKeepAlives:   true,
	}}
	defer hc.CloseIdleConnections()

	type answer struct {
		at    time.Time
		items []wire.FeedItem
		err   error
	}
	answers := make([]answer, n)
	var mu sync.Mutex // guards answers
	set := func(i int, a answer) { mu.Lock(); answers[i] = a; mu.Unlock() }
	var repolls atomic.Int64 // waits that ran out before the commit and were asked again
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wait := func(i int) {
		defer wg.Done()
		url := fmt.Sprintf("%s/v0/feed/wait?consumer_id=%s&timeout_ms=60000", s.base, consumer)
		for attempt := 0; ; attempt++ {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			req.Header.Set("Authorization", "Bearer "+tokens[i%len(tokens)])
			resp, err := hc.Do(req)
			if err != nil {
				set(i, answer{err: err})
				return
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			at := time.Now()
			if resp.StatusCode == http.StatusTooManyRequests && attempt < 100 {
				// The readiness probe may hold a place for a moment: a well-behaved client waits and retries.
				time.Sleep(time.Second)
				continue
			}
			var env struct {
				OK   bool `json:"ok"`
				Data struct {
					Items []wire.FeedItem `json:"items"`
				} `json:"data"`
			}
			if err == nil {
				err = json.Unmarshal(body, &env)
			}
			if err == nil && !env.OK {
				err = fmt.Errorf("HTTP %d %s", resp.StatusCode, body)
			}
			if err == nil && len(env.Data.Items) == 0 && attempt < 100 {
				// The wait ran out (timeout_ms is at most 60 s) before the commit: on a slow machine the ramp
				// of n waiters can take longer. A long-polling client asks again; the commit can only answer
				// with its item, so an empty answer is always such a time-out.
				repolls.Add(1)
				continue
			}
			set(i, answer{at: at, items: env.Data.Items, err: err})
			return
		}
	}
	start := time.Now()
	for i := range n {
		wg.Add(1)
		go wait(i)
		if i%500 == 499 {
			time.Sleep(20 * time.Millisecond) // a steady ramp, not a SYN flood of the listen queue
		}
	}
	// Every place is taken once one more waiter is refused (the server's bound is n).
	probe := fmt.Sprintf("/v0/feed/wait?consumer_id=%s&timeout_ms=1", consumer)
	for deadline := time.Now().Add(5 * time.Minute); ; {
		r, err := s.roundTrip(context.Background(), request{Method: "GET", Path: probe, Token: probeToken})
		if err == nil && r.code() == "RATE_LIMITED" && r.Env.Error.Details["limit"] == "feed_wait_waiters_max" {
			break
		}
		if err == nil && !r.Env.OK && r.code() != "RATE_LIMITED" {
			tb.Fatalf("probe: %v", r)
		}
		if err == nil && r.Env.OK {
			var pg wire.RawPage
			_ = json.Unmarshal(r.Env.Data, &pg)
			if len(pg.Items) != 0 {
				tb.Fatalf("the probe found items before the commit")
			}
		}
		if time.Now().After(deadline) {
			tb.Fatalf("the %d waiters did not all get waiting within 5 minutes (last probe: %v %v)", n, r, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	run := waiterRun{waiters: n, ramp: time.Since(start)}
	mu.Lock()
	for i, a := range answers {
		if !a.at.IsZero() || a.err != nil {
			mu.Unlock()
			tb.Fatalf("waiter %d answered before the commit: %+v", i, a)
		}
	}
	mu.Unlock()

	serverCPU, clientCPU := processCPU(s.cmd.Process.Pid), processCPU(os.Getpid())
	sendStart := time.Now()
	sent := send(tb, s, sender.token, map[string]any{"request_id": "wake", "recipient_ids": []string{agent}, "body": map[string]any{"text": "wake up"}})
	run.send = time.Since(sendStart)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		tb.Fatalf("the waiters were not all answered within 2 minutes of the commit")
	}
	run.serverCPU, run.clientCPU = processCPU(s.cmd.Process.Pid)-serverCPU, processCPU(os.Getpid())-clientCPU
	run.repolls = repolls.Load()
	mu.Lock()
	defer mu.Unlock()
	for i, a := range answers {
		if a.err != nil {
			tb.Fatalf("waiter %d: %v", i, a.err)
		}
		if len(a.items) != 1 || a.items[0].ResourceID != sent.ResourceID || a.items[0].VisibleSeq != sent.VisibleSeq {
			tb.Fatalf("waiter %d was answered with %+v, want exactly the committed message %s", i, a.items, sent.ResourceID)
		}
		run.wake = append(run.wake, a.at.Sub(sendStart))
	}
	return run
}

// TestTenThousandWaiters holds 10,000 concurrent feed.wait requests on one space of the real binary over
// HTTP; one commit wakes each exactly once with that commit's item. It logs the wake-up percentiles
// (measured from the start of the waking send); docs/benchmarks-channel.md reports them.
func TestTenThousandWaiters(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 connections")
	}
	const n = 10_000
	needDescriptors(t, n+1024)
	s := startServer(t, "--max-waiters-per-space", fmt.Sprint(n))
	run := runWaiters(t, s, n)
	t.Logf("%d waiters (ready after %s, %d waits asked again): one commit (send %s) answered each once; wake p50 %s p99 %s max %s; "+
		"CPU from the send to the last answer: server %s, client %s",
		n, run.ramp.Round(time.Millisecond), run.repolls, run.send.Round(time.Millisecond), run.percentile(0.50).Round(time.Millisecond),
		run.percentile(0.99).Round(time.Millisecond), run.percentile(1).Round(time.Millisecond), run.serverCPU, run.clientCPU)
}

// BenchmarkWaiters reports the wake-up of 10,000 waiters per iteration (go test ./e2e -run '^$' -bench
// Waiters -benchtime 3x): wake-p50-ms, wake-p99-ms, wake-max-ms.
func BenchmarkWaiters(b *testing.B) {
	const n = 10_000
	needDescriptors(b, n+1024)
	s := startServer(b, "--max-waiters-per-space", fmt.Sprint(n))
	var p50, p99, worst, server, client time.Duration
	for b.Loop() {
		run := runWaiters(b, s, n)
		p50, p99, worst = p50+run.percentile(0.5), p99+run.percentile(0.99), worst+run.percentile(1)
		server, client = server+run.serverCPU, client+run.clientCPU
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) / float64(b.N) }
	b.ReportMetric(ms(p50), "wake-p50-ms")
	b.ReportMetric(ms(p99), "wake-p99-ms")
	b.ReportMetric(ms(worst), "wake-max-ms")
	b.ReportMetric(ms(server), "server-cpu-ms")
	b.ReportMetric(ms(client), "client-cpu-ms")
}
