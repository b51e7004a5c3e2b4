package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/server"
)

// BenchmarkFeedWaitWake measures how long after a send's HTTP response a consumer's pending
// GET /v0/feed/wait returns with the item (fsync on). Reported as p50/p99 wake latency.
func BenchmarkFeedWaitWake(b *testing.B) {
	srv, err := server.Open(server.Config{DataDir: b.TempDir(), AdminSecret: "bench-admin-secret-0123456789abcdefghijklmnopqrstuvwxyz"})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	ctx := context.Background()
	svc := srv.Service()
	sp, _ := svc.CreateSpace(ctx, domain.CreateSpaceRequest{RequestID: "sp"})
	a, _ := svc.CreateActor(ctx, sp.SpaceID, domain.CreateActorRequest{RequestID: "a"})
	rb, _ := svc.CreateActor(ctx, sp.SpaceID, domain.CreateActorRequest{RequestID: "b"})
	cb, _ := svc.CreateConsumer(ctx, sp.SpaceID, domain.CreateConsumerRequest{RequestID: "c", ActorID: rb.ActorID, View: domain.ViewInbox})
	ta, _ := svc.CreateToken(ctx, sp.SpaceID, domain.CreateTokenRequest{RequestID: "ta", ActorID: a.ActorID, Scopes: domain.AllScopes()})
	tb, _ := svc.CreateToken(ctx, sp.SpaceID, domain.CreateTokenRequest{RequestID: "tb", ActorID: rb.ActorID, Scopes: domain.AllScopes()})
	client := &http.Client{}
	cursor := ""
	var lat []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		type result struct {
			at     time.Time
			cursor string
			n      int
			err    error
		}
		done := make(chan result, 1)
		go func(cur string) {
			req, _ := http.NewRequest("GET", fmt.Sprintf("%s/v0/feed/wait?consumer_id=%s&timeout_ms=20000&cursor=%s", hs.URL, cb.ConsumerID, cur), nil)
			req.Header.Set("Authorization", "Bearer "+tb.Token)
			resp, err := client.Do(req)
			if err != nil {
				done <- result{err: err}
				return
			}
			defer resp.Body.Close()
			var env struct {
				Data struct {
					Items      []json.RawMessage `json:"items"`
					NextCursor string            `json:"next_cursor"`
				} `json:"data"`
			}
			err = json.NewDecoder(resp.Body).Decode(&env)
			done <- result{at: time.Now(), cursor: env.Data.NextCursor, n: len(env.Data.Items), err: err}
		}(cursor)
		time.Sleep(2 * time.Millisecond) // let the waiter subscribe
		body, _ := json.Marshal(map[string]any{"request_id": fmt.Sprintf("w%d", i), "recipient_ids": []string{rb.ActorID}, "body": map[string]any{"text": "x"}})
		req, _ := http.NewRequest("POST", hs.URL+"/v0/messages", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+ta.Token)
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		committed := time.Now()
		r := <-done
		if r.err != nil || r.n != 1 {
			b.Fatalf("wait: %v (items %d)", r.err, r.n)
		}
		cursor = r.cursor
		lat = append(lat, max(0, r.at.Sub(committed)))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-wake-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-wake-µs")
}
