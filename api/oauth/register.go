package oauth

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/internal/echo"
)

// Registration bounds.
const (
	maxRedirectURIs   = 10
	maxURILength      = 2000
	maxClientNameLen  = 200
	maxRegistration   = 32 << 10
	defaultAuthMethod = "client_secret_basic" // RFC 7591 §2
)

// registration is the RFC 7591 client metadata Waypost reads; other members are ignored, as §2 allows.
type registration struct {
	RedirectURIs            []string `json:"redirect_uris"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method"`
	GrantTypes              []string `json:"grant_types"`
	ResponseTypes           []string `json:"response_types"`
	ClientName              string   `json:"client_name"`
	ClientURI               string   `json:"client_uri"`
	LogoURI                 string   `json:"logo_uri"`
	Scope                   string   `json:"scope"`
	SoftwareID              string   `json:"software_id"`
	SoftwareVersion         string   `json:"software_version"`
}

// registrationError is an RFC 7591 §3.2.2 error.
type registrationError struct {
	Code, Description string
}

func (e *registrationError) Error() string { return e.Code + ": " + e.Description }

func badMetadata(format string, args ...any) *registrationError {
	return &registrationError{Code: "invalid_client_metadata", Description: fmt.Sprintf(format, args...)}
}

// register is the dynamic client registration endpoint (RFC 7591), open as the MCP specification expects:
// a registered client can do nothing until the owner approves it on the consent page.
func (s *Server) register(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	var md registration
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRegistration))
	if err := dec.Decode(&md); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_client_metadata", "error_description": "the body must be a JSON object of client metadata"})
		return
	}
	c, rerr := validateRegistration(md)
	if rerr != nil {
		s.log.InfoContext(ctx, "oauth registration refused", "error", rerr.Code, "description", rerr.Description)
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": rerr.Code, "error_description": rerr.Description})
		return
	}
	var secret string
	if c.TokenEndpointAuthMethod != "none" {
		raw := make([]byte, 32)
		if _, err := rand.Read(raw); err != nil {
			writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "server_error"})
			return
		}
		secret = base64.RawURLEncoding.EncodeToString(raw)
		hash, err := s.config.GetSecretsHasher(ctx).Hash(ctx, []byte(secret))
		if err != nil {
			writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "server_error"})
			return
		}
		c.SecretHash = string(hash)
	}
	c, err := s.svc.RegisterOAuthClient(ctx, c)
	if err != nil {
		s.log.ErrorContext(ctx, "oauth registration failed", "error", err.Error())
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "temporarily_unavailable", "error_description": "the registration could not be stored; retry"})
		return
	}
	s.log.InfoContext(ctx, "oauth client registered", "client_id", c.ClientID, "client_name", c.ClientName, "auth_method", c.TokenEndpointAuthMethod)
	out := map[string]any{
		"client_id":                  c.ClientID,
		"client_id_issued_at":        c.CreatedAt.Unix(),
		"redirect_uris":              c.RedirectURIs,
		"token_endpoint_auth_method": c.TokenEndpointAuthMethod,
		"grant_types":                c.GrantTypes,
		"response_types":             c.ResponseTypes,
	}
	for k, v := range map[string]string{"client_name": c.ClientName, "client_uri": c.ClientURI, "logo_uri": c.LogoURI,
		"scope": c.Scope, "software_id": c.SoftwareID, "software_version": c.SoftwareVersion} {
		if v != "" {
			out[k] = v
		}
	}
	if secret != "" {
		out["client_secret"] = secret
		out["client_secret_expires_at"] = 0
	}
	writeJSON(w, http.StatusCreated, out)
}

// validateRegistration applies the registration rules and fills the defaults.
func validateRegistration(md registration) (domain.OAuthClient, *registrationError) {
	if len(md.RedirectURIs) == 0 {
		return domain.OAuthClient{}, &registrationError{"invalid_redirect_uri", "redirect_uris must name at least one URI"}
	}
	if len(md.RedirectURIs) > maxRedirectURIs {
		return domain.OAuthClient{}, &registrationError{"invalid_redirect_uri", fmt.Sprintf("at most %d redirect_uris", maxRedirectURIs)}
	}
	for _, u := range md.RedirectURIs {
		if err := checkRedirectURI(u); err != "" {
			return domain.OAuthClient{}, &registrationError{"invalid_redirect_uri", err}
		}
	}
	method := md.TokenEndpointAuthMethod
	if method == "" {
		method = defaultAuthMethod
	}
	if !slices.Contains([]string{"none", "client_secret_basic", "client_secret_post"}, method) {
		return domain.OAuthClient{}, badMetadata("token_endpoint_auth_method must be none, client_secret_basic or client_secret_post")
	}
	grants := md.GrantTypes
	if len(grants) == 0 {
		grants = []string{"authorization_code", "refresh_token"}
	}
	for _, g := range grants {
		if g != "authorization_code" && g != "refresh_token" {
			return domain.OAuthClient{}, badMetadata("grant_types may name authorization_code and refresh_token only, not %q", echo.Clip(g))
		}
	}
	if !slices.Contains(grants, "authorization_code") {
		return domain.OAuthClient{}, badMetadata("grant_types must include authorization_code")
	}
	responses := md.ResponseTypes
	if len(responses) == 0 {
		responses = []string{"code"}
	}
	if !slices.Equal(responses, []string{"code"}) {
		return domain.OAuthClient{}, badMetadata("response_types must be [\"code\"]")
	}
	if len(md.ClientName) > maxClientNameLen {
		return domain.OAuthClient{}, badMetadata("client_name is longer than %d bytes", maxClientNameLen)
	}
	for _, sc := range strings.Fields(md.Scope) {
		if sc != offlineScope && !slices.Contains(scopeNames(), sc) {
			return domain.OAuthClient{}, badMetadata("unknown scope %q", echo.Clip(sc))
		}
	}
	for _, u := range []string{md.ClientURI, md.LogoURI} {
		if u == "" {
			continue
		}
		p, err := url.Parse(u)
		if len(u) > maxURILength || err != nil || (p.Scheme != "https" && p.Scheme != "http") || p.Host == "" {
			return domain.OAuthClient{}, badMetadata("client_uri and logo_uri must be absolute http(s) URLs")
		}
	}
	return domain.OAuthClient{ClientName: md.ClientName, RedirectURIs: md.RedirectURIs, GrantTypes: grants, ResponseTypes: responses,
		Scope: md.Scope, TokenEndpointAuthMethod: method, ClientURI: md.ClientURI, LogoURI: md.LogoURI,
		SoftwareID: echo.Clip(md.SoftwareID), SoftwareVersion: echo.Clip(md.SoftwareVersion)}, nil
}

// checkRedirectURI returns why a redirect URI is refused ("" when it is fine): it must be absolute, without
// fragment, and https — or http to a loopback host (native apps, RFC 8252 §7.3), or a private-use scheme
// with a dot in it (RFC 8252 §7.1). Script and data schemes are never accepted.
func checkRedirectURI(raw string) string {
	if len(raw) > maxURILength {
		return "a redirect URI is too long"
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() {
		return "redirect URIs must be absolute URIs"
	}
	if u.Fragment != "" || strings.Contains(raw, "#") {
		return "redirect URIs must not have a fragment"
	}
	switch scheme := strings.ToLower(u.Scheme); {
	case scheme == "https":
		if u.Host == "" {
			return "an https redirect URI needs a host"
		}
	case scheme == "http":
		host := u.Hostname()
		if ip := net.ParseIP(host); !(host == "localhost" || ip != nil && ip.IsLoopback()) {
			return "http redirect URIs are allowed to loopback hosts only; use https"
		}
	case strings.Contains(scheme, "."):
		// a private-use scheme (reverse domain name) of a native app
	default:
		return fmt.Sprintf("the scheme %q is not allowed for a redirect URI", echo.Clip(scheme))
	}
	return ""
}
