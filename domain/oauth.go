package domain

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/internal/echo"
)

// The records of the OAuth authorization server (api/oauth), kept through the item store port so that both
// deployments serve it. The protocol (RFC 6749/7591/7636/8707/9207) lives in api/oauth; what the domain
// holds is what outlives a request: registered clients, the short-lived protocol sessions (authorization
// codes, PKCE challenges, refresh tokens) as opaque payloads, and the ordinary Waypost tokens an approved
// authorization issues. An OAuth grant (one approval, the "refresh family") ties them together: revoking it
// revokes every token issued under it, and revoking a client revokes all its grants.
//
// Keys: a client OC#<client>|META (attribute state: active or revoked), listed in OX|<client>; its grants
// OC#<client>|G#<grant>; a grant's tokens and sessions OG#<grant>|T#<token> and OG#<grant>|<kind>#<sig>;
// a session OS#<kind>#<sig>|S (attribute active: 1 or 0).

// OAuthClient is a client registered with the authorization server (RFC 7591 metadata).
type OAuthClient struct {
	ClientID string `json:"client_id"`
	// SecretHash is the hash of a confidential client's secret (api/oauth's hasher); empty for a public client.
	SecretHash              string    `json:"secret_hash,omitempty"`
	ClientName              string    `json:"client_name,omitempty"`
	RedirectURIs            []string  `json:"redirect_uris"`
	GrantTypes              []string  `json:"grant_types"`
	ResponseTypes           []string  `json:"response_types"`
	Scope                   string    `json:"scope,omitempty"`
	TokenEndpointAuthMethod string    `json:"token_endpoint_auth_method"`
	ClientURI               string    `json:"client_uri,omitempty"`
	LogoURI                 string    `json:"logo_uri,omitempty"`
	SoftwareID              string    `json:"software_id,omitempty"`
	SoftwareVersion         string    `json:"software_version,omitempty"`
	CreatedAt               time.Time `json:"created_at"`
	Revoked                 bool      `json:"revoked,omitempty"`
}

// OAuthClientList is the result of ListOAuthClients (never a secret hash).
type OAuthClientList struct {
	Clients []OAuthClient `json:"clients"`
}

// OAuthSession is a protocol session of the authorization server: an authorization code, a PKCE challenge
// or a refresh token, keyed by the signature of the secret (never the secret). Data is api/oauth's own
// encoding of the request it stands for.
type OAuthSession struct {
	GrantID   string    `json:"grant_id"`
	ClientID  string    `json:"client_id"`
	Data      []byte    `json:"data"`
	ExpiresAt time.Time `json:"expires_at"`
	// Active is false once the session was used up (a redeemed code, a rotated refresh token): api/oauth
	// tells reuse from a mere unknown secret by it.
	Active bool `json:"active"`
}

// OAuthTokenSpec is what an approved authorization issues: an ordinary token of the space, bound to an
// actor (and a consumer), scopes and an expiry, whose secret's digest api/oauth computed (TokenDigest).
type OAuthTokenSpec struct {
	SpaceID    string
	ActorID    string
	ConsumerID string
	Scopes     []Scope
	ExpiresAt  time.Time
	Digest     string
	ClientID   string
	GrantID    string
}

// ErrOAuthSessionInactive is returned by DeactivateOAuthSession when the session was already used.
var ErrOAuthSessionInactive = errors.New("oauth session already used")

// oauthGrantRef is a grant's entry under its client, and a token's entry under its grant.
type oauthGrantRef struct {
	SpaceID string `json:"space_id,omitempty"`
	GrantID string `json:"grant_id,omitempty"`
	TokenID string `json:"token_id,omitempty"`
}

const (
	pkOAuthClients  = "OX"
	attrOAuthState  = "state"
	attrOAuthActive = "active"
)

func keyOAuthClient(client string) port.Key { return port.Key{PK: "OC#" + client, SK: "META"} }
func keyOAuthClientGrant(client, grant string) port.Key {
	return port.Key{PK: "OC#" + client, SK: "G#" + grant}
}
func keyOAuthGrantToken(grant, token string) port.Key {
	return port.Key{PK: "OG#" + grant, SK: "T#" + token}
}
func keyOAuthGrantSession(grant, kind, sig string) port.Key {
	return port.Key{PK: "OG#" + grant, SK: kind + "#" + sig}
}
func keyOAuthSession(kind, sig string) port.Key {
	return port.Key{PK: "OS#" + kind + "#" + sig, SK: "S"}
}

// TokenDigest is the stored digest of a token secret.
func TokenDigest(token string) string { return tokenDigest(token) }

// NewTokenSecret returns a fresh data-plane token secret (wpt_…) and its digest.
func (s *Service) NewTokenSecret() (secret, digest string, err error) {
	secret, err = s.newTokenSecret()
	if err != nil {
		return "", "", fmt.Errorf("generating a token secret: %w", err)
	}
	return secret, tokenDigest(secret), nil
}

// RegisterOAuthClient stores a new client (RFC 7591 registration, validated by api/oauth) under a fresh
// client_id and returns it.
func (s *Service) RegisterOAuthClient(ctx context.Context, c OAuthClient) (OAuthClient, error) {
	c.ClientID = s.ids.NewID("oc")
	c.CreatedAt = s.clock.Now().UTC().Truncate(time.Second)
	c.Revoked = false
	err := s.commitOps(ctx, []port.Op{
		port.Put(item(keyOAuthClient(c.ClientID), c, attrOAuthState, "active"), port.NotExists()),
		port.Put(item(port.Key{PK: pkOAuthClients, SK: c.ClientID}, oauthGrantRef{}), port.NotExists()),
	})
	if err != nil {
		return OAuthClient{}, fmt.Errorf("registering an oauth client: %w", err)
	}
	return c, nil
}

// GetOAuthClient reads a client; found is false when there is none.
func (s *Service) GetOAuthClient(ctx context.Context, clientID string) (c OAuthClient, found bool, err error) {
	if !ValidID(clientID) {
		return OAuthClient{}, false, nil
	}
	c, _, found, err = getRecord[OAuthClient](ctx, s.store, keyOAuthClient(clientID))
	return c, found, err
}

// ListOAuthClients lists the registered clients (without secret hashes), oldest ID first.
func (s *Service) ListOAuthClients(ctx context.Context) (OAuthClientList, error) {
	clients, err := listIndexed(ctx, s, pkOAuthClients, keyOAuthClient, func(OAuthClient) bool { return true })
	if err != nil {
		return OAuthClientList{}, fmt.Errorf("listing oauth clients: %w", err)
	}
	for i := range clients {
		clients[i].SecretHash = ""
	}
	return OAuthClientList{Clients: clients}, nil
}

// RevokeOAuthClient revokes a client: it can no longer authorize, redeem a code or refresh, and every token
// issued to it is revoked (each through RevokeToken, so a submission in flight with one cannot commit).
// Idempotent.
func (s *Service) RevokeOAuthClient(ctx context.Context, clientID string) (OAuthClient, error) {
	if !ValidID(clientID) {
		return OAuthClient{}, Errorf(CodeNotFound, "no such oauth client").WithDetails("client_id", echo.Clip(clientID))
	}
	c, it, found, err := getRecord[OAuthClient](ctx, s.store, keyOAuthClient(clientID))
	if err != nil {
		return OAuthClient{}, err
	}
	if !found {
		return OAuthClient{}, Errorf(CodeNotFound, "no such oauth client").WithDetails("client_id", clientID)
	}
	if !c.Revoked {
		c.Revoked = true
		if err := s.commitOps(ctx, []port.Op{port.Put(item(it.Key, c, attrOAuthState, "revoked"), port.Cond{})}); err != nil {
			return OAuthClient{}, fmt.Errorf("revoking an oauth client: %w", err)
		}
	}
	// The client is marked first: a token issued from now on fails its condition on the client's state, so
	// the grants read below are all the grants there will be.
	for items, err := range s.pages(ctx, prefixQuery(keyOAuthClient(clientID).PK, "G#")) {
		if err != nil {
			return OAuthClient{}, fmt.Errorf("listing the grants of an oauth client: %w", err)
		}
		for _, g := range items {
			if err := s.RevokeOAuthGrant(ctx, g.Key.SK[len("G#"):]); err != nil {
				return OAuthClient{}, err
			}
		}
	}
	c.SecretHash = ""
	return c, nil
}

// IssueOAuthToken commits the token an approved authorization (or a refresh) issues. It fails NOT_FOUND when
// the actor or consumer is gone, and FORBIDDEN when the client was revoked meanwhile (checked in the same
// transaction).
func (s *Service) IssueOAuthToken(ctx context.Context, spec OAuthTokenSpec) (TokenResult, error) {
	if !ValidID(spec.SpaceID) || !ValidID(spec.ActorID) || !ValidID(spec.ClientID) || spec.GrantID == "" || spec.Digest == "" {
		return TokenResult{}, Errorf(CodeInvalidRequest, "incomplete oauth token")
	}
	scopes := slices.Clone(spec.Scopes)
	slices.Sort(scopes)
	scopes = slices.Compact(scopes)
	if len(scopes) == 0 {
		return TokenResult{}, Errorf(CodeInvalidRequest, "an oauth token needs at least one scope")
	}
	for _, sc := range scopes {
		if !slices.Contains(AllScopes(), sc) {
			return TokenResult{}, Errorf(CodeInvalidRequest, "unknown scope %q", string(sc))
		}
	}
	if _, err := s.liveSpace(ctx, spec.SpaceID); err != nil {
		return TokenResult{}, err
	}
	if err := s.checkLiveActor(ctx, spec.SpaceID, spec.ActorID); err != nil {
		return TokenResult{}, err
	}
	if spec.ConsumerID != "" {
		c, _, found, err := getRecord[Consumer](ctx, s.store, keyConsumer(spec.SpaceID, spec.ConsumerID))
		if err != nil {
			return TokenResult{}, err
		}
		if !found || c.ActorID != spec.ActorID {
			return TokenResult{}, Errorf(CodeNotFound, "no such consumer of this actor").WithDetails("consumer_id", spec.ConsumerID)
		}
	}
	exp := spec.ExpiresAt.UTC().Truncate(time.Second)
	t := Token{TokenID: s.ids.NewID("tok"), SpaceID: spec.SpaceID, ActorID: spec.ActorID, ConsumerID: spec.ConsumerID,
		Scopes: scopes, ExpiresAt: &exp, Digest: spec.Digest, OAuthClientID: spec.ClientID, OAuthGrantID: spec.GrantID}
	err := s.commitOps(ctx, []port.Op{
		port.Check(keyOAuthClient(spec.ClientID), port.AttrEquals(attrOAuthState, "active")),
		port.Put(item(keyTokenByDigest(t.Digest), t), port.NotExists()),
		port.Put(item(keyTokenByID(spec.SpaceID, t.TokenID), t, attrDigest, t.Digest), port.NotExists()),
		port.Put(item(keyOAuthGrantToken(spec.GrantID, t.TokenID), oauthGrantRef{SpaceID: spec.SpaceID, TokenID: t.TokenID}), port.Cond{}),
		port.Put(item(keyOAuthClientGrant(spec.ClientID, spec.GrantID), oauthGrantRef{GrantID: spec.GrantID}), port.Cond{}),
		spaceLive(spec.SpaceID),
	})
	if i, ok := port.FailedOp(err); ok {
		if i == 0 {
			return TokenResult{}, Errorf(CodeForbidden, "the oauth client is revoked")
		}
		return TokenResult{}, Errorf(CodeStorageUnavailable, "the token could not be issued; retry")
	}
	if err != nil {
		return TokenResult{}, fmt.Errorf("issuing an oauth token: %w", err)
	}
	return tokenResult(t, ""), nil
}

// RevokeOAuthGrant revokes every token issued under a grant (idempotent). The grant's protocol sessions are
// api/oauth's to delete (DeleteOAuthGrantSessions).
func (s *Service) RevokeOAuthGrant(ctx context.Context, grantID string) error {
	for items, err := range s.pages(ctx, prefixQuery("OG#"+grantID, "T#")) {
		if err != nil {
			return fmt.Errorf("listing the tokens of an oauth grant: %w", err)
		}
		for _, it := range items {
			ref, err := decodeItem[oauthGrantRef](it)
			if err != nil {
				return err
			}
			if _, err := s.RevokeToken(ctx, ref.SpaceID, ref.TokenID); err != nil && AsError(err).Code != CodeNotFound {
				return fmt.Errorf("revoking a token of an oauth grant: %w", err)
			}
		}
	}
	return nil
}

// PutOAuthSession stores a new protocol session of the given kind under the signature of its secret, and
// lists it under its grant when it has one.
func (s *Service) PutOAuthSession(ctx context.Context, kind, sig string, sess OAuthSession) error {
	ops := []port.Op{port.Put(item(keyOAuthSession(kind, sig), sess, attrOAuthActive, boolAttr(sess.Active)), port.NotExists())}
	if sess.GrantID != "" {
		ops = append(ops, port.Put(item(keyOAuthGrantSession(sess.GrantID, kind, sig), oauthGrantRef{}), port.Cond{}))
	}
	if err := s.commitOps(ctx, ops); err != nil {
		return fmt.Errorf("storing an oauth %s: %w", kind, err)
	}
	return nil
}

// GetOAuthSession reads a protocol session; found is false when there is none (or it was deleted).
func (s *Service) GetOAuthSession(ctx context.Context, kind, sig string) (sess OAuthSession, found bool, err error) {
	sess, _, found, err = getRecord[OAuthSession](ctx, s.store, keyOAuthSession(kind, sig))
	return sess, found, err
}

// DeactivateOAuthSession marks a session used, once: ErrOAuthSessionInactive when it already was (a second
// redemption racing the first), NOT_FOUND when there is none.
func (s *Service) DeactivateOAuthSession(ctx context.Context, kind, sig string) error {
	sess, it, found, err := getRecord[OAuthSession](ctx, s.store, keyOAuthSession(kind, sig))
	if err != nil {
		return err
	}
	if !found {
		return Errorf(CodeNotFound, "no such oauth %s", kind)
	}
	if !sess.Active {
		return ErrOAuthSessionInactive
	}
	sess.Active = false
	err = s.commitOps(ctx, []port.Op{port.Put(item(it.Key, sess, attrOAuthActive, "0"), port.AttrEquals(attrOAuthActive, "1"))})
	if _, ok := port.FailedOp(err); ok {
		return ErrOAuthSessionInactive
	}
	return err
}

// DeleteOAuthSession deletes a protocol session (idempotent).
func (s *Service) DeleteOAuthSession(ctx context.Context, kind, sig string) error {
	if err := s.commitOps(ctx, []port.Op{port.Delete(keyOAuthSession(kind, sig), port.Cond{})}); err != nil {
		return fmt.Errorf("deleting an oauth %s: %w", kind, err)
	}
	return nil
}

// DeleteOAuthGrantSessions deletes every session of the given kind issued under a grant (a refresh family
// revoked on reuse).
func (s *Service) DeleteOAuthGrantSessions(ctx context.Context, grantID, kind string) error {
	for items, err := range s.pages(ctx, prefixQuery("OG#"+grantID, kind+"#")) {
		if err != nil {
			return fmt.Errorf("listing the %s sessions of an oauth grant: %w", kind, err)
		}
		for _, it := range items {
			sig := it.Key.SK[len(kind)+1:]
			if err := s.commitOps(ctx, []port.Op{port.Delete(keyOAuthSession(kind, sig), port.Cond{}),
				port.Delete(it.Key, port.Cond{})}); err != nil {
				return fmt.Errorf("deleting an oauth %s: %w", kind, err)
			}
		}
	}
	return nil
}

func boolAttr(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// ActorLive reports whether an actor exists, is not revoked, and its space is not being deleted: whether a
// grant bound to it may still be refreshed.
func (s *Service) ActorLive(ctx context.Context, spaceID, actorID string) (bool, error) {
	if _, err := s.liveSpace(ctx, spaceID); err != nil {
		if AsError(err).Code == CodeNotFound {
			return false, nil
		}
		return false, err
	}
	err := s.checkLiveActor(ctx, spaceID, actorID)
	if err != nil && AsError(err).Code == CodeNotFound {
		return false, nil
	}
	return err == nil, err
}
