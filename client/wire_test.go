package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/waypost/waypost/api/openapi/openapitest"
	"github.com/waypost/waypost/client"
	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/schemas"
	"github.com/waypost/waypost/server/servertest"
)

// bodies is a transport that keeps every response body.
type bodies struct {
	mu  sync.Mutex
	all [][]byte
}

func (b *bodies) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	b.all = append(b.all, raw)
	b.mu.Unlock()
	resp.Body = io.NopCloser(bytes.NewReader(raw))
	return resp, nil
}

func (b *bodies) last() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.all[len(b.all)-1]
}

func (b *bodies) contains(s string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, raw := range b.all {
		if bytes.Contains(raw, []byte(s)) {
			return true
		}
	}
	return false
}

// TestWireShapesAgainstRealServer drives every call of the client against a real in-process server and
// checks each response against the published JSON Schemas: the envelope, then its data against the
// operation's response schema. It also checks that decoding into the shared domain types and encoding
// again keeps every member the server sent (the client drops nothing it is given).
func TestWireShapesAgainstRealServer(t *testing.T) {
	t.Parallel()
	_, url := servertest.Start(t)
	reg, err := schemas.New()
	if err != nil {
		t.Fatal(err)
	}
	rec := &bodies{}
	hc := openapitest.Client(t, &http.Client{Transport: rec}) // every answer checked against the OpenAPI document too
	ctx := context.Background()
	ad := client.NewAdmin(url, servertest.AdminSecret, client.WithHTTPClient(hc))

	check := func(what, schema string, typed any, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		raw := rec.last()
		if verr := reg.Validate("envelope.success", raw); verr != nil {
			t.Errorf("%s: envelope: %v", what, verr)
		}
		var env struct {
			Data json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(raw, &env); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if verr := reg.Validate(schema, env.Data); verr != nil {
			t.Errorf("%s: data does not match %s: %v\n%s", what, schema, verr, env.Data)
		}
		var sent map[string]any
		_ = json.Unmarshal(env.Data, &sent)
		again, _ := json.Marshal(typed)
		var kept map[string]any
		_ = json.Unmarshal(again, &kept)
		for k := range sent {
			if _, ok := kept[k]; !ok {
				t.Errorf("%s: member %q sent by the server is lost by the domain type %T", what, k, typed)
			}
		}
	}
	checkErr := func(what string, err error, code domain.Code) {
		t.Helper()
		if !client.IsCode(err, code) {
			t.Fatalf("%s: err = %v, want %s", what, err, code)
		}
		if verr := reg.Validate("envelope.error", rec.last()); verr != nil {
			t.Errorf("%s: error envelope: %v", what, verr)
		}
	}

	sp, err := ad.CreateSpace(ctx, domain.CreateSpaceRequest{RequestID: "w-space", DisplayName: "wire"})
	check("create space", "admin.space.create.response", sp, err)
	got, err := ad.GetSpace(ctx, sp.SpaceID)
	check("get space", "admin.space.get.response", got, err)
	a, err := ad.CreateActor(ctx, sp.SpaceID, domain.CreateActorRequest{RequestID: "w-a", DisplayName: "A"})
	check("create actor", "admin.actor.create.response", a, err)
	b, err := ad.CreateActor(ctx, sp.SpaceID, domain.CreateActorRequest{RequestID: "w-b"})
	check("create actor", "admin.actor.create.response", b, err)
	cb, err := ad.CreateConsumer(ctx, sp.SpaceID, domain.CreateConsumerRequest{RequestID: "w-cb", ActorID: b.ActorID, View: domain.ViewInbox,
		Filter: &domain.Filter{ProducerIDs: []string{a.ActorID}}})
	check("create consumer", "admin.consumer.response", cb, err)
	cb, err = ad.UpdateConsumer(ctx, sp.SpaceID, cb.ConsumerID, domain.UpdateConsumerRequest{Filter: &domain.Filter{}})
	check("update consumer", "admin.consumer.response", cb, err)
	col, err := ad.CreateCollection(ctx, sp.SpaceID, domain.CreateCollectionRequest{RequestID: "w-col", SourceActorID: a.ActorID, Scope: "notes"})
	check("create collection", "admin.collection.create.response", col, err)
	g, err := ad.CreateGrant(ctx, sp.SpaceID, domain.CreateGrantRequest{RequestID: "w-g", ActorID: b.ActorID, Permission: domain.PermMemoryRead, CollectionID: col.CollectionID})
	check("create grant", "admin.grant.create.response", g, err)
	g, err = ad.RevokeGrant(ctx, sp.SpaceID, g.GrantID)
	check("revoke grant", "admin.grant.revoke.response", g, err)
	exp := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	ta, err := ad.CreateToken(ctx, sp.SpaceID, domain.CreateTokenRequest{RequestID: "w-ta", ActorID: a.ActorID,
		Scopes: []domain.Scope{domain.ScopeMessageSend, domain.ScopeMessageRead}, ExpiresAt: &exp})
	check("create token", "admin.token.response", ta, err)
	tb, err := ad.CreateToken(ctx, sp.SpaceID, domain.CreateTokenRequest{RequestID: "w-tb", ActorID: b.ActorID, ConsumerID: cb.ConsumerID,
		Scopes: []domain.Scope{domain.ScopeMessageRead, domain.ScopeReceiptWrite, domain.ScopeMessageSend}})
	check("create token", "admin.token.response", tb, err)
	tb, err = ad.RotateToken(ctx, sp.SpaceID, tb.TokenID)
	check("rotate token", "admin.token.response", tb, err)

	ca := client.New(url, ta.Token, client.WithHTTPClient(hc))
	cB := client.New(url, tb.Token, client.WithHTTPClient(hc))
	d, err := cB.Describe(ctx)
	check("describe", "describe.response", d, err)
	sr, err := ca.SendWithRetry(ctx, domain.SendRequest{RequestID: "w-send", RecipientIDs: []string{b.ActorID}, Subject: "hello",
		Body: &domain.MessageBody{Text: "text"}, Metadata: json.RawMessage(`{"n":1}`)})
	check("send", "message.send.response", sr, err)
	m, err := cB.GetMessage(ctx, sr.MessageID)
	check("get message", "message.get.response", m, err)
	st, err := ca.Status(ctx, domain.OpMessageSend, "w-send")
	check("status", "status.response", st, err)
	p, err := cB.ReadInbox(ctx, domain.ReadRequest{ConsumerID: cb.ConsumerID})
	check("read", "inbox.read.response", p, err)
	if len(p.Items) != 1 {
		t.Fatalf("read %d items", len(p.Items))
	}
	ar, err := cB.Ack(ctx, domain.AckRequest{RequestID: "w-ack", ConsumerID: cb.ConsumerID,
		Items: []domain.AckEntry{{ItemID: p.Items[0].ItemID, Stage: domain.StageReceived}}, CheckpointCursor: &p.NextCursor})
	check("ack", "inbox.ack.response", ar, err)
	ar, err = cB.Ack(ctx, domain.AckRequest{RequestID: "w-ack-cp-only", ConsumerID: cb.ConsumerID, CheckpointCursor: &p.NextCursor})
	check("checkpoint-only ack", "inbox.ack.response", ar, err)
	rp, err := cB.SendWithRetry(ctx, domain.SendRequest{RequestID: "w-reply", RecipientIDs: []string{a.ActorID}, InReplyTo: &sr.MessageID,
		Body: &domain.MessageBody{Text: "reply"}})
	check("reply", "message.send.response", rp, err)
	if rp.ThreadID != sr.ThreadID {
		t.Errorf("the reply went to thread %s, not %s", rp.ThreadID, sr.ThreadID)
	}
	tok, err := ad.RevokeToken(ctx, sp.SpaceID, ta.TokenID)
	check("revoke token", "admin.token.revoke.response", tok, err)
	act, err := ad.RevokeActor(ctx, sp.SpaceID, b.ActorID)
	check("revoke actor", "admin.actor.revoke.response", act, err)

	_, err = ca.Describe(ctx)
	checkErr("revoked token", err, domain.CodeUnauthenticated)
	_, err = client.NewAdmin(url, "wrong", client.WithHTTPClient(hc)).GetSpace(ctx, sp.SpaceID)
	checkErr("wrong admin secret", err, domain.CodeUnauthenticated)
	_, err = ad.GetSpace(ctx, "sp_missing")
	checkErr("missing space", err, domain.CodeNotFound)
}
