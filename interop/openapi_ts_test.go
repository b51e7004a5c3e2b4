package interop_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/waypost/waypost/api/apitest"
	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/server/servertest"
)

// servedDocument fetches GET /v0/openapi.json (no credential) into dir/openapi.json.
func servedDocument(t *testing.T, url, dir string) string {
	t.Helper()
	res, err := http.Get(url + "/v0/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET /v0/openapi.json: %d %v", res.StatusCode, err)
	}
	path := filepath.Join(dir, "openapi.json")
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// run runs a command of the interop tools, failing the test with its output.
func run(t *testing.T, ctx context.Context, dir string, env []string, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %v: %v\nstdout:\n%s\nstderr:\n%s", filepath.Base(name), args, err, out, stderr.String())
	}
	return out
}

// TestOpenAPILint: the document GET /v0/openapi.json serves lints clean with @redocly/cli (a third-party
// linter from npm) under its recommended-strict rules: no error and no warning (interop/openapi-ts/redocly.yaml).
func TestOpenAPILint(t *testing.T) {
	node, dir := nodeTools(t, "openapi-ts", "@redocly/cli", "openapi-fetch")
	_, url := servertest.Start(t)
	doc := servedDocument(t, url, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out := run(t, ctx, dir, []string{"REDOCLY_TELEMETRY=off", "REDOCLY_SUPPRESS_UPDATE_NOTICE=true"}, node,
		filepath.Join(dir, "node_modules", "@redocly", "cli", "bin", "cli.js"), "lint", "--config", filepath.Join(dir, "redocly.yaml"), "--format", "stylish", doc)
	t.Logf("redocly lint:\n%s", out)
}

// TestOpenAPITypeScriptClient: a TypeScript client generated from GET /v0/openapi.json by openapi-typescript,
// calling through openapi-fetch (interop/openapi-ts/loop.ts), type-checks with tsc and runs the RFC §16.1
// loop — send, read, ack, reply, status — and a memory publish/read against the real embedded server. Every
// answer it received is printed and checked here against the OpenAPI document too.
func TestOpenAPITypeScriptClient(t *testing.T) {
	node, dir := nodeTools(t, "openapi-ts", "@redocly/cli", "openapi-fetch")
	srv, url := servertest.Start(t)
	ctx := context.Background()
	w := apitest.NewWorld(t, srv.Service())
	coll, err := srv.Service().CreateCollection(ctx, w.SpaceID, domain.CreateCollectionRequest{RequestID: "col", SourceActorID: w.A, Scope: "openapi notes"})
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	doc := servedDocument(t, url, work)
	for _, f := range []string{"loop.ts", "tsconfig.json"} {
		raw, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(work, f), raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(work, "package.json"), []byte(`{"type": "module", "private": true}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "node_modules"), filepath.Join(work, "node_modules")); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	bin := func(name string) string { return filepath.Join(dir, "node_modules", name) }
	run(t, cctx, work, nil, node, bin("openapi-typescript/bin/cli.js"), doc, "--default-non-nullable=false", "-o", filepath.Join(work, "waypost.ts"))
	run(t, cctx, work, nil, node, bin("typescript/bin/tsc"), "-p", work, "--outDir", filepath.Join(work, "out"))
	out := run(t, cctx, work, []string{"WAYPOST_URL=" + url, "WAYPOST_TOKEN_A=" + w.TokA, "WAYPOST_TOKEN_B=" + w.TokB,
		"WAYPOST_ACTOR_A=" + w.A, "WAYPOST_ACTOR_B=" + w.B, "WAYPOST_CONSUMER_B=" + w.CB, "WAYPOST_COLLECTION_A=" + coll.CollectionID},
		node, filepath.Join(work, "out", "loop.js"))
	var steps []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var line struct {
			Step   string `json:"step"`
			Status int    `json:"status"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("bad output line %q: %v", sc.Text(), err)
		}
		steps = append(steps, line.Step)
	}
	want := []string{"send", "read", "ack", "reply", "status", "status-reply", "get-reply", "send-retry", "send-conflict",
		"blob-prepare", "blob-upload", "blob-commit", "memory-publish", "memory-read", "memory-publish-stale", "done"}
	if len(steps) != len(want) {
		t.Fatalf("steps %v, want %v\n%s", steps, want, out)
	}
	for i := range want {
		if steps[i] != want[i] {
			t.Fatalf("steps %v, want %v", steps, want)
		}
	}
}
