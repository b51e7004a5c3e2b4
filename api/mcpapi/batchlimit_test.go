package mcpapi_test

import (
	"context"
	"testing"
	"time"

	"github.com/waypost/waypost/api/mcpapi/mcptest"
	"github.com/waypost/waypost/domain"
)

// TestBatchPaysForEveryCall (issue 33): a JSON-RPC batch of three times the credential's burst commits no
// more sends than the rate limit allows; every other call's tool result is RATE_LIMITED with its retry
// time, as the same sends over HTTP would be answered 429. The inbox holds exactly the committed sends.
func TestBatchPaysForEveryCall(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	limits := domain.RateLimits{RequestsPerSecond: 1, Burst: 10}
	if _, err := e.svc.UpdateSpace(ctx, e.space.SpaceID, domain.UpdateSpaceRequest{RateLimits: &limits}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	res := mcptest.SendBatch(t, e.url+"/mcp", e.tokA, e.b, "batch", 3*limits.Burst)
	allowed := limits.Burst + int(time.Since(start).Seconds()*float64(limits.RequestsPerSecond)) + 1
	if res.Committed > allowed || res.Committed < limits.Burst || res.Committed+res.Limited != 3*limits.Burst {
		t.Fatalf("batch of %d: %d committed (the limit allows %d), %d RATE_LIMITED", 3*limits.Burst, res.Committed, allowed, res.Limited)
	}
	s := e.session(e.tokB)
	defer s.Close()
	m, isErr := e.call(s, "waypost_inbox", map[string]any{"consumer_id": e.cb, "limit": 200})
	items, _ := m["data"].(map[string]any)["items"].([]any)
	if isErr || len(items) != res.Committed {
		t.Fatalf("B's inbox holds %d items, %d sends were answered committed", len(items), res.Committed)
	}
}
