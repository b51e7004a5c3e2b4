package oauth_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/waypost/waypost/api/oauth"
	"github.com/waypost/waypost/api/oauth/oauthtest"
)

// TestBadInputGetsItsErrorAndNoToken: every refusal of issue 28's list answers the error the RFCs name, and
// no token is issued by it (the space's token list is unchanged).
func TestBadInputGetsItsErrorAndNoToken(t *testing.T) {
	h := newHarness(t, oauth.Options{})
	client := h.register()
	token := func(form url.Values, basic ...string) (int, map[string]any) {
		return oauthtest.Token(t, h.base, form, basic...)
	}
	codeForm := func(code string, pk oauthtest.PKCE) url.Values {
		return url.Values{"grant_type": {"authorization_code"}, "client_id": {client}, "code": {code}, "redirect_uri": {redirect},
			"code_verifier": {pk.Verifier}}
	}
	// exchangeRefused gets a fresh code, changes its token request with change, and checks that the exchange
	// is refused with want and issues no token.
	exchangeRefused := func(t *testing.T, change func(f url.Values, pk oauthtest.PKCE), want string) {
		t.Helper()
		pk := oauthtest.NewPKCE()
		f := codeForm(h.code(client, pk), pk)
		change(f, pk)
		n := h.tokens()
		if st, body := token(f); st != http.StatusBadRequest || body["error"] != want || h.tokens() != n {
			t.Fatalf("want %s and no token: %d %v, tokens %d → %d", want, st, body, n, h.tokens())
		}
	}
	// redirected checks an authorization refused back to the client: error, state and iss (RFC 9207).
	redirected := func(t *testing.T, p oauthtest.Page, want string) {
		t.Helper()
		u, err := url.Parse(p.Location)
		if p.Status != http.StatusSeeOther || err != nil || !strings.HasPrefix(p.Location, redirect) {
			t.Fatalf("want a redirect to the client, got %d %q\n%s", p.Status, p.Location, p.Body)
		}
		q := u.Query()
		if q.Get("error") != want || q.Get("iss") != h.base || q.Get("state") != "state-12345678" || q.Get("code") != "" {
			t.Fatalf("redirect query %v, want error %s with iss and state", q, want)
		}
	}
	// page checks an authorization refused on a page (no redirect to an unchecked URI).
	page := func(t *testing.T, p oauthtest.Page, want string) {
		t.Helper()
		if p.Location != "" || p.Status < 400 || !strings.Contains(p.Body, want) {
			t.Fatalf("want a %s page without redirect, got %d %q\n%s", want, p.Status, p.Location, p.Body)
		}
	}
	rows := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"reused code", func(t *testing.T) {
			pk := oauthtest.NewPKCE()
			code := h.code(client, pk)
			if st, body := token(codeForm(code, pk)); st != http.StatusOK {
				t.Fatalf("first redemption: %d %v", st, body)
			}
			n := h.tokens()
			st, body := token(codeForm(code, pk))
			if st != http.StatusBadRequest || body["error"] != "invalid_grant" || h.tokens() != n {
				t.Fatalf("second redemption: %d %v, tokens %d → %d", st, body, n, h.tokens())
			}
		}},
		{"expired code", func(t *testing.T) {
			h := newHarness(t, oauth.Options{CodeLifespan: time.Second})
			client := h.register()
			pk := oauthtest.NewPKCE()
			code := h.code(client, pk)
			time.Sleep(2100 * time.Millisecond)
			n := h.tokens()
			st, body := oauthtest.Token(t, h.base, url.Values{"grant_type": {"authorization_code"}, "client_id": {client}, "code": {code},
				"redirect_uri": {redirect}, "code_verifier": {pk.Verifier}})
			if st != http.StatusBadRequest || body["error"] != "invalid_grant" || h.tokens() != n {
				t.Fatalf("expired code: %d %v", st, body)
			}
		}},
		{"wrong code_verifier", func(t *testing.T) {
			exchangeRefused(t, func(f url.Values, _ oauthtest.PKCE) { f.Set("code_verifier", oauthtest.NewPKCE().Verifier) }, "invalid_grant")
		}},
		{"missing code_verifier", func(t *testing.T) {
			pk := oauthtest.NewPKCE()
			code := h.code(client, pk)
			n := h.tokens()
			f := codeForm(code, pk)
			f.Del("code_verifier")
			if st, body := token(f); st != http.StatusBadRequest || (body["error"] != "invalid_grant" && body["error"] != "invalid_request") || h.tokens() != n {
				t.Fatalf("missing verifier: %d %v", st, body)
			}
		}},
		{"redirect URI not registered", func(t *testing.T) {
			q := h.authQuery(client, oauthtest.NewPKCE())
			q.Set("redirect_uri", "http://127.0.0.1:9/callback/../evil")
			page(t, h.owner.Get("/authorize?"+q.Encode()), "invalid_request")
			q.Set("redirect_uri", "https://attacker.invalid/cb")
			page(t, h.owner.Get("/authorize?"+q.Encode()), "invalid_request")
		}},
		{"redirect URI differs at the token endpoint", func(t *testing.T) {
			exchangeRefused(t, func(f url.Values, _ oauthtest.PKCE) { f.Set("redirect_uri", "http://127.0.0.1:9/other") }, "invalid_grant")
		}},
		{"plain PKCE", func(t *testing.T) {
			q := h.authQuery(client, oauthtest.NewPKCE())
			q.Set("code_challenge_method", "plain")
			redirected(t, h.owner.Get("/authorize?"+q.Encode()), "invalid_request")
		}},
		{"no PKCE", func(t *testing.T) {
			q := h.authQuery(client, oauthtest.NewPKCE())
			q.Del("code_challenge")
			q.Del("code_challenge_method")
			redirected(t, h.owner.Get("/authorize?"+q.Encode()), "invalid_request")
		}},
		{"unknown client", func(t *testing.T) {
			q := h.authQuery("oc_unknown", oauthtest.NewPKCE())
			page(t, h.owner.Get("/authorize?"+q.Encode()), "invalid_client")
			n := h.tokens()
			st, body := token(url.Values{"grant_type": {"authorization_code"}, "client_id": {"oc_unknown"}, "code": {"x.y"},
				"redirect_uri": {redirect}, "code_verifier": {oauthtest.NewPKCE().Verifier}})
			if st != http.StatusUnauthorized || body["error"] != "invalid_client" || h.tokens() != n {
				t.Fatalf("token for an unknown client: %d %v", st, body)
			}
		}},
		{"refresh token used twice", func(t *testing.T) {
			pk := oauthtest.NewPKCE()
			_, tok := token(codeForm(h.code(client, pk), pk))
			rf := url.Values{"grant_type": {"refresh_token"}, "client_id": {client}, "refresh_token": {tok["refresh_token"].(string)}}
			if st, body := token(rf); st != http.StatusOK {
				t.Fatalf("first refresh: %d %v", st, body)
			}
			n := h.tokens()
			if st, body := token(rf); st != http.StatusBadRequest || body["error"] != "invalid_grant" || h.tokens() != n {
				t.Fatalf("second refresh: %d %v", st, body)
			}
		}},
		{"resource of another server at authorization", func(t *testing.T) {
			q := h.authQuery(client, oauthtest.NewPKCE())
			q.Set("resource", "https://other.invalid/mcp")
			redirected(t, h.owner.Get("/authorize?"+q.Encode()), "invalid_target")
		}},
		{"resource of another server at the token endpoint", func(t *testing.T) {
			pk := oauthtest.NewPKCE()
			code := h.code(client, pk)
			n := h.tokens()
			f := codeForm(code, pk)
			f.Set("resource", "https://other.invalid/mcp")
			if st, body := token(f); st != http.StatusBadRequest || body["error"] != "invalid_target" || h.tokens() != n {
				t.Fatalf("foreign resource: %d %v", st, body)
			}
			// the refusal used nothing up: the same code still redeems for this server
			f.Set("resource", h.base+"/mcp")
			if st, body := token(f); st != http.StatusOK {
				t.Fatalf("after the refused resource: %d %v", st, body)
			}
		}},
		{"unsupported grant type", func(t *testing.T) {
			n := h.tokens()
			st, body := token(url.Values{"grant_type": {"password"}, "client_id": {client}, "username": {"a"}, "password": {"b"}})
			if st != http.StatusBadRequest || body["error"] != "unsupported_grant_type" || h.tokens() != n {
				t.Fatalf("password grant: %d %v", st, body)
			}
		}},
		{"unknown scope", func(t *testing.T) {
			q := h.authQuery(client, oauthtest.NewPKCE())
			q.Set("scope", "message.send admin.everything")
			redirected(t, h.owner.Get("/authorize?"+q.Encode()), "invalid_scope")
		}},
		{"owner denies", func(t *testing.T) {
			p := h.owner.Authorize(h.authQuery(client, oauthtest.NewPKCE()))
			n := h.tokens()
			redirected(t, h.owner.Decide(p, "deny", nil), "access_denied")
			if h.tokens() != n {
				t.Fatal("a denial issued a token")
			}
		}},
		{"wrong client secret", func(t *testing.T) {
			st, reg := oauthtest.Register(t, h.base, map[string]any{"redirect_uris": []string{redirect}, "token_endpoint_auth_method": "client_secret_basic"})
			if st != http.StatusCreated || reg["client_secret"] == nil {
				t.Fatalf("register confidential: %d %v", st, reg)
			}
			id := reg["client_id"].(string)
			pk := oauthtest.NewPKCE()
			code := h.code(id, pk)
			n := h.tokens()
			f := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirect}, "code_verifier": {pk.Verifier}}
			if st, body := token(f, id, "not-the-secret"); st != http.StatusUnauthorized || body["error"] != "invalid_client" || h.tokens() != n {
				t.Fatalf("wrong secret: %d %v", st, body)
			}
			if st, body := token(f, id, reg["client_secret"].(string)); st != http.StatusOK {
				t.Fatalf("right secret: %d %v", st, body)
			}
		}},
		{"bad registrations", func(t *testing.T) {
			for _, c := range []struct {
				md   map[string]any
				want string
			}{
				{map[string]any{"redirect_uris": []string{"javascript:alert(1)"}}, "invalid_redirect_uri"},
				{map[string]any{"redirect_uris": []string{"http://example.com/cb"}}, "invalid_redirect_uri"},
				{map[string]any{"redirect_uris": []string{"https://example.com/cb#frag"}}, "invalid_redirect_uri"},
				{map[string]any{}, "invalid_redirect_uri"},
				{map[string]any{"redirect_uris": []string{redirect}, "grant_types": []string{"client_credentials"}}, "invalid_client_metadata"},
				{map[string]any{"redirect_uris": []string{redirect}, "token_endpoint_auth_method": "private_key_jwt"}, "invalid_client_metadata"},
				{map[string]any{"redirect_uris": []string{redirect}, "scope": "message.send root"}, "invalid_client_metadata"},
			} {
				if st, body := oauthtest.Register(t, h.base, c.md); st != http.StatusBadRequest || body["error"] != c.want {
					t.Errorf("register %v: %d %v, want %s", c.md, st, body, c.want)
				}
			}
		}},
	}
	for _, r := range rows {
		t.Run(r.name, r.run)
	}
}
