package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/waypost/waypost/api/mcpapi/mcptest"
	"github.com/waypost/waypost/functions/config"
	"github.com/waypost/waypost/store/dynamo/dynamotest"
)

// TestMCPFunctionBatchPaysForEveryCall (issue 33): the AWS mcp function, built as its cold start builds it
// and over DynamoDB (minidyn), counts every tool call of a JSON-RPC batch against the credential's rate
// limit: a batch of three times the burst commits no more than the limit allows and the rest answer
// RATE_LIMITED in their tool results. The control plane is the admin function's handler over the same table.
func TestMCPFunctionBatchPaysForEveryCall(t *testing.T) {
	offline(t)
	ddb := dynamotest.New(t)
	secret := "wpa_secret-0123456789abcdefghijklmnopqrstuvwxyzABCD"
	cfg := config.Config{Table: ddb.Table(t), Bucket: "b", CursorKey: strings.Repeat("k", 32), InlineBodyMax: 4096, Version: "test",
		DynamoDBEndpoint: ddb.URL, S3Endpoint: "http://127.0.0.1:1", AdminSecret: secret}
	log := slog.New(slog.DiscardHandler)
	ctx := context.Background()
	adminH, err := build(ctx, config.Admin, cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	mcpH, err := build(ctx, config.MCP, cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	admin, mcpSrv := httptest.NewServer(adminH), httptest.NewServer(mcpH)
	t.Cleanup(admin.Close)
	t.Cleanup(mcpSrv.Close)
	call := func(method, path string, body any) map[string]any {
		t.Helper()
		raw, _ := json.Marshal(body)
		req, _ := http.NewRequest(method, admin.URL+path, bytes.NewReader(raw))
		req.Header.Set("Authorization", "Bearer "+secret)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		var env struct {
			OK   bool           `json:"ok"`
			Data map[string]any `json:"data"`
		}
		if json.Unmarshal(out, &env) != nil || !env.OK {
			t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, out)
		}
		return env.Data
	}
	sp := call("POST", "/admin/v0/spaces", map[string]any{"request_id": "sp"})["space_id"].(string)
	const burst = 10
	call("PATCH", "/admin/v0/spaces/"+sp, map[string]any{"rate_limits": map[string]any{"requests_per_second": 1, "burst": burst}})
	a := call("POST", "/admin/v0/spaces/"+sp+"/actors", map[string]any{"request_id": "a"})["actor_id"].(string)
	b := call("POST", "/admin/v0/spaces/"+sp+"/actors", map[string]any{"request_id": "b"})["actor_id"].(string)
	tok := call("POST", "/admin/v0/spaces/"+sp+"/tokens", map[string]any{"request_id": "t", "actor_id": a, "scopes": []string{"message.send"}})["token"].(string)

	start := time.Now()
	res := mcptest.SendBatch(t, mcpSrv.URL+"/mcp", tok, b, "lambda-batch", 3*burst)
	allowed := burst + int(time.Since(start).Seconds()) + 1
	if res.Committed > allowed || res.Committed < burst || res.Committed+res.Limited != 3*burst {
		t.Fatalf("batch of %d: %d committed (the limit allows %d), %d RATE_LIMITED", 3*burst, res.Committed, allowed, res.Limited)
	}
}
