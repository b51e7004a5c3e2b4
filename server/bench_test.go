package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/internal/cputime"
	"github.com/waypost/waypost/server"
)

// The benchmarks drive the real HTTP handler of the embedded server in-process (no sockets), over the item
// store (store/pebble) and the file blob store in a temporary directory with fsync ON, the production setting. They report
// throughput and latency percentiles with b.ReportMetric; they assert no timings.
//
//	go test ./server -run '^$' -bench . -benchtime 3000x
//
// docs/benchmarks.md has figures and profiles.

const benchAdmin = "wpa_bench_0123456789abcdefghijklmnopqrstuvwxyz"

// benchServer is an embedded server opened on a temporary data directory.
type benchServer struct {
	h http.Handler
}

func openBench(b *testing.B, noSync bool) *benchServer {
	b.Helper()
	s, err := server.Open(server.Config{DataDir: b.TempDir(), AdminSecret: benchAdmin, NoSync: noSync})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return &benchServer{h: s.Handler()}
}

// do serves one request and returns the status and the envelope's data.
func (s *benchServer) do(method, path, token string, body []byte) (int, json.RawMessage, []byte) {
	req := httptest.NewRequest(method, path, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	s.h.ServeHTTP(rec, req)
	var env struct {
		Data json.RawMessage `json:"data"`
	}
	_ = json.Unmarshal(rec.Body.Bytes(), &env)
	return rec.Code, env.Data, rec.Body.Bytes()
}

// must serves a setup request that must succeed and decodes its data into out.
func (s *benchServer) must(b *testing.B, method, path, token string, body any, out any) {
	b.Helper()
	raw, err := json.Marshal(body)
	if err != nil {
		b.Fatal(err)
	}
	code, data, all := s.do(method, path, token, raw)
	if code != http.StatusOK {
		b.Fatalf("%s %s: %d %s", method, path, code, all)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			b.Fatal(err)
		}
	}
}

// benchSpace is a space with n sender tokens and an inbox consumer (with token) of the default recipient.
type benchSpace struct {
	senders        []string
	readerToken    string
	readerConsumer string
	// ackConsumer is another inbox consumer of the default recipient, whose token may also acknowledge.
	ackConsumer, ackToken string
}

func (s *benchServer) space(b *testing.B, n int) benchSpace {
	b.Helper()
	var sp struct {
		SpaceID            string `json:"space_id"`
		DefaultRecipientID string `json:"default_recipient_id"`
	}
	s.must(b, "POST", "/admin/v0/spaces", benchAdmin, map[string]any{"request_id": "bench-space"}, &sp)
	base := "/admin/v0/spaces/" + sp.SpaceID
	// A throughput measurement, not a test of throttling: lift the per-credential rate limits.
	s.must(b, "PATCH", base, benchAdmin, map[string]any{"rate_limits": map[string]any{
		"requests_per_second": domain.MaxRequestsPerSecond, "burst": domain.MaxBurst}}, nil)
	var out benchSpace
	var tok struct {
		Token string `json:"token"`
	}
	for i := 0; i < n; i++ {
		var a struct {
			ActorID string `json:"actor_id"`
		}
		s.must(b, "POST", base+"/actors", benchAdmin, map[string]any{"request_id": fmt.Sprintf("actor-%d", i)}, &a)
		s.must(b, "POST", base+"/tokens", benchAdmin, map[string]any{"request_id": fmt.Sprintf("token-%d", i), "actor_id": a.ActorID, "scopes": []string{"message.send"}}, &tok)
		out.senders = append(out.senders, tok.Token)
	}
	var c struct {
		ConsumerID string `json:"consumer_id"`
	}
	s.must(b, "POST", base+"/consumers", benchAdmin, map[string]any{"request_id": "reader", "actor_id": sp.DefaultRecipientID, "view": "inbox"}, &c)
	s.must(b, "POST", base+"/tokens", benchAdmin, map[string]any{"request_id": "reader-token", "actor_id": sp.DefaultRecipientID, "consumer_id": c.ConsumerID, "scopes": []string{"message.read"}}, &tok)
	out.readerToken, out.readerConsumer = tok.Token, c.ConsumerID
	s.must(b, "POST", base+"/consumers", benchAdmin, map[string]any{"request_id": "acker", "actor_id": sp.DefaultRecipientID, "view": "inbox"}, &c)
	s.must(b, "POST", base+"/tokens", benchAdmin, map[string]any{"request_id": "acker-token", "actor_id": sp.DefaultRecipientID, "consumer_id": c.ConsumerID,
		"scopes": []string{"message.read", "receipt.write"}}, &tok)
	out.ackConsumer, out.ackToken = c.ConsumerID, tok.Token
	return out
}

// sendBody is a message.send request with a 256-byte body.text.
func sendBody(rid string) []byte {
	return fmt.Appendf(nil, `{"request_id":%q,"subject":"bench","body":{"text":%q}}`, rid, bytes.Repeat([]byte("x"), 256))
}

// runConcurrent runs b.N operations from n goroutines and reports ops/s (named unit), p50/p99 latency and
// the process CPU time per operation (user+system, all goroutines: this stays meaningful when other
// processes compete for the cores, where ops/s does not).
func runConcurrent(b *testing.B, n int, unit string, op func(worker, i int) error) {
	b.Helper()
	var next atomic.Int64
	lat := make([][]time.Duration, n)
	var wg sync.WaitGroup
	var failures atomic.Int64
	var firstErr atomic.Value
	b.ResetTimer()
	start, cpu0 := time.Now(), cputime.Self()
	for w := 0; w < n; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N {
					return
				}
				t0 := time.Now()
				if err := op(w, i); err != nil {
					failures.Add(1)
					firstErr.CompareAndSwap(nil, err)
					continue
				}
				lat[w] = append(lat[w], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed, cpu := time.Since(start), cputime.Self()-cpu0
	b.StopTimer()
	if f := failures.Load(); f > 0 {
		b.Fatalf("%d of %d operations failed, first: %v", f, b.N, firstErr.Load())
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), unit)
	b.ReportMetric(float64(all[len(all)*50/100])/1e6, "p50-ms")
	b.ReportMetric(float64(all[min(len(all)-1, len(all)*99/100)])/1e6, "p99-ms")
	b.ReportMetric(float64(cpu)/float64(b.N)/1e3, "cpu-µs/op")
}

// BenchmarkSend measures committed message.send through the HTTP handler at 1, 8, 32 and 128 concurrent
// clients (each its own actor and token), fsync on.
func BenchmarkSend(b *testing.B) {
	for _, clients := range []int{1, 8, 32, 128} {
		benchSend(b, clients, false)
	}
}

// BenchmarkSendNoFsync is BenchmarkSend at 32 clients with fsync OFF: not a deployment setting (a crash can
// lose acknowledged sends), only the CPU ceiling that BenchmarkSend's figures are compared with.
func BenchmarkSendNoFsync(b *testing.B) { benchSend(b, 32, true) }

func benchSend(b *testing.B, clients int, noSync bool) {
	// One server per concurrency level, kept across the b.N rounds of its sub-benchmark.
	s := openBench(b, noSync)
	sp := s.space(b, clients)
	var round atomic.Int64
	b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
		r := round.Add(1)
		runConcurrent(b, clients, "sends/s", func(w, i int) error {
			code, data, all := s.do("POST", "/v0/messages", sp.senders[w], sendBody(fmt.Sprintf("r%d-%d", r, i)))
			if code != http.StatusOK || !bytes.Contains(data, []byte(`"committed"`)) {
				return fmt.Errorf("send: %d %s", code, all)
			}
			return nil
		})
	})
}

// BenchmarkInboxRead50 measures inbox.read of 50-item pages through the HTTP handler, from 1 and 8
// concurrent readers, over an inbox of 5000 messages.
func BenchmarkInboxRead50(b *testing.B) {
	const messages, page = 5000, 50
	s := openBench(b, false)
	sp := s.space(b, 64)
	// Fill the inbox from 64 concurrent senders (group commit makes this quick).
	var wg sync.WaitGroup
	for w := 0; w < 64; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < messages; i += 64 {
				if code, _, all := s.do("POST", "/v0/messages", sp.senders[w], sendBody(fmt.Sprintf("fill-%d", i))); code != http.StatusOK {
					b.Errorf("fill: %d %s", code, all)
					return
				}
			}
		}()
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
	// The cursors of every page, so each read starts at a different position.
	cursors := []*string{nil}
	for {
		body, _ := json.Marshal(map[string]any{"consumer_id": sp.readerConsumer, "cursor": cursors[len(cursors)-1], "limit": page})
		_, data, all := s.do("POST", "/v0/inbox/read", sp.readerToken, body)
		var pg struct {
			Items      []json.RawMessage `json:"items"`
			NextCursor string            `json:"next_cursor"`
			HasMore    bool              `json:"has_more"`
		}
		if err := json.Unmarshal(data, &pg); err != nil || len(pg.Items) != page {
			b.Fatalf("paging the inbox: %s", all)
		}
		if !pg.HasMore {
			break
		}
		cursors = append(cursors, &pg.NextCursor)
	}
	bodies := make([][]byte, len(cursors))
	for i, c := range cursors {
		bodies[i], _ = json.Marshal(map[string]any{"consumer_id": sp.readerConsumer, "cursor": c, "limit": page})
	}
	for _, readers := range []int{1, 8} {
		b.Run(fmt.Sprintf("clients=%d", readers), func(b *testing.B) {
			runConcurrent(b, readers, "pages/s", func(_, i int) error {
				code, data, all := s.do("POST", "/v0/inbox/read", sp.readerToken, bodies[i%len(bodies)])
				if code != http.StatusOK || !bytes.Contains(data, []byte(`"items":[{`)) {
					return fmt.Errorf("read: %d %s", code, all)
				}
				return nil
			})
		})
	}
}

// BenchmarkInboxReadAck measures a durable consumer's cycle through the HTTP handler: inbox.read of a
// 50-item page from its checkpoint, then inbox.ack of every item of it (stage received) with the page's
// next_cursor as checkpoint_cursor, as `waypost bench` runs it. One op is one item read and acknowledged.
func BenchmarkInboxReadAck(b *testing.B) {
	const page = 50
	s := openBench(b, false)
	sp := s.space(b, 64)
	runs := 0 // request IDs carry the run, so -count > 1 does not replay an earlier run's IDs
	b.Run("clients=1", func(b *testing.B) {
		// Fill the inbox with b.N messages from 64 concurrent senders (not measured).
		b.StopTimer()
		runs++
		var next atomic.Int64
		var wg sync.WaitGroup
		for w := 0; w < 64; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
					if code, _, all := s.do("POST", "/v0/messages", sp.senders[w], sendBody(fmt.Sprintf("ack-%d-%d-%d", runs, b.N, i))); code != http.StatusOK {
						b.Errorf("fill: %d %s", code, all)
						return
					}
				}
			}()
		}
		wg.Wait()
		if b.Failed() {
			b.FailNow()
		}
		b.StartTimer()
		start, cpu0 := time.Now(), cputime.Self()
		items := 0
		var cursor *string
		for n := 0; items < b.N; n++ {
			body, _ := json.Marshal(map[string]any{"consumer_id": sp.ackConsumer, "cursor": cursor, "limit": page})
			code, data, all := s.do("POST", "/v0/inbox/read", sp.ackToken, body)
			var pg struct {
				Items []struct {
					ItemID string `json:"item_id"`
				} `json:"items"`
				NextCursor string `json:"next_cursor"`
			}
			if err := json.Unmarshal(data, &pg); code != http.StatusOK || err != nil || len(pg.Items) == 0 {
				b.Fatalf("read: %d %s", code, all)
			}
			ack := fmt.Appendf(nil, `{"request_id":"ack-%d-%d-%d","consumer_id":%q,"checkpoint_cursor":%q,"items":[`, runs, b.N, n, sp.ackConsumer, pg.NextCursor)
			for k, it := range pg.Items {
				if k > 0 {
					ack = append(ack, ',')
				}
				ack = fmt.Appendf(ack, `{"item_id":%q,"stage":"received"}`, it.ItemID)
			}
			if code, _, all := s.do("POST", "/v0/inbox/ack", sp.ackToken, append(ack, "]}"...)); code != http.StatusOK {
				b.Fatalf("ack: %d %s", code, all)
			}
			items += len(pg.Items)
			cursor = &pg.NextCursor
		}
		elapsed, cpu := time.Since(start), cputime.Self()-cpu0
		b.ReportMetric(float64(items)/elapsed.Seconds(), "items/s")
		b.ReportMetric(float64(cpu)/float64(items)/1e3, "cpu-µs/item")
	})
}
