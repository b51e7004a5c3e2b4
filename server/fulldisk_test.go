package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/internal/volumefs"
	"github.com/waypost/waypost/server"
)

// fdEnvelope is the RFC §5.2 envelope as the full-disk tests read it.
type fdEnvelope struct {
	OK    bool            `json:"ok"`
	Data  json.RawMessage `json:"data"`
	Error *struct {
		Code string `json:"code"`
	} `json:"error"`
}

// fdCall sends one request with token and returns the status, Retry-After and envelope.
func fdCall(t *testing.T, method, url, token string, body any) (int, string, fdEnvelope) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		rd = bytes.NewReader(raw)
	}
	req, _ := http.NewRequest(method, url, rd)
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var env fdEnvelope
	if err := json.Unmarshal(raw, &env); err != nil {
		t.Fatalf("%s %s: %d %s", method, url, resp.StatusCode, raw)
	}
	return resp.StatusCode, resp.Header.Get("Retry-After"), env
}

type fdSent struct {
	ResourceID string `json:"resource_id"`
	VisibleSeq string `json:"visible_seq"`
}

// TestFullDiskHealsWithoutRestart (issue 33): the embedded server on a 16 MiB volume (tmpfs as root, a
// fault-injecting volume otherwise) that fills up answers every send with 503 STORAGE_UNAVAILABLE and
// Retry-After while describe, inbox.read, status and feed.wait keep working and the gauges say writes are
// refused; once space is freed a send commits within seconds without a restart. Every send acknowledged
// before the disk filled is read back once, none twice; its request_id retried after the outage answers
// the original result; a send refused during the outage and retried after it commits once. The store says
// it refuses writes in a few WARN lines, not one per retry.
func TestFullDiskHealsWithoutRestart(t *testing.T) {
	dir, fsys, _ := volumefs.Volume(t, 16<<20)
	srv, logs := start(t, server.Config{DataDir: filepath.Join(dir, "data"), AdminSecret: m1Admin,
		ItemFS: fsys, RecoverEvery: 50 * time.Millisecond, MetricsAddr: "127.0.0.1:0"})
	base := "http://" + srv.Addr()
	svc, ctx := srv.Service(), context.Background()
	sp, err := svc.CreateSpace(ctx, domain.CreateSpaceRequest{RequestID: "sp"})
	if err != nil {
		t.Fatal(err)
	}
	a, err := svc.CreateActor(ctx, sp.SpaceID, domain.CreateActorRequest{RequestID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	b := sp.DefaultRecipientID
	con, err := svc.CreateConsumer(ctx, sp.SpaceID, domain.CreateConsumerRequest{RequestID: "con", ActorID: b, View: "inbox"})
	if err != nil {
		t.Fatal(err)
	}
	// A high rate limit: the test fills the disk as fast as it can.
	limits := domain.RateLimits{RequestsPerSecond: 100000, Burst: 100000}
	if _, err := svc.UpdateSpace(ctx, sp.SpaceID, domain.UpdateSpaceRequest{RateLimits: &limits}); err != nil {
		t.Fatal(err)
	}
	tokA, err := svc.CreateToken(ctx, sp.SpaceID, domain.CreateTokenRequest{RequestID: "ta", ActorID: a.ActorID, Scopes: domain.AllScopes()})
	if err != nil {
		t.Fatal(err)
	}
	tokB, err := svc.CreateToken(ctx, sp.SpaceID, domain.CreateTokenRequest{RequestID: "tb", ActorID: b, ConsumerID: con.ConsumerID, Scopes: domain.AllScopes()})
	if err != nil {
		t.Fatal(err)
	}
	filler := volumefs.Fill(t, fsys, dir, srv.Room().NeedBytes+(1<<20))

	send := func(rid string) (int, string, fdEnvelope) {
		return fdCall(t, "POST", base+"/v0/messages", tokA.Token, map[string]any{"request_id": rid, "recipient_ids": []string{b},
			"body": map[string]any{"text": strings.Repeat("x", 600) + rid}})
	}
	var (
		mu      sync.Mutex
		acked   = map[string]fdSent{}
		refused []string
		next    atomic.Int64
		full    atomic.Bool
	)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !full.Load() && next.Load() < 100_000 {
				rid := fmt.Sprintf("send-%06d", next.Add(1))
				status, retryAfter, env := send(rid)
				mu.Lock()
				switch {
				case status == 200 && env.OK:
					var s fdSent
					_ = json.Unmarshal(env.Data, &s)
					acked[rid] = s
				case status == 503 && env.Error != nil && env.Error.Code == "STORAGE_UNAVAILABLE" && retryAfter != "":
					refused = append(refused, rid)
					full.Store(true)
				default:
					t.Errorf("send %s: %d %+v (Retry-After %q)", rid, status, env.Error, retryAfter)
					full.Store(true)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if t.Failed() || len(refused) == 0 {
		t.Fatalf("%d sends and none refused", next.Load())
	}
	fullAt := time.Now()
	t.Logf("%d sends acknowledged before the disk was full, %d refused", len(acked), len(refused))

	// While full: writes refused, reads served, the gauges and stats say so.
	if status, _, _ := send(refused[0]); status != 503 {
		t.Fatalf("a retry while full: %d, want 503", status)
	}
	var someAcked string
	for rid := range acked {
		someAcked = rid
		break
	}
	for _, c := range []struct{ method, path, token string }{
		{"GET", "/v0/describe", tokA.Token},
		{"GET", "/v0/status?operation=message.send&request_id=" + someAcked, tokA.Token},
		{"GET", "/v0/messages/" + acked[someAcked].ResourceID, tokB.Token},
		{"GET", "/v0/feed/wait?consumer_id=" + con.ConsumerID + "&timeout_ms=100", tokB.Token},
	} {
		if status, _, env := fdCall(t, c.method, base+c.path, c.token, nil); status != 200 || !env.OK {
			t.Fatalf("%s %s while the disk is full: %d %+v", c.method, c.path, status, env.Error)
		}
	}
	if status, _, env := fdCall(t, "POST", base+"/v0/inbox/read", tokB.Token, map[string]any{"consumer_id": con.ConsumerID, "limit": 10}); status != 200 || !env.OK {
		t.Fatalf("inbox.read while the disk is full: %d %+v", status, env.Error)
	}
	metricsText := func() string {
		resp, err := http.Get("http://" + srv.MetricsAddr() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return string(raw)
	}
	if m := metricsText(); !strings.Contains(m, "waypost_store_writes_refused 1") || !strings.Contains(m, "waypost_store_volume_free_bytes ") {
		t.Fatalf("metrics while full lack the gauges:\n%s", grepLines(m, "waypost_store_"))
	}
	st, err := svc.GetStats(ctx, sp.SpaceID, domain.StatsOptions{})
	if err != nil || st.Storage == nil || !st.Storage.WritesRefused || st.Storage.FreeBytes >= st.Storage.NeededBytes || st.Storage.RefusedSince == nil {
		t.Fatalf("stats while full: %+v %v", st.Storage, err)
	}
	time.Sleep(1500 * time.Millisecond) // the recovery loop checks about 30 times meanwhile

	// Room again: the refused send commits within seconds, without a restart.
	if err := fsys.Remove(filler); err != nil {
		t.Fatal(err)
	}
	freed := time.Now()
	for _, rid := range refused {
		for {
			status, _, env := send(rid)
			if status == 200 && env.OK {
				var s fdSent
				_ = json.Unmarshal(env.Data, &s)
				acked[rid] = s
				break
			}
			if time.Since(freed) > 10*time.Second {
				t.Fatalf("send %s still refused 10 s after space was freed: %d %+v", rid, status, env.Error)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	t.Logf("a send committed %v after space was freed (refused for %v)", time.Since(freed).Round(time.Millisecond), freed.Sub(fullAt).Round(time.Millisecond))
	// The same request_id across the outage: the original result.
	if status, _, env := send(someAcked); status != 200 {
		t.Fatalf("retry of %s: %d %+v", someAcked, status, env.Error)
	} else {
		var s fdSent
		_ = json.Unmarshal(env.Data, &s)
		if s != acked[someAcked] {
			t.Fatalf("retry of %s across the outage: %+v, first %+v", someAcked, s, acked[someAcked])
		}
	}
	if m := metricsText(); !strings.Contains(m, "waypost_store_writes_refused 0") {
		t.Fatalf("metrics after recovery:\n%s", grepLines(m, "waypost_store_"))
	}

	// Every acknowledged send is in B's inbox exactly once.
	seen := map[string]int{}
	var cursor any
	for {
		status, _, env := fdCall(t, "POST", base+"/v0/inbox/read", tokB.Token, map[string]any{"consumer_id": con.ConsumerID, "limit": 200, "cursor": cursor})
		if status != 200 {
			t.Fatalf("inbox.read: %d %+v", status, env.Error)
		}
		var page struct {
			Items []struct {
				ResourceID string `json:"resource_id"`
			} `json:"items"`
			NextCursor string `json:"next_cursor"`
			HasMore    bool   `json:"has_more"`
		}
		if err := json.Unmarshal(env.Data, &page); err != nil {
			t.Fatal(err)
		}
		for _, it := range page.Items {
			seen[it.ResourceID]++
		}
		cursor = page.NextCursor
		if !page.HasMore {
			break
		}
	}
	for rid, s := range acked {
		if seen[s.ResourceID] != 1 {
			t.Fatalf("%s (%s) read back %d times", rid, s.ResourceID, seen[s.ResourceID])
		}
	}
	if len(seen) != len(acked) {
		t.Fatalf("the inbox holds %d messages, %d sends were acknowledged", len(seen), len(acked))
	}
	warns := strings.Count(logs.String(), "writes refused until there is room")
	engineErrors := strings.Count(logs.String(), `"msg":"item store: `) - warns
	perRequest := strings.Count(logs.String(), `"msg":"operation failed"`)
	if limit := int(freed.Sub(fullAt)/(5*time.Second)) + 2; warns > limit || engineErrors > 10 || perRequest > 0 {
		t.Fatalf("%d WARN lines about the room (at most %d), %d other store lines and %d per refused request in %v of refusal",
			warns, limit, engineErrors, perRequest, freed.Sub(fullAt))
	}
}

// grepLines returns the lines of text that contain s.
func grepLines(text, s string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
