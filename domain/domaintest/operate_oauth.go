package domaintest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/waypost/waypost/domain"
)

// opOAuthRecords checks the OAuth authorization server's records on a backend: a registered client, a token
// issued under one of its grants (an ordinary token of the actor, listed with its client), protocol sessions
// used once, the grant's sessions deleted together, and the client's revocation stopping its tokens and
// refusing new ones. It also checks the control-plane lists the consent page reads.
func opOAuthRecords(t *testing.T, nb NewBackend) {
	e := newOpEnv(t, nb)
	sp := e.Space().SpaceID
	a := e.Party(sp)
	ctx := e.ctx
	c := mustDo[domain.OAuthClient](t, "RegisterOAuthClient")(e.Svc.RegisterOAuthClient(ctx, domain.OAuthClient{ClientName: "host",
		RedirectURIs: []string{"https://host.example/cb"}, GrantTypes: []string{"authorization_code"}, ResponseTypes: []string{"code"},
		TokenEndpointAuthMethod: "none", SecretHash: "hash"}))
	if got, found, err := e.Svc.GetOAuthClient(ctx, c.ClientID); err != nil || !found || got.ClientName != "host" || got.SecretHash != "hash" {
		t.Fatalf("GetOAuthClient: %+v %v %v", got, found, err)
	}
	list := mustDo[domain.OAuthClientList](t, "ListOAuthClients")(e.Svc.ListOAuthClients(ctx))
	if len(list.Clients) != 1 || list.Clients[0].ClientID != c.ClientID || list.Clients[0].SecretHash != "" {
		t.Fatalf("ListOAuthClients: %+v (never a secret hash)", list)
	}
	issue := func(grant string) (string, error) {
		secret, digest, err := e.Svc.NewTokenSecret()
		if err != nil {
			t.Fatal(err)
		}
		_, err = e.Svc.IssueOAuthToken(ctx, domain.OAuthTokenSpec{SpaceID: sp, ActorID: a.ActorID, ConsumerID: a.ConsumerID,
			Scopes: []domain.Scope{domain.ScopeMessageRead}, ExpiresAt: time.Now().Add(time.Hour), Digest: digest, ClientID: c.ClientID, GrantID: grant})
		return secret, err
	}
	tok := mustDo[string](t, "IssueOAuthToken")(issue("grant-1"))
	p := mustDo[*domain.Principal](t, "Authenticate")(e.Svc.Authenticate(ctx, tok))
	if p.ActorID != a.ActorID || p.ConsumerID != a.ConsumerID || !slices.Equal(p.Scopes, []domain.Scope{domain.ScopeMessageRead}) {
		t.Fatalf("the OAuth token authenticates as %+v", p)
	}
	tokens := mustDo[domain.TokenList](t, "ListTokens")(e.Svc.ListTokens(ctx, sp))
	if len(tokens.Tokens) != 2 || !slices.ContainsFunc(tokens.Tokens, func(r domain.TokenResult) bool { return r.OAuthClientID == c.ClientID && r.Token == "" }) {
		t.Fatalf("ListTokens: %+v, want the party's token and the OAuth one naming its client, no secret", tokens)
	}
	// Protocol sessions: used once; the grant's refresh sessions go together.
	for _, sig := range []string{"s1", "s2"} {
		if err := e.Svc.PutOAuthSession(ctx, "rt", sig, domain.OAuthSession{GrantID: "grant-1", ClientID: c.ClientID, Data: []byte(`{}`), Active: true}); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Svc.PutOAuthSession(ctx, "rt", "s1", domain.OAuthSession{GrantID: "grant-1"}); err == nil {
		t.Fatal("a session stored twice under one signature")
	}
	if err := e.Svc.DeactivateOAuthSession(ctx, "rt", "s1"); err != nil {
		t.Fatal(err)
	}
	if err := e.Svc.DeactivateOAuthSession(ctx, "rt", "s1"); !errors.Is(err, domain.ErrOAuthSessionInactive) {
		t.Fatalf("a second use: %v, want ErrOAuthSessionInactive", err)
	}
	if s, found, _ := e.Svc.GetOAuthSession(ctx, "rt", "s1"); !found || s.Active || string(s.Data) != `{}` {
		t.Fatalf("a used session reads %+v %v", s, found)
	}
	if err := e.Svc.DeleteOAuthGrantSessions(ctx, "grant-1", "rt"); err != nil {
		t.Fatal(err)
	}
	for _, sig := range []string{"s1", "s2"} {
		if _, found, _ := e.Svc.GetOAuthSession(ctx, "rt", sig); found {
			t.Fatalf("session %s outlived its grant's deletion", sig)
		}
	}
	// The lists the consent page reads.
	if l := mustDo[domain.SpaceList](t, "ListSpaces")(e.Svc.ListSpaces(ctx)); !slices.ContainsFunc(l.Spaces, func(s domain.SpaceResult) bool { return s.SpaceID == sp }) {
		t.Fatalf("ListSpaces lacks %s: %+v", sp, l)
	}
	if l := mustDo[domain.ActorList](t, "ListActors")(e.Svc.ListActors(ctx, sp)); !slices.ContainsFunc(l.Actors, func(r domain.ActorResult) bool { return r.ActorID == a.ActorID }) {
		t.Fatalf("ListActors lacks %s: %+v", a.ActorID, l)
	}
	if l := mustDo[domain.ConsumerList](t, "ListConsumers")(e.Svc.ListConsumers(ctx, sp)); len(l.Consumers) != 1 || l.Consumers[0].ConsumerID != a.ConsumerID {
		t.Fatalf("ListConsumers: %+v", l)
	}
	// Revoking the client stops its token at once and refuses new ones; the party's own token lives on.
	if r := mustDo[domain.OAuthClient](t, "RevokeOAuthClient")(e.Svc.RevokeOAuthClient(ctx, c.ClientID)); !r.Revoked {
		t.Fatalf("RevokeOAuthClient answered %+v", r)
	}
	if _, err := e.Svc.Authenticate(ctx, tok); domain.CodeOf(err) != domain.CodeUnauthenticated {
		t.Fatalf("a revoked client's token authenticates: %v", err)
	}
	if _, err := issue("grant-2"); domain.CodeOf(err) != domain.CodeForbidden {
		t.Fatalf("a token issued to a revoked client: %v, want FORBIDDEN", err)
	}
	if _, err := e.Svc.Authenticate(ctx, a.Token); err != nil {
		t.Fatalf("the actor's own token was revoked with the client: %v", err)
	}
}
