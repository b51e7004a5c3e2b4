package interop_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/schemas"
	"github.com/waypost/waypost/server"
)

// TestTypeScriptMCPClient runs interop/mcp-ts/interop.mjs (official @modelcontextprotocol/sdk client):
// initialize, tools/list, then every tool (send, retry, conflict, status, inbox, ack, get, wait, blobs,
// memory, subscriptions). The SDK validates every structured result against the tool's declared
// outputSchema, the script checks that every result's text content is the same JSON, and every structured
// result is checked against the project's schemas here.
func TestTypeScriptMCPClient(t *testing.T) {
	dir, _ := filepath.Abs("mcp-ts")
	node, err := exec.LookPath("node")
	if err != nil || !exists(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk")) {
		if os.Getenv("WAYPOST_REQUIRE_INTEROP") != "" {
			t.Fatalf("node or interop/mcp-ts/node_modules missing (run: npm ci --prefix interop/mcp-ts)")
		}
		t.Skip("node or interop/mcp-ts/node_modules missing; scripts/test installs them (npm ci --prefix interop/mcp-ts)")
	}
	srv, err := server.Open(server.Config{DataDir: t.TempDir(), NoSync: true, AdminSecret: "test-admin-secret-0123456789abcdefghijklmnopqrstuvwxyz"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	ctx := context.Background()
	svc := srv.Service()
	sp, _ := svc.CreateSpace(ctx, domain.CreateSpaceRequest{RequestID: "sp"})
	a, _ := svc.CreateActor(ctx, sp.SpaceID, domain.CreateActorRequest{RequestID: "a"})
	b, _ := svc.CreateActor(ctx, sp.SpaceID, domain.CreateActorRequest{RequestID: "b"})
	cb, _ := svc.CreateConsumer(ctx, sp.SpaceID, domain.CreateConsumerRequest{RequestID: "cb", ActorID: b.ActorID, View: domain.ViewInbox})
	ta, _ := svc.CreateToken(ctx, sp.SpaceID, domain.CreateTokenRequest{RequestID: "ta", ActorID: a.ActorID, Scopes: domain.AllScopes()})
	tb, err := svc.CreateToken(ctx, sp.SpaceID, domain.CreateTokenRequest{RequestID: "tb", ActorID: b.ActorID, Scopes: domain.AllScopes()})
	if err != nil {
		t.Fatal(err)
	}
	coll, err := svc.CreateCollection(ctx, sp.SpaceID, domain.CreateCollectionRequest{RequestID: "col", SourceActorID: a.ActorID, Scope: "interop notes"})
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, node, "interop.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "WAYPOST_URL="+hs.URL, "WAYPOST_TOKEN_A="+ta.Token, "WAYPOST_TOKEN_B="+tb.Token,
		"WAYPOST_ACTOR_B="+b.ActorID, "WAYPOST_CONSUMER_B="+cb.ConsumerID, "WAYPOST_COLLECTION_A="+coll.CollectionID)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("interop.mjs: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr.String())
	}
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
