package skill_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/server/servertest"
)

type step struct {
	Tool        string          `json:"tool"`
	Args        json.RawMessage `json:"args"`
	Expect      string          `json:"expect"`
	RevokeToken bool            `json:"revoke_token"`
	// FillSpace lowers the space's item quota to what it holds, so the next publish is refused.
	FillSpace bool `json:"fill_space"`
}

var scenarioBlock = regexp.MustCompile("(?s)```scenario\n(.*?)```")

func scenarios(t *testing.T) [][]step {
	raw, err := os.ReadFile("SKILL.md")
	if err != nil {
		t.Fatal(err)
	}
	var out [][]step
	for _, m := range scenarioBlock.FindAllSubmatch(raw, -1) {
		var steps []step
		if err := json.Unmarshal(m[1], &steps); err != nil {
			t.Fatalf("SKILL.md scenario is not valid JSON: %v\n%s", err, m[1])
		}
		out = append(out, steps)
	}
	if len(out) < 7 {
		t.Fatalf("found %d scenario blocks, want the RFC §13.2 set", len(out))
	}
	return out
}

// TestSkillScenarios runs each scenario of SKILL.md as a tool-call script on a fresh server.
func TestSkillScenarios(t *testing.T) {
	for i, sc := range scenarios(t) {
		t.Run(strconv.Itoa(i+1), func(t *testing.T) { runScenario(t, sc) })
	}
}

func runScenario(t *testing.T, steps []step) {
	ctx := context.Background()
	srv, url := servertest.Start(t)
	svc := srv.Service()
	sp, _ := svc.CreateSpace(ctx, domain.CreateSpaceRequest{RequestID: "sp"})
	a, _ := svc.CreateActor(ctx, sp.SpaceID, domain.CreateActorRequest{RequestID: "a"})
	b, _ := svc.CreateActor(ctx, sp.SpaceID, domain.CreateActorRequest{RequestID: "b"})
	con, _ := svc.CreateConsumer(ctx, sp.SpaceID, domain.CreateConsumerRequest{RequestID: "c", ActorID: a.ActorID, View: domain.ViewInbox})
	coll, _ := svc.CreateCollection(ctx, sp.SpaceID, domain.CreateCollectionRequest{RequestID: "col", SourceActorID: a.ActorID, Scope: "notes"})
	tok, err := svc.CreateToken(ctx, sp.SpaceID, domain.CreateTokenRequest{RequestID: "t", ActorID: a.ActorID, Scopes: domain.AllScopes()})
	if err != nil {
		t.Fatal(err)
	}
	p, err := svc.Authenticate(ctx, tok.Token)
	if err != nil {
		t.Fatal(err)
	}
	seedCollection(t, svc, p, coll.CollectionID)

	sess := servertest.MCP(t, url, tok.Token)
	vars := map[string]string{"B": b.ActorID, "CONSUMER": con.ConsumerID, "COLLECTION": coll.CollectionID}
	var prev json.RawMessage
	for i, st := range steps {
		if st.FillSpace {
			cur, err := svc.GetSpace(ctx, sp.SpaceID)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := svc.UpdateSpace(ctx, sp.SpaceID, domain.UpdateSpaceRequest{Quotas: &domain.Quotas{
				MaxStoredBytes: domain.DefaultSpaceMaxStoredBytes, MaxItems: cur.Usage.Items}}); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if st.RevokeToken {
			if _, err := svc.RevokeToken(ctx, sp.SpaceID, tok.TokenID); err != nil {
				t.Fatal(err)
			}
			continue
		}
		args := string(st.Args)
		if v, ok := vars["CURRENT_REVISION"]; ok {
			args = strings.ReplaceAll(args, `"${CURRENT_REVISION}"`, v)
		}
		for k, v := range vars {
			args = strings.ReplaceAll(args, "${"+k+"}", v)
		}
		res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: st.Tool, Arguments: json.RawMessage(args)})
		if err != nil {
			if st.Expect == "UNAUTHENTICATED" && strings.Contains(err.Error(), "401") || strings.Contains(strings.ToLower(err.Error()), "unauthorized") {
				continue // the endpoint refuses a revoked credential with HTTP 401
			}
			t.Fatalf("step %d %s: %v", i+1, st.Tool, err)
		}
		raw, _ := json.Marshal(res.StructuredContent)
		var env struct {
			OK    bool            `json:"ok"`
			Data  json.RawMessage `json:"data"`
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		_ = json.Unmarshal(raw, &env)
		var data map[string]any
		_ = json.Unmarshal(env.Data, &data)
		switch st.Expect {
		case "ok", "committed", "has_more", "same_as_previous":
			if !env.OK {
				t.Fatalf("step %d %s: want success, got %s", i+1, st.Tool, raw)
			}
		default:
			if env.OK || env.Error.Code != st.Expect {
				t.Fatalf("step %d %s: want %s, got %s", i+1, st.Tool, st.Expect, raw)
			}
			continue
		}
		switch st.Expect {
		case "committed":
			if data["submission_state"] != "committed" {
				t.Fatalf("step %d: not committed: %s", i+1, raw)
			}
		case "has_more":
			if data["has_more"] != true {
				t.Fatalf("step %d: has_more is not true: %s", i+1, raw)
			}
		case "same_as_previous":
			if !bytes.Equal(env.Data, prev) {
				t.Fatalf("step %d: retry returned another result:\n%s\n%s", i+1, env.Data, prev)
			}
		}
		prev = env.Data
		if id, ok := data["message_id"].(string); ok {
			vars["LAST_MESSAGE"] = id
		}
		if c, ok := data["next_cursor"].(string); ok {
			vars["NEXT_CURSOR"] = c
		}
		if r, ok := data["revision"].(float64); ok {
			vars["CURRENT_REVISION"] = strconv.Itoa(int(r))
		}
	}
}

// seedCollection publishes two items so a one-item page has more.
func seedCollection(t *testing.T, svc *domain.Service, p *domain.Principal, coll string) {
	ctx := context.Background()
	var items []domain.MemoryItemInput
	for i, text := range []string{"alpha", "beta"} {
		sum := sha256.Sum256([]byte(text))
		h := hex.EncodeToString(sum[:])
		prep, err := svc.PrepareBlob(ctx, p, domain.BlobPrepareRequest{RequestID: "bp" + text, ContentType: "text/plain", SizeBytes: int64(len(text)), SHA256: h})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Upload(ctx, p, prep.UploadID, "text/plain", int64(len(text)), strings.NewReader(text)); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.CommitBlob(ctx, p, domain.BlobCommitRequest{RequestID: "bc" + text, UploadID: prep.UploadID}); err != nil {
			t.Fatal(err)
		}
		items = append(items, domain.MemoryItemInput{ItemID: "item" + strconv.Itoa(i), BlobID: prep.BlobID, Path: "notes/" + text + ".md"})
	}
	zero := int64(0)
	if _, err := svc.PublishMemory(ctx, p, coll, domain.MemoryPublishRequest{RequestID: "seed", ExpectedRevision: &zero, Mode: domain.ModeSnapshot, Items: items}); err != nil {
		t.Fatal(err)
	}
}
