package interop_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/waypost/waypost/api/apitest"
	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/schemas"
	"github.com/waypost/waypost/server/servertest"
)

// TestTypeScriptMCPClient runs interop/mcp-ts/interop.mjs (official @modelcontextprotocol/sdk client):
// initialize, tools/list, then every tool (send, retry, conflict, status, inbox, ack, get, wait, blobs,
// memory, subscriptions). The SDK validates every structured result against the tool's declared
// outputSchema, the script checks that every result's text content is the same JSON, and every structured
// result is checked against the project's schemas here.
func TestTypeScriptMCPClient(t *testing.T) {
	node, dir := nodeTools(t, "mcp-ts", "@modelcontextprotocol/sdk")
	srv, url := servertest.Start(t)
	ctx := context.Background()
	w := apitest.NewWorld(t, srv.Service())
	coll, err := srv.Service().CreateCollection(ctx, w.SpaceID, domain.CreateCollectionRequest{RequestID: "col", SourceActorID: w.A, Scope: "interop notes"})
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	out := run(t, cctx, dir, []string{"WAYPOST_URL=" + url, "WAYPOST_TOKEN_A=" + w.TokA, "WAYPOST_TOKEN_B=" + w.TokB,
		"WAYPOST_ACTOR_B=" + w.B, "WAYPOST_CONSUMER_B=" + w.CB, "WAYPOST_COLLECTION_A=" + coll.CollectionID}, node, "interop.mjs")
	reg := schemas.MustNew()
	steps := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var line struct {
			Step       string          `json:"step"`
			IsError    bool            `json:"isError"`
			Structured json.RawMessage `json:"structured"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("bad output line %q: %v", sc.Text(), err)
		}
		if len(line.Structured) == 0 || string(line.Structured) == "null" {
			continue
		}
		steps++
		schema := "envelope.success"
		if line.IsError {
			schema = "envelope.error"
		}
		if err := reg.Validate(schema, line.Structured); err != nil {
			t.Errorf("step %s: %v\n%s", line.Step, err, line.Structured)
		}
		if !line.IsError {
			var env struct {
				Data json.RawMessage `json:"data"`
			}
			_ = json.Unmarshal(line.Structured, &env)
			if name, ok := map[string]string{"send": "message.send.response", "status": "status.response", "inbox": "inbox.read.response",
				"ack": "inbox.ack.response", "describe": "describe.response", "get": "message.get.response", "wait": "inbox.read.response",
				"blob-prepare": "blob.prepare.response", "blob-commit": "blob.info", "blob-get": "blob.info",
				"memory-publish": "memory.publish.response", "memory-read": "memory.read.response", "memory-export": "memory.export.response",
				"subscriptions": "subscription.list.response"}[line.Step]; ok {
				if err := reg.Validate(name, env.Data); err != nil {
					t.Errorf("step %s: data: %v", line.Step, err)
				}
			}
		}
	}
	if steps < 7 {
		t.Fatalf("only %d tool results seen:\n%s", steps, out)
	}
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// nodeTools returns node and the absolute path of interop/<folder>, whose node_modules scripts/test installs
// (npm ci --prefix interop/<folder>) with the given packages; without them the test fails under
// WAYPOST_REQUIRE_INTEROP and skips otherwise.
func nodeTools(t *testing.T, folder string, packages ...string) (node, dir string) {
	t.Helper()
	dir, _ = filepath.Abs(folder)
	node, err := exec.LookPath("node")
	missing := err != nil
	for _, p := range packages {
		missing = missing || !exists(filepath.Join(dir, "node_modules", p))
	}
	if missing {
		if os.Getenv("WAYPOST_REQUIRE_INTEROP") != "" {
			t.Fatalf("node or interop/%s/node_modules missing (run: npm ci --prefix interop/%s)", folder, folder)
		}
		t.Skipf("node or interop/%s/node_modules missing; scripts/test installs them (npm ci --prefix interop/%s)", folder, folder)
	}
	return node, dir
}
