package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/waypost/waypost/internal/volumefs"
)

// startOnFullVolume runs `waypost serve` on dir and watches it for up to 30 s: it must either answer HTTP
// or exit; it returns whether it listened, its output and its exit error (nil when it listened). It fails
// the test when the process is alive and deaf at the deadline. A process that listens is stopped.
func startOnFullVolume(t *testing.T, dir string) (listened bool, out string, exitErr error) {
	t.Helper()
	addr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	var mu sync.Mutex
	cmd := exec.Command(binPath, "serve", "--addr", addr, "--data", dir, "--log-level", "warn")
	cmd.Env = append(os.Environ(), "WAYPOST_ADMIN_SECRET="+adminSecret)
	w := lockedWriter{mu: &mu, b: &buf}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	output := func() string { mu.Lock(); defer mu.Unlock(); return buf.String() }
	deadline := time.After(30 * time.Second)
	for {
		select {
		case err := <-done:
			if err == nil {
				err = fmt.Errorf("exit status 0")
			}
			return false, output(), err
		case <-deadline:
			_ = cmd.Process.Kill()
			<-done
			t.Fatalf("waypost serve alive and not listening 30 s after start on a full volume:\n%s", output())
		case <-time.After(50 * time.Millisecond):
		}
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.Close()
			_ = cmd.Process.Signal(os.Interrupt)
			<-done
			return true, output(), nil
		}
	}
}

// sendUntilRefused sends from pa to pb from 4 clients until a send is refused with 503
// STORAGE_UNAVAILABLE and Retry-After, and returns the acknowledged sends (request_id → message_id); any
// other outcome fails the test.
func sendUntilRefused(t *testing.T, s *server, pa, pb participant, prefix string) map[string]string {
	t.Helper()
	var (
		mu     sync.Mutex
		acked  = map[string]string{} // request_id → message_id
		next   atomic.Int64
		full   atomic.Bool
		wg     sync.WaitGroup
		failed atomic.Value
	)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !full.Load() && next.Load() < 100_000 {
				rid := fmt.Sprintf("%s-%06d", prefix, next.Add(1))
				r, err := s.roundTrip(context.Background(), request{Method: "POST", Path: "/v0/messages", Token: pa.token,
					Body: map[string]any{"request_id": rid, "recipient_ids": []string{pb.actor}, "body": map[string]any{"text": strings.Repeat("y", 600)}}})
				switch {
				case err != nil:
					failed.Store(err.Error())
					full.Store(true)
				case r.Status == 200:
					var d struct {
						ResourceID string `json:"resource_id"`
					}
					_ = json.Unmarshal(r.Env.Data, &d)
					mu.Lock()
					acked[rid] = d.ResourceID
					mu.Unlock()
				case r.Status == 503 && r.code() == "STORAGE_UNAVAILABLE" && r.Header.Get("Retry-After") != "":
					full.Store(true)
				default:
					failed.Store(r.String())
					full.Store(true)
				}
			}
		}()
	}
	wg.Wait()
	if f := failed.Load(); f != nil {
		t.Fatalf("a send failed otherwise than 503 STORAGE_UNAVAILABLE with Retry-After: %v", f)
	}
	if !full.Load() {
		t.Fatal("the volume never filled")
	}
	return acked
}

// readOnce fails the test unless pb's inbox holds every message of acked exactly once, and nothing else.
func readOnce(t *testing.T, s *server, pb participant, acked map[string]string) {
	t.Helper()
	got, _ := readAll(t, s, pb, nil)
	seen := map[string]int{}
	for _, it := range got {
		seen[it.ResourceID]++
	}
	for rid, id := range acked {
		if seen[id] != 1 {
			t.Fatalf("%s (%s) read back %d times", rid, id, seen[id])
		}
	}
	if len(got) != len(acked) {
		t.Fatalf("%d items in the inbox, %d sends acknowledged", len(got), len(acked))
	}
}

// TestFullVolumeRestart (issue 33), on tmpfs volumes (root only; without root the same behaviour is checked
// in-process on a fault-injecting volume, server.TestRestartOnFullVolume):
//   - a fresh server on a 16 MiB volume serves, and sends commit (journal segments sized to the volume);
//   - filled until sends are refused (503), it stops gracefully on SIGTERM;
//   - restarted on the still-full volume it exits non-zero within seconds with one line naming the
//     directory and the room it needs, never alive and deaf;
//   - once space is freed it starts, and every send acknowledged before the disk filled is read back once;
//   - filled again and killed (SIGKILL) before, during and after its recovery once space is freed, it
//     restarts with every acknowledged send read back once;
//   - on a 2 MiB volume, too small for the store, start is refused the same way, naming the room.
func TestFullVolumeRestart(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounts tmpfs volumes: root only (server.TestRestartOnFullVolume covers it on a fault-injecting volume)")
	}
	dir, fsys, tmpfs := volumefs.Volume(t, 16<<20)
	if !tmpfs {
		t.Skip("tmpfs could not be mounted (server.TestRestartOnFullVolume covers it on a fault-injecting volume)")
	}
	data := filepath.Join(dir, "data")
	s := startServerOn(t, data)
	a := newSpace(t, s, "full")
	a.rateLimits(t, 100000, 100000)
	pa, pb := a.participant(t, "A"), a.participant(t, "B")
	stats, _ := ok[map[string]any](t, s, request{Method: "GET", Path: a.path("/stats"), Token: adminSecret})
	storage, _ := stats["storage"].(map[string]any)
	need, _ := storage["needed_bytes"].(float64)
	if need <= 0 || storage["writes_refused"] != false {
		t.Fatalf("stats storage: %v", storage)
	}
	filler := volumefs.Fill(t, fsys, dir, int64(need)+(1<<20))

	acked := sendUntilRefused(t, s, pa, pb, "full")
	t.Logf("%d sends acknowledged before the volume was full", len(acked))
	s.stop() // SIGTERM: a clean exit within 20 s, or the test fails

	start := time.Now()
	listened, out, exitErr := startOnFullVolume(t, data)
	if listened {
		t.Fatalf("listened on a full volume (the documented choice is to refuse): %s", out)
	}
	items := filepath.Join(data, "items")
	if !strings.Contains(out, items) || !strings.Contains(out, "needs at least") || !strings.Contains(out, "free space on that volume") ||
		strings.Count(strings.TrimSpace(out), "\n") > 1 {
		t.Fatalf("start on a full volume exited (%v) after %v without one line naming %s and the room: %q", exitErr, time.Since(start), items, out)
	}
	t.Logf("start on the full volume refused after %v: %s", time.Since(start).Round(time.Millisecond), strings.TrimSpace(out))

	if err := fsys.Remove(filler); err != nil {
		t.Fatal(err)
	}
	s.restart()
	readOnce(t, s, pb, acked)
	d := send(t, s, pa.token, map[string]any{"request_id": "after-restart", "recipient_ids": []string{pb.actor}, "body": map[string]any{"text": "room again"}})
	acked["after-restart"] = d.ResourceID

	// Full again, then kill -9 around the recovery (the server checks for room every second; the kills
	// land before, during or after it), restarted each time: nothing acknowledged is lost or doubled.
	for round, delay := range []time.Duration{0, 1100 * time.Millisecond, 2 * time.Second} {
		filler = volumefs.Fill(t, fsys, dir, int64(need)+(1<<20))
		for rid, id := range sendUntilRefused(t, s, pa, pb, fmt.Sprintf("kill%d", round)) {
			acked[rid] = id
		}
		if err := fsys.Remove(filler); err != nil {
			t.Fatal(err)
		}
		time.Sleep(delay)
		s.kill()
		s.restart()
		readOnce(t, s, pb, acked)
	}
	t.Logf("%d sends acknowledged in all, each read back once", len(acked))

	tiny, _, _ := volumefs.Volume(t, 2<<20)
	listened, out, exitErr = startOnFullVolume(t, filepath.Join(tiny, "data"))
	if listened || exitErr == nil || !strings.Contains(out, filepath.Join(tiny, "data", "items")) || !strings.Contains(out, "needs at least 3.0 MiB") {
		t.Fatalf("start on a 2 MiB volume: listened %v, exit %v: %q", listened, exitErr, out)
	}
}
