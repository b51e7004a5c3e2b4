package main

import (
	"strings"
	"testing"

	"github.com/waypost/waypost/api/ops"
)

// notServedByHTTPAPI are the routes of the stack that api/httpapi does not register, with where they are
// served instead.
func notServedByHTTPAPI() map[string]string {
	return map[string]string{
		"ANY /mcp":                  "the MCP handler (api/mcpapi) that functions/mcp serves",
		"ANY /internal/v0/{proxy+}": "the channel service's internal API (channel/chanservice in the channel container)",
	}
}

// expectedTarget is where a path of the Waypost API must go, written independently of Routes().
func expectedTarget(path string) string {
	switch {
	case strings.HasPrefix(path, "/admin/"):
		return FnAdmin
	case strings.HasPrefix(path, "/v0/collections/"):
		return FnMemory
	case path == "/v0/blobs" || strings.HasPrefix(path, "/v0/blobs/") || strings.HasPrefix(path, "/v0/uploads/"):
		return FnBlobs
	case path == "/v0/feed/wait" || strings.HasPrefix(path, "/internal/"):
		return TargetChannel
	case path == "/mcp":
		return FnMCP
	default:
		return FnMailbox
	}
}

// TestRoutesMatchServer checks that every operation api/httpapi serves (api/ops.List: httpapi registers
// exactly those, which its TestEveryOperationIsRouted checks on the live mux) is a route of the stack,
// integrated with the function of its group, and that the stack has no other route but those of
// notServedByHTTPAPI.
func TestRoutesMatchServer(t *testing.T) {
	var served []string
	for _, o := range ops.List() {
		if o.Embedded { // waypost serve alone (admin.backup): api/httpapi does not serve it either
			continue
		}
		served = append(served, o.Method+" "+o.Path)
	}
	if len(served) < 30 {
		t.Fatalf("found only %d operations in api/ops", len(served))
	}
	stack := map[string]Route{}
	for _, r := range Routes() {
		if _, dup := stack[r.Key()]; dup {
			t.Errorf("route %s twice in Routes()", r.Key())
		}
		stack[r.Key()] = r
		if want := expectedTarget(r.Path); r.Target != want {
			t.Errorf("route %s goes to %s, want %s", r.Key(), r.Target, want)
		}
	}
	for _, key := range served {
		if _, ok := stack[key]; !ok {
			t.Errorf("api/httpapi serves %s, which the stack does not route", key)
			continue
		}
		delete(stack, key)
	}
	for key := range stack {
		if where, ok := notServedByHTTPAPI()[key]; ok {
			t.Logf("%s: served by %s", key, where)
			continue
		}
		t.Errorf("the stack routes %s, which api/httpapi does not serve", key)
	}
}
