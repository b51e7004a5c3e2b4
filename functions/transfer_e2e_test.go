package functions_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/waypost/waypost/client"
	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/functions/config"
	"github.com/waypost/waypost/internal/platform"
	"github.com/waypost/waypost/internal/testzip"
	"github.com/waypost/waypost/store/dynamo"
	"github.com/waypost/waypost/store/dynamo/dynamotest"
	"github.com/waypost/waypost/store/s3blob"
	"github.com/waypost/waypost/store/s3blob/s3test"
)

// buildCLI builds the waypost command for this machine.
func buildCLI(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "waypost")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "../cmd/waypost")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building waypost: %v\n%s", err, b)
	}
	return bin
}

// stack is the emulated AWS deployment: the HTTP functions under aws-lambda-rie and the channel container
// behind the gateway stand-in, on DynamoDB (minidyn) and S3 (versitygw).
type stack struct {
	gw                               *gateway
	fns                              map[string]*lambdaFn
	table, bucket, prefix, cursorKey string
	ddb                              *dynamotest.Server
	s3Endpoint                       string
	admin                            *client.Admin
}

func startStack(t *testing.T) *stack {
	t.Helper()
	const prefix = "stack/"
	e := newLambdaEnv(t, map[string]string{config.EnvBlobPrefix: prefix, config.EnvChannelSecret: channelSecret, config.EnvMCPWaitsPerSpace: "2"})
	st := &stack{table: e.table, bucket: e.bucket, prefix: prefix, cursorKey: cursorKey, ddb: e.ddb, s3Endpoint: e.s3.Endpoint}
	names := []string{"admin", "mailbox", "memory", "blobs", "mcp"}
	bins := buildFunctions(t, names...)
	channelProc := startChannel(t, buildChannel(t), e.env(t, config.Channel))
	e.values[config.EnvChannelURL] = channelProc.url
	st.fns = e.start(t, bins, names...)
	st.gw = newGateway(t, st.fns, channelProc.url)
	st.admin = client.NewAdmin(st.gw.URL(), adminSecret)
	return st
}

// party creates an actor with a consumer and a token of scopes in space, as the owner would.
func (st *stack) party(t *testing.T, space string, scopes ...domain.Scope) (actor, token string) {
	t.Helper()
	ctx := context.Background()
	a, err := st.admin.CreateActor(ctx, space, domain.CreateActorRequest{RequestID: client.NewRequestID()})
	if err != nil {
		t.Fatal(err)
	}
	c, err := st.admin.CreateConsumer(ctx, space, domain.CreateConsumerRequest{RequestID: client.NewRequestID(), ActorID: a.ActorID, View: domain.ViewInbox})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := st.admin.CreateToken(ctx, space, domain.CreateTokenRequest{RequestID: client.NewRequestID(), ActorID: a.ActorID,
		ConsumerID: c.ConsumerID, Scopes: scopes})
	if err != nil {
		t.Fatal(err)
	}
	return a.ActorID, tok.Token
}

func randomFile(t *testing.T, dir, name string, size int64) (string, string) {
	t.Helper()
	path := filepath.Join(dir, name)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	if _, err := io.CopyN(io.MultiWriter(f, h), rand.Reader, size); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path, hex.EncodeToString(h.Sum(nil))
}

func fileSHA(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// putBlob prepares, uploads and seals content through cl and returns the prepared upload (with its blob_id).
func putBlob(ctx context.Context, t *testing.T, cl *client.Client, contentType string, content []byte) domain.BlobPrepareResult {
	t.Helper()
	sum := sha256.Sum256(content)
	prep, err := cl.PrepareBlob(ctx, domain.BlobPrepareRequest{RequestID: client.NewRequestID(), ContentType: contentType,
		SizeBytes: int64(len(content)), SHA256: hex.EncodeToString(sum[:])})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.UploadPrepared(ctx, prep, int64(len(content)), bytes.NewReader(content)); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.CommitBlob(ctx, domain.BlobCommitRequest{RequestID: client.NewRequestID(), UploadID: prep.UploadID}); err != nil {
		t.Fatal(err)
	}
	return prep
}

// rawPut sends body to a presigned upload with its signed headers and returns the status, or -1 when the
// store closed the connection before the body was sent (it may refuse before reading it).
func rawPut(t *testing.T, prep domain.BlobPrepareResult, body []byte) int {
	t.Helper()
	req := s3test.PresignedRequest(t, prep.UploadMethod, prep.UploadURL, prep.UploadHeaders, body)
	req.Header.Set("Expect", "100-continue") // the store may answer before reading the body
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Logf("PUT: %v", err)
		return -1
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestEmulatedStack runs the AWS functions behind a stand-in of API Gateway that enforces its payload
// limits (issue 17): waypost smoke passes against it; a 100 MiB blob goes up with `waypost blob put`
// straight to S3 through the presigned URL and comes back through the redirect with `waypost blob get`,
// its SHA-256 checked, while the blobs function never sees the bytes (no upload route call, small events,
// bounded memory); S3 itself refuses wrong bytes, a second PUT and an expired URL; a ZIP export larger than
// Lambda's 6 MB response is served by a redirect to an export object.
func TestEmulatedStack(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the Lambda bootstraps and moves 100 MiB; skipped in -short mode")
	}
	st := startStack(t)
	cli := buildCLI(t)
	ctx := context.Background()
	dir := t.TempDir()

	t.Run("Smoke", func(t *testing.T) {
		cmd := exec.Command(cli, "smoke", "--url", st.gw.URL(), "--blob-bytes", "2000000", "--wait-timeout", "5s")
		cmd.Env = append(os.Environ(), "WAYPOST_ADMIN_SECRET="+adminSecret)
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "steps passed") || !strings.Contains(string(out), "upload straight to storage") {
			t.Fatalf("waypost smoke against the emulated stack: %v\n%s", err, out)
		}
		t.Logf("waypost smoke:\n%s", out)
	})

	sp, err := st.admin.CreateSpace(ctx, domain.CreateSpaceRequest{RequestID: client.NewRequestID(), DisplayName: "transfer"})
	if err != nil {
		t.Fatal(err)
	}
	actor, token := st.party(t, sp.SpaceID, domain.ScopeBlobWrite, domain.ScopeBlobRead, domain.ScopeMemoryRead, domain.ScopeMemoryWrite)
	cl := client.New(st.gw.URL(), token)

	t.Run("HundredMiBBlob", func(t *testing.T) {
		const size = 100 << 20
		src, sum := randomFile(t, dir, "big.bin", size)
		env := append(os.Environ(), "WAYPOST_URL="+st.gw.URL(), "WAYPOST_TOKEN="+token)
		put := exec.Command(cli, "blob", "put", src, "--json", "--state-dir", filepath.Join(dir, "state"))
		put.Env = env
		out, err := put.Output()
		if err != nil {
			t.Fatalf("waypost blob put: %v\n%s", err, out)
		}
		var res struct {
			Info domain.BlobInfo `json:"blob"`
		}
		if err := json.Unmarshal(out, &res); err != nil || res.Info.State != domain.BlobSealed || res.Info.SHA256 != sum || res.Info.SizeBytes != size {
			t.Fatalf("waypost blob put: %s (%v)", out, err)
		}
		dst := filepath.Join(dir, "big.out")
		get := exec.Command(cli, "blob", "get", res.Info.BlobID, "-o", dst)
		get.Env = env
		if out, err := get.CombinedOutput(); err != nil {
			t.Fatalf("waypost blob get: %v\n%s", err, out)
		}
		if got := fileSHA(t, dst); got != sum {
			t.Fatalf("downloaded sha256 %s, uploaded %s", got, sum)
		}
		os.Remove(dst)
		os.Remove(src)
		// The blobs function never carried the bytes: no upload route call, every event small, the content
		// answered with a redirect, and its memory stayed far below the blob's size.
		for _, c := range st.gw.Calls() {
			if c.Target != "blobs" {
				continue
			}
			if strings.HasPrefix(c.Path, "/v0/uploads/") || c.EventBytes > 64<<10 || c.RespLen > 64<<10 {
				t.Errorf("the blobs function carried bytes: %+v", c)
			}
			if strings.HasSuffix(c.Path, "/content") && c.Status != http.StatusFound {
				t.Errorf("content answered %d, not a redirect", c.Status)
			}
		}
		rss, err := st.fns["blobs"].peakRSS()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("blobs function peak RSS after a 100 MiB upload and download: %.1f MiB", float64(rss)/(1<<20))
		if rss > 64<<20 {
			t.Errorf("blobs function peak RSS %d bytes: it held blob bytes", rss)
		}
	})

	t.Run("MCPBlobGetAnswersPresignedURL", func(t *testing.T) {
		content := []byte("# via MCP\n")
		prep := putBlob(ctx, t, cl, "text/markdown", content)
		call := func(method string, params any) map[string]any {
			body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
			req, _ := http.NewRequest(http.MethodPost, st.gw.URL()+"/mcp", bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+token)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var out struct {
				Result map[string]any `json:"result"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 || out.Result == nil {
				t.Fatalf("MCP %s: %d %v", method, resp.StatusCode, err)
			}
			return out.Result
		}
		call("initialize", map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "e2e", "version": "1"}})
		res := call("tools/call", map[string]any{"name": "waypost_blob_get", "arguments": map[string]any{"blob_id": prep.BlobID}})
		data, _ := res["structuredContent"].(map[string]any)["data"].(map[string]any)
		url, _ := data["download_url"].(string)
		if !strings.HasPrefix(url, st.s3Endpoint+"/") || data["download_expires_at"] == nil {
			t.Fatalf("waypost_blob_get: %v", res)
		}
		resp, err := http.Get(url) // no credential
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !bytes.Equal(got, content) {
			t.Fatalf("GET of the MCP download_url: %d %q", resp.StatusCode, got)
		}
	})

	t.Run("StoreRefusals", func(t *testing.T) {
		// 16 KiB: S3 refuses a taken key or an expired URL before reading the body; versitygw then resets the
		// connection (real S3 answers Expect: 100-continue first), and a body that fits the socket buffers is
		// written whole, so the test reads the refusal rather than the reset.
		content := make([]byte, 16<<10)
		if _, err := rand.Read(content); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(content)
		prep, err := cl.PrepareBlob(ctx, domain.BlobPrepareRequest{RequestID: client.NewRequestID(), ContentType: "application/octet-stream",
			SizeBytes: int64(len(content)), SHA256: hex.EncodeToString(sum[:])})
		if err != nil || !strings.HasPrefix(prep.UploadURL, st.s3Endpoint+"/") || prep.UploadHeaders["If-None-Match"] != "*" {
			t.Fatalf("prepare: %+v %v", prep, err)
		}
		wrong := bytes.Clone(content)
		wrong[1234] ^= 0xff
		if status := rawPut(t, prep, wrong); status != http.StatusBadRequest {
			t.Fatalf("S3 took wrong bytes: %d", status)
		}
		if _, err := cl.UploadPrepared(ctx, prep, int64(len(wrong)), bytes.NewReader(wrong)); !client.IsCode(err, domain.CodeChecksumMismatch) {
			t.Fatalf("client upload of wrong bytes: %v", err)
		}
		if _, err := cl.CommitBlob(ctx, domain.BlobCommitRequest{RequestID: client.NewRequestID(), UploadID: prep.UploadID}); !client.IsCode(err, domain.CodeInvalidBlob) {
			t.Fatalf("commit before any right bytes: %v", err)
		}
		if up, err := cl.UploadPrepared(ctx, prep, int64(len(content)), bytes.NewReader(content)); err != nil || up.AlreadyUploaded {
			t.Fatalf("upload: %+v %v", up, err)
		}
		// The URL is create-only: a second PUT, even of the same bytes, is refused; the client reads that as
		// already_uploaded (S3 accepted that object only with the declared digest).
		if status := rawPut(t, prep, content); status != http.StatusPreconditionFailed {
			t.Fatalf("second PUT to the same URL: %d", status)
		}
		if status := rawPut(t, prep, wrong); status/100 == 2 {
			t.Fatalf("second PUT of other bytes: %d", status)
		}
		if up, err := cl.UploadPrepared(ctx, prep, int64(len(content)), bytes.NewReader(content)); err != nil || !up.AlreadyUploaded {
			t.Fatalf("repeated upload: %+v %v", up, err)
		}
		info, err := cl.CommitBlob(ctx, domain.BlobCommitRequest{RequestID: client.NewRequestID(), UploadID: prep.UploadID})
		if err != nil || info.State != domain.BlobSealed || info.SHA256 != hex.EncodeToString(sum[:]) {
			t.Fatalf("commit: %+v %v", info, err)
		}
		bc, err := cl.OpenBlobContent(ctx, info.BlobID)
		if err != nil {
			t.Fatal(err)
		}
		stored, err := io.ReadAll(bc)
		bc.Close()
		if err != nil || !bytes.Equal(stored, content) {
			t.Fatalf("the stored bytes changed after the refused PUTs: %v", err)
		}

		// An upload whose time is about to pass (prepared by a service on the same table whose clock is
		// behind): once its URL expired, S3 refuses it.
		bs, err := s3blob.New(s3test.Require(t).Client(), st.bucket, s3blob.Options{Prefix: st.prefix})
		if err != nil {
			t.Fatal(err)
		}
		items, err := dynamo.New(st.ddb.Client, st.table, dynamo.Options{})
		if err != nil {
			t.Fatal(err)
		}
		behind, err := domain.New(domain.Config{Store: items, Blobs: bs, Clock: pastClock{time.Hour - 3*time.Second}, IDs: platform.IDs{}, CursorKey: []byte(st.cursorKey)})
		if err != nil {
			t.Fatal(err)
		}
		p, err := behind.Authenticate(ctx, token)
		if err != nil {
			t.Fatal(err)
		}
		small := content
		smallSum := sum
		late, err := behind.PrepareBlob(ctx, p, domain.BlobPrepareRequest{RequestID: client.NewRequestID(), ContentType: "application/octet-stream",
			SizeBytes: int64(len(small)), SHA256: hex.EncodeToString(smallSum[:])})
		if err != nil || !strings.HasPrefix(late.UploadURL, st.s3Endpoint+"/") {
			t.Fatalf("prepare of a late upload: %+v %v", late, err)
		}
		time.Sleep(4 * time.Second)
		if status := rawPut(t, late, small); status != http.StatusForbidden {
			t.Fatalf("PUT to an expired URL: %d", status)
		}
		if _, err := cl.UploadPrepared(ctx, late, int64(len(small)), bytes.NewReader(small)); !client.IsCode(err, domain.CodeUploadExpired) {
			t.Fatalf("client upload to an expired URL: %v", err)
		}
	})

	t.Run("ZipExportOverSixMB", func(t *testing.T) {
		coll, err := st.admin.CreateCollection(ctx, sp.SpaceID, domain.CreateCollectionRequest{RequestID: client.NewRequestID(), SourceActorID: actor, Scope: "export"})
		if err != nil {
			t.Fatal(err)
		}
		content := make([]byte, 8<<20)
		if _, err := rand.Read(content); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(content)
		prep := putBlob(ctx, t, cl, "application/octet-stream", content)
		zero := int64(0)
		if _, err := cl.PublishMemory(ctx, coll.CollectionID, domain.MemoryPublishRequest{RequestID: client.NewRequestID(), ExpectedRevision: &zero,
			Mode: "snapshot", Items: []domain.MemoryItemInput{{ItemID: "big", BlobID: prep.BlobID, Path: "data/big.bin"}}}); err != nil {
			t.Fatal(err)
		}
		rc, err := cl.OpenMemoryExportZip(ctx, coll.CollectionID, nil)
		if err != nil {
			t.Fatal(err)
		}
		archive, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		if len(archive) <= 6_000_000 {
			t.Fatalf("the export has %d bytes, not more than 6 MB", len(archive))
		}
		big, found := testzip.Entries(t, archive)["files/data/big.bin"]
		if !found {
			t.Fatal("the export lacks files/data/big.bin")
		}
		if got := sha256.Sum256(big); got != sum {
			t.Fatal("files/data/big.bin in the export has other bytes")
		}
		for _, c := range st.gw.Calls() {
			if c.Target == "memory" && strings.HasSuffix(c.Path, "/export") && (c.Status != http.StatusFound || c.RespLen > 64<<10) {
				t.Errorf("the export passed through the memory function: %+v", c)
			}
		}
		t.Logf("ZIP export of %d bytes served by a redirect", len(archive))
	})
}
