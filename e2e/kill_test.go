package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/waypost/waypost/e2e/wire"
)

// killClient is one of the concurrent senders of TestKillDuringConcurrentSends. Its fields are touched by
// its own goroutine during a phase and by the test between phases.
type killClient struct {
	name      string
	token     string
	pad       int                  // body.text padding: some clients send bodies too large to commit inline
	attempted []string             // every request_id sent, in order
	acked     map[string]bool      // request_ids whose first attempt got a 200 committed response
	result    map[string]wire.Send // the first committed result seen for each request_id
}

func (c *killClient) body(rid string) map[string]any {
	return map[string]any{"request_id": rid, "subject": "load " + rid,
		"body": map[string]any{"text": "payload of " + rid + " " + strings.Repeat("x", c.pad)}}
}

// record stores a committed result, or checks it against the one already stored for rid.
func (c *killClient) record(rid string, d wire.Send) error {
	if d.SubmissionState != "committed" || d.ResourceID == "" || d.VisibleSeq == "" || d.CommittedAt == "" {
		return fmt.Errorf("%s: incomplete committed result %+v", rid, d)
	}
	if prev, seen := c.result[rid]; seen && prev != d {
		return fmt.Errorf("%s: result changed from %+v to %+v", rid, prev, d)
	}
	c.result[rid] = d
	return nil
}

// TestKillDuringConcurrentSends is the last row of the SUPPLEMENT §7.4 failure matrix (property P03 for
// the embedded server): 16 clients send concurrently with unique request IDs; the server is SIGKILLed in the
// middle of the load and restarted on the same data directory; every client then retries every request ID it
// ever attempted, acknowledged or not, until it gets a committed result. This is repeated three times. In
// the end every acknowledged send is in the feed exactly once with the message ID and visible_seq first
// acknowledged, no request ID has two messages, and visible_seq is gapless from 1.
func TestKillDuringConcurrentSends(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts the server several times")
	}
	const (
		nClients = 16
		rounds   = 3
		minAcks  = 10   // acknowledged sends in a round before the kill may happen
		maxAcks  = 3000 // kill at the latest after this many acknowledged sends in a round
	)
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	t.Logf("seed %d (kill times are drawn from it)", seed)

	s := startServer(t)
	adm := newSpace(t, s, "kill")
	adm.rateLimits(t, 100000, 1000000) // a crash test under full load, not a test of throttling
	obs := adm.observer(t)
	clients := make([]*killClient, nClients)
	for i := range clients {
		actor := adm.actor(t, fmt.Sprintf("sender %d", i))
		clients[i] = &killClient{name: fmt.Sprintf("c%02d", i), token: adm.token(t, actor, "", "message.send").Token,
			pad: 100, acked: map[string]bool{}, result: map[string]wire.Send{}}
		if i%4 == 0 {
			// 24 KiB: over the embedded server's inline body size (server.InlineBodyMax), so these sends take
			// the reserve → body object → commit path and the kill can land between those steps.
			clients[i].pad = 24 << 10
		}
	}

	for round := 0; round < rounds; round++ {
		killAfter := 700*time.Millisecond + time.Duration(rng.Int64N(int64(600*time.Millisecond)))
		var (
			acks   atomic.Int64
			killed atomic.Bool
			wg     sync.WaitGroup
			mu     sync.Mutex
			errs   []error
		)
		report := func(err error) { mu.Lock(); errs = append(errs, err); mu.Unlock() }
		start := time.Now()
		for _, c := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := 0; !killed.Load(); k++ {
					rid := fmt.Sprintf("%s-r%d-%05d", c.name, round, k)
					c.attempted = append(c.attempted, rid)
					r, err := s.roundTrip(context.Background(), request{Method: "POST", Path: "/v0/messages", Token: c.token, Body: c.body(rid)})
					if err != nil {
						if !killed.Load() {
							report(fmt.Errorf("%s before the kill: %w", rid, err))
						}
						return
					}
					if err := checkEnvelope(r); err != nil {
						report(err)
						return
					}
					if !r.Env.OK {
						report(fmt.Errorf("%s: unexpected failure under load: %s", rid, r))
						return
					}
					var d wire.Send
					if err := json.Unmarshal(r.Env.Data, &d); err != nil {
						report(fmt.Errorf("%s: %w", rid, err))
						return
					}
					if err := c.record(rid, d); err != nil {
						report(err)
						return
					}
					c.acked[rid] = true
					acks.Add(1)
				}
			}()
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			n := acks.Load()
			if (time.Since(start) >= killAfter && n >= minAcks) || n >= maxAcks {
				break
			}
			mu.Lock()
			failed := len(errs) > 0
			mu.Unlock()
			if failed || time.Now().After(deadline) {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		killed.Store(true)
		s.kill()
		wg.Wait()
		if len(errs) > 0 {
			t.Fatalf("round %d: %v (and %d more)", round, errs[0], len(errs)-1)
		}
		if n := acks.Load(); n < minAcks {
			t.Fatalf("round %d: only %d acknowledged sends in 30 s", round, n)
		}
		attempted := 0
		for _, c := range clients {
			attempted += len(c.attempted)
		}
		t.Logf("round %d: killed after %v with %d sends acknowledged this round; %d request IDs attempted so far",
			round, time.Since(start).Round(time.Millisecond), acks.Load(), attempted)

		s.restart()
		retryAll(t, s, clients)
	}

	// The whole feed, as an observer of the space sees it.
	items, _ := readAll(t, s, obs, nil)
	byMessage := map[string]string{} // message_id → request_id
	total, acked := 0, 0
	for _, c := range clients {
		for _, rid := range c.attempted {
			total++
			d := c.result[rid]
			if other, dup := byMessage[d.ResourceID]; dup {
				t.Fatalf("request IDs %s and %s share message %s", other, rid, d.ResourceID)
			}
			byMessage[d.ResourceID] = rid
			if c.acked[rid] {
				acked++
			}
		}
	}
	if len(items) != total {
		t.Fatalf("the feed has %d items, want one per attempted request ID (%d)", len(items), total)
	}
	seen := map[string]bool{}
	for i, it := range items {
		if it.VisibleSeq != fmt.Sprint(i+1) {
			t.Fatalf("feed item %d has visible_seq %s: not gapless from 1", i, it.VisibleSeq)
		}
		if it.ItemType != "message" || seen[it.ResourceID] {
			t.Fatalf("feed item %+v: want each message exactly once", it)
		}
		seen[it.ResourceID] = true
		if _, known := byMessage[it.ResourceID]; !known {
			t.Fatalf("feed item %+v belongs to no request ID", it)
		}
	}
	for _, c := range clients {
		for _, rid := range c.attempted {
			d := c.result[rid]
			n := mustAtoi(t, d.VisibleSeq)
			if n > len(items) {
				t.Fatalf("%s committed at visible_seq %d, beyond the feed's %d items", rid, n, len(items))
			}
			it := items[n-1]
			if it.ResourceID != d.ResourceID || it.CommittedAt != d.CommittedAt {
				t.Fatalf("%s committed as %+v, but visible_seq %s holds %+v", rid, d, d.VisibleSeq, it)
			}
		}
	}
	// Bodies were written before their commits: a sample reads back intact.
	for i := 0; i < 32; i++ {
		c := clients[rng.IntN(len(clients))]
		rid := c.attempted[rng.IntN(len(c.attempted))]
		m, _ := ok[wire.Message](t, s, request{Method: "GET", Path: "/v0/messages/" + c.result[rid].ResourceID, Token: c.token})
		if m.Body.Text != c.body(rid)["body"].(map[string]any)["text"] || m.Subject != "load "+rid {
			t.Fatalf("%s: message %s has subject %q body %q", rid, m.MessageID, m.Subject, m.Body.Text)
		}
	}
	t.Logf("%d sends (%d acknowledged before a kill) committed exactly once across %d kills", total, acked, rounds)
}

// retryAll makes every client retry every request ID it ever attempted until each has a committed result
// equal to any result seen before.
func retryAll(t *testing.T, s *server, clients []*killClient) {
	t.Helper()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, rid := range c.attempted {
				if err := retryOne(s, c, rid); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("retrying after restart: %v (and %d more)", errs[0], len(errs)-1)
	}
}

func retryOne(s *server, c *killClient, rid string) error {
	for try := 0; try < 100; try++ {
		r, err := s.roundTrip(context.Background(), request{Method: "POST", Path: "/v0/messages", Token: c.token, Body: c.body(rid)})
		if err != nil {
			return fmt.Errorf("%s: %w", rid, err)
		}
		if err := checkEnvelope(r); err != nil {
			return err
		}
		if !r.Env.OK {
			if r.Env.Error.Retryable { // SUBMISSION_PENDING or STORAGE_UNAVAILABLE: the same request may be tried again
				time.Sleep(20 * time.Millisecond)
				continue
			}
			return fmt.Errorf("%s: retry failed: %s", rid, r)
		}
		var d wire.Send
		if err := json.Unmarshal(r.Env.Data, &d); err != nil {
			return fmt.Errorf("%s: %w", rid, err)
		}
		if err := c.record(rid, d); err != nil {
			return err
		}
		// status agrees with the replayed result.
		st, err := s.roundTrip(context.Background(), request{Method: "GET", Token: c.token,
			Path: "/v0/status?" + url.Values{"operation": {"message.send"}, "request_id": {rid}}.Encode()})
		if err != nil {
			return fmt.Errorf("%s: status: %w", rid, err)
		}
		if err := checkEnvelope(st); err != nil {
			return err
		}
		var sd wire.Status
		var sr wire.Send
		if err := json.Unmarshal(st.Env.Data, &sd); err != nil || sd.SubmissionState != "committed" || sd.ResourceID != d.ResourceID ||
			json.Unmarshal(sd.Result, &sr) != nil || sr != d {
			return fmt.Errorf("%s: status %s after the retry returned %+v", rid, st, d)
		}
		return nil
	}
	return fmt.Errorf("%s: still not committed after 100 retries", rid)
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	var n int
	if _, err := fmt.Sscanf(s, "%d", &n); err != nil || n < 1 {
		t.Fatalf("visible_seq %q is not a positive decimal", s)
	}
	return n
}
