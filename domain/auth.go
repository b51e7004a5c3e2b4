package domain

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/waypost/waypost/domain/port"
)

// tokenPrefix starts every data-plane token; the rest is base64url of 32 random bytes.
const tokenPrefix = "wpt_"

// Principal is the authenticated calling context (RFC §4.2): who calls, in which space, with which rights
// and at which authorization generation. It never holds the raw token.
type Principal struct {
	SpaceID    string
	ActorID    string
	TokenID    string
	ConsumerID string // non-empty when the token is bound to one consumer
	Scopes     []Scope
	Grants     []Grant
	Gen        int64
	digest     string
}

// HasScope reports whether the token carries scope sc.
func (p *Principal) HasScope(sc Scope) bool { return slices.Contains(p.Scopes, sc) }

// HasGrant reports whether the actor holds an active grant of perm (on collection coll when not empty).
func (p *Principal) HasGrant(perm Permission, coll string) bool {
	for _, g := range p.Grants {
		if g.Permission == perm && (coll == "" || g.CollectionID == coll) {
			return true
		}
	}
	return false
}

// CanObserve reports whether the principal may observe the whole space (scope and grant).
func (p *Principal) CanObserve() bool {
	return p.HasScope(ScopeSpaceObserve) && p.HasGrant(PermSpaceObserve, "")
}

// grantFingerprint identifies the effective read rights of the principal, independent of the token ID, so
// that rotating a token keeps cursors valid while a change of rights invalidates them (RFC §8.2).
func (p *Principal) grantFingerprint() string {
	parts := make([]string, 0, len(p.Scopes)+len(p.Grants))
	for _, s := range p.Scopes {
		parts = append(parts, "s:"+string(s))
	}
	for _, g := range p.Grants {
		parts = append(parts, "g:"+string(g.Permission)+":"+g.CollectionID+":"+g.BlobID)
	}
	slices.Sort(parts)
	sum := sha256.Sum256([]byte(strings.Join(parts, "\n")))
	return hex.EncodeToString(sum[:16])
}

func tokenDigest(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

func (s *Service) newTokenSecret() (string, error) {
	b := make([]byte, 32)
	if err := s.ids.Random(b); err != nil {
		return "", err
	}
	return tokenPrefix + base64.RawURLEncoding.EncodeToString(b), nil
}

var errUnauthenticated = Errorf(CodeUnauthenticated, "missing, malformed, expired or revoked credential")

// Authenticate resolves a bearer token into a Principal, checking expiry and revocation of the token and
// its actor (RFC §4.3). Every failure is UNAUTHENTICATED without saying which check failed.
func (s *Service) Authenticate(ctx context.Context, token string) (*Principal, error) {
	if !strings.HasPrefix(token, tokenPrefix) || len(token) < len(tokenPrefix)+43 || len(token) > 256 {
		return nil, errUnauthenticated
	}
	return s.authenticateDigest(ctx, tokenDigest(token))
}

// authenticateDigest authenticates the token with the given digest. A token authenticated before (see
// authCache) costs one read: the actor's current authorization generation, which every revocation and
// grant change increments; when it moved, everything is read afresh.
func (s *Service) authenticateDigest(ctx context.Context, digest string) (*Principal, error) {
	if e := s.auth.token(digest); e != nil {
		it, found, err := s.store.Get(ctx, keyActor(e.tok.SpaceID, e.tok.ActorID))
		if err != nil {
			return nil, fmt.Errorf("reading the actor of a token: %w", err)
		}
		if found && genOf(it) == e.gen {
			if s.expired(e.tok) {
				return nil, errUnauthenticated
			}
			return newPrincipal(e.tok, e.grants, e.gen, digest), nil
		}
		s.auth.dropToken(digest)
	}
	tok, _, found, err := getRecord[Token](ctx, s.store, keyTokenByDigest(digest))
	if err != nil {
		return nil, err
	}
	if !found || tok.Revoked || s.expired(tok) {
		return nil, errUnauthenticated
	}
	actor, actorItem, found, err := getRecord[Actor](ctx, s.store, keyActor(tok.SpaceID, tok.ActorID))
	if err != nil {
		return nil, err
	}
	if !found || actor.Revoked {
		return nil, errUnauthenticated
	}
	gen := genOf(actorItem)
	grants, err := s.activeGrants(ctx, tok.SpaceID, tok.ActorID)
	if err != nil {
		return nil, err
	}
	// Remember the result only as of generation gen: the grants were read after the actor, and the token is
	// read again here, so a revocation committed between the first token read and the actor read (it
	// incremented gen) is not remembered as valid.
	if again, _, found, err := getRecord[Token](ctx, s.store, keyTokenByDigest(digest)); err == nil && found &&
		!again.Revoked && again.TokenID == tok.TokenID {
		s.auth.putToken(digest, &authEntry{tok: again, grants: grants, gen: gen})
	}
	return newPrincipal(tok, grants, gen, digest), nil
}

func (s *Service) expired(tok Token) bool {
	return tok.ExpiresAt != nil && !s.clock.Now().Before(*tok.ExpiresAt)
}

func newPrincipal(tok Token, grants []Grant, gen int64, digest string) *Principal {
	return &Principal{
		SpaceID: tok.SpaceID, ActorID: tok.ActorID, TokenID: tok.TokenID, ConsumerID: tok.ConsumerID,
		Scopes: slices.Clone(tok.Scopes), Grants: slices.Clone(grants), Gen: gen, digest: digest,
	}
}

func (s *Service) activeGrants(ctx context.Context, space, actor string) ([]Grant, error) {
	var out []Grant
	for items, err := range s.pages(ctx, port.Query{PK: pkGrants(space, actor), Limit: 200}) {
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			g, err := decodeItem[Grant](it)
			if err != nil {
				return nil, err
			}
			if !g.Revoked {
				out = append(out, g)
			}
		}
	}
	return out, nil
}

// refresh re-reads the principal's credential and rights, as every commit must (RFC §7.2).
func (s *Service) refresh(ctx context.Context, p *Principal) (*Principal, error) {
	return s.authenticateDigest(ctx, p.digest)
}

// genCheck is the condition that pins a commit to the principal's authorization generation.
func genCheck(p *Principal) port.Op {
	return port.Check(keyActor(p.SpaceID, p.ActorID), port.AttrEquals(attrGen, itoa(p.Gen)))
}

func requireScope(p *Principal, sc Scope) error {
	if !p.HasScope(sc) {
		return Errorf(CodeForbidden, "the credential lacks scope %s", sc).WithDetails("scope", string(sc))
	}
	return nil
}

// hasBlobGrant reports whether the actor holds blob.reference for the blob.
func (p *Principal) hasBlobGrant(blobID string) bool {
	for _, g := range p.Grants {
		if g.Permission == PermBlobReference && g.BlobID == blobID {
			return true
		}
	}
	return false
}
