package domaintest_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/domain/domaintest"
	"github.com/waypost/waypost/webhook/dial"
	"github.com/waypost/waypost/webhook/sender"
)

func TestWebhookSmoke(t *testing.T) {
	var mu sync.Mutex
	var got []map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		if m["type"] == "verification" {
			_ = json.NewEncoder(w).Encode(map[string]any{"challenge": m["challenge"]})
			return
		}
		mu.Lock()
		got = append(got, m)
		mu.Unlock()
	}))
	defer srv.Close()
	snd, err := sender.New(sender.Options{Dial: dial.Options{AllowHTTP: true, AllowLoopback: true}})
	if err != nil {
		t.Fatal(err)
	}
	f := domaintest.New(t, memBackend, func(c *domain.Config) { c.Webhooks = snd })
	sp := f.Space()
	a, b := f.Party(sp.SpaceID), f.Party(sp.SpaceID)
	ctx := context.Background()
	sub, err := f.Svc.UpsertSubscription(ctx, b.P, domain.UpsertSubscriptionRequest{RequestID: "s1", ConsumerID: b.ConsumerID,
		EventTypes: []string{domain.EventMessageCommitted}, Delivery: domain.SubscriptionDelivery{Mode: "webhook", URL: srv.URL + "/hook",
			Secret: "whsec_rBdQJc8BCm4AiFLnM5qNWu1YmLzo+n2Drg7CWj+s408="}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("sub %+v", sub)
	res := f.Send(a.P, "hello", b.ActorID)
	n, err := f.Svc.WorkDeliveries(ctx, 10)
	if err != nil || n != 1 {
		t.Fatalf("work: %d %v", n, err)
	}
	if len(got) != 1 || got[0]["id"] == nil {
		t.Fatalf("got %v", got)
	}
	t.Logf("event %v (msg %s)", got[0], res.MessageID)
	l, err := f.Svc.ListSubscriptions(ctx, b.P)
	if err != nil || len(l.Subscriptions) != 1 || l.Subscriptions[0].Health.LastSuccessAt == nil {
		t.Fatalf("list %+v %v", l, err)
	}
}
