package mcpapi_test

import (
	"context"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/waypost/waypost/api/httpapi"
	"github.com/waypost/waypost/api/mcpapi"
	"github.com/waypost/waypost/api/ops"
	"github.com/waypost/waypost/api/transport"
	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/domain/domaintest"
	"github.com/waypost/waypost/internal/metrics"
	"github.com/waypost/waypost/internal/platform"
	"github.com/waypost/waypost/schemas"
	"github.com/waypost/waypost/store/mem"
)

type seen struct {
	metrics.Nop
	mu  sync.Mutex
	ops []string
}

func (s *seen) Request(op, outcome string, _ time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ops = append(s.ops, op+" "+outcome)
}

// TestOperationsAreMeasured: an operation is measured under its name with its outcome, whether it arrives
// as an MCP tool call or over HTTP.
func TestOperationsAreMeasured(t *testing.T) {
	rec := &seen{}
	stack, err := transport.New(domain.Config{Store: mem.New(), Blobs: domaintest.TempBlobs(t), Clock: platform.Clock{}, IDs: platform.IDs{},
		CursorKey: []byte("metrics-test-cursor-key-0123456789abcdef")},
		transport.Options{Ops: ops.List(), HTTP: httpapi.Over(httpapi.Options{}), MCP: mcpapi.Over, Metrics: rec})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(stack.Handler)
	t.Cleanup(hs.Close)
	ctx := context.Background()
	sp, err := stack.Svc.CreateSpace(ctx, domain.CreateSpaceRequest{RequestID: "sp"})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := stack.Svc.CreateToken(ctx, sp.SpaceID, domain.CreateTokenRequest{RequestID: "t", ActorID: sp.DefaultRecipientID, Scopes: domain.AllScopes()})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, url: hs.URL, schemas: schemas.MustNew()}
	s := e.session(tok.Token)
	if _, isErr := e.call(s, "waypost_describe", map[string]any{}); isErr {
		t.Fatal("describe failed")
	}
	e.call(s, "waypost_get_message", map[string]any{"message_id": "msg_none"})
	e.http("GET", "/v0/describe", tok.Token, nil)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, want := range []string{"describe ok", "message.get NOT_FOUND"} {
		if n := len(slices.DeleteFunc(slices.Clone(rec.ops), func(s string) bool { return s != want })); n < 1 {
			t.Errorf("no %q among %v", want, rec.ops)
		}
	}
	if n := len(slices.DeleteFunc(slices.Clone(rec.ops), func(s string) bool { return s != "describe ok" })); n != 2 {
		t.Errorf("describe measured %d times (one MCP call, one HTTP call): %v", n, rec.ops)
	}
}
