package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/waypost/waypost/e2e/wire"
)

// waypost runs the CLI with the admin secret and returns its output and error.
func waypost(args ...string) (stdout, stderr string, err error) {
	cmd := exec.Command(binPath, args...)
	cmd.Env = append(os.Environ(), "WAYPOST_ADMIN_SECRET="+adminSecret)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

// blobFile is where the file blob store keeps an object (store/fsblob's layout).
func blobFile(data, key string) string {
	sum := sha256.Sum256([]byte(key))
	h := hex.EncodeToString(sum[:])
	return filepath.Join(data, "blobs", h[:2], h[2:4], h)
}

// TestBackupUnderLoadAndVerify: `waypost backup` taken while clients keep sending (inline bodies, bodies
// in the blob store, attachments) restores to a data directory that `waypost verify` passes, that the
// server verifies at its first start and serves: every send answered before the backup began is there,
// body and attachment readable. In a second copy one blob file is removed: verify then lists exactly that
// blob and the messages that attach it (exit status 1), and the server refuses to serve that restore.
func TestBackupUnderLoadAndVerify(t *testing.T) {
	s := startServer(t)
	adm := newSpace(t, s, "backup")
	adm.rateLimits(t, 100000, 1000000)
	obs := adm.observer(t)
	b := adm.participant(t, "b")
	writer := adm.token(t, adm.actor(t, "writer"), "", "message.send", "blob.write", "blob.read").Token
	attachments := []string{uploadBlob(t, s, writer, "first attachment"), uploadBlob(t, s, writer, "second attachment")}

	var answered sync.Map // request_id → message_id of every send answered
	var acked atomic.Int64
	var failures sync.Map
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				rid := fmt.Sprintf("g%d-%d", g, i)
				body := map[string]any{"request_id": rid, "recipient_ids": []string{b.actor}, "body": map[string]any{"text": "load " + rid}}
				switch i % 5 {
				case 1:
					body["body"] = map[string]any{"text": strings.Repeat("big ", 6<<10)} // over the inline size: a body object
				case 2:
					body["attachment_ids"] = []string{attachments[(g+i)%2]}
				}
				r, err := s.roundTrip(context.Background(), request{Method: "POST", Path: "/v0/messages", Token: writer, Body: body})
				var d wire.Send
				if err == nil {
					err = checkEnvelope(r)
				}
				if err == nil && !r.Env.OK {
					err = fmt.Errorf("%s", r)
				}
				if err == nil {
					err = json.Unmarshal(r.Env.Data, &d)
				}
				if err != nil {
					failures.Store(rid, err)
					return
				}
				answered.Store(rid, d.ResourceID)
				acked.Add(1)
			}
		}()
	}
	waitAcked := func(n int64) {
		deadline := time.Now().Add(60 * time.Second)
		for acked.Load() < n && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitAcked(50)
	var before []string
	answered.Range(func(k, _ any) bool { before = append(before, k.(string)); return true })
	dir := filepath.Join(t.TempDir(), "backup")
	out, errOut, err := waypost("backup", dir, "--url", s.base)
	waitAcked(int64(len(before)) + 50) // the load goes on after the backup too
	close(stop)
	wg.Wait()
	failures.Range(func(k, v any) bool { t.Errorf("send %s under load: %v", k, v); return true })
	if err != nil {
		t.Fatalf("waypost backup: %v\n%s%s", err, out, errOut)
	}
	t.Logf("backup with %d sends answered before it began, %d in all:\n%s", len(before), acked.Load(), out)
	// A second copy to damage: one of the attachments loses its file.
	damaged := filepath.Join(t.TempDir(), "damaged")
	if out, errOut, err := waypost("backup", damaged, "--url", s.base); err != nil {
		t.Fatalf("second backup: %v\n%s%s", err, out, errOut)
	}

	if out, errOut, err := waypost("verify", "--data", dir); err != nil || out != "" {
		t.Fatalf("verify of the backup: %v\n%s%s", err, out, errOut)
	} else {
		t.Logf("verify: %s", strings.TrimSpace(errOut))
	}
	r := startServerOn(t, dir)
	if _, err := os.Stat(filepath.Join(dir, "RESTORE-VERIFIED")); err != nil {
		t.Errorf("the restored server did not record its verification: %v", err)
	}
	items, _ := readAll(t, r, obs, nil)
	restored := map[string]string{} // message ID → visible
	for _, it := range items {
		if it.ItemType == "message" {
			restored[it.ResourceID] = it.VisibleSeq
		}
	}
	for _, rid := range before {
		id, _ := answered.Load(rid)
		if _, ok := restored[id.(string)]; !ok {
			t.Fatalf("send %s (message %s) answered before the backup is not in the restore", rid, id)
		}
	}
	for i, it := range items {
		if it.ItemType != "message" || i%7 != 0 {
			continue
		}
		ok[wire.Message](t, r, request{Method: "GET", Path: "/v0/messages/" + it.ResourceID, Token: obs.token})
	}
	r.stop()

	// The damaged copy: remove the first attachment's file.
	if err := os.Remove(blobFile(damaged, "spaces/"+adm.space.SpaceID+"/blobs/"+attachments[0])); err != nil {
		t.Fatal(err)
	}
	out, errOut, err = waypost("verify", "--data", damaged, "--json")
	if err == nil {
		t.Fatalf("verify of a backup missing a blob file exited 0:\n%s", out)
	}
	var res struct {
		Unreadable []struct {
			Kind, ID, Problem string
			BlobID            string `json:"blob_id"`
		} `json:"unreadable"`
	}
	if jerr := json.Unmarshal([]byte(out), &res); jerr != nil {
		t.Fatalf("verify --json: %v\n%s%s", jerr, out, errOut)
	}
	var listed, want []string
	for _, f := range res.Unreadable {
		listed = append(listed, f.Kind+" "+f.ID+" "+f.Problem)
	}
	want = append(want, "blob "+attachments[0]+" missing_object")
	dr := startServerOnAllowed(t, damaged)
	all, _ := readAll(t, dr, obs, nil)
	for _, it := range all {
		if it.ItemType != "message" {
			continue
		}
		m, _ := ok[wire.Message](t, dr, request{Method: "GET", Path: "/v0/messages/" + it.ResourceID, Token: obs.token})
		if slices.Contains(m.AttachmentIDs, attachments[0]) {
			want = append(want, "message "+m.MessageID+" blob_unreadable")
		}
	}
	dr.stop()
	slices.Sort(listed)
	slices.Sort(want)
	if !slices.Equal(listed, want) || len(want) < 2 {
		t.Errorf("verify listed\n%q\nwant exactly the blob and the messages that attach it\n%q", listed, want)
	}
	// Served as is, the damaged restore is refused, naming what is unreadable.
	cmd := exec.Command(binPath, "serve", "--addr", "127.0.0.1:0", "--data", damaged)
	cmd.Env = append(os.Environ(), "WAYPOST_ADMIN_SECRET="+adminSecret)
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "unreadable") || !strings.Contains(string(out), attachments[0]) {
		t.Errorf("serving a restore that misses a blob: %v\n%s", err, out)
	}
}

// startServerOnAllowed starts a server on a restore with unreadable resources (--allow-unreadable).
func startServerOnAllowed(t testing.TB, dir string) *server {
	return startServerOn(t, dir, "--allow-unreadable")
}
