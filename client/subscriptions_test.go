package client_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/waypost/waypost/api/apitest"
	"github.com/waypost/waypost/api/openapi/openapitest"
	"github.com/waypost/waypost/client"
	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/schemas"
)

func TestNewWebhookSecret(t *testing.T) {
	t.Parallel()
	reg := schemas.MustNew()
	seen := map[string]bool{}
	for range 50 {
		s, err := client.NewWebhookSecret()
		if err != nil {
			t.Fatal(err)
		}
		raw, err := base64.StdEncoding.Strict().DecodeString(strings.TrimPrefix(s, "whsec_"))
		if !strings.HasPrefix(s, "whsec_") || err != nil || len(raw) != 32 || seen[s] {
			t.Fatalf("secret %q: %v", s, err)
		}
		seen[s] = true
		req := `{"request_id":"r","consumer_id":"c","event_types":["waypost.message.committed.v1"],"delivery":{"mode":"webhook","url":"https://h.example/","secret":"` + s + `"}}`
		if err := reg.Validate("subscription.upsert.request", []byte(req)); err != nil {
			t.Fatalf("the schema refuses a generated secret: %v", err)
		}
	}
}

// TestSubscriptionsAgainstRealStack drives the subscription and delivery calls of the client against a real
// service with a webhook sender and a loopback receiver: every response matches its schema, the domain
// types keep every member, and no response carries the secret.
func TestSubscriptionsAgainstRealStack(t *testing.T) {
	t.Parallel()
	st := apitest.New(t, apitest.Options{Webhooks: apitest.Sender(t, true)})
	w := st.World(t)
	recv := apitest.NewReceiver(t)
	recv.SetStatus(http.StatusGone)
	reg := schemas.MustNew()
	rec := &bodies{}
	hc := openapitest.Client(t, &http.Client{Transport: rec}) // every answer checked against the OpenAPI document too
	ctx := context.Background()
	b := client.New(st.URL, w.TokB, client.WithHTTPClient(hc))
	a := client.New(st.URL, w.TokA, client.WithHTTPClient(hc))
	ad := client.NewAdmin(st.URL, apitest.AdminSecret, client.WithHTTPClient(hc))
	check := func(what, schema string, typed any, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		var env struct {
			Data json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(rec.last(), &env); err != nil {
			t.Fatal(err)
		}
		if err := reg.Validate(schema, env.Data); err != nil {
			t.Fatalf("%s: data does not match %s: %v\n%s", what, schema, err, env.Data)
		}
		var sent, kept map[string]any
		_ = json.Unmarshal(env.Data, &sent)
		again, _ := json.Marshal(typed)
		_ = json.Unmarshal(again, &kept)
		for k := range sent {
			if _, ok := kept[k]; !ok {
				t.Errorf("%s: member %q is lost by %T", what, k, typed)
			}
		}
	}

	secret, err := client.NewWebhookSecret()
	if err != nil {
		t.Fatal(err)
	}
	req := domain.UpsertSubscriptionRequest{RequestID: "sub-1", ConsumerID: w.CB, EventTypes: []string{domain.EventMessageCommitted},
		Filter: &domain.Filter{ProducerIDs: []string{w.A}}, Delivery: domain.SubscriptionDelivery{URL: recv.URL + "/hook", Secret: secret}}
	sub, err := b.UpsertSubscription(ctx, req)
	check("upsert", "subscription.upsert.response", sub, err)
	if sub.State != domain.SubscriptionActive || sub.Filter.ProducerIDs[0] != w.A || sub.Delivery.Mode != domain.DeliveryModeWebhook {
		t.Fatalf("upsert: %+v", sub)
	}
	list, err := b.ListSubscriptions(ctx)
	check("list", "subscription.list.response", list, err)
	if len(list.Subscriptions) != 1 || list.Subscriptions[0].Health == nil {
		t.Fatalf("list: %+v", list)
	}
	status, err := b.Status(ctx, domain.OpSubscriptionUpsert, "sub-1")
	check("status", "status.response", status, err)

	if _, err := a.Send(ctx, domain.SendRequest{RequestID: "m1", RecipientIDs: []string{w.B}, Body: &domain.MessageBody{Text: "x"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Svc.WorkDeliveries(ctx, 10); err != nil {
		t.Fatal(err)
	}
	failed, err := ad.ListDeliveries(ctx, w.SpaceID, "")
	check("list deliveries", "admin.deliveries.response", failed, err)
	if len(failed.Deliveries) != 1 || failed.Deliveries[0].State != domain.DeliveryFailed {
		t.Fatalf("failed deliveries: %+v", failed)
	}
	pending, err := ad.ListDeliveries(ctx, w.SpaceID, domain.DeliveryPending)
	check("list pending deliveries", "admin.deliveries.response", pending, err)
	if len(pending.Deliveries) != 0 {
		t.Fatalf("pending deliveries: %+v", pending)
	}
	d, err := ad.Redeliver(ctx, w.SpaceID, failed.Deliveries[0].DeliveryID)
	check("redeliver", "admin.delivery.response", d, err)
	if d.State != domain.DeliveryPending || d.Attempts != 0 {
		t.Fatalf("redeliver: %+v", d)
	}
	_, err = ad.ListDeliveries(ctx, w.SpaceID, "delivered")
	if !client.IsCode(err, domain.CodeInvalidRequest) {
		t.Fatalf("unknown state: %v", err)
	}
	_, err = ad.Redeliver(ctx, w.SpaceID, "dl_absent")
	if !client.IsCode(err, domain.CodeNotFound) {
		t.Fatalf("unknown delivery: %v", err)
	}

	stop, err := b.StopSubscription(ctx, sub.SubscriptionID, domain.StopSubscriptionRequest{RequestID: "stop-1"})
	check("stop", "subscription.stop.response", stop, err)
	if stop.State != domain.SubscriptionStopped {
		t.Fatalf("stop: %+v", stop)
	}
	if _, err := b.StopSubscription(ctx, "sub_absent", domain.StopSubscriptionRequest{RequestID: "stop-2"}); !client.IsCode(err, domain.CodeNotFound) {
		t.Fatalf("stop of an unknown subscription: %v", err)
	}

	// A receiver that does not echo: WEBHOOK_VERIFICATION_FAILED, not retryable as is.
	recv.SetEcho(false)
	req.RequestID, req.Delivery.URL = "sub-2", recv.URL+"/other"
	_, err = b.UpsertSubscription(ctx, req)
	if !client.IsCode(err, domain.CodeWebhookVerification) || client.IsRetryable(err) {
		t.Fatalf("verification failure: %v (retryable %v)", err, client.IsRetryable(err))
	}
	var ce *client.Error
	if !errors.As(err, &ce) || ce.HTTPStatus != 422 || ce.RequestID != "sub-2" {
		t.Fatalf("verification failure: %+v", ce)
	}
	if rec.contains(strings.TrimPrefix(secret, "whsec_")) {
		t.Fatal("a response carries the secret")
	}

	// Without webhook_events every call is UNSUPPORTED.
	off := apitest.New(t, apitest.Options{})
	wo := off.World(t)
	bo := client.New(off.URL, wo.TokB)
	if _, err := bo.ListSubscriptions(ctx); !client.IsCode(err, domain.CodeUnsupported) {
		t.Fatalf("list without webhook_events: %v", err)
	}
	req.RequestID, req.ConsumerID = "sub-3", wo.CB
	if _, err := bo.UpsertSubscription(ctx, req); !client.IsCode(err, domain.CodeUnsupported) {
		t.Fatalf("upsert without webhook_events: %v", err)
	}
}
