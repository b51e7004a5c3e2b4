// Package mcptest holds checks of an MCP endpoint shared by the tests of both deployments (the embedded
// server and the AWS mcp function), which serve /mcp through the same api/mcpapi handler.
package mcptest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// BatchResult counts the outcomes of the tool calls of one JSON-RPC batch.
type BatchResult struct {
	// Committed are the sends answered ok.
	Committed int
	// Limited are the calls answered with a RATE_LIMITED tool error carrying details.retry_after_ms > 0.
	Limited int
	// Status is the HTTP status of the batch's response.
	Status int
}

// SendBatch posts one JSON-RPC batch of n waypost_send tool calls (request IDs prefix-0 … prefix-(n-1), to
// recipient) to the MCP endpoint at url (…/mcp) with token, under protocol revision 2025-03-26 (the last
// that allows batches), and counts the outcomes. Any other outcome fails the test.
func SendBatch(t testing.TB, url, token, recipient, prefix string, n int) BatchResult {
	t.Helper()
	var b strings.Builder
	b.WriteByte('[')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"waypost_send","arguments":`+
			`{"request_id":"%s-%d","recipient_ids":["%s"],"body":{"text":"batched %d"}}}}`, i+1, prefix, i, recipient, i)
	}
	b.WriteByte(']')
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-03-26")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	res := BatchResult{Status: resp.StatusCode}
	var answers []struct {
		ID     int `json:"id"`
		Result *struct {
			IsError           bool `json:"isError"`
			StructuredContent struct {
				OK    bool `json:"ok"`
				Error *struct {
					Code    string         `json:"code"`
					Details map[string]any `json:"details"`
				} `json:"error"`
			} `json:"structuredContent"`
		} `json:"result"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(raw), &answers); err != nil || len(answers) != n {
		t.Fatalf("batch of %d: HTTP %d, not %d JSON-RPC answers (%v): %.500s", n, resp.StatusCode, n, err, raw)
	}
	for _, a := range answers {
		switch r := a.Result; {
		case r == nil:
			t.Fatalf("call %d: no result: %.500s", a.ID, raw)
		case r.StructuredContent.OK && !r.IsError:
			res.Committed++
		case r.IsError && r.StructuredContent.Error != nil && r.StructuredContent.Error.Code == "RATE_LIMITED":
			if ms, _ := r.StructuredContent.Error.Details["retry_after_ms"].(float64); ms <= 0 {
				t.Fatalf("call %d: RATE_LIMITED without a retry time: %+v", a.ID, r.StructuredContent.Error)
			}
			res.Limited++
		default:
			t.Fatalf("call %d: unexpected outcome %+v", a.ID, r.StructuredContent)
		}
	}
	return res
}
