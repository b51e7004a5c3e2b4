package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/waypost/waypost/e2e/wire"
)

// spaceState is the part of GET /admin/v0/spaces/{space_id} the deletion tests read.
type spaceState struct {
	SpaceID  string `json:"space_id"`
	State    string `json:"state"`
	Deletion *struct {
		Phase   string `json:"phase"`
		Removed struct {
			Records     int64            `json:"records"`
			Objects     int64            `json:"objects"`
			ObjectBytes int64            `json:"object_bytes"`
			Resources   map[string]int64 `json:"resources"`
		} `json:"removed"`
		CompletedAt *string `json:"completed_at"`
	} `json:"deletion"`
}

func (a *admin) get(t testing.TB) spaceState {
	t.Helper()
	sp, _ := ok[spaceState](t, a.s, request{Method: "GET", Path: a.path(""), Token: adminSecret})
	return sp
}

// uploadBlob prepares, uploads and seals a blob of content with token (blob.write) and returns its ID.
func uploadBlob(t testing.TB, s *server, token, content string) string {
	t.Helper()
	sum := sha256.Sum256([]byte(content))
	prep, _ := ok[struct {
		BlobID   string `json:"blob_id"`
		UploadID string `json:"upload_id"`
	}](t, s, request{Method: "POST", Path: "/v0/blobs", Token: token, Body: map[string]any{"request_id": "bp-" + hex.EncodeToString(sum[:8]),
		"content_type": "text/plain", "size_bytes": len(content), "sha256": hex.EncodeToString(sum[:])}})
	req, err := http.NewRequest("PUT", s.base+"/v0/uploads/"+prep.UploadID+"/content", bytes.NewReader([]byte(content)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "text/plain")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := s.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("upload: HTTP %d", resp.StatusCode)
	}
	ok[map[string]any](t, s, request{Method: "POST", Path: "/v0/blobs/commit", Token: token,
		Body: map[string]any{"request_id": "bc-" + prep.UploadID, "upload_id": prep.UploadID}})
	return prep.BlobID
}

// blobFiles counts the object files under the data directory's blob store (temporary files aside).
func blobFiles(t testing.TB, data string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(filepath.Join(data, "blobs"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() && !strings.HasPrefix(d.Name(), ".tmp") {
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestDeleteSpaceSurvivesKill: deleting a space on the real binary stops every token of it at once (401);
// the server is then SIGKILLed in the middle of removing it and restarted on the same data directory; the
// deletion resumes where it stopped and reports "deleted" with what it removed, every blob file of the space
// is gone, and another space is untouched.
func TestDeleteSpaceSurvivesKill(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts the server")
	}
	// A pause between deletion batches stretches the deletion so that the kill lands in its middle.
	s := startServer(t, "--deletion-pause", "150ms")
	keep := newSpace(t, s, "keep")
	kp := keep.participant(t, "keeper")
	send(t, s, kp.token, map[string]any{"request_id": "k1", "body": map[string]any{"text": strings.Repeat("k", 20<<10)}})
	filesKept := blobFiles(t, s.data)

	doomed := newSpace(t, s, "doomed")
	a, b := doomed.participant(t, "a"), doomed.participant(t, "b")
	writer := doomed.token(t, a.actor, "", "message.send", "blob.write", "blob.read").Token
	const inline, large, blobs = 40, 10, 3
	var attach []string
	for i := range blobs {
		attach = append(attach, uploadBlob(t, s, writer, fmt.Sprintf("blob %d of the doomed space", i)))
	}
	for i := range inline {
		body := map[string]any{"request_id": fmt.Sprintf("in-%d", i), "recipient_ids": []string{b.actor}, "body": map[string]any{"text": "hello"}}
		if i == 0 {
			body["attachment_ids"] = attach
		}
		send(t, s, writer, body)
	}
	for i := range large {
		send(t, s, a.token, map[string]any{"request_id": fmt.Sprintf("big-%d", i), "recipient_ids": []string{b.actor},
			"body": map[string]any{"text": strings.Repeat("x", 20<<10)}})
	}
	if got := blobFiles(t, s.data) - filesKept; got != large+blobs {
		t.Fatalf("the doomed space has %d blob files, want %d", got, large+blobs)
	}
	page := read(t, s, b, nil, 5)
	ack(t, s, b, "ack-1", []map[string]string{{"item_id": page.Feed(t)[0].ItemID, "stage": "processed"}}, &page.NextCursor)

	del, _ := ok[spaceState](t, s, request{Method: "DELETE", Path: doomed.path(""), Token: adminSecret})
	if del.State != "deleting" {
		t.Fatalf("DELETE answered state %q", del.State)
	}
	// Every token of the space is refused from the answer on.
	for _, tok := range []string{a.token, b.token, writer} {
		fail(t, s, request{Method: "POST", Path: "/v0/inbox/read", Token: tok, Body: map[string]any{"consumer_id": b.consumer}}, "UNAUTHENTICATED")
	}
	fail(t, s, request{Method: "POST", Path: "/v0/messages", Token: a.token, Body: map[string]any{"request_id": "late", "body": map[string]any{"text": "x"}}}, "UNAUTHENTICATED")
	fail(t, s, request{Method: "POST", Path: doomed.path("/actors"), Token: adminSecret, Body: map[string]any{"request_id": "late"}}, "NOT_FOUND")

	// Kill the server once the first batch is in.
	deadline := time.Now().Add(60 * time.Second)
	var before spaceState
	for {
		before = doomed.get(t)
		if before.State != "deleting" {
			t.Fatalf("the deletion finished before the kill (state %s): raise --deletion-pause", before.State)
		}
		if before.Deletion != nil && before.Deletion.Removed.Records > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no deletion batch within 60 s: %+v", before)
		}
		time.Sleep(5 * time.Millisecond)
	}
	s.kill()
	s.restart()
	after := doomed.get(t)
	if after.State != "deleting" || after.Deletion.Removed.Records < before.Deletion.Removed.Records {
		t.Fatalf("after the restart: %+v (before the kill: %+v)", after.Deletion, before.Deletion)
	}
	t.Logf("killed in phase %s after %d records; resumed", before.Deletion.Phase, before.Deletion.Removed.Records)
	fail(t, s, request{Method: "POST", Path: "/v0/inbox/read", Token: b.token, Body: map[string]any{"consumer_id": b.consumer}}, "UNAUTHENTICATED")

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for after.State != "deleted" {
		if ctx.Err() != nil {
			t.Fatalf("not deleted within 2 minutes: %+v", after.Deletion)
		}
		time.Sleep(50 * time.Millisecond)
		after = doomed.get(t)
	}
	rm := after.Deletion.Removed
	if after.Deletion.CompletedAt == nil || rm.Resources["messages"] != inline+large || rm.Resources["blobs"] != blobs ||
		rm.Objects != large+blobs || rm.Resources["receipts"] != 1 || rm.Resources["tokens"] != 3 {
		t.Errorf("removed: %+v", rm)
	}
	if got := blobFiles(t, s.data); got != filesKept {
		t.Errorf("%d blob files left, want the other space's %d", got, filesKept)
	}
	// The other space still works, and every reference left verifies (the deleted space is skipped).
	readAll(t, s, kp, nil)
	ok[wire.Space](t, s, request{Method: "GET", Path: keep.path(""), Token: adminSecret})
	s.stop()
	if out, errOut, err := waypost("verify", "--data", s.data); err != nil || !strings.Contains(errOut, "1 skipped") {
		t.Errorf("verify after the deletion: %v\n%s%s", err, out, errOut)
	}
}

// TestMetricsEndpoint: `waypost serve --metrics-addr` answers `curl http://ADDR/metrics` with Prometheus
// text holding a latency histogram per operation and outcome, and the store's commit histograms.
func TestMetricsEndpoint(t *testing.T) {
	addr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, "--metrics-addr", addr)
	adm := newSpace(t, s, "metrics")
	a, b := adm.participant(t, "a"), adm.participant(t, "b")
	for i := range 5 {
		send(t, s, a.token, map[string]any{"request_id": fmt.Sprintf("m-%d", i), "recipient_ids": []string{b.actor}, "body": map[string]any{"text": "hi"}})
	}
	fail(t, s, request{Method: "POST", Path: "/v0/messages", Token: "wpt_wrong", Body: map[string]any{"request_id": "x", "body": map[string]any{"text": "x"}}}, "UNAUTHENTICATED")
	readAll(t, s, b, nil)

	var body []byte
	if curl, err := exec.LookPath("curl"); err == nil {
		body, err = exec.Command(curl, "-sf", "http://"+addr+"/metrics").Output()
		if err != nil {
			t.Fatalf("curl /metrics: %v", err)
		}
	} else {
		resp, err := s.http.Get("http://" + addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("/metrics is not Prometheus text: %v\n%s", err, body)
	}
	count := func(family string, labels map[string]string) uint64 {
		f := families[family]
		if f == nil || f.GetType() != dto.MetricType_HISTOGRAM {
			t.Fatalf("no histogram %s in /metrics", family)
		}
		var n uint64
	next:
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				if want, ok := labels[lp.GetName()]; ok && want != lp.GetValue() {
					continue next
				}
			}
			n += m.GetHistogram().GetSampleCount()
		}
		return n
	}
	if n := count("waypost_request_duration_seconds", map[string]string{"operation": "message.send", "outcome": "ok"}); n != 5 {
		t.Errorf("message sends observed: %d, want 5", n)
	}
	if n := count("waypost_request_duration_seconds", map[string]string{"operation": "message.send", "outcome": "UNAUTHENTICATED"}); n != 1 {
		t.Errorf("refused sends observed: %d, want 1", n)
	}
	if n := count("waypost_request_duration_seconds", map[string]string{"operation": "inbox.read"}); n == 0 {
		t.Errorf("no inbox read observed")
	}
	if n := count("waypost_store_commit_duration_seconds", map[string]string{"outcome": "ok"}); n < 5 {
		t.Errorf("store commits observed: %d", n)
	}
	count("waypost_store_commit_ops", nil)
	if n := count("waypost_store_batch_transactions", nil); n == 0 {
		t.Errorf("no group commit observed")
	}
	// The data plane's listener does not serve it.
	r, err := s.roundTrip(context.Background(), request{Method: "GET", Path: "/metrics"})
	if err != nil || r.Status != http.StatusNotFound {
		t.Errorf("/metrics on the API listener: %v %v", r.Status, err)
	}
}
