package functions_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/e2e/wire"
	"github.com/waypost/waypost/functions/channelhost/channelhosttest"
	"github.com/waypost/waypost/functions/config"
	"github.com/waypost/waypost/internal/emulator"
	"github.com/waypost/waypost/internal/platform"
	"github.com/waypost/waypost/internal/syncbuf"
	"github.com/waypost/waypost/store/dynamo"
	"github.com/waypost/waypost/store/s3blob"
)

const channelSecret = "wpc_e2e-channel-secret-0123456789"

// buildChannel builds the channel container's binary (cmd/waypost-channel) as its Dockerfile does, for this
// machine.
func buildChannel(t *testing.T) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to build waypost-channel with: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "waypost-channel")
	cmd := exec.Command(gobin, "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, "../cmd/waypost-channel")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building waypost-channel: %v\n%s", err, b)
	}
	return bin
}

// channelProc is the channel container's process.
type channelProc struct {
	url  string
	cmd  *exec.Cmd
	logs *syncbuf.Buffer
	exit chan error
}

// startChannel runs the waypost-channel binary with env on a free loopback port and waits for /healthz.
func startChannel(t *testing.T, bin string, env []string) *channelProc {
	t.Helper()
	addr := emulator.FreeAddr(t)
	cmd := exec.Command(bin, "--addr", addr)
	cmd.Env = env
	logs := &syncbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting waypost-channel: %v", err)
	}
	p := &channelProc{url: "http://" + addr, cmd: cmd, logs: logs, exit: make(chan error, 1)}
	go func() { p.exit <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.exit
		if t.Failed() {
			t.Logf("waypost-channel logs:\n%s", logs.String())
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(p.url + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("waypost-channel not healthy on %s: %v\n%s", addr, err, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// feedWait is one GET /v0/feed/wait on the channel process (safe off the test goroutine).
func (p *channelProc) feedWait(token, consumer, cursor string, timeoutMS int) (wire.Page, error) {
	return channelhosttest.FeedPage[wire.Page](p.url+channelhosttest.WaitPath(consumer, cursor, timeoutMS), token)
}

// pastClock is a clock running behind by a fixed duration.
type pastClock struct{ behind time.Duration }

func (c pastClock) Now() time.Time { return time.Now().Add(-c.behind) }

// logLines returns the JSON log lines of a process whose msg is msg.
func logLines(logs, msg string) []map[string]any {
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(logs))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if i := bytes.IndexByte(line, '{'); i >= 0 {
			var rec map[string]any
			if json.Unmarshal(line[i:], &rec) == nil && rec["msg"] == msg {
				out = append(out, rec)
			}
		}
	}
	return out
}

// TestAWSFunctions runs every AWS process through its real binary, each given exactly the variables
// config.VarsFor lists for it: the memory, blobs, MCP and sweeper bootstraps under aws-lambda-rie (next to
// admin and mailbox), and the channel container's waypost-channel, against DynamoDB (minidyn) and S3
// (versitygw). A commit by the mailbox function wakes a feed.wait pending on the channel process; a
// feed.wait with nothing new answers at its timeout; the memory function publishes a revision of a blob the
// blobs function uploaded; the MCP function lists its tools and answers a tool call; the sweeper expires an
// upload whose time passed, once.
func TestAWSFunctions(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the Lambda bootstraps and the channel container; skipped in -short mode")
	}
	const prefix = "e2e-blobs/"
	e := newLambdaEnv(t, map[string]string{config.EnvBlobPrefix: prefix, config.EnvChannelSecret: channelSecret, config.EnvLogLevel: "debug"})
	names := []string{"admin", "mailbox", "memory", "blobs", "mcp", "sweeper"}
	bins := buildFunctions(t, names...)
	channelProc := startChannel(t, buildChannel(t), e.env(t, config.Channel))
	e.values[config.EnvChannelURL] = channelProc.url
	fns := e.start(t, bins, names...)
	admin, mailbox, memory, blobs, mcpFn, sweeper := fns["admin"], fns["mailbox"], fns["memory"], fns["blobs"], fns["mcp"], fns["sweeper"]

	// A space with a writer A (source of a collection) and a reader B (consumer, memory.read grant).
	n := 0
	rid := func(p string) string { n++; return fmt.Sprintf("%s-%d", p, n) }
	adm := func(path string, body map[string]any) map[string]any {
		body["request_id"] = rid("adm")
		v, _ := okData[map[string]any](t, admin, "POST", "/admin/v0"+path, adminSecret, body)
		return v
	}
	sp := adm("/spaces", map[string]any{"display_name": "aws"})["space_id"].(string)
	scopes := []string{"message.send", "message.read", "receipt.write", "blob.write", "blob.read", "memory.read", "memory.write"}
	a, b := newParty(t, admin, sp, "A", rid, scopes...), newParty(t, admin, sp, "B", rid, scopes...)
	coll := adm("/spaces/"+sp+"/collections", map[string]any{"source_actor_id": a.actor, "scope": "e2e notes"})["collection_id"].(string)
	adm("/spaces/"+sp+"/grants", map[string]any{"actor_id": b.actor, "permission": "memory.read", "collection_id": coll})

	// The functions publish the AWS limits: blobs as large as embedded (they never pass through a function).
	d, _ := okData[struct {
		Limits       map[string]any  `json:"limits"`
		Capabilities map[string]bool `json:"capabilities"`
	}](t, mailbox, "GET", "/v0/describe", a.token, nil)
	if d.Limits["feed_wait_max_ms"] != float64(25000) || d.Limits["max_blob_bytes"] != float64(100<<20) {
		t.Fatalf("describe limits: feed_wait_max_ms %v, max_blob_bytes %v", d.Limits["feed_wait_max_ms"], d.Limits["max_blob_bytes"])
	}
	// feed.wait is served (the container over HTTP; the functions by polling the durable feed), and so are webhooks.
	if !d.Capabilities["live_feed"] || !d.Capabilities["webhook_events"] {
		t.Fatalf("describe capabilities: %v", d.Capabilities)
	}
	// The stack serves no OAuth authorization server (README): describe must not tell an OAuth-only host
	// that it can connect (RFC §11.3).
	if d.Capabilities["oauth"] {
		t.Fatal("describe publishes oauth: true on AWS, where no authorization server is served")
	}

	t.Run("feed.wait on the channel container", func(t *testing.T) {
		// B's long poll is pending on the channel process when the mailbox function commits a message to B.
		first, err := channelProc.feedWait(b.token, b.consumer, "", 0)
		if err != nil || len(first.Items) != 0 {
			t.Fatalf("B's feed before anything: %+v, %v", first, err)
		}
		pending := channelhosttest.StartWait[wire.Page](t, channelProc.url, channelSecret, sp,
			channelProc.url+channelhosttest.WaitPath(b.consumer, first.NextCursor, 20000), b.token)
		sent, _ := okData[wire.Send](t, mailbox, "POST", "/v0/messages", a.token, map[string]any{"request_id": "wake-1",
			"recipient_ids": []string{b.actor}, "body": map[string]any{"text": "wake up"}})
		woke := pending.Answer(t)
		if woke.Err != nil || len(woke.Page.Items) != 1 || woke.Page.Items[0].ResourceID != sent.ResourceID || woke.Elapsed > 10*time.Second {
			t.Fatalf("woken feed.wait after %v: %+v, %v (sent %+v)", woke.Elapsed, woke.Page, woke.Err, sent)
		}
		// Nothing new: the wait answers an empty page at its timeout.
		start := time.Now()
		idle, err := channelProc.feedWait(b.token, b.consumer, woke.Page.NextCursor, 1500)
		if elapsed := time.Since(start); err != nil || len(idle.Items) != 0 || elapsed < 1500*time.Millisecond || elapsed > 8*time.Second {
			t.Fatalf("idle feed.wait: %+v, %v after %v (timeout_ms 1500)", idle, err, elapsed)
		}
		// The mailbox function logged no failed announcement.
		if warn := logLines(mailbox.logs.String(), "livefeed: announcing to the channel service failed"); len(warn) > 0 {
			t.Fatalf("announcements failed: %v", warn)
		}
	})

	// blobs: prepare, upload (straight to S3 through the presigned URL), commit, download (a redirect to a
	// presigned GET).
	content := []byte("# Notes\n\x00\xff binary-safe \xe2\x9c\x93\n")
	sum := sha256.Sum256(content)
	prep, _ := okData[domain.BlobPrepareResult](t, blobs, "POST", "/v0/blobs", a.token, map[string]any{"request_id": rid("prep"),
		"content_type": "text/markdown", "size_bytes": len(content), "sha256": hex.EncodeToString(sum[:])})
	if !strings.HasPrefix(prep.UploadURL, e.s3.Endpoint+"/") || !strings.Contains(prep.UploadURL, "X-Amz-Signature=") {
		t.Fatalf("upload_url is not a presigned S3 URL: %s", prep.UploadURL)
	}
	if prep.UploadMethod != http.MethodPut {
		t.Fatalf("upload_method %q, want PUT", prep.UploadMethod)
	}
	if status := rawPut(t, prep, content); status != http.StatusOK {
		t.Fatalf("presigned PUT: status %d", status)
	}
	sealed, _ := okData[struct {
		State string `json:"state"`
	}](t, blobs, "POST", "/v0/blobs/commit", a.token, map[string]any{"request_id": rid("seal"), "upload_id": prep.UploadID})
	if sealed.State != "sealed" {
		t.Fatalf("blob.commit: %+v", sealed)
	}
	status, h, _ := blobs.invoke(t, "GET", "/v0/blobs/"+prep.BlobID+"/content", map[string]string{"authorization": "Bearer " + a.token}, nil)
	if status != http.StatusFound || h.Get("Etag") != `"`+hex.EncodeToString(sum[:])+`"` || !strings.HasPrefix(h.Get("Location"), e.s3.Endpoint+"/") {
		t.Fatalf("blob content: %d %v", status, h)
	}
	resp, err := http.Get(h.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || !bytes.Equal(got, content) || resp.Header.Get("Content-Type") != "text/markdown" {
		t.Fatalf("presigned download: %d %q %v", resp.StatusCode, got, err)
	}

	// memory: a snapshot revision of that blob, read back by B (memory.read grant).
	rev, _ := okData[struct {
		Revision        int64  `json:"revision"`
		Changed         bool   `json:"changed"`
		SubmissionState string `json:"submission_state"`
	}](t, memory, "POST", "/v0/collections/"+coll+"/revisions", a.token, map[string]any{"request_id": rid("mem"), "collection_id": coll,
		"expected_revision": 0, "mode": "snapshot", "items": []any{map[string]any{"item_id": "a", "blob_id": prep.BlobID, "path": "notes/a.md"}},
		"delete_ids": []any{}})
	if rev.Revision != 1 || !rev.Changed || rev.SubmissionState != "committed" {
		t.Fatalf("memory.publish: %+v", rev)
	}
	items, _ := okData[struct {
		Revision int64 `json:"revision"`
		Items    []struct {
			ItemID string `json:"item_id"`
			BlobID string `json:"blob_id"`
			Path   string `json:"path"`
		} `json:"items"`
	}](t, memory, "GET", "/v0/collections/"+coll+"/items", b.token, nil)
	if items.Revision != 1 || len(items.Items) != 1 || items.Items[0].BlobID != prep.BlobID || items.Items[0].Path != "notes/a.md" {
		t.Fatalf("memory.read by B: %+v", items)
	}

	// mcp: the tool list and one tool call, over the stateless Streamable HTTP transport.
	mcpCall := func(id int, method string, params any) map[string]any {
		t.Helper()
		req := map[string]any{"jsonrpc": "2.0", "id": id, "method": method}
		if params != nil {
			req["params"] = params
		}
		body, _ := json.Marshal(req)
		status, _, raw := mcpFn.invoke(t, "POST", "/mcp", map[string]string{"authorization": "Bearer " + b.token,
			"content-type": "application/json", "accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18"}, body)
		var resp struct {
			Result map[string]any `json:"result"`
			Error  any            `json:"error"`
		}
		if err := json.Unmarshal(raw, &resp); status != 200 || err != nil || resp.Error != nil || resp.Result == nil {
			t.Fatalf("MCP %s: status %d, %s", method, status, raw)
		}
		return resp.Result
	}
	mcpCall(1, "initialize", map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "waypost-e2e", "version": "1"}})
	var tools []string
	for _, tl := range mcpCall(2, "tools/list", nil)["tools"].([]any) {
		tools = append(tools, tl.(map[string]any)["name"].(string))
	}
	for _, want := range []string{"waypost_describe", "waypost_send", "waypost_inbox", "waypost_ack", "waypost_blob_prepare", "waypost_memory_publish", "waypost_memory_read", "waypost_wait"} {
		if !slices.Contains(tools, want) {
			t.Errorf("MCP tools/list lacks %s: %q", want, tools)
		}
	}
	call := mcpCall(3, "tools/call", map[string]any{"name": "waypost_describe", "arguments": map[string]any{}})
	sc, _ := call["structuredContent"].(map[string]any)
	data, _ := sc["data"].(map[string]any)
	if call["isError"] == true || sc["ok"] != true || data["space_id"] != sp || data["actor_id"] != b.actor {
		t.Fatalf("MCP waypost_describe: %v", call)
	}
	if status, _, _ := mcpFn.invoke(t, "POST", "/mcp", map[string]string{"content-type": "application/json"}, []byte(`{}`)); status != 401 {
		t.Fatalf("MCP without a token: %d", status)
	}

	// sweeper: an upload prepared two hours ago (by a service on the same table whose clock is behind) has
	// expired; one invocation expires it and deletes its bytes, the next finds nothing.
	st, err := dynamo.New(e.ddb.Client, e.table, dynamo.Options{})
	if err != nil {
		t.Fatal(err)
	}
	bs, err := s3blob.New(e.s3.Client(), e.bucket, s3blob.Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	past, err := domain.New(domain.Config{Store: st, Blobs: bs, Clock: pastClock{2 * time.Hour}, IDs: platform.IDs{}, CursorKey: []byte(cursorKey)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pa, err := past.Authenticate(ctx, a.token)
	if err != nil {
		t.Fatal(err)
	}
	stale := []byte("never sealed")
	staleSum := sha256.Sum256(stale)
	old, err := past.PrepareBlob(ctx, pa, domain.BlobPrepareRequest{RequestID: rid("old"), ContentType: "text/plain",
		SizeBytes: int64(len(stale)), SHA256: hex.EncodeToString(staleSum[:])})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := past.Upload(ctx, pa, old.UploadID, "text/plain", int64(len(stale)), bytes.NewReader(stale)); err != nil {
		t.Fatal(err)
	}
	objectsOf := func(blobID string) int {
		out, err := e.s3.Client().ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(e.bucket), Prefix: aws.String(prefix)})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, o := range out.Contents {
			if strings.Contains(aws.ToString(o.Key), blobID) {
				n++
			}
		}
		return n
	}
	if objectsOf(old.BlobID) != 1 || objectsOf(prep.BlobID) != 1 {
		t.Fatalf("before the sweep: %d object(s) of the stale upload, %d of the sealed blob", objectsOf(old.BlobID), objectsOf(prep.BlobID))
	}
	scheduled := []byte(`{"version":"0","id":"e2e","detail-type":"Scheduled Event","source":"aws.events","account":"123456789012",` +
		`"time":"2026-11-30T00:00:00Z","region":"us-east-1","resources":["arn:aws:events:us-east-1:123456789012:rule/waypost-sweeper"],"detail":{}}`)
	var swept struct {
		Expired int  `json:"expired"`
		Batches int  `json:"batches"`
		More    bool `json:"more"`
	}
	if raw := sweeper.invokeRaw(t, scheduled); json.Unmarshal(raw, &swept) != nil || swept.Expired != 1 || swept.More {
		t.Fatalf("first sweep: %s", raw)
	}
	if objectsOf(old.BlobID) != 0 || objectsOf(prep.BlobID) != 1 {
		t.Fatalf("after the sweep: %d object(s) of the stale upload, %d of the sealed blob", objectsOf(old.BlobID), objectsOf(prep.BlobID))
	}
	oldInfo, _ := okData[struct {
		State string `json:"state"`
	}](t, blobs, "GET", "/v0/blobs/"+old.BlobID, a.token, nil)
	if oldInfo.State != "expired" {
		t.Fatalf("the swept upload is %q", oldInfo.State)
	}
	if raw := sweeper.invokeRaw(t, scheduled); json.Unmarshal(raw, &swept) != nil || swept.Expired != 0 || swept.Batches != 1 {
		t.Fatalf("second sweep: %s", raw)
	}
	// The function's log lines reach the test through the emulator's output, read concurrently: wait for them.
	sweeps := logLines(sweeper.logs.String(), "sweep")
	for deadline := time.Now().Add(10 * time.Second); len(sweeps) < 2 && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		sweeps = logLines(sweeper.logs.String(), "sweep")
	}
	if len(sweeps) != 2 || sweeps[0]["expired"] != float64(1) || sweeps[1]["expired"] != float64(0) || sweeps[0]["function"] != "sweeper" {
		t.Fatalf("sweeper log lines: %v\n%s", sweeps, sweeper.logs.String())
	}

	t.Run("space deletion through the admin and sweeper functions", func(t *testing.T) {
		// A second space with a message whose body is an S3 object and a sealed blob.
		sp2 := adm("/spaces", map[string]any{"display_name": "doomed"})["space_id"].(string)
		w := adm("/spaces/"+sp2+"/actors", map[string]any{})["actor_id"].(string)
		wtok := adm("/spaces/"+sp2+"/tokens", map[string]any{"actor_id": w, "scopes": scopes})["token"].(string)
		okData[wire.Send](t, mailbox, "POST", "/v0/messages", wtok, map[string]any{"request_id": "doomed-1",
			"body": map[string]any{"text": strings.Repeat("a body stored in S3 ", 400)}})
		now, err := domain.New(domain.Config{Store: st, Blobs: bs, Clock: platform.Clock{}, IDs: platform.IDs{}, CursorKey: []byte(cursorKey)})
		if err != nil {
			t.Fatal(err)
		}
		pw, err := now.Authenticate(ctx, wtok)
		if err != nil {
			t.Fatal(err)
		}
		text := []byte("doomed blob")
		sum := sha256.Sum256(text)
		bp, err := now.PrepareBlob(ctx, pw, domain.BlobPrepareRequest{RequestID: "doomed-blob", ContentType: "text/plain",
			SizeBytes: int64(len(text)), SHA256: hex.EncodeToString(sum[:])})
		if err == nil {
			_, err = now.Upload(ctx, pw, bp.UploadID, "text/plain", int64(len(text)), bytes.NewReader(text))
		}
		if err == nil {
			_, err = now.CommitBlob(ctx, pw, domain.BlobCommitRequest{RequestID: "doomed-seal", UploadID: bp.UploadID})
		}
		if err != nil {
			t.Fatal(err)
		}
		if n := objectsOf("spaces/" + sp2 + "/"); n != 2 {
			t.Fatalf("the doomed space has %d objects, want its body and its blob", n)
		}
		del, _ := okData[struct {
			State string `json:"state"`
		}](t, admin, "DELETE", "/admin/v0/spaces/"+sp2, adminSecret, nil)
		if del.State != "deleting" {
			t.Fatalf("DELETE answered %q", del.State)
		}
		if status, env := mailbox.call(t, "GET", "/v0/describe", wtok, nil); status != 401 || env.OK {
			t.Fatalf("a token of the deleting space: %d %+v", status, env.Error)
		}
		var run struct {
			DeletionBatches    int      `json:"deletion_batches"`
			DeletionsCompleted []string `json:"deletions_completed"`
		}
		if raw := sweeper.invokeRaw(t, scheduled); json.Unmarshal(raw, &run) != nil || run.DeletionBatches == 0 || !slices.Contains(run.DeletionsCompleted, sp2) {
			t.Fatalf("the sweep that deletes: %s", raw)
		}
		got, _ := okData[struct {
			State    string `json:"state"`
			Deletion struct {
				Removed struct {
					Objects   int              `json:"objects"`
					Resources map[string]int64 `json:"resources"`
				} `json:"removed"`
			} `json:"deletion"`
		}](t, admin, "GET", "/admin/v0/spaces/"+sp2, adminSecret, nil)
		if got.State != "deleted" || got.Deletion.Removed.Objects != 2 || got.Deletion.Removed.Resources["messages"] != 1 || got.Deletion.Removed.Resources["blobs"] != 1 {
			t.Fatalf("after the sweep: %+v", got)
		}
		if n := objectsOf("spaces/" + sp2 + "/"); n != 0 {
			t.Fatalf("%d objects of the deleted space left in S3", n)
		}
	})

	t.Run("metrics in the embedded metric format", func(t *testing.T) {
		// The mailbox function wrote an EMF document for message.send: namespace, dimensions, latency values.
		var found bool
		for _, line := range strings.Split(mailbox.logs.String(), "\n") {
			var doc map[string]any
			if i := strings.IndexByte(line, '{'); i < 0 || json.Unmarshal([]byte(line[i:]), &doc) != nil {
				continue
			}
			meta, _ := doc["_aws"].(map[string]any)
			if meta == nil || doc["Operation"] != "message.send" || doc["Outcome"] != "ok" || doc["Function"] != "mailbox" {
				continue
			}
			if lat, _ := doc["RequestLatency"].([]any); len(lat) > 0 && strings.Contains(line, `"Namespace":"Waypost"`) {
				found = true
			}
		}
		if !found {
			t.Fatalf("no EMF document for message.send in the mailbox function's log:\n%s", mailbox.logs.String())
		}
	})

	// Every HTTP function logged its requests; the channel process logged the feed.waits it served.
	for _, f := range []*lambdaFn{admin, mailbox, memory, blobs, mcpFn} {
		if len(logLines(f.logs.String(), "request")) == 0 {
			t.Errorf("%s: no request log lines:\n%s", f.name, f.logs.String())
		}
	}
	waits := 0
	for _, rec := range logLines(channelProc.logs.String(), "request") {
		if rec["path"] == "/v0/feed/wait" && rec["function"] == "channel" {
			waits++
		}
	}
	if waits < 3 {
		t.Errorf("channel process logged %d feed.wait requests:\n%s", waits, channelProc.logs.String())
	}

	// SIGTERM (ECS stopping the task): the channel process stops gracefully, answering a pending long poll at once.
	head, err := channelProc.feedWait(b.token, b.consumer, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		// An empty page, or (shutdown cut its store read short) 503 STORAGE_UNAVAILABLE: never items, never
		// an empty response.
		p, status, code, err := channelhosttest.FeedWait[wire.Page](channelProc.url+channelhosttest.WaitPath(b.consumer, head.NextCursor, 20000), b.token)
		if err == nil && !(status == 200 && len(p.Items) == 0 && p.NextCursor != "" || status == 503 && code == "STORAGE_UNAVAILABLE") {
			err = fmt.Errorf("answered %d %s %+v at shutdown", status, code, p)
		}
		done <- err
	}()
	channelhosttest.WaitSubscribed(t, channelProc.url, channelSecret, sp, 1)
	if err := channelProc.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the pending wait at shutdown: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the pending wait did not answer after SIGTERM")
	}
	select {
	case err := <-channelProc.exit:
		channelProc.exit <- err // for the cleanup
		if err != nil {
			t.Fatalf("waypost-channel exited with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("waypost-channel did not exit after SIGTERM")
	}
}
