package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"time"

	"github.com/ory/fosite"
	"github.com/ory/fosite/handler/oauth2"

	"github.com/waypost/waypost/domain"
)

// Session is what an approval binds an OAuth grant to: the space, the actor the client acts as, its
// consumer, and the resource (RFC 8707) it was authorized for; with the expiry of each secret fosite issues.
// It is fosite's session of every request of the grant.
type Session struct {
	ExpiresAt  map[fosite.TokenType]time.Time `json:"expires_at,omitempty"`
	SpaceID    string                         `json:"space_id"`
	ActorID    string                         `json:"actor_id"`
	ConsumerID string                         `json:"consumer_id,omitempty"`
	Resource   string                         `json:"resource,omitempty"`
}

// SetExpiresAt implements fosite.Session.
func (s *Session) SetExpiresAt(key fosite.TokenType, exp time.Time) {
	if s.ExpiresAt == nil {
		s.ExpiresAt = map[fosite.TokenType]time.Time{}
	}
	s.ExpiresAt[key] = exp
}

// GetExpiresAt implements fosite.Session.
func (s *Session) GetExpiresAt(key fosite.TokenType) time.Time { return s.ExpiresAt[key] }

// GetUsername implements fosite.Session: the actor.
func (s *Session) GetUsername() string { return s.ActorID }

// GetSubject implements fosite.Session: the actor.
func (s *Session) GetSubject() string { return s.ActorID }

// Clone implements fosite.Session.
func (s *Session) Clone() fosite.Session {
	c := *s
	c.ExpiresAt = map[fosite.TokenType]time.Time{}
	for k, v := range s.ExpiresAt {
		c.ExpiresAt[k] = v
	}
	return &c
}

// The kinds of protocol sessions kept through domain.Service.PutOAuthSession.
const (
	kindCode    = "ac" // authorization codes
	kindPKCE    = "pk" // PKCE challenges, keyed like their code
	kindRefresh = "rt" // refresh tokens
)

// offlineScope is accepted in requests (some clients ask for it to get a refresh token) and never stored
// in a Waypost token: every grant gets a refresh token.
const offlineScope = "offline_access"

// storage implements fosite's storage interfaces over the domain's OAuth records (the item store port), so
// that the embedded and AWS deployments keep the same state the same way.
type storage struct {
	svc *domain.Service
}

var (
	_ fosite.ClientManager          = (*storage)(nil)
	_ oauth2.CoreStorage            = (*storage)(nil)
	_ oauth2.TokenRevocationStorage = (*storage)(nil)
)

// storedRequest is how a fosite request is kept: the client by ID, the rest as fosite holds it.
type storedRequest struct {
	ID                string     `json:"id"`
	RequestedAt       time.Time  `json:"requested_at"`
	ClientID          string     `json:"client_id"`
	RequestedScope    []string   `json:"requested_scope"`
	GrantedScope      []string   `json:"granted_scope"`
	RequestedAudience []string   `json:"requested_audience,omitempty"`
	GrantedAudience   []string   `json:"granted_audience,omitempty"`
	Form              url.Values `json:"form,omitempty"`
	Session           *Session   `json:"session"`
}

func encodeRequest(r fosite.Requester) ([]byte, *Session, error) {
	sess, ok := r.GetSession().(*Session)
	if !ok || sess == nil {
		return nil, nil, errors.New("oauth: a request without a Waypost session")
	}
	b, err := json.Marshal(storedRequest{ID: r.GetID(), RequestedAt: r.GetRequestedAt(), ClientID: r.GetClient().GetID(),
		RequestedScope: r.GetRequestedScopes(), GrantedScope: r.GetGrantedScopes(),
		RequestedAudience: r.GetRequestedAudience(), GrantedAudience: r.GetGrantedAudience(),
		Form: r.GetRequestForm(), Session: sess})
	return b, sess, err
}

// decodeRequest rebuilds a stored request; a client revoked or gone since makes it ErrNotFound.
func (st *storage) decodeRequest(ctx context.Context, data []byte) (*fosite.Request, error) {
	var sr storedRequest
	if err := json.Unmarshal(data, &sr); err != nil {
		return nil, fmt.Errorf("oauth: decoding a stored request: %w", err)
	}
	client, err := st.GetClient(ctx, sr.ClientID)
	if err != nil {
		return nil, err
	}
	if sr.Session == nil {
		sr.Session = &Session{}
	}
	// The session fosite passes in is not filled here: it may be the live session of the request being
	// handled (the PKCE handler passes it after the code's handler set the new tokens' expiry).
	return &fosite.Request{ID: sr.ID, RequestedAt: sr.RequestedAt, Client: client,
		RequestedScope: sr.RequestedScope, GrantedScope: sr.GrantedScope,
		RequestedAudience: sr.RequestedAudience, GrantedAudience: sr.GrantedAudience,
		Form: sr.Form, Session: sr.Session}, nil
}

func (st *storage) put(ctx context.Context, kind, sig string, r fosite.Requester, tt fosite.TokenType) error {
	data, sess, err := encodeRequest(r)
	if err != nil {
		return err
	}
	return st.svc.PutOAuthSession(ctx, kind, sig, domain.OAuthSession{GrantID: r.GetID(), ClientID: r.GetClient().GetID(),
		Data: data, ExpiresAt: sess.GetExpiresAt(tt), Active: true})
}

// get reads a session; an inactive one is returned with fosite's inactive error of its kind.
func (st *storage) get(ctx context.Context, kind, sig string, inactive error) (fosite.Requester, error) {
	sess, found, err := st.svc.GetOAuthSession(ctx, kind, sig)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, fosite.ErrNotFound
	}
	req, err := st.decodeRequest(ctx, sess.Data)
	if err != nil {
		return nil, err
	}
	if !sess.Active {
		return req, inactive
	}
	return req, nil
}

// GetClient implements fosite.ClientManager: a registered client that is not revoked.
func (st *storage) GetClient(ctx context.Context, id string) (fosite.Client, error) {
	c, found, err := st.svc.GetOAuthClient(ctx, id)
	if err != nil {
		return nil, err
	}
	if !found || c.Revoked {
		return nil, fosite.ErrNotFound
	}
	return fositeClient(c), nil
}

// fositeClient is a registered client as fosite sees it: the Waypost scopes (and offline_access) are what it
// may ask for, whatever it registered with.
func fositeClient(c domain.OAuthClient) fosite.Client {
	scopes := []string{offlineScope}
	for _, s := range domain.AllScopes() {
		scopes = append(scopes, string(s))
	}
	return &fosite.DefaultOpenIDConnectClient{
		DefaultClient: &fosite.DefaultClient{ID: c.ClientID, Secret: []byte(c.SecretHash), RedirectURIs: slices.Clone(c.RedirectURIs),
			GrantTypes: c.GrantTypes, ResponseTypes: c.ResponseTypes, Scopes: scopes, Public: c.TokenEndpointAuthMethod == "none"},
		TokenEndpointAuthMethod: c.TokenEndpointAuthMethod,
	}
}

// ClientAssertionJWTValid implements fosite.ClientManager (JWT client assertions are not offered).
func (st *storage) ClientAssertionJWTValid(context.Context, string) error { return nil }

// SetClientAssertionJWT implements fosite.ClientManager (JWT client assertions are not offered).
func (st *storage) SetClientAssertionJWT(context.Context, string, time.Time) error { return nil }

// CreateAuthorizeCodeSession implements oauth2.AuthorizeCodeStorage.
func (st *storage) CreateAuthorizeCodeSession(ctx context.Context, sig string, r fosite.Requester) error {
	return st.put(ctx, kindCode, sig, r, fosite.AuthorizeCode)
}

// GetAuthorizeCodeSession implements oauth2.AuthorizeCodeStorage. It also fills the session passed in when
// it is still empty (the token request's, on the first read): fosite checks the code's expiry against that
// session first, and a code found expired there is invalid_grant (RFC 6749 §5.2). A session already filled
// is the live one of the request being answered (fosite reads the code again before issuing), and is left
// as it is: it holds the new tokens' expiry.
func (st *storage) GetAuthorizeCodeSession(ctx context.Context, sig string, into fosite.Session) (fosite.Requester, error) {
	req, err := st.get(ctx, kindCode, sig, fosite.ErrInvalidatedAuthorizeCode)
	if s, ok := into.(*Session); ok && s != nil && req != nil && s.SpaceID == "" && len(s.ExpiresAt) == 0 {
		*s = *(req.GetSession().(*Session).Clone().(*Session))
	}
	return req, err
}

// InvalidateAuthorizeCodeSession implements oauth2.AuthorizeCodeStorage: a code is redeemed once; the
// second of two racing redemptions fails.
func (st *storage) InvalidateAuthorizeCodeSession(ctx context.Context, sig string) error {
	err := st.svc.DeactivateOAuthSession(ctx, kindCode, sig)
	if errors.Is(err, domain.ErrOAuthSessionInactive) {
		return fosite.ErrInvalidatedAuthorizeCode
	}
	return err
}

// CreatePKCERequestSession implements pkce.PKCERequestStorage.
func (st *storage) CreatePKCERequestSession(ctx context.Context, sig string, r fosite.Requester) error {
	return st.put(ctx, kindPKCE, sig, r, fosite.AuthorizeCode)
}

// GetPKCERequestSession implements pkce.PKCERequestStorage.
func (st *storage) GetPKCERequestSession(ctx context.Context, sig string, _ fosite.Session) (fosite.Requester, error) {
	return st.get(ctx, kindPKCE, sig, fosite.ErrNotFound)
}

// DeletePKCERequestSession implements pkce.PKCERequestStorage.
func (st *storage) DeletePKCERequestSession(ctx context.Context, sig string) error {
	return st.svc.DeleteOAuthSession(ctx, kindPKCE, sig)
}

// CreateAccessTokenSession implements oauth2.AccessTokenStorage: the access token is an ordinary Waypost
// token (accessTokens generated it; sig is its digest), bound to the grant's space, actor, consumer and
// scopes, expiring with the access token.
func (st *storage) CreateAccessTokenSession(ctx context.Context, sig string, r fosite.Requester) error {
	sess, ok := r.GetSession().(*Session)
	if !ok || sess == nil {
		return errors.New("oauth: an access token without a Waypost session")
	}
	var scopes []domain.Scope
	for _, s := range r.GetGrantedScopes() {
		if s != offlineScope {
			scopes = append(scopes, domain.Scope(s))
		}
	}
	_, err := st.svc.IssueOAuthToken(ctx, domain.OAuthTokenSpec{SpaceID: sess.SpaceID, ActorID: sess.ActorID, ConsumerID: sess.ConsumerID,
		Scopes: scopes, ExpiresAt: sess.GetExpiresAt(fosite.AccessToken), Digest: sig, ClientID: r.GetClient().GetID(), GrantID: r.GetID()})
	if err != nil {
		return fmt.Errorf("oauth: issuing the access token: %w", err)
	}
	return nil
}

// GetAccessTokenSession implements oauth2.AccessTokenStorage. Access tokens are checked by the data plane as
// any token; fosite never needs to read one back in the flows served (no introspection).
func (st *storage) GetAccessTokenSession(context.Context, string, fosite.Session) (fosite.Requester, error) {
	return nil, fosite.ErrNotFound
}

// DeleteAccessTokenSession implements oauth2.AccessTokenStorage (see GetAccessTokenSession); tokens are
// revoked by grant (RevokeAccessToken).
func (st *storage) DeleteAccessTokenSession(context.Context, string) error { return nil }

// CreateRefreshTokenSession implements oauth2.RefreshTokenStorage.
func (st *storage) CreateRefreshTokenSession(ctx context.Context, sig, _ string, r fosite.Requester) error {
	return st.put(ctx, kindRefresh, sig, r, fosite.RefreshToken)
}

// GetRefreshTokenSession implements oauth2.RefreshTokenStorage: a rotated token reads as inactive (fosite
// then revokes the whole family); a grant whose actor was revoked reads as not found.
func (st *storage) GetRefreshTokenSession(ctx context.Context, sig string, _ fosite.Session) (fosite.Requester, error) {
	req, err := st.get(ctx, kindRefresh, sig, fosite.ErrInactiveToken)
	if err != nil {
		return req, err
	}
	sess := req.GetSession().(*Session)
	live, err := st.svc.ActorLive(ctx, sess.SpaceID, sess.ActorID)
	if err != nil {
		return nil, err
	}
	if !live {
		return nil, fosite.ErrNotFound
	}
	return req, nil
}

// DeleteRefreshTokenSession implements oauth2.RefreshTokenStorage.
func (st *storage) DeleteRefreshTokenSession(ctx context.Context, sig string) error {
	return st.svc.DeleteOAuthSession(ctx, kindRefresh, sig)
}

// RotateRefreshToken implements oauth2.RefreshTokenStorage: the used refresh token becomes inactive, so that
// its reuse is detected.
func (st *storage) RotateRefreshToken(ctx context.Context, _ string, sig string) error {
	err := st.svc.DeactivateOAuthSession(ctx, kindRefresh, sig)
	if errors.Is(err, domain.ErrOAuthSessionInactive) {
		return fosite.ErrInactiveToken
	}
	return err
}

// RevokeRefreshToken implements oauth2.TokenRevocationStorage: every refresh token of the grant.
func (st *storage) RevokeRefreshToken(ctx context.Context, requestID string) error {
	return st.svc.DeleteOAuthGrantSessions(ctx, requestID, kindRefresh)
}

// RevokeAccessToken implements oauth2.TokenRevocationStorage: every Waypost token issued under the grant.
func (st *storage) RevokeAccessToken(ctx context.Context, requestID string) error {
	return st.svc.RevokeOAuthGrant(ctx, requestID)
}
