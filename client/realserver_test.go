package client_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/waypost/waypost/client"
	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/server"
)

const realAdminSecret = "test-admin-secret-0123456789abcdefghijklmnopqrstuvwxyz"

// realWorld is an embedded server behind httptest with one space: a writer actor (all scopes, own consumer)
// with a collection it is the source of, and a reader actor with memory.read on that collection.
type realWorld struct {
	url                    string
	spaceID                string
	writerID, readerID     string
	writerConsumer         string
	collectionID           string
	writer, reader         *client.Client
	writerToken, readToken string
}

// newRealWorld starts the server; wrap, when not nil, wraps its handler (fault injection, inspection).
func newRealWorld(t *testing.T, wrap func(http.Handler) http.Handler) *realWorld {
	t.Helper()
	srv, err := server.Open(server.Config{DataDir: t.TempDir(), NoSync: true, NoSyncBlobs: true, AdminSecret: realAdminSecret})
	if err != nil {
		t.Fatalf("server.Open: %v", err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	var h http.Handler = srv.Handler()
	if wrap != nil {
		h = wrap(h)
	}
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	ctx := context.Background()
	adm := client.NewAdmin(hs.URL, realAdminSecret)
	w := &realWorld{url: hs.URL}
	sp, err := adm.CreateSpace(ctx, domain.CreateSpaceRequest{RequestID: "sp"})
	if err != nil {
		t.Fatalf("create space: %v", err)
	}
	w.spaceID = sp.SpaceID
	wa, err := adm.CreateActor(ctx, sp.SpaceID, domain.CreateActorRequest{RequestID: "writer", DisplayName: "writer"})
	if err != nil {
		t.Fatalf("create actor: %v", err)
	}
	ra, err := adm.CreateActor(ctx, sp.SpaceID, domain.CreateActorRequest{RequestID: "reader", DisplayName: "reader"})
	if err != nil {
		t.Fatalf("create actor: %v", err)
	}
	w.writerID, w.readerID = wa.ActorID, ra.ActorID
	con, err := adm.CreateConsumer(ctx, sp.SpaceID, domain.CreateConsumerRequest{RequestID: "wc", ActorID: wa.ActorID, View: domain.ViewInbox})
	if err != nil {
		t.Fatalf("create consumer: %v", err)
	}
	w.writerConsumer = con.ConsumerID
	coll, err := adm.CreateCollection(ctx, sp.SpaceID, domain.CreateCollectionRequest{RequestID: "coll", SourceActorID: wa.ActorID,
		CollectionID: "notes", Scope: "test notes"})
	if err != nil {
		t.Fatalf("create collection: %v", err)
	}
	w.collectionID = coll.CollectionID
	if _, err := adm.CreateGrant(ctx, sp.SpaceID, domain.CreateGrantRequest{RequestID: "g", ActorID: ra.ActorID,
		Permission: domain.PermMemoryRead, CollectionID: coll.CollectionID}); err != nil {
		t.Fatalf("create grant: %v", err)
	}
	wt, err := adm.CreateToken(ctx, sp.SpaceID, domain.CreateTokenRequest{RequestID: "wt", ActorID: wa.ActorID, ConsumerID: con.ConsumerID,
		Scopes: domain.AllScopes()})
	if err != nil {
		t.Fatalf("create token: %v", err)
	}
	rt, err := adm.CreateToken(ctx, sp.SpaceID, domain.CreateTokenRequest{RequestID: "rt", ActorID: ra.ActorID,
		Scopes: []domain.Scope{domain.ScopeMemoryRead, domain.ScopeBlobRead, domain.ScopeMessageSend}})
	if err != nil {
		t.Fatalf("create token: %v", err)
	}
	w.writerToken, w.readToken = wt.Token, rt.Token
	w.writer, w.reader = client.New(hs.URL, wt.Token), client.New(hs.URL, rt.Token)
	return w
}
