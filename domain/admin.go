package domain

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"slices"
	"time"

	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/internal/echo"
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
	// RateLimits are the per-credential rate limits in force (the owner's, or the defaults).
	RateLimits *RateLimits `json:"rate_limits,omitempty"`
	// Quotas are the capacity quotas in force (the owner's, or the defaults); Usage what the space uses of
	// them (active spaces).
	Quotas *Quotas     `json:"quotas,omitempty"`
	Usage  *QuotaUsage `json:"usage,omitempty"`
	// State is active, deleting or deleted (DeleteSpace).
	State string `json:"state,omitempty"`
	// Deletion describes the deletion of a deleting or deleted space: when, how far, what was removed.
	Deletion *SpaceDeletion `json:"deletion,omitempty"`
}

func spaceResult(sp Space) SpaceResult {
	res := SpaceResult{SpaceID: sp.SpaceID, DefaultRecipientID: sp.DefaultRecipientID, SourceURI: sp.SourceURI,
		DisplayName: sp.DisplayName, CreatedAt: sp.CreatedAt, State: sp.state()}
	if sp.Deletion != nil {
		d := *sp.Deletion
		d.PendingObjects = nil // internal progress
		res.Deletion = &d
	}
	return res
}

// spaceResult describes a space with the rate limits and quotas in force.
func (s *Service) spaceResult(sp Space) SpaceResult {
	res := spaceResult(sp)
	l := s.effectiveRateLimits(sp)
	q := s.effectiveQuotas(sp)
	res.RateLimits, res.Quotas = &l, &q
	return res
}

// spaceResultWithUsage is spaceResult with the usage of an active space read from the store.
func (s *Service) spaceResultWithUsage(ctx context.Context, sp Space) (SpaceResult, error) {
	res := s.spaceResult(sp)
	if sp.state() == SpaceActive {
		u, err := s.usage(ctx, sp.SpaceID)
		if err != nil {
			return SpaceResult{}, err
		}
		res.Usage = &u
	}
	return res, nil
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
	return adminCreate[SpaceResult](ctx, s, globalSpace, "admin.space.create", req.RequestID, map[string]any{"display_name": req.DisplayName},
		func(ctx context.Context) (*onceTx, error) {
			now := s.clock.Now().UTC()
			var u [16]byte
			if err := s.ids.Random(u[:]); err != nil {
				return nil, err
			}
			u[6], u[8] = (u[6]&0x0f)|0x40, (u[8]&0x3f)|0x80 // RFC 9562 version 4
			sp := Space{SpaceID: s.ids.NewID("sp"), DisplayName: req.DisplayName, SourceURI: "urn:uuid:" + uuidString(u), CreatedAt: now}
			recipient := Actor{ActorID: s.ids.NewID("act"), SpaceID: sp.SpaceID, DisplayName: "default recipient", CreatedAt: now}
			sp.DefaultRecipientID = recipient.ActorID
			return &onceTx{resourceID: sp.SpaceID, build: func(uint64) ([]port.Op, any, []port.Published) {
				return []port.Op{
					port.Put(item(keySpace(sp.SpaceID), sp), port.NotExists()),
					port.Put(port.Item{Key: keySpaceIndex(sp.SpaceID)}, port.NotExists()),
					port.Put(item(keyActor(sp.SpaceID, recipient.ActorID), recipient, attrGen, "1"), port.NotExists()),
				}, spaceResult(sp), nil
			}}, nil
		})
}

// GetSpace returns a space, also while it is deleting and once it is deleted (with what was removed). The
// owner reads the store, never the cache.
func (s *Service) GetSpace(ctx context.Context, spaceID string) (SpaceResult, error) {
	sp, _, err := s.existingSpace(ctx, spaceID)
	if err != nil {
		return SpaceResult{}, err
	}
	return s.spaceResultWithUsage(ctx, sp)
}

// existingSpace is spaceRecord for a space the owner names: an absent one is NOT_FOUND.
func (s *Service) existingSpace(ctx context.Context, spaceID string) (Space, port.Item, error) {
	sp, it, found, err := s.spaceRecord(ctx, spaceID)
	if err == nil && !found {
		err = Errorf(CodeNotFound, "no such space")
	}
	return sp, it, err
}

// spaceRecord reads a space record in any state from the store and refreshes the cache with it.
func (s *Service) spaceRecord(ctx context.Context, spaceID string) (Space, port.Item, bool, error) {
	sp, it, found, err := getNamed[Space](ctx, s.store, spaceID, keySpace(spaceID))
	if err == nil && found {
		s.auth.putSpace(sp, s.clock.Now())
	}
	return sp, it, found, err
}

// space returns an active space, possibly cached for up to spaceCacheTTL (see authCache): a space being
// deleted or deleted is NOT_FOUND, like an absent one. Access to a deleted space never depends on the
// cache (DeleteSpace revokes every actor); control-plane calls use liveSpace.
func (s *Service) space(ctx context.Context, spaceID string) (Space, error) {
	if sp, ok := s.auth.space(spaceID, s.clock.Now()); ok && sp.state() == SpaceActive {
		return sp, nil
	}
	return s.liveSpace(ctx, spaceID)
}

// liveSpace returns an active space read from the store (control plane: the owner sees a deletion at once).
func (s *Service) liveSpace(ctx context.Context, spaceID string) (Space, error) {
	sp, _, found, err := s.spaceRecord(ctx, spaceID)
	if err != nil {
		return Space{}, err
	}
	if !found || sp.state() != SpaceActive {
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
	if _, err := s.liveSpace(ctx, spaceID); err != nil {
		return ActorResult{}, err
	}
	return adminCreate[ActorResult](ctx, s, spaceID, "admin.actor.create", req.RequestID, map[string]any{"display_name": req.DisplayName},
		func(ctx context.Context) (*onceTx, error) {
			a := Actor{ActorID: s.ids.NewID("act"), SpaceID: spaceID, DisplayName: req.DisplayName, CreatedAt: s.clock.Now().UTC()}
			return &onceTx{resourceID: a.ActorID, build: func(uint64) ([]port.Op, any, []port.Published) {
				return []port.Op{port.Put(item(keyActor(spaceID, a.ActorID), a, attrGen, "1"), port.NotExists()), spaceLive(spaceID)},
					ActorResult{ActorID: a.ActorID, DisplayName: a.DisplayName}, nil
			}}, nil
		})
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
	return actorWrite(it, a), a, nil
}

// actorWrite is the op that writes actor a back over its record it, with its authorization generation
// incremented and guarded by the generation it holds (authCache relies on every actor change doing so).
func actorWrite(it port.Item, a Actor) port.Op {
	gen := genOf(it)
	return port.Put(item(it.Key, a, attrGen, itoa(gen+1)), port.AttrEquals(attrGen, itoa(gen)))
}

// commitRetry commits ops built by prepare, re-running prepare after a condition failure. No ops means
// nothing changes: nothing is committed.
func (s *Service) commitRetry(ctx context.Context, what string, prepare func(ctx context.Context) ([]port.Op, error)) error {
	for attempt := 0; attempt < s.retries; attempt++ {
		ops, err := prepare(ctx)
		if err != nil || len(ops) == 0 {
			return err
		}
		err = s.commitOps(ctx, ops)
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

// ChangeRequest is the body of the control plane's revoke and rotate calls: empty, or a request_id that
// makes the call idempotent (RFC §11.3): a retry with the same request_id returns the first result and
// changes nothing again.
type ChangeRequest struct {
	RequestID string `json:"request_id,omitempty"`
}

// changeRequestID returns the request_id of an optional ChangeRequest ("" when there is none).
func changeRequestID(reqs []ChangeRequest) (string, error) {
	if len(reqs) == 0 || reqs[0].RequestID == "" {
		return "", nil
	}
	return reqs[0].RequestID, checkRequestID(reqs[0].RequestID)
}

// adminChange commits a control-plane change of an existing resource (consumer update, revoke, rotate).
// prepare reads the current state and returns the ops and the result; no ops means nothing changes. It runs
// again after a condition failure (optimistic retry). With a request_id the change is idempotent like a
// create: the result is stored with the submission in the same transaction, and a retry with the same
// request_id and content replays it (a different content is IDEMPOTENCY_CONFLICT). committed, when not nil,
// runs only when this call's transaction committed.
func adminChange[T any](ctx context.Context, s *Service, spaceID, op, requestID string, fpReq map[string]any,
	prepare func(ctx context.Context) ([]port.Op, T, error), committed func()) (T, error) {
	if requestID != "" {
		return adminCreate[T](ctx, s, spaceID, op, requestID, fpReq, func(ctx context.Context) (*onceTx, error) {
			ops, res, err := prepare(ctx)
			if err != nil {
				return nil, err
			}
			return &onceTx{build: func(uint64) ([]port.Op, any, []port.Published) { return ops, res, nil }, committed: committed}, nil
		})
	}
	var res T
	changed := false
	err := s.commitRetry(ctx, op, func(ctx context.Context) ([]port.Op, error) {
		ops, r, err := prepare(ctx)
		res, changed = r, len(ops) > 0
		return ops, err
	})
	if err != nil {
		var zero T
		return zero, err
	}
	if changed && committed != nil {
		committed()
	}
	return res, nil
}

// adminCreate runs a control-plane write exactly once per request_id (the creates, and a change that names
// one): a retry with the same request_id and content replays the first result; a different content is
// IDEMPOTENCY_CONFLICT. fpReq is what the fingerprint covers.
func adminCreate[T any](ctx context.Context, s *Service, spaceID, op, requestID string, fpReq map[string]any,
	prepare func(ctx context.Context) (*onceTx, error)) (T, error) {
	fp, err := fingerprintOf(op, fpReq)
	if err != nil {
		var zero T
		return zero, err
	}
	raw, _, err := s.runOnce(ctx, onceSpec{
		key: adminKey(spaceID, op, requestID), operation: op, requestID: requestID, fingerprint: fp, prepare: prepare,
	})
	return decodeResult[T](raw, err)
}

// checkLiveActor is NOT_FOUND unless the actor exists and is not revoked.
func (s *Service) checkLiveActor(ctx context.Context, spaceID, actorID string) error {
	a, _, found, err := getRecord[Actor](ctx, s.store, keyActor(spaceID, actorID))
	if err != nil {
		return err
	}
	if !found || a.Revoked {
		return Errorf(CodeNotFound, "no such actor").WithDetails("actor_id", actorID)
	}
	return nil
}

// RevokeActor revokes an actor: every credential of it stops working at once. Idempotent by nature; an
// optional request_id also makes a retry return the first result. The space's default recipient cannot be
// revoked: RFC §4.2 does not let the default identity be replaced in v0.1, and messages without recipient_ids
// go to it.
func (s *Service) RevokeActor(ctx context.Context, spaceID, actorID string, req ...ChangeRequest) (ActorResult, error) {
	rid, err := changeRequestID(req)
	if err != nil {
		return ActorResult{}, err
	}
	sp, err := s.liveSpace(ctx, spaceID)
	if err != nil {
		return ActorResult{}, err
	}
	if actorID == sp.DefaultRecipientID {
		return ActorResult{}, Errorf(CodeInvalidRequest, "actor %s is the space's default recipient and cannot be revoked", actorID).
			WithDetails("field", "actor_id", "actor_id", actorID, "reason", "default_recipient")
	}
	return adminChange(ctx, s, spaceID, "admin.actor.revoke", rid, map[string]any{"actor_id": actorID},
		func(ctx context.Context) ([]port.Op, ActorResult, error) {
			op, a, err := s.actorUpdate(ctx, spaceID, actorID, func(a *Actor) { a.Revoked = true })
			return []port.Op{op}, ActorResult{ActorID: a.ActorID, DisplayName: a.DisplayName, Revoked: true}, err
		}, nil)
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
	return ConsumerResult(c)
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
	if _, err := s.liveSpace(ctx, spaceID); err != nil {
		return ConsumerResult{}, err
	}
	var f Filter
	if req.Filter != nil {
		f = *req.Filter
	}
	f = f.Normalize()
	return adminCreate[ConsumerResult](ctx, s, spaceID, "admin.consumer.create", req.RequestID,
		map[string]any{"actor_id": req.ActorID, "view": req.View, "filter": f},
		func(ctx context.Context) (*onceTx, error) {
			if err := s.checkLiveActor(ctx, spaceID, req.ActorID); err != nil {
				return nil, err
			}
			c := Consumer{ConsumerID: s.ids.NewID("con"), ActorID: req.ActorID, View: req.View, Filter: f, ViewRevision: 1}
			return &onceTx{resourceID: c.ConsumerID, build: func(uint64) ([]port.Op, any, []port.Published) {
				return []port.Op{port.Put(item(keyConsumer(spaceID, c.ConsumerID), c, attrVersion, "1"), port.NotExists()), spaceLive(spaceID)}, consumerResult(c), nil
			}}, nil
		})
}

// UpdateConsumer changes a consumer's view or filter, increments its view_revision (old cursors then get
// CURSOR_SCOPE_CHANGED) and the actor's authorization generation. A PATCH that changes neither returns the
// consumer as it is and invalidates nothing. With a request_id a retry returns the first result.
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
	if _, err := s.liveSpace(ctx, spaceID); err != nil {
		return ConsumerResult{}, err
	}
	var filter *Filter
	if req.Filter != nil {
		f := req.Filter.Normalize()
		filter = &f
	}
	fpReq := map[string]any{"consumer_id": consumerID, "view": req.View, "filter": filter}
	return adminChange(ctx, s, spaceID, "admin.consumer.update", req.RequestID, fpReq,
		func(ctx context.Context) ([]port.Op, ConsumerResult, error) {
			c, cit, found, err := getRecord[Consumer](ctx, s.store, keyConsumer(spaceID, consumerID))
			if err != nil {
				return nil, ConsumerResult{}, err
			}
			if !found {
				return nil, ConsumerResult{}, Errorf(CodeNotFound, "no such consumer").WithDetails("consumer_id", consumerID)
			}
			old := c
			if req.View != "" {
				c.View = req.View
			}
			if filter != nil {
				c.Filter = *filter
			}
			if c.View == old.View && bytes.Equal(encode(c.Filter.Normalize()), encode(old.Filter.Normalize())) {
				return nil, consumerResult(old), nil // nothing changes: cursors stay valid
			}
			c.ViewRevision++
			actorOp, _, err := s.actorUpdate(ctx, spaceID, c.ActorID, nil)
			if err != nil {
				return nil, ConsumerResult{}, err
			}
			return []port.Op{
				port.Put(item(cit.Key, c, attrVersion, itoa(c.ViewRevision)), port.AttrEquals(attrVersion, itoa(old.ViewRevision))),
				actorOp,
			}, consumerResult(c), nil
		}, nil)
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
	if _, err := s.liveSpace(ctx, spaceID); err != nil {
		return CollectionResult{}, err
	}
	return adminCreate[CollectionResult](ctx, s, spaceID, "admin.collection.create", req.RequestID,
		map[string]any{"source_actor_id": req.SourceActorID, "collection_id": req.CollectionID, "scope": req.Scope},
		func(ctx context.Context) (*onceTx, error) {
			if err := s.checkLiveActor(ctx, spaceID, req.SourceActorID); err != nil {
				return nil, err
			}
			id := req.CollectionID
			if id == "" {
				id = s.ids.NewID("col")
			} else if _, _, exists, err := getRecord[Collection](ctx, s.store, keyCollection(spaceID, id)); err != nil {
				return nil, err
			} else if exists {
				// Not retryable: the same request can never succeed (docs/decisions.md, "Control plane").
				return nil, Errorf(CodeInvalidRequest, "collection %s already exists in this space; choose another collection_id or omit it", id).
					WithDetails("field", "collection_id", "collection_id", id, "reason", "already_exists")
			}
			c := Collection{CollectionID: id, SourceActorID: req.SourceActorID, Scope: req.Scope}
			return &onceTx{resourceID: id, build: func(uint64) ([]port.Op, any, []port.Published) {
				return []port.Op{
						port.Put(item(keyCollection(spaceID, id), c, attrVersion, "0"), port.NotExists()),
						port.Put(port.Item{Key: keySourceCollection(spaceID, c.SourceActorID, id)}, port.Cond{}),
						spaceLive(spaceID),
					},
					CollectionResult{CollectionID: id, SourceActorID: c.SourceActorID, Scope: c.Scope}, nil
			}}, nil
		})
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
	return GrantResult(g)
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
	if _, err := s.liveSpace(ctx, spaceID); err != nil {
		return GrantResult{}, err
	}
	return adminCreate[GrantResult](ctx, s, spaceID, "admin.grant.create", req.RequestID,
		map[string]any{"actor_id": req.ActorID, "permission": req.Permission, "collection_id": req.CollectionID, "blob_id": req.BlobID},
		func(ctx context.Context) (*onceTx, error) {
			if req.CollectionID != "" {
				if _, _, found, err := getRecord[Collection](ctx, s.store, keyCollection(spaceID, req.CollectionID)); err != nil {
					return nil, err
				} else if !found {
					return nil, Errorf(CodeNotFound, "no such collection").WithDetails("collection_id", req.CollectionID)
				}
			}
			if req.BlobID != "" {
				if _, _, found, err := getRecord[blobRecord](ctx, s.store, keyBlob(spaceID, req.BlobID)); err != nil {
					return nil, err
				} else if !found {
					return nil, Errorf(CodeNotFound, "no such blob").WithDetails("blob_id", req.BlobID)
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
					spaceLive(spaceID),
				}, grantResult(g), nil
			}}, nil
		})
}

// RevokeGrant revokes a grant (idempotent) and increments the holder's authorization generation. With a
// request_id a retry returns the first result.
func (s *Service) RevokeGrant(ctx context.Context, spaceID, grantID string, req ...ChangeRequest) (GrantResult, error) {
	rid, err := changeRequestID(req)
	if err != nil {
		return GrantResult{}, err
	}
	if _, err := s.liveSpace(ctx, spaceID); err != nil {
		return GrantResult{}, err
	}
	return adminChange(ctx, s, spaceID, "admin.grant.revoke", rid, map[string]any{"grant_id": grantID},
		func(ctx context.Context) ([]port.Op, GrantResult, error) {
			g, _, found, err := getRecord[Grant](ctx, s.store, keyGrantRef(spaceID, grantID))
			if err != nil {
				return nil, GrantResult{}, err
			}
			if !found {
				return nil, GrantResult{}, Errorf(CodeNotFound, "no such grant")
			}
			g.Revoked = true
			actorOp, _, err := s.actorUpdate(ctx, spaceID, g.ActorID, nil)
			if err != nil {
				return nil, GrantResult{}, err
			}
			return []port.Op{
				actorOp,
				port.Put(item(keyGrant(spaceID, g.ActorID, g.GrantID), g), port.Exists()),
				port.Put(item(keyGrantRef(spaceID, g.GrantID), g), port.Exists()),
			}, grantResult(g), nil
		}, nil)
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
	// OAuthClientID names the OAuth client that holds the token (issued through OAuth); absent otherwise.
	OAuthClientID string `json:"oauth_client_id,omitempty"`
}

func tokenResult(t Token, secret string) TokenResult {
	r := TokenResult{TokenID: t.TokenID, Token: secret, ActorID: t.ActorID, Scopes: t.Scopes, ExpiresAt: t.ExpiresAt, Revoked: t.Revoked,
		OAuthClientID: t.OAuthClientID}
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
			return TokenResult{}, Errorf(CodeInvalidRequest, "unknown scope %q", echo.Clip(string(sc))).WithDetails("field", "scopes")
		}
	}
	var expires *time.Time
	if req.ExpiresAt != nil {
		e := req.ExpiresAt.UTC().Truncate(time.Second)
		expires = &e
	}
	if _, err := s.liveSpace(ctx, spaceID); err != nil {
		return TokenResult{}, err
	}
	var secret string
	res, err := adminCreate[TokenResult](ctx, s, spaceID, "admin.token.create", req.RequestID,
		map[string]any{"actor_id": req.ActorID, "consumer_id": req.ConsumerID, "scopes": scopes, "expires_at": expires},
		func(ctx context.Context) (*onceTx, error) {
			if err := s.checkLiveActor(ctx, spaceID, req.ActorID); err != nil {
				return nil, err
			}
			// Checked for a new token only: a retry of a create that succeeded replays it even after expiry.
			if expires != nil && !expires.After(s.clock.Now()) {
				return nil, Errorf(CodeInvalidRequest, "expires_at must be in the future").WithDetails("field", "expires_at")
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
			fresh, err := s.newTokenSecret()
			if err != nil {
				return nil, err
			}
			t := Token{TokenID: s.ids.NewID("tok"), SpaceID: spaceID, ActorID: req.ActorID, ConsumerID: req.ConsumerID,
				Scopes: scopes, ExpiresAt: expires, Digest: tokenDigest(fresh)}
			return &onceTx{resourceID: t.TokenID, build: func(uint64) ([]port.Op, any, []port.Published) {
				return []port.Op{
					port.Put(item(keyTokenByDigest(t.Digest), t), port.NotExists()),
					port.Put(item(keyTokenByID(spaceID, t.TokenID), t, attrDigest, t.Digest), port.NotExists()),
					spaceLive(spaceID),
				}, tokenResult(t, ""), nil
			}, committed: func() { secret = fresh }}, nil
		})
	if err == nil && secret != "" {
		res.Token = secret // only the call that created it sees the secret
	}
	return res, err
}

// RevokeToken revokes a token (idempotent) and increments its actor's authorization generation, so that
// submissions in flight with it cannot commit (SUPPLEMENT §7.4). With a request_id a retry returns the
// first result.
func (s *Service) RevokeToken(ctx context.Context, spaceID, tokenID string, req ...ChangeRequest) (TokenResult, error) {
	return s.changeToken(ctx, spaceID, tokenID, false, req)
}

// RotateToken replaces a token's secret, keeping its ID, actor, consumer and scopes; the old secret stops
// working at once. The new secret is returned once. With a request_id a retry returns the first result
// without the secret (it is not stored) and does not rotate again.
func (s *Service) RotateToken(ctx context.Context, spaceID, tokenID string, req ...ChangeRequest) (TokenResult, error) {
	return s.changeToken(ctx, spaceID, tokenID, true, req)
}

func (s *Service) changeToken(ctx context.Context, spaceID, tokenID string, rotate bool, req []ChangeRequest) (TokenResult, error) {
	rid, err := changeRequestID(req)
	if err != nil {
		return TokenResult{}, err
	}
	if _, err := s.liveSpace(ctx, spaceID); err != nil {
		return TokenResult{}, err
	}
	if !ValidID(tokenID) {
		return TokenResult{}, Errorf(CodeNotFound, "no such token")
	}
	op := "admin.token.revoke"
	if rotate {
		op = "admin.token.rotate"
	}
	var secret, committedSecret string
	res, err := adminChange(ctx, s, spaceID, op, rid, map[string]any{"token_id": tokenID},
		func(ctx context.Context) ([]port.Op, TokenResult, error) {
			t, it, found, err := getRecord[Token](ctx, s.store, keyTokenByID(spaceID, tokenID))
			if err != nil {
				return nil, TokenResult{}, err
			}
			if !found {
				return nil, TokenResult{}, Errorf(CodeNotFound, "no such token")
			}
			if rotate && t.Revoked {
				return nil, TokenResult{}, Errorf(CodeForbidden, "a revoked token cannot be rotated")
			}
			actorOp, _, err := s.actorUpdate(ctx, spaceID, t.ActorID, nil)
			if err != nil {
				return nil, TokenResult{}, err
			}
			oldDigest := t.Digest
			ops := []port.Op{actorOp}
			if rotate {
				if secret, err = s.newTokenSecret(); err != nil {
					return nil, TokenResult{}, err
				}
				t.Digest = tokenDigest(secret)
				ops = append(ops,
					port.Delete(keyTokenByDigest(oldDigest), port.Exists()),
					port.Put(item(keyTokenByDigest(t.Digest), t), port.NotExists()))
			} else {
				t.Revoked = true
				ops = append(ops, port.Put(item(keyTokenByDigest(oldDigest), t), port.Cond{}))
			}
			ops = append(ops, port.Put(item(it.Key, t, attrDigest, t.Digest), port.AttrEquals(attrDigest, oldDigest)))
			return ops, tokenResult(t, ""), nil // the stored result never holds the secret
		}, func() { committedSecret = secret })
	if err != nil {
		return TokenResult{}, err
	}
	res.Token = committedSecret // only the call whose rotation committed sees the new secret
	return res, nil
}

// uuidString renders 16 bytes in the RFC 9562 text form (8-4-4-4-12 lowercase hex digits).
func uuidString(u [16]byte) string {
	h := hex.EncodeToString(u[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
