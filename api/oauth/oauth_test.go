package oauth_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/waypost/waypost/api/apitest"
	"github.com/waypost/waypost/api/oauth"
	"github.com/waypost/waypost/api/oauth/oauthtest"
	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/server/servertest"
)

// harness is an embedded server whose authorization server has the given lifespans, with a space, two
// actors (A, and B with consumer CB) and a CLI token of each.
type harness struct {
	t     *testing.T
	base  string
	svc   *domain.Service
	world apitest.World
	owner *oauthtest.Owner
}

const redirect = "http://127.0.0.1:9/callback"

func newHarness(t *testing.T, opts oauth.Options) *harness {
	t.Helper()
	srv, _ := servertest.Start(t)
	opts.Svc, opts.AdminSecret = srv.Service(), servertest.AdminSecret
	opts.Secret = []byte("0123456789abcdef0123456789abcdef-test")
	opts.Logger = slog.New(slog.NewTextHandler(testLog{t}, nil))
	as, err := oauth.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	for _, rt := range as.Routes() {
		mux.Handle(rt.Pattern, rt.Handler)
	}
	mux.Handle("/", srv.Handler())
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	h := &harness{t: t, base: hs.URL, svc: srv.Service(), world: apitest.NewWorld(t, srv.Service())}
	h.owner = oauthtest.NewOwner(t, hs.URL, servertest.AdminSecret)
	return h
}

// register registers a public client with the test redirect URI.
func (h *harness) register() string {
	h.t.Helper()
	st, body := oauthtest.Register(h.t, h.base, map[string]any{"client_name": "Test host", "redirect_uris": []string{redirect},
		"token_endpoint_auth_method": "none", "grant_types": []string{"authorization_code", "refresh_token"}})
	if st != http.StatusCreated {
		h.t.Fatalf("register: %d %v", st, body)
	}
	return body["client_id"].(string)
}

func (h *harness) authQuery(client string, pk oauthtest.PKCE) url.Values {
	return url.Values{"response_type": {"code"}, "client_id": {client}, "redirect_uri": {redirect}, "state": {"state-12345678"},
		"code_challenge": {pk.Challenge}, "code_challenge_method": {"S256"}, "resource": {h.base + "/mcp"},
		"scope": {"message.send message.read receipt.write"}}
}

// approveB approves q as actor B with consumer CB and returns the redirect's query.
func (h *harness) approve(q url.Values) url.Values {
	h.t.Helper()
	p := h.owner.Authorize(q)
	if p.Status != http.StatusOK || !strings.Contains(p.Body, `id="approve"`) {
		h.t.Fatalf("consent page: %d\n%s", p.Status, p.Body)
	}
	d := h.owner.Decide(p, "approve", url.Values{"wp_space": {h.world.SpaceID}, "wp_actor": {h.world.B}, "wp_consumer": {h.world.CB},
		"wp_scope": {"message.send", "message.read", "receipt.write"}})
	if d.Status != http.StatusSeeOther {
		h.t.Fatalf("approval answered %d:\n%s", d.Status, d.Body)
	}
	u, err := url.Parse(d.Location)
	if err != nil || !strings.HasPrefix(d.Location, redirect+"?") {
		h.t.Fatalf("approval redirected to %q", d.Location)
	}
	return u.Query()
}

func (h *harness) code(client string, pk oauthtest.PKCE) string {
	h.t.Helper()
	q := h.approve(h.authQuery(client, pk))
	if q.Get("iss") != h.base || q.Get("state") != "state-12345678" || q.Get("code") == "" {
		h.t.Fatalf("authorization response %v (want iss %s)", q, h.base)
	}
	return q.Get("code")
}

func (h *harness) exchange(client, code string, pk oauthtest.PKCE) (int, map[string]any) {
	return oauthtest.Token(h.t, h.base, url.Values{"grant_type": {"authorization_code"}, "client_id": {client}, "code": {code},
		"redirect_uri": {redirect}, "code_verifier": {pk.Verifier}, "resource": {h.base + "/mcp"}})
}

func (h *harness) tokens() int {
	h.t.Helper()
	l, err := h.svc.ListTokens(context.Background(), h.world.SpaceID)
	if err != nil {
		h.t.Fatal(err)
	}
	return len(l.Tokens)
}

// describeStatus calls GET /v0/describe with a token.
func (h *harness) describeStatus(token string) int {
	h.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, h.base+"/v0/describe", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestFlowIssuesOrdinaryTokens(t *testing.T) {
	h := newHarness(t, oauth.Options{})
	client := h.register()
	pk := oauthtest.NewPKCE()
	st, tok := h.exchange(client, h.code(client, pk), pk)
	if st != http.StatusOK {
		t.Fatalf("exchange: %d %v", st, tok)
	}
	access, refresh := tok["access_token"].(string), tok["refresh_token"].(string)
	if !strings.HasPrefix(access, "wpt_") || refresh == "" || tok["token_type"] != "bearer" {
		t.Fatalf("token response %v", tok)
	}
	// The access token is an ordinary token of actor B with consumer CB, listed with its client.
	list, _ := h.svc.ListTokens(context.Background(), h.world.SpaceID)
	var found *domain.TokenResult
	for i, tr := range list.Tokens {
		if tr.OAuthClientID == client {
			found = &list.Tokens[i]
		}
	}
	if found == nil || found.ActorID != h.world.B || found.ConsumerID == nil || *found.ConsumerID != h.world.CB || found.ExpiresAt == nil ||
		len(found.Scopes) != 3 {
		t.Fatalf("token list has %+v", found)
	}
	// One idempotency scope with the actor's CLI token: a retried send is one message.
	send := func(token string) string {
		req, _ := http.NewRequest(http.MethodPost, h.base+"/v0/messages", strings.NewReader(
			`{"request_id":"same-request-1","recipient_ids":["`+h.world.A+`"],"subject":"hi","body":{"text":"once"}}`))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var env struct {
			OK   bool `json:"ok"`
			Data struct {
				MessageID string `json:"message_id"`
			} `json:"data"`
		}
		b, _ := io.ReadAll(resp.Body)
		if err := json.Unmarshal(b, &env); err != nil || !env.OK {
			t.Fatalf("send: %s", b)
		}
		return env.Data.MessageID
	}
	if a, b := send(access), send(h.world.TokB); a == "" || a != b {
		t.Fatalf("a retry through the CLI token sent %q, the OAuth send %q: want one message", b, a)
	}
	// Refresh rotates; the used refresh token is refused and its reuse revokes the family.
	st, ref := oauthtest.Token(t, h.base, url.Values{"grant_type": {"refresh_token"}, "client_id": {client}, "refresh_token": {refresh}})
	if st != http.StatusOK || ref["refresh_token"] == refresh || !strings.HasPrefix(ref["access_token"].(string), "wpt_") {
		t.Fatalf("refresh: %d %v", st, ref)
	}
	access2, refresh2 := ref["access_token"].(string), ref["refresh_token"].(string)
	if h.describeStatus(access2) != http.StatusOK {
		t.Fatal("the refreshed access token is refused")
	}
	st, again := oauthtest.Token(t, h.base, url.Values{"grant_type": {"refresh_token"}, "client_id": {client}, "refresh_token": {refresh}})
	if st != http.StatusBadRequest || again["error"] != "invalid_grant" {
		t.Fatalf("reused refresh token: %d %v", st, again)
	}
	if h.describeStatus(access2) != http.StatusUnauthorized || h.describeStatus(access) != http.StatusUnauthorized {
		t.Fatal("the family's access tokens still work after the refresh token's reuse")
	}
	st, fam := oauthtest.Token(t, h.base, url.Values{"grant_type": {"refresh_token"}, "client_id": {client}, "refresh_token": {refresh2}})
	if st != http.StatusBadRequest || fam["error"] != "invalid_grant" {
		t.Fatalf("the family's newest refresh token after reuse: %d %v", st, fam)
	}
	if h.describeStatus(h.world.TokB) != http.StatusOK {
		t.Fatal("the actor's CLI token was revoked with the OAuth family")
	}
}

// TestStateIsOptional: a client that sends no state (OAuth 2.1 with PKCE) gets its code, and no state back.
func TestStateIsOptional(t *testing.T) {
	h := newHarness(t, oauth.Options{})
	client := h.register()
	pk := oauthtest.NewPKCE()
	q := h.authQuery(client, pk)
	q.Del("state")
	got := h.approve(q)
	if got.Get("code") == "" || got.Has("state") || got.Get("iss") != h.base {
		t.Fatalf("authorization response without state: %v", got)
	}
	if st, body := h.exchange(client, got.Get("code"), pk); st != http.StatusOK {
		t.Fatalf("exchange: %d %v", st, body)
	}
}

func TestRevokingTheClientStopsItsTokens(t *testing.T) {
	h := newHarness(t, oauth.Options{})
	client := h.register()
	pk := oauthtest.NewPKCE()
	_, tok := h.exchange(client, h.code(client, pk), pk)
	access, refresh := tok["access_token"].(string), tok["refresh_token"].(string)
	if h.describeStatus(access) != http.StatusOK {
		t.Fatal("fresh access token refused")
	}
	if _, err := h.svc.RevokeOAuthClient(context.Background(), client); err != nil {
		t.Fatal(err)
	}
	if h.describeStatus(access) != http.StatusUnauthorized {
		t.Fatal("a revoked client's access token still works")
	}
	st, body := oauthtest.Token(t, h.base, url.Values{"grant_type": {"refresh_token"}, "client_id": {client}, "refresh_token": {refresh}})
	if st != http.StatusUnauthorized || body["error"] != "invalid_client" {
		t.Fatalf("refresh by a revoked client: %d %v", st, body)
	}
	p := h.owner.Authorize(h.authQuery(client, oauthtest.NewPKCE()))
	if p.Status == http.StatusOK || strings.Contains(p.Body, `id="approve"`) {
		t.Fatalf("a revoked client was shown the consent page: %d", p.Status)
	}
}

func TestMetadataAndChallenge(t *testing.T) {
	h := newHarness(t, oauth.Options{})
	get := func(path string) (int, map[string]any, http.Header) {
		resp, err := http.Get(h.base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, m, resp.Header
	}
	_, prm, _ := get("/.well-known/oauth-protected-resource/mcp")
	if prm["resource"] != h.base+"/mcp" || prm["authorization_servers"].([]any)[0] != h.base {
		t.Fatalf("protected-resource metadata %v", prm)
	}
	_, as, hdr := get("/.well-known/oauth-authorization-server")
	if hdr.Get("Access-Control-Allow-Origin") != "*" {
		t.Error("the authorization-server metadata cannot be read by a browser-based client (no CORS)")
	}
	if as["issuer"] != h.base || as["code_challenge_methods_supported"].([]any)[0] != "S256" ||
		as["authorization_response_iss_parameter_supported"] != true || as["registration_endpoint"] != h.base+"/register" {
		t.Fatalf("authorization-server metadata %v", as)
	}
	for _, path := range []string{"/mcp", "/v0/describe"} {
		req, _ := http.NewRequest(http.MethodGet, h.base+path, nil)
		if path == "/mcp" {
			req, _ = http.NewRequest(http.MethodPost, h.base+path, strings.NewReader(`{}`))
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		want := h.base + "/.well-known/oauth-protected-resource" + map[string]string{"/mcp": "/mcp", "/v0/describe": "/v0"}[path]
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.Header.Get("WWW-Authenticate"), `resource_metadata="`+want+`"`) {
			t.Errorf("%s: %d, WWW-Authenticate %q", path, resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
		}
	}
	// The served OpenAPI document offers the oauth2 scheme with these endpoints.
	if resp, err := http.Get(h.base + "/v0/openapi.json"); err != nil {
		t.Fatal(err)
	} else {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(b), `"authorizationUrl": "/authorize"`) || !strings.Contains(string(b), `"tokenUrl": "/token"`) {
			t.Error("the served OpenAPI document has no oauth2 scheme naming /authorize and /token")
		}
	}
	// describe and the metadata agree: oauth is published where it is served.
	req, _ := http.NewRequest(http.MethodGet, h.base+"/v0/describe", nil)
	req.Header.Set("Authorization", "Bearer "+h.world.TokA)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var d struct {
		Data struct {
			Capabilities domain.Capabilities `json:"capabilities"`
		} `json:"data"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&d)
	if !d.Data.Capabilities.OAuth {
		t.Fatal("describe does not publish oauth: true")
	}
}

// testLog writes the server's log lines to the test's log.
type testLog struct{ t *testing.T }

func (l testLog) Write(b []byte) (int, error) {
	l.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}
