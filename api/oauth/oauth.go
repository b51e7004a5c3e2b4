// Package oauth is Waypost's OAuth 2.1 authorization server and the protected-resource side of /mcp and /v0,
// per the MCP authorization specification (revision 2025-06-18): RFC 9728 protected-resource metadata,
// RFC 8414 authorization-server metadata, RFC 7591 dynamic client registration, the authorization-code
// grant with PKCE S256 only (RFC 7636), refresh tokens rotated on every use with reuse revoking the family,
// RFC 8707 resource indicators and RFC 9207's iss in every authorization response.
//
// The protocol state machine is ory/fosite's; this package gives it storage (the domain's OAuth records,
// through the item store port, so both deployments serve it), the owner's consent page, and an access-token
// strategy that makes every access token an ordinary Waypost token: bound to a space, an actor, a consumer,
// scopes and an expiry, checked by the data plane like any other, listed and revoked with the others.
package oauth

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/ory/fosite"
	"github.com/ory/fosite/compose"
	"github.com/ory/fosite/handler/oauth2"

	"github.com/waypost/waypost/api/adminauth"
	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/internal/echo"
)

// Default lifetimes.
const (
	DefaultAccessTokenLifespan  = time.Hour
	DefaultRefreshTokenLifespan = 30 * 24 * time.Hour
	DefaultCodeLifespan         = 5 * time.Minute
	DefaultOwnerSessionLifespan = 30 * time.Minute
)

// Options configures the authorization server.
type Options struct {
	// Svc is the domain service whose records and tokens the server uses.
	Svc *domain.Service
	// AdminSecret is the owner's secret: the consent page asks for it once per browser session, and the
	// owner's session cookie is authenticated with a key derived from it.
	AdminSecret string
	// Secret (at least 32 bytes, stable across restarts and shared by every instance) authenticates
	// authorization codes and refresh tokens.
	Secret []byte
	// Issuer is the public base URL (scheme://host[:port], no path), the issuer and the base of every
	// endpoint and resource URI. Empty means each request's own scheme and Host: right for a server
	// reached by one name, wrong behind a proxy that rewrites Host (set it there).
	Issuer string
	// Logger receives one line per refused or failed flow (never a secret).
	Logger *slog.Logger
	// AccessTokenLifespan, RefreshTokenLifespan, CodeLifespan and OwnerSessionLifespan override the defaults.
	AccessTokenLifespan, RefreshTokenLifespan, CodeLifespan, OwnerSessionLifespan time.Duration
}

// Server is the authorization server: mount its Routes.
type Server struct {
	opts      Options
	svc       *domain.Service
	provider  fosite.OAuth2Provider
	config    *fosite.Config
	admin     *adminauth.Verifier
	cookieKey []byte // HMAC key of the owner's session cookie and the CSRF tokens
	log       *slog.Logger
}

// New builds the authorization server.
func New(opts Options) (*Server, error) {
	if opts.Svc == nil {
		return nil, errors.New("oauth: no domain service")
	}
	if len(opts.Secret) < 32 {
		return nil, errors.New("oauth: the token secret must have at least 32 bytes")
	}
	if opts.Issuer != "" {
		u, err := url.Parse(opts.Issuer)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
			return nil, fmt.Errorf("oauth: the issuer %q must be an absolute http(s) URL without path, query or fragment", opts.Issuer)
		}
		opts.Issuer = strings.TrimSuffix(opts.Issuer, "/")
	}
	admin, err := adminauth.NewVerifier(opts.AdminSecret)
	if err != nil {
		return nil, fmt.Errorf("oauth: %w", err)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{
		{&opts.AccessTokenLifespan, DefaultAccessTokenLifespan}, {&opts.RefreshTokenLifespan, DefaultRefreshTokenLifespan},
		{&opts.CodeLifespan, DefaultCodeLifespan}, {&opts.OwnerSessionLifespan, DefaultOwnerSessionLifespan},
	} {
		switch {
		case *d.v < 0:
			return nil, errors.New("oauth: negative lifespan")
		case *d.v == 0:
			*d.v = d.def
		}
	}
	cfg := &fosite.Config{
		AccessTokenLifespan:            opts.AccessTokenLifespan,
		RefreshTokenLifespan:           opts.RefreshTokenLifespan,
		AuthorizeCodeLifespan:          opts.CodeLifespan,
		GlobalSecret:                   derive(opts.Secret, "waypost oauth hmac"),
		EnforcePKCE:                    true,
		EnablePKCEPlainChallengeMethod: false,
		ScopeStrategy:                  fosite.ExactScopeStrategy,
		AudienceMatchingStrategy:       fosite.ExactAudienceMatchingStrategy,
		RefreshTokenScopes:             []string{}, // every grant gets a refresh token
		SendDebugMessagesToClients:     false,
		MinParameterEntropy:            1, // any state a client sends; none at all is handled by authorize
	}
	st := &storage{svc: opts.Svc}
	strategy := &tokens{HMACSHAStrategy: compose.NewOAuth2HMACStrategy(cfg), svc: opts.Svc}
	provider := compose.Compose(cfg, st, strategy,
		compose.OAuth2AuthorizeExplicitFactory,
		compose.OAuth2RefreshTokenGrantFactory,
		compose.OAuth2PKCEFactory,
	)
	return &Server{opts: opts, svc: opts.Svc, provider: provider, config: cfg, admin: admin,
		cookieKey: derive([]byte(opts.AdminSecret), "waypost oauth owner session"), log: opts.Logger}, nil
}

// derive is HMAC-SHA256(key, label): independent keys from one secret.
func derive(key []byte, label string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(label))
	return m.Sum(nil)
}

// tokens is fosite's HMAC strategy for codes and refresh tokens, with Waypost tokens as access tokens: the
// secret is a wpt_ token and its signature the digest the data plane looks tokens up by.
type tokens struct {
	*oauth2.HMACSHAStrategy
	svc *domain.Service
}

// AccessTokenSignature implements oauth2.AccessTokenStrategy.
func (t *tokens) AccessTokenSignature(_ context.Context, token string) string {
	return domain.TokenDigest(token)
}

// GenerateAccessToken implements oauth2.AccessTokenStrategy.
func (t *tokens) GenerateAccessToken(context.Context, fosite.Requester) (string, string, error) {
	return t.svc.NewTokenSecret()
}

// ValidateAccessToken implements oauth2.AccessTokenStrategy; the data plane checks access tokens (expiry,
// revocation, generation) as it checks every token.
func (t *tokens) ValidateAccessToken(context.Context, fosite.Requester, string) error { return nil }

// Route is one endpoint of the server.
type Route struct {
	Pattern string // net/http ServeMux pattern
	Handler http.Handler
}

// Routes returns the endpoints to mount: the metadata documents, registration, the consent page and the
// token endpoint.
func (s *Server) Routes() []Route {
	prm := cors(http.HandlerFunc(s.protectedResource))
	as, register, token := cors(http.HandlerFunc(s.authorizationServer)), cors(http.HandlerFunc(s.register)), cors(http.HandlerFunc(s.token))
	preflight := cors(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	return []Route{
		{"GET /.well-known/oauth-protected-resource", prm},
		{"GET /.well-known/oauth-protected-resource/mcp", prm},
		{"GET /.well-known/oauth-protected-resource/v0", prm},
		{"GET /.well-known/oauth-authorization-server", as},
		{"OPTIONS /.well-known/", preflight},
		{"POST /register", register},
		{"OPTIONS /register", preflight},
		{"OPTIONS /token", preflight},
		{"GET /authorize", http.HandlerFunc(s.authorize)},
		{"POST /authorize", http.HandlerFunc(s.authorize)},
		{"POST /authorize/login", http.HandlerFunc(s.login)},
		{"GET /authorize/consent.css", http.HandlerFunc(s.stylesheet)},
		{"POST /token", token},
	}
}

// cors lets a browser-based MCP client (an inspector, a web host) read the metadata and call registration
// and the token endpoint from any origin: they take no cookie and answer only what the request itself
// proves (RFC 8414 §3, RFC 7591 §3). The consent page is never cross-origin.
func cors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", "*")
		h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
		h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, MCP-Protocol-Version")
		h.Set("Access-Control-Max-Age", "600")
		next.ServeHTTP(w, r)
	})
}

// Issuer returns the issuer URL a request is served under.
func (s *Server) Issuer(r *http.Request) string { return issuerOf(s.opts.Issuer, r) }

// issuerOf is the fixed issuer, or the request's own scheme and Host.
func issuerOf(fixed string, r *http.Request) string {
	if fixed != "" {
		return strings.TrimSuffix(fixed, "/")
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// resources are the resource indicators (RFC 8707) this server accepts: the MCP endpoint, the HTTP data
// plane, and the server as a whole. A token issued for one serves all three (they are one server); a
// resource naming anything else is refused.
func (s *Server) resources(r *http.Request) []string {
	iss := s.Issuer(r)
	return []string{iss + "/mcp", iss + "/v0", iss, iss + "/"}
}

// Challenge returns the WWW-Authenticate value of a 401 (transport.Options.Challenge) for a server whose
// authorization server has the given fixed issuer ("" = each request's own): on /mcp and /v0 it names
// where the protected-resource metadata is (RFC 9728 §5.1); elsewhere (the control plane) only the realm.
func Challenge(issuer string) func(r *http.Request) string {
	return func(r *http.Request) string {
		var suffix string
		switch p := r.URL.Path; {
		case p == "/mcp" || strings.HasPrefix(p, "/mcp/"):
			suffix = "/mcp"
		case strings.HasPrefix(p, "/v0/"):
			suffix = "/v0"
		default:
			return `Bearer realm="waypost"`
		}
		return fmt.Sprintf(`Bearer realm="waypost", resource_metadata="%s/.well-known/oauth-protected-resource%s"`, issuerOf(issuer, r), suffix)
	}
}

func scopeNames() []string {
	var out []string
	for _, sc := range domain.AllScopes() {
		out = append(out, string(sc))
	}
	return out
}

// protectedResource serves RFC 9728 metadata; under /mcp or /v0 it describes that resource.
func (s *Server) protectedResource(w http.ResponseWriter, r *http.Request) {
	iss := s.Issuer(r)
	resource := iss + "/mcp"
	if strings.HasSuffix(r.URL.Path, "/v0") {
		resource = iss + "/v0"
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"resource":                 resource,
		"authorization_servers":    []string{iss},
		"scopes_supported":         scopeNames(),
		"bearer_methods_supported": []string{"header"},
		"resource_name":            "Waypost",
		"resource_documentation":   iss + "/v0/describe",
	})
}

// authorizationServer serves RFC 8414 metadata.
func (s *Server) authorizationServer(w http.ResponseWriter, r *http.Request) {
	iss := s.Issuer(r)
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer":                                         iss,
		"authorization_endpoint":                         iss + "/authorize",
		"token_endpoint":                                 iss + "/token",
		"registration_endpoint":                          iss + "/register",
		"scopes_supported":                               append(scopeNames(), offlineScope),
		"response_types_supported":                       []string{"code"},
		"response_modes_supported":                       []string{"query"},
		"grant_types_supported":                          []string{"authorization_code", "refresh_token"},
		"token_endpoint_auth_methods_supported":          []string{"none", "client_secret_basic", "client_secret_post"},
		"code_challenge_methods_supported":               []string{"S256"},
		"authorization_response_iss_parameter_supported": true,
		"service_documentation":                          iss + "/v0/describe",
	})
}

// token is the token endpoint: the authorization-code and refresh-token grants.
func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	// Checked before fosite reads the request, which uses up parts of a grant (its PKCE challenge) as it
	// goes: a refusal here changes nothing.
	if err := r.ParseForm(); err == nil {
		if gt := r.PostForm.Get("grant_type"); gt != "" && gt != "authorization_code" && gt != "refresh_token" {
			err := fosite.ErrUnsupportedGrantType.WithHintf("The grant type %q is not supported: use authorization_code or refresh_token.", echo.Clip(gt))
			s.refused(ctx, "token", err)
			s.provider.WriteAccessError(ctx, w, fosite.NewAccessRequest(&Session{}), err)
			return
		}
		// RFC 8707: a resource named here must be this server's.
		for _, v := range r.PostForm["resource"] {
			if !slices.Contains(s.resources(r), v) {
				err := errInvalidTarget().WithHintf("The resource %q is not served by this server.", echo.Clip(v))
				s.refused(ctx, "token", err)
				s.provider.WriteAccessError(ctx, w, fosite.NewAccessRequest(&Session{}), err)
				return
			}
		}
	}
	ar, err := s.provider.NewAccessRequest(ctx, r, &Session{})
	if err != nil {
		s.refused(ctx, "token", err)
		s.provider.WriteAccessError(ctx, w, ar, err)
		return
	}
	resp, err := s.provider.NewAccessResponse(ctx, ar)
	if err != nil {
		s.refused(ctx, "token", err)
		s.provider.WriteAccessError(ctx, w, ar, err)
		return
	}
	s.provider.WriteAccessResponse(ctx, w, ar, resp)
}

// errInvalidTarget is RFC 8707's error for a resource the server does not serve.
func errInvalidTarget() *fosite.RFC6749Error {
	return &fosite.RFC6749Error{ErrorField: "invalid_target", DescriptionField: "The requested resource is invalid, unknown or malformed.", CodeField: http.StatusBadRequest}
}

// refused logs a refused or failed flow: the error code and hint, never a secret.
func (s *Server) refused(ctx context.Context, endpoint string, err error) {
	rfc := fosite.ErrorToRFC6749Error(err)
	level := slog.LevelInfo
	if rfc.CodeField >= 500 {
		level = slog.LevelError
	}
	s.log.LogAttrs(ctx, level, "oauth request refused", slog.String("endpoint", endpoint), slog.String("error", rfc.ErrorField),
		slog.String("hint", rfc.HintField), slog.String("cause", fmt.Sprint(errors.Unwrap(err))))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
