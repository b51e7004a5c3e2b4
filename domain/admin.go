package domain

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/waypost/waypost/domain/port"
)

// Control-plane operations (SUPPLEMENT §11.3). The transport authenticates the instance administrator
// before calling them; they are never reachable with a data-plane token.

// CreateSpaceRequest is the body of POST /admin/v0/spaces.
type CreateSpaceRequest struct {
	RequestID   string `json:"request_id"`
	DisplayName string `json:"display_name,omitempty"`
}

// SpaceResult describes a space.
type SpaceResult struct {
	SpaceID            string    `json:"space_id"`
	DefaultRecipientID string    `json:"default_recipient_id"`
	SourceURI          string    `json:"source_uri"`
	DisplayName        string    `json:"display_name,omitempty"`
	CreatedAt          time.Time `json:"created_at"`
}

func spaceResult(sp Space) SpaceResult {
	return SpaceResult{SpaceID: sp.SpaceID, DefaultRecipientID: sp.DefaultRecipientID, SourceURI: sp.SourceURI,
		DisplayName: sp.DisplayName, CreatedAt: sp.CreatedAt}
}

// fingerprintOf fingerprints a request of an operation; a value JCS cannot represent (invalid UTF-8, a
// number outside I-JSON) is INVALID_REQUEST.
func fingerprintOf(op string, v any) (string, error) {
	fp, err := Fingerprint(map[string]any{"op": op, "req": v})
	if err != nil {
		return "", Errorf(CodeInvalidRequest, "the request cannot be canonicalized (RFC 8785): %v", err)
	}
	return fp, nil
}

func adminKey(space, op, requestID string) port.Key {
	return keySubmission(space, adminProducer, op, requestID)
}

func checkDisplayName(s string) error {
	if len(s) > 256 {
		return Errorf(CodeInvalidRequest, "display_name is longer than 256 bytes")
	}
	return nil
}

// CreateSpace creates a space with its default recipient actor and a stable urn:uuid source URI.
func (s *Service) CreateSpace(ctx context.Context, req CreateSpaceRequest) (SpaceResult, error) {
	if err := checkRequestID(req.RequestID); err != nil {
		return SpaceResult{}, err
	}
	if err := checkDisplayName(req.DisplayName); err != nil {
		return SpaceResult{}, err
	}
	const op = "admin.space.create"
	fp, err := fingerprintOf(op, map[string]any{"display_name": req.DisplayName})
	if err != nil {
		return SpaceResult{}, err
	}
	raw, _, err := s.runOnce(ctx, onceSpec{
		key: adminKey(globalSpace, op, req.RequestID), operation: op, requestID: req.RequestID,
		fingerprint: fp,
		prepare: func(ctx context.Context) (*onceTx, error) {
			now := s.clock.Now().UTC()
			var u [16]byte
			if err := s.ids.Random(u[:]); err != nil {
				return nil, err
			}
			u[6], u[8] = (u[6]&0x0f)|0x40, (u[8]&0x3f)|0x80 // RFC 9562 version 4
			sp := Space{SpaceID: s.ids.NewID("sp"), DisplayName: req.DisplayName, SourceURI: "urn:uuid:" + uuid.UUID(u).String(), CreatedAt: now}
			recipient := Actor{ActorID: s.ids.NewID("act"), SpaceID: sp.SpaceID, DisplayName: "default recipient", CreatedAt: now}
			sp.DefaultRecipientID = recipient.ActorID
			return &onceTx{resourceID: sp.SpaceID, build: func(uint64) ([]port.Op, any, []port.Published) {
				return []port.Op{
					port.Put(item(keySpace(sp.SpaceID), sp), port.NotExists()),
					port.Put(item(keyActor(sp.SpaceID, recipient.ActorID), recipient, attrGen, "1"), port.NotExists()),
				}, spaceResult(sp), nil
			}}, nil
		},
	})
	return decodeResult[SpaceResult](raw, err)
}

// GetSpace returns a space.
func (s *Service) GetSpace(ctx context.Context, spaceID string) (SpaceResult, error) {
	sp, err := s.space(ctx, spaceID)
	if err != nil {
		return SpaceResult{}, err
	}
	return spaceResult(sp), nil
}

func (s *Service) space(ctx context.Context, spaceID string) (Space, error) {
	if !ValidID(spaceID) {
		return Space{}, Errorf(CodeNotFound, "no such space")
	}
	sp, _, found, err := getRecord[Space](ctx, s.store, keySpace(spaceID))
	if err != nil {
		return Space{}, err
	}
	if !found {
		return Space{}, Errorf(CodeNotFound, "no such space")
	}
	return sp, nil
}

// CreateActorRequest is the body of POST /admin/v0/spaces/{space_id}/actors.
type CreateActorRequest struct {
	RequestID   string `json:"request_id"`
	DisplayName string `json:"display_name,omitempty"`
}

// ActorResult describes an actor.
type ActorResult struct {
	ActorID     string `json:"actor_id"`
	DisplayName string `json:"display_name,omitempty"`
	Revoked     bool   `json:"revoked,omitempty"`
}

// CreateActor adds an actor to a space.
func (s *Service) CreateActor(ctx context.Context, spaceID string, req CreateActorRequest) (ActorResult, error) {
	if err := checkRequestID(req.RequestID); err != nil {
		return ActorResult{}, err
	}
	if err := checkDisplayName(req.DisplayName); err != nil {
		return ActorResult{}, err
	}
	if _, err := s.space(ctx, spaceID); err != nil {
		return ActorResult{}, err
	}
	const op = "admin.actor.create"
	fp, err := fingerprintOf(op, map[string]any{"display_name": req.DisplayName})
	if err != nil {
		return ActorResult{}, err
	}
	raw, _, err := s.runOnce(ctx, onceSpec{
		key: adminKey(spaceID, op, req.RequestID), operation: op, requestID: req.RequestID,
		fingerprint: fp,
		prepare: func(ctx context.Context) (*onceTx, error) {
			a := Actor{ActorID: s.ids.NewID("act"), SpaceID: spaceID, DisplayName: req.DisplayName, CreatedAt: s.clock.Now().UTC()}
			return &onceTx{resourceID: a.ActorID, build: func(uint64) ([]port.Op, any, []port.Published) {
				return []port.Op{port.Put(item(keyActor(spaceID, a.ActorID), a, attrGen, "1"), port.NotExists())},
					ActorResult{ActorID: a.ActorID, DisplayName: a.DisplayName}, nil
			}}, nil
		},
	})
	return decodeResult[ActorResult](raw, err)
}

// actorUpdate reads an actor and returns the op that writes it back changed, with its authorization
// generation incremented, guarded by the generation read (RFC §7.2: every grant change, revoke or view
// change increments the principal's generation).
func (s *Service) actorUpdate(ctx context.Context, spaceID, actorID string, mutate func(*Actor)) (port.Op, Actor, error) {
	a, it, found, err := getRecord[Actor](ctx, s.store, keyActor(spaceID, actorID))
	if err != nil {
		return port.Op{}, a, err
	}
	if !found {
		return port.Op{}, a, Errorf(CodeNotFound, "no such actor").WithDetails("actor_id", actorID)
	}
	if mutate != nil {
		mutate(&a)
	}
	gen := genOf(it)
	return port.Put(item(it.Key, a, attrGen, itoa(gen+1)), port.AttrEquals(attrGen, itoa(gen))), a, nil
}

// commitRetry commits ops built by prepare, re-running prepare after a condition failure.
func (s *Service) commitRetry(ctx context.Context, what string, prepare func(ctx context.Context) ([]port.Op, error)) error {
	for attempt := 0; attempt < s.retries; attempt++ {
		ops, err := prepare(ctx)
		if err != nil {
			return err
		}
		_, err = s.store.Commit(ctx, port.Tx{Build: func(uint64) ([]port.Op, error) { return ops, nil }})
		if err == nil {
			return nil
		}
		if _, ok := port.FailedOp(err); ok {
			continue
		}
		return fmt.Errorf("%s: %w", what, err)
	}
	return Errorf(CodeStorageUnavailable, "too much contention; retry")
}

// RevokeActor revokes an actor: every credential of it stops working at once. Idempotent.
func (s *Service) RevokeActor(ctx context.Context, spaceID, actorID string) (ActorResult, error) {
	if _, err := s.space(ctx, spaceID); err != nil {
		return ActorResult{}, err
	}
	var out Actor
	err := s.commitRetry(ctx, "revoke actor", func(ctx context.Context) ([]port.Op, error) {
		op, a, err := s.actorUpdate(ctx, spaceID, actorID, func(a *Actor) { a.Revoked = true })
		out = a
		return []port.Op{op}, err
	})
	return ActorResult{ActorID: out.ActorID, DisplayName: out.DisplayName, Revoked: true}, err
}

// CreateConsumerRequest is the body of POST …/consumers.
type CreateConsumerRequest struct {
	RequestID string  `json:"request_id"`
	ActorID   string  `json:"actor_id"`
	View      View    `json:"view"`
	Filter    *Filter `json:"filter,omitempty"`
}

// UpdateConsumerRequest is the body of PATCH …/consumers/{consumer_id}.
type UpdateConsumerRequest struct {
	RequestID string  `json:"request_id,omitempty"`
	View      View    `json:"view,omitempty"`
	Filter    *Filter `json:"filter,omitempty"`
}

// ConsumerResult describes a consumer.
type ConsumerResult struct {
	ConsumerID   string `json:"consumer_id"`
	ActorID      string `json:"actor_id"`
	View         View   `json:"view"`
	Filter       Filter `json:"filter"`
	ViewRevision int64  `json:"view_revision"`
}

func consumerResult(c Consumer) ConsumerResult {
	return ConsumerResult{ConsumerID: c.ConsumerID, ActorID: c.ActorID, View: c.View, Filter: c.Filter, ViewRevision: c.ViewRevision}
}

func checkView(v View) error {
	if v != ViewInbox && v != ViewSpaceLog {
		return Errorf(CodeInvalidRequest, "view must be inbox or space_log").WithDetails("field", "view")
	}
	return nil
}

func checkFilter(f *Filter) error {
	if f == nil {
		return nil
	}
	for field, ids := range map[string][]string{"producer_ids": f.ProducerIDs, "thread_ids": f.ThreadIDs, "collection_ids": f.CollectionIDs} {
		if len(ids) > 64 {
			return Errorf(CodeInvalidRequest, "filter.%s has more than 64 entries", field)
		}
		for _, id := range ids {
			if err := checkID("filter."+field, id); err != nil {
				return err
			}
		}
	}
	for _, t := range f.ItemTypes {
		if t != string(ItemMessage) && t != string(ItemMemoryRevision) && t != string(ItemReceipt) {
			return Errorf(CodeInvalidRequest, "filter.item_types has an unknown item type")
		}
	}
	return nil
}

// CreateConsumer creates a consumer of an actor with a view and a fixed filter.
func (s *Service) CreateConsumer(ctx context.Context, spaceID string, req CreateConsumerRequest) (ConsumerResult, error) {
	if err := checkRequestID(req.RequestID); err != nil {
		return ConsumerResult{}, err
	}
	if err := checkID("actor_id", req.ActorID); err != nil {
		return ConsumerResult{}, err
	}
	if err := checkView(req.View); err != nil {
		return ConsumerResult{}, err
	}
	if err := checkFilter(req.Filter); err != nil {
		return ConsumerResult{}, err
	}
	if _, err := s.space(ctx, spaceID); err != nil {
		return ConsumerResult{}, err
	}
	var f Filter
	if req.Filter != nil {
		f = *req.Filter
	}
	f = f.Normalize()
	const op = "admin.consumer.create"
	fp, err := fingerprintOf(op, map[string]any{"actor_id": req.ActorID, "view": req.View, "filter": f})
	if err != nil {
		return ConsumerResult{}, err
	}
	raw, _, err := s.runOnce(ctx, onceSpec{
		key: adminKey(spaceID, op, req.RequestID), operation: op, requestID: req.RequestID,
		fingerprint: fp,
		prepare: func(ctx context.Context) (*onceTx, error) {
			a, _, found, err := getRecord[Actor](ctx, s.store, keyActor(spaceID, req.ActorID))
			if err != nil {
				return nil, err
			}
			if !found || a.Revoked {
				return nil, Errorf(CodeNotFound, "no such actor").WithDetails("actor_id", req.ActorID)
			}
			c := Consumer{ConsumerID: s.ids.NewID("con"), ActorID: req.ActorID, View: req.View, Filter: f, ViewRevision: 1}
			return &onceTx{resourceID: c.ConsumerID, build: func(uint64) ([]port.Op, any, []port.Published) {
				return []port.Op{port.Put(item(keyConsumer(spaceID, c.ConsumerID), c, attrVersion, "1"), port.NotExists())}, consumerResult(c), nil
			}}, nil
		},
	})
	return decodeResult[ConsumerResult](raw, err)
}

// UpdateConsumer changes a consumer's view or filter, increments its view_revision (old cursors then get
// CURSOR_SCOPE_CHANGED) and the actor's authorization generation.
func (s *Service) UpdateConsumer(ctx context.Context, spaceID, consumerID string, req UpdateConsumerRequest) (ConsumerResult, error) {
	if req.View != "" {
		if err := checkView(req.View); err != nil {
			return ConsumerResult{}, err
		}
	}
	if err := checkFilter(req.Filter); err != nil {
		return ConsumerResult{}, err
	}
	if req.RequestID != "" {
		if err := checkRequestID(req.RequestID); err != nil {
			return ConsumerResult{}, err
		}
	}
	if _, err := s.space(ctx, spaceID); err != nil {
		return ConsumerResult{}, err
	}
	var out Consumer
	err := s.commitRetry(ctx, "update consumer", func(ctx context.Context) ([]port.Op, error) {
		c, cit, found, err := getRecord[Consumer](ctx, s.store, keyConsumer(spaceID, consumerID))
		if err != nil {
			return nil, err
		}
		if !found {
			return nil, Errorf(CodeNotFound, "no such consumer")
		}
		old := c.ViewRevision
		if req.View != "" {
			c.View = req.View
		}
		if req.Filter != nil {
			c.Filter = req.Filter.Normalize()
		}
		c.ViewRevision++
		out = c
		actorOp, _, err := s.actorUpdate(ctx, spaceID, c.ActorID, nil)
		if err != nil {
			return nil, err
		}
		return []port.Op{
			port.Put(item(cit.Key, c, attrVersion, itoa(c.ViewRevision)), port.AttrEquals(attrVersion, itoa(old))),
			actorOp,
		}, nil
	})
	return consumerResult(out), err
}

// CreateCollectionRequest is the body of POST …/collections.
type CreateCollectionRequest struct {
	RequestID     string `json:"request_id"`
	SourceActorID string `json:"source_actor_id"`
	CollectionID  string `json:"collection_id,omitempty"`
	Scope         string `json:"scope"`
}

// CollectionResult describes a collection.
type CollectionResult struct {
	CollectionID    string `json:"collection_id"`
	SourceActorID   string `json:"source_actor_id"`
	Scope           string `json:"scope"`
	CurrentRevision int64  `json:"current_revision"`
}

// CreateCollection creates an empty memory collection (current_revision 0) with an immutable scope text.
func (s *Service) CreateCollection(ctx context.Context, spaceID string, req CreateCollectionRequest) (CollectionResult, error) {
	if err := checkRequestID(req.RequestID); err != nil {
		return CollectionResult{}, err
	}
	if err := checkID("source_actor_id", req.SourceActorID); err != nil {
		return CollectionResult{}, err
	}
	if req.CollectionID != "" {
		if err := checkID("collection_id", req.CollectionID); err != nil {
			return CollectionResult{}, err
		}
	}
	if len(req.Scope) == 0 || len(req.Scope) > 4096 {
		return CollectionResult{}, Errorf(CodeInvalidRequest, "scope must be 1 to 4096 bytes")
	}
	if _, err := s.space(ctx, spaceID); err != nil {
		return CollectionResult{}, err
	}
	const op = "admin.collection.create"
	fp, err := fingerprintOf(op, map[string]any{"source_actor_id": req.SourceActorID, "collection_id": req.CollectionID, "scope": req.Scope})
	if err != nil {
		return CollectionResult{}, err
	}
	raw, _, err := s.runOnce(ctx, onceSpec{
		key: adminKey(spaceID, op, req.RequestID), operation: op, requestID: req.RequestID,
		fingerprint: fp,
		prepare: func(ctx context.Context) (*onceTx, error) {
			a, _, found, err := getRecord[Actor](ctx, s.store, keyActor(spaceID, req.SourceActorID))
			if err != nil {
				return nil, err
			}
			if !found || a.Revoked {
				return nil, Errorf(CodeNotFound, "no such actor").WithDetails("actor_id", req.SourceActorID)
			}
			id := req.CollectionID
			if id == "" {
				id = s.ids.NewID("col")
			}
			c := Collection{CollectionID: id, SourceActorID: req.SourceActorID, Scope: req.Scope}
			return &onceTx{resourceID: id, build: func(uint64) ([]port.Op, any, []port.Published) {
				return []port.Op{port.Put(item(keyCollection(spaceID, id), c, attrVersion, "0"), port.NotExists())},
					CollectionResult{CollectionID: id, SourceActorID: c.SourceActorID, Scope: c.Scope}, nil
			}}, nil
		},
	})
	return decodeResult[CollectionResult](raw, err)
}

// CreateGrantRequest is the body of POST …/grants.
type CreateGrantRequest struct {
	RequestID    string     `json:"request_id"`
	ActorID      string     `json:"actor_id"`
	Permission   Permission `json:"permission"`
	CollectionID string     `json:"collection_id,omitempty"`
	BlobID       string     `json:"blob_id,omitempty"`
}

// GrantResult describes a grant.
type GrantResult struct {
	GrantID      string     `json:"grant_id"`
	ActorID      string     `json:"actor_id"`
	Permission   Permission `json:"permission"`
	CollectionID string     `json:"collection_id,omitempty"`
	BlobID       string     `json:"blob_id,omitempty"`
	Revoked      bool       `json:"revoked,omitempty"`
}

func grantResult(g Grant) GrantResult {
	return GrantResult{GrantID: g.GrantID, ActorID: g.ActorID, Permission: g.Permission, CollectionID: g.CollectionID, BlobID: g.BlobID, Revoked: g.Revoked}
}

// CreateGrant gives an actor a permission and increments its authorization generation.
func (s *Service) CreateGrant(ctx context.Context, spaceID string, req CreateGrantRequest) (GrantResult, error) {
	if err := checkRequestID(req.RequestID); err != nil {
		return GrantResult{}, err
	}
	if err := checkID("actor_id", req.ActorID); err != nil {
		return GrantResult{}, err
	}
	switch req.Permission {
	case PermMemoryRead, PermMemoryWrite:
		if err := checkID("collection_id", req.CollectionID); err != nil {
			return GrantResult{}, err
		}
		if req.BlobID != "" {
			return GrantResult{}, Errorf(CodeInvalidRequest, "blob_id does not apply to %s", req.Permission)
		}
	case PermBlobReference:
		if err := checkID("blob_id", req.BlobID); err != nil {
			return GrantResult{}, err
		}
		if req.CollectionID != "" {
			return GrantResult{}, Errorf(CodeInvalidRequest, "collection_id does not apply to %s", req.Permission)
		}
	case PermSpaceObserve:
		if req.CollectionID != "" || req.BlobID != "" {
			return GrantResult{}, Errorf(CodeInvalidRequest, "space.observe takes no collection_id or blob_id")
		}
	default:
		return GrantResult{}, Errorf(CodeInvalidRequest, "unknown permission").WithDetails("field", "permission")
	}
	if _, err := s.space(ctx, spaceID); err != nil {
		return GrantResult{}, err
	}
	const op = "admin.grant.create"
	fp, err := fingerprintOf(op, map[string]any{"actor_id": req.ActorID, "permission": req.Permission, "collection_id": req.CollectionID, "blob_id": req.BlobID})
	if err != nil {
		return GrantResult{}, err
	}
	raw, _, err := s.runOnce(ctx, onceSpec{
		key: adminKey(spaceID, op, req.RequestID), operation: op, requestID: req.RequestID,
		fingerprint: fp,
		prepare: func(ctx context.Context) (*onceTx, error) {
			if req.CollectionID != "" {
				if _, _, found, err := getRecord[Collection](ctx, s.store, keyCollection(spaceID, req.CollectionID)); err != nil {
					return nil, err
				} else if !found {
					return nil, Errorf(CodeNotFound, "no such collection").WithDetails("collection_id", req.CollectionID)
				}
			}
			actorOp, _, err := s.actorUpdate(ctx, spaceID, req.ActorID, nil)
			if err != nil {
				return nil, err
			}
			g := Grant{GrantID: s.ids.NewID("grt"), ActorID: req.ActorID, Permission: req.Permission, CollectionID: req.CollectionID, BlobID: req.BlobID}
			return &onceTx{resourceID: g.GrantID, build: func(uint64) ([]port.Op, any, []port.Published) {
				return []port.Op{
					actorOp,
					port.Put(item(keyGrant(spaceID, g.ActorID, g.GrantID), g), port.NotExists()),
					port.Put(item(keyGrantRef(spaceID, g.GrantID), g), port.NotExists()),
				}, grantResult(g), nil
			}}, nil
		},
	})
	return decodeResult[GrantResult](raw, err)
}

// RevokeGrant revokes a grant (idempotent) and increments the holder's authorization generation.
func (s *Service) RevokeGrant(ctx context.Context, spaceID, grantID string) (GrantResult, error) {
	if _, err := s.space(ctx, spaceID); err != nil {
		return GrantResult{}, err
	}
	var out Grant
	err := s.commitRetry(ctx, "revoke grant", func(ctx context.Context) ([]port.Op, error) {
		g, _, found, err := getRecord[Grant](ctx, s.store, keyGrantRef(spaceID, grantID))
		if err != nil {
			return nil, err
		}
		if !found {
			return nil, Errorf(CodeNotFound, "no such grant")
		}
		g.Revoked = true
		out = g
		actorOp, _, err := s.actorUpdate(ctx, spaceID, g.ActorID, nil)
		if err != nil {
			return nil, err
		}
		return []port.Op{
			actorOp,
			port.Put(item(keyGrant(spaceID, g.ActorID, g.GrantID), g), port.Exists()),
			port.Put(item(keyGrantRef(spaceID, g.GrantID), g), port.Exists()),
		}, nil
	})
	return grantResult(out), err
}

// CreateTokenRequest is the body of POST …/tokens.
type CreateTokenRequest struct {
	RequestID  string     `json:"request_id"`
	ActorID    string     `json:"actor_id"`
	ConsumerID string     `json:"consumer_id,omitempty"`
	Scopes     []Scope    `json:"scopes"`
	ExpiresAt  *time.Time `json:"expires_at,omitempty"`
}

// TokenResult describes a token. Token (the secret) is present only in the response that created or
// rotated it; a replayed create returns the same token_id without the secret (it is not stored).
type TokenResult struct {
	TokenID    string     `json:"token_id"`
	Token      string     `json:"token,omitempty"`
	ActorID    string     `json:"actor_id"`
	ConsumerID *string    `json:"consumer_id"`
	Scopes     []Scope    `json:"scopes"`
	ExpiresAt  *time.Time `json:"expires_at"`
	Revoked    bool       `json:"revoked,omitempty"`
}

func tokenResult(t Token, secret string) TokenResult {
	r := TokenResult{TokenID: t.TokenID, Token: secret, ActorID: t.ActorID, Scopes: t.Scopes, ExpiresAt: t.ExpiresAt, Revoked: t.Revoked}
	if t.ConsumerID != "" {
		c := t.ConsumerID
		r.ConsumerID = &c
	}
	return r
}

// CreateToken issues a data-plane bearer token (32 random bytes; only its SHA-256 digest is stored). The
// secret is returned once.
func (s *Service) CreateToken(ctx context.Context, spaceID string, req CreateTokenRequest) (TokenResult, error) {
	if err := checkRequestID(req.RequestID); err != nil {
		return TokenResult{}, err
	}
	if err := checkID("actor_id", req.ActorID); err != nil {
		return TokenResult{}, err
	}
	if req.ConsumerID != "" {
		if err := checkID("consumer_id", req.ConsumerID); err != nil {
			return TokenResult{}, err
		}
	}
	if len(req.Scopes) == 0 {
		return TokenResult{}, Errorf(CodeInvalidRequest, "scopes must name at least one scope")
	}
	scopes := slices.Clone(req.Scopes)
	slices.Sort(scopes)
	scopes = slices.Compact(scopes)
	for _, sc := range scopes {
		if !slices.Contains(AllScopes(), sc) {
			return TokenResult{}, Errorf(CodeInvalidRequest, "unknown scope %q", sc).WithDetails("field", "scopes")
		}
	}
	var expires *time.Time
	if req.ExpiresAt != nil {
		e := req.ExpiresAt.UTC().Truncate(time.Second)
		expires = &e
	}
	if _, err := s.space(ctx, spaceID); err != nil {
		return TokenResult{}, err
	}
	const op = "admin.token.create"
	var secret string
	fp, err := fingerprintOf(op, map[string]any{"actor_id": req.ActorID, "consumer_id": req.ConsumerID, "scopes": scopes, "expires_at": expires})
	if err != nil {
		return TokenResult{}, err
	}
	raw, _, err := s.runOnce(ctx, onceSpec{
		key: adminKey(spaceID, op, req.RequestID), operation: op, requestID: req.RequestID,
		fingerprint: fp,
		prepare: func(ctx context.Context) (*onceTx, error) {
			a, _, found, err := getRecord[Actor](ctx, s.store, keyActor(spaceID, req.ActorID))
			if err != nil {
				return nil, err
			}
			if !found || a.Revoked {
				return nil, Errorf(CodeNotFound, "no such actor").WithDetails("actor_id", req.ActorID)
			}
			if req.ConsumerID != "" {
				c, _, found, err := getRecord[Consumer](ctx, s.store, keyConsumer(spaceID, req.ConsumerID))
				if err != nil {
					return nil, err
				}
				if !found || c.ActorID != req.ActorID {
					return nil, Errorf(CodeNotFound, "no such consumer of this actor").WithDetails("consumer_id", req.ConsumerID)
				}
			}
			secret, err = s.newTokenSecret()
			if err != nil {
				return nil, err
			}
			t := Token{TokenID: s.ids.NewID("tok"), SpaceID: spaceID, ActorID: req.ActorID, ConsumerID: req.ConsumerID,
				Scopes: scopes, ExpiresAt: expires, Digest: tokenDigest(secret)}
			return &onceTx{resourceID: t.TokenID, build: func(uint64) ([]port.Op, any, []port.Published) {
				return []port.Op{
					port.Put(item(keyTokenByDigest(t.Digest), t), port.NotExists()),
					port.Put(item(keyTokenByID(spaceID, t.TokenID), t, attrDigest, t.Digest), port.NotExists()),
				}, tokenResult(t, ""), nil
			}}, nil
		},
	})
	res, err := decodeResult[TokenResult](raw, err)
	if err == nil && secret != "" {
		res.Token = secret // only the call that created it sees the secret
	}
	return res, err
}

// RevokeToken revokes a token (idempotent) and increments its actor's authorization generation, so that
// submissions in flight with it cannot commit (SUPPLEMENT §7.4).
func (s *Service) RevokeToken(ctx context.Context, spaceID, tokenID string) (TokenResult, error) {
	return s.changeToken(ctx, spaceID, tokenID, false)
}

// RotateToken replaces a token's secret, keeping its ID, actor, consumer and scopes; the old secret stops
// working at once. The new secret is returned once.
func (s *Service) RotateToken(ctx context.Context, spaceID, tokenID string) (TokenResult, error) {
	return s.changeToken(ctx, spaceID, tokenID, true)
}

func (s *Service) changeToken(ctx context.Context, spaceID, tokenID string, rotate bool) (TokenResult, error) {
	if _, err := s.space(ctx, spaceID); err != nil {
		return TokenResult{}, err
	}
	if !ValidID(tokenID) {
		return TokenResult{}, Errorf(CodeNotFound, "no such token")
	}
	var out Token
	var secret string
	err := s.commitRetry(ctx, "change token", func(ctx context.Context) ([]port.Op, error) {
		t, it, found, err := getRecord[Token](ctx, s.store, keyTokenByID(spaceID, tokenID))
		if err != nil {
			return nil, err
		}
		if !found {
			return nil, Errorf(CodeNotFound, "no such token")
		}
		if rotate && t.Revoked {
			return nil, Errorf(CodeForbidden, "a revoked token cannot be rotated")
		}
		actorOp, _, err := s.actorUpdate(ctx, spaceID, t.ActorID, nil)
		if err != nil {
			return nil, err
		}
		oldDigest := t.Digest
		ops := []port.Op{actorOp}
		if rotate {
			secret, err = s.newTokenSecret()
			if err != nil {
				return nil, err
			}
			t.Digest = tokenDigest(secret)
			ops = append(ops,
				port.Delete(keyTokenByDigest(oldDigest), port.Exists()),
				port.Put(item(keyTokenByDigest(t.Digest), t), port.NotExists()))
		} else {
			t.Revoked = true
			ops = append(ops, port.Put(item(keyTokenByDigest(oldDigest), t), port.Cond{}))
		}
		out = t
		return append(ops, port.Put(item(it.Key, t, attrDigest, t.Digest), port.AttrEquals(attrDigest, oldDigest))), nil
	})
	if err != nil {
		return TokenResult{}, err
	}
	return tokenResult(out, secret), nil
}
