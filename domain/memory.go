package domain

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/internal/echo"
)

// OpMemoryPublish is the idempotency operation name of memory.publish.
const OpMemoryPublish = "memory.publish"

// Memory publish modes (RFC §10.3, §10.4).
const (
	ModeSnapshot = "snapshot"
	ModeDelta    = "delta"
)

// MemoryItemInput is one upserted item of a publish.
type MemoryItemInput struct {
	ItemID   string          `json:"item_id"`
	BlobID   string          `json:"blob_id"`
	Path     string          `json:"path"`
	Metadata json.RawMessage `json:"metadata,omitempty"`
}

// MemoryPublishRequest is the body of memory.publish (RFC §10.2). Changes come inline (items, delete_ids)
// or from a sealed manifest blob holding {"items": [...], "delete_ids": [...]}.
type MemoryPublishRequest struct {
	RequestID        string            `json:"request_id"`
	CollectionID     string            `json:"collection_id,omitempty"`
	ExpectedRevision *int64            `json:"expected_revision"`
	Mode             string            `json:"mode"`
	Items            []MemoryItemInput `json:"items,omitempty"`
	DeleteIDs        []string          `json:"delete_ids,omitempty"`
	ManifestBlobID   string            `json:"manifest_blob_id,omitempty"`
}

// MemoryPublishResult is the stable result of memory.publish (RFC §10.5).
type MemoryPublishResult struct {
	CollectionID    string          `json:"collection_id"`
	Revision        int64           `json:"revision"`
	Changed         bool            `json:"changed"`
	SubmissionState SubmissionState `json:"submission_state"`
	Upserted        int             `json:"upserted"`
	Deleted         int             `json:"deleted"`
	CommittedAt     time.Time       `json:"committed_at"`
	VisibleSeq      *string         `json:"visible_seq"`
}

// MemoryEntry is one entry of a collection state: an active item or a tombstone.
type MemoryEntry struct {
	ItemID            string          `json:"item_id"`
	BlobID            string          `json:"blob_id"`
	Path              string          `json:"path"`
	Metadata          json.RawMessage `json:"metadata"`
	Revision          int64           `json:"revision"`
	State             string          `json:"state"`
	DeletedInRevision *int64          `json:"deleted_in_revision,omitempty"`
}

const (
	entryActive    = "active"
	entryTombstone = "tombstone"
)

// memoryState is the complete, immutable state of one revision, stored as one object.
type memoryState struct {
	CollectionID string        `json:"collection_id"`
	Revision     int64         `json:"revision"`
	Entries      []MemoryEntry `json:"entries"` // sorted by item_id
}

// revisionRecord is the stored record of one revision.
type revisionRecord struct {
	Revision int64  `json:"revision"`
	StateKey string `json:"state_key"`
	// StateSHA256 and StateSize identify the state object (Verify checks it against them).
	StateSHA256 string    `json:"state_sha256,omitempty"`
	StateSize   int64     `json:"state_size,omitempty"`
	Mode        string    `json:"mode"`
	Upserted    int       `json:"upserted"`
	Deleted     int       `json:"deleted"`
	ProducerID  string    `json:"producer_id"`
	CommittedAt time.Time `json:"committed_at"`
	VisibleSeq  string    `json:"visible_seq"`
}

// collectionAccess loads a collection and checks the principal's right on it: the source actor, or a
// holder of the matching grant. A collection the principal cannot read at all is NOT_FOUND.
func (s *Service) collectionAccess(ctx context.Context, p *Principal, collID string, write bool) (Collection, port.Item, error) {
	notFound := Errorf(CodeNotFound, "no such collection").WithDetails("collection_id", collID)
	c, it, found, err := getNamed[Collection](ctx, s.store, collID, keyCollection(p.SpaceID, collID))
	if err != nil {
		return Collection{}, it, err
	}
	if !found {
		return Collection{}, it, notFound
	}
	source := c.SourceActorID == p.ActorID
	canRead := p.HasScope(ScopeMemoryRead) && (source || p.HasGrant(PermMemoryRead, collID))
	canWrite := p.HasScope(ScopeMemoryWrite) && (source || p.HasGrant(PermMemoryWrite, collID))
	switch {
	case write && canWrite, !write && canRead:
		c.CurrentRevision, _ = strconv.ParseInt(it.Attr(attrVersion), 10, 64)
		return c, it, nil
	case canRead || canWrite || source || p.HasGrant(PermMemoryRead, collID) || p.HasGrant(PermMemoryWrite, collID):
		need := ScopeMemoryRead
		if write {
			need = ScopeMemoryWrite
		}
		return Collection{}, it, Errorf(CodeForbidden, "%s on this collection is missing", need).WithDetails("collection_id", collID)
	default:
		return Collection{}, it, notFound
	}
}

// memoryChanges is the validated change set of one publish.
type memoryChanges struct {
	items   []MemoryItemInput
	deletes []string
}

func (s *Service) checkChanges(ctx context.Context, p *Principal, mode string, ch memoryChanges, code Code) error {
	bad := func(format string, args ...any) error { return Errorf(code, format, args...) }
	if mode == ModeSnapshot && len(ch.deletes) > 0 {
		return bad("a snapshot replaces the whole collection: delete_ids must be empty")
	}
	ids := map[string]bool{}
	paths := map[string]bool{}
	for _, it := range ch.items {
		if !ValidID(it.ItemID) {
			return bad("item_id %q must match [A-Za-z0-9_-]{1,96}", echo.Clip(it.ItemID))
		}
		if ids[it.ItemID] {
			return bad("item_id %s appears twice", it.ItemID)
		}
		ids[it.ItemID] = true
		if len(it.Path) > s.limits.MemoryPathBytes && code != CodeInvalidManifest {
			return Errorf(CodeResourceLimit, "item %s: path is longer than memory_path_bytes (%d)", it.ItemID, s.limits.MemoryPathBytes).
				WithDetails("limit", s.limits.MemoryPathBytes)
		}
		if err := checkPath(it.Path, s.limits.MemoryPathBytes); err != nil {
			return bad("item %s: %s", it.ItemID, err)
		}
		if paths[it.Path] {
			return bad("path %q is used by two items", echo.Clip(it.Path))
		}
		paths[it.Path] = true
		if !ValidID(it.BlobID) {
			return bad("item %s: blob_id must match [A-Za-z0-9_-]{1,96}", it.ItemID)
		}
	}
	for _, d := range ch.deletes {
		if !ValidID(d) {
			return bad("delete_ids entry %q must match [A-Za-z0-9_-]{1,96}", echo.Clip(d))
		}
		if ids[d] {
			return bad("item_id %s is both upserted and deleted", d)
		}
	}
	if len(normalizeSet(ch.deletes)) != len(ch.deletes) {
		return bad("delete_ids has duplicates")
	}
	for i := range ch.items {
		md, err := s.checkMetadata("metadata", ch.items[i].Metadata, s.limits.MemoryItemMetadataBytes)
		if err != nil {
			if code == CodeInvalidManifest {
				return bad("item %s: %s", ch.items[i].ItemID, AsError(err).Message)
			}
			return err
		}
		ch.items[i].Metadata = md
	}
	seen := map[string]bool{}
	var blobIDs []string
	for _, it := range ch.items {
		if !seen[it.BlobID] {
			seen[it.BlobID] = true
			blobIDs = append(blobIDs, it.BlobID)
		}
	}
	_, err := s.referencableBlobs(ctx, p, blobIDs)
	return err
}

// checkPath enforces RFC §10.4: a relative export path without "..", empty segments or backslashes.
func checkPath(path string, max int) error {
	switch {
	case path == "" || len(path) > max:
		return fmt.Errorf("path must be 1 to %d bytes", max)
	case strings.HasPrefix(path, "/") || strings.Contains(path, "\\") || strings.ContainsRune(path, 0):
		return errors.New("path must be relative, without backslashes")
	}
	for _, seg := range strings.Split(path, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return errors.New("path has an empty, '.' or '..' segment")
		}
	}
	if len(path) >= 2 && path[1] == ':' {
		return errors.New("path must not start with a drive letter")
	}
	return nil
}

// loadManifest reads and strictly parses a manifest blob (RFC §10.2).
func (s *Service) loadManifest(ctx context.Context, p *Principal, blobID string) (memoryChanges, error) {
	b, err := s.referencableBlob(ctx, p, blobID)
	if err != nil {
		return memoryChanges{}, err
	}
	rc, _, err := s.blobs.Get(ctx, blobObjectKey(p.SpaceID, b.BlobID))
	if err != nil {
		return memoryChanges{}, fmt.Errorf("reading manifest: %w", err)
	}
	defer rc.Close()
	raw, err := io.ReadAll(io.LimitReader(rc, b.SizeBytes+1))
	if err != nil {
		return memoryChanges{}, fmt.Errorf("reading manifest: %w", err)
	}
	var m struct {
		Items     []MemoryItemInput `json:"items"`
		DeleteIDs []string          `json:"delete_ids"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return memoryChanges{}, Errorf(CodeInvalidManifest, "the manifest is not a JSON object {items, delete_ids}: %s", echo.Clip(err.Error()))
	}
	if dec.More() {
		return memoryChanges{}, Errorf(CodeInvalidManifest, "the manifest has trailing data")
	}
	if n := len(m.Items) + len(m.DeleteIDs); n > s.limits.MemoryManifestChangesMax { // a published limit (SUPPLEMENT §5.3)
		return memoryChanges{}, Errorf(CodeResourceLimit, "the manifest has %d changes; at most memory_manifest_changes_max (%d)", n, s.limits.MemoryManifestChangesMax).
			WithDetails("field", "manifest_blob_id", "limit", s.limits.MemoryManifestChangesMax, "limit_name", "memory_manifest_changes_max")
	}
	return memoryChanges{items: m.Items, deletes: m.DeleteIDs}, nil
}

// headState loads the state of a collection at a revision (revision 0 is the empty state).
func (s *Service) stateAt(ctx context.Context, space, coll string, rev int64) (memoryState, revisionRecord, error) {
	if rev == 0 {
		return memoryState{CollectionID: coll, Entries: []MemoryEntry{}}, revisionRecord{}, nil
	}
	rr, _, found, err := getRecord[revisionRecord](ctx, s.store, keyRevision(space, coll, rev))
	if err != nil {
		return memoryState{}, rr, err
	}
	if !found {
		return memoryState{}, rr, Errorf(CodeNotFound, "no such revision").WithDetails("revision", rev)
	}
	if st, ok := s.states.get(rr.StateKey); ok {
		return st, rr, nil
	}
	rc, _, err := s.blobs.Get(ctx, rr.StateKey)
	if err != nil {
		return memoryState{}, rr, fmt.Errorf("reading state of revision %d: %w", rev, err)
	}
	defer rc.Close()
	var st memoryState
	if err := json.NewDecoder(rc).Decode(&st); err != nil {
		return memoryState{}, rr, fmt.Errorf("decoding state of revision %d: %w", rev, err)
	}
	s.states.put(rr.StateKey, st)
	return st, rr, nil
}

// applyChanges computes the next state (RFC §10.3–10.5) and whether anything changed.
func applyChanges(cur memoryState, mode string, ch memoryChanges, next int64) (memoryState, bool, int, int) {
	byID := make(map[string]MemoryEntry, len(cur.Entries))
	for _, e := range cur.Entries {
		byID[e.ItemID] = e
	}
	out := map[string]MemoryEntry{}
	upserts := map[string]MemoryItemInput{}
	for _, it := range ch.items {
		upserts[it.ItemID] = it
	}
	deleted := 0
	tombstone := func(e MemoryEntry) MemoryEntry {
		r := next
		e.State, e.DeletedInRevision = entryTombstone, &r
		deleted++
		return e
	}
	for id, e := range byID {
		if _, up := upserts[id]; up {
			continue
		}
		switch {
		case e.State == entryTombstone:
			out[id] = e // tombstones persist until an explicit upsert restores the item
		case mode == ModeSnapshot || slices.Contains(ch.deletes, id):
			out[id] = tombstone(e)
		default:
			out[id] = e
		}
	}
	upserted := 0
	for id, it := range upserts {
		e, had := byID[id]
		if had && e.State == entryActive && e.BlobID == it.BlobID && e.Path == it.Path && bytes.Equal(e.Metadata, it.Metadata) {
			out[id] = e // unchanged: keeps the revision it was last written in
			continue
		}
		out[id] = MemoryEntry{ItemID: id, BlobID: it.BlobID, Path: it.Path, Metadata: it.Metadata, Revision: next, State: entryActive}
		upserted++
	}
	st := memoryState{CollectionID: cur.CollectionID, Revision: next, Entries: make([]MemoryEntry, 0, len(out))}
	for _, e := range out {
		st.Entries = append(st.Entries, e)
	}
	slices.SortFunc(st.Entries, func(a, b MemoryEntry) int { return strings.Compare(a.ItemID, b.ItemID) })
	return st, upserted > 0 || deleted > 0, upserted, deleted
}

// duplicateActivePath returns a path that two active entries of st share, if any.
func duplicateActivePath(st memoryState) (string, bool) {
	seen := make(map[string]bool, len(st.Entries))
	for _, e := range st.Entries {
		if e.State != entryActive {
			continue
		}
		if seen[e.Path] {
			return e.Path, true
		}
		seen[e.Path] = true
	}
	return "", false
}

// PublishMemory publishes a new revision of a collection (memory.publish, RFC §10.5): idempotency first,
// then the CAS on expected_revision inside the commit transaction together with the revision record, the
// submission and the feed item. A publish that changes nothing records changed:false at the same commit
// point, under the same head condition.
func (s *Service) PublishMemory(ctx context.Context, p *Principal, collID string, req MemoryPublishRequest) (MemoryPublishResult, error) {
	if err := checkRequestID(req.RequestID); err != nil {
		return MemoryPublishResult{}, err
	}
	if req.CollectionID != "" && req.CollectionID != collID {
		return MemoryPublishResult{}, Errorf(CodeInvalidRequest, "collection_id differs from the path").WithDetails("field", "collection_id")
	}
	if req.ExpectedRevision == nil || *req.ExpectedRevision < 0 || *req.ExpectedRevision > s.limits.RevisionMax {
		return MemoryPublishResult{}, Errorf(CodeInvalidRequest, "expected_revision is required: 0 to %d", s.limits.RevisionMax).WithDetails("field", "expected_revision")
	}
	if req.Mode != ModeSnapshot && req.Mode != ModeDelta {
		return MemoryPublishResult{}, Errorf(CodeInvalidRequest, "mode must be snapshot or delta").WithDetails("field", "mode")
	}
	if req.ManifestBlobID != "" && (len(req.Items) > 0 || len(req.DeleteIDs) > 0) {
		return MemoryPublishResult{}, Errorf(CodeInvalidRequest, "give changes inline or as manifest_blob_id, not both")
	}
	if n := len(req.Items) + len(req.DeleteIDs); n > s.limits.MemoryInlineChangesMax {
		return MemoryPublishResult{}, Errorf(CodeResourceLimit, "%d inline changes; at most %d (use manifest_blob_id)", n, s.limits.MemoryInlineChangesMax).WithDetails("limit", s.limits.MemoryInlineChangesMax)
	}
	coll, _, err := s.collectionAccess(ctx, p, collID, true)
	if err != nil {
		return MemoryPublishResult{}, err
	}
	expected := *req.ExpectedRevision
	fp, ferr := fingerprintOf(OpMemoryPublish, map[string]any{"collection_id": collID, "expected_revision": expected, "mode": req.Mode,
		"items": req.Items, "delete_ids": req.DeleteIDs, "manifest_blob_id": req.ManifestBlobID})
	if ferr != nil {
		return MemoryPublishResult{}, ferr
	}
	key := keySubmission(p.SpaceID, p.ActorID, OpMemoryPublish, req.RequestID)
	// Idempotency before CAS: a retry of a publish that succeeded returns its revision even if the head moved.
	if sub, _, found, err := getRecord[Submission](ctx, s.store, key); err != nil {
		return MemoryPublishResult{}, err
	} else if found {
		return decodeResult[MemoryPublishResult](replay(sub, fp))
	}
	ch := memoryChanges{items: slices.Clone(req.Items), deletes: req.DeleteIDs}
	if req.ManifestBlobID != "" {
		if ch, err = s.loadManifest(ctx, p, req.ManifestBlobID); err != nil {
			if CodeOf(err) == CodeInvalidManifest {
				return MemoryPublishResult{}, s.failSubmission(ctx, key, OpMemoryPublish, req.RequestID, fp, collID, err)
			}
			return MemoryPublishResult{}, err
		}
		if err := s.checkChanges(ctx, p, req.Mode, ch, CodeInvalidManifest); err != nil {
			if CodeOf(err) == CodeInvalidManifest {
				return MemoryPublishResult{}, s.failSubmission(ctx, key, OpMemoryPublish, req.RequestID, fp, collID, err)
			}
			return MemoryPublishResult{}, err
		}
	} else if err := s.checkChanges(ctx, p, req.Mode, ch, CodeInvalidRequest); err != nil {
		return MemoryPublishResult{}, err
	}
	for attempt := 0; attempt < s.retries; attempt++ {
		res, retry, err := s.publishOnce(ctx, p, coll, key, req, fp, expected, ch)
		if !retry {
			return res, err
		}
	}
	return MemoryPublishResult{}, Errorf(CodeStorageUnavailable, "too much contention; retry with the same request_id")
}

// failSubmission records a permanent business failure found after the request was accepted (CAS miss,
// invalid manifest) so that retries with the same key get the same outcome (RFC §6.3).
func (s *Service) failSubmission(ctx context.Context, key port.Key, op, requestID, fp, resourceID string, cause error) error {
	de := AsError(cause)
	w := de.Wire()
	sub := Submission{Operation: op, RequestID: requestID, Fingerprint: fp, ResourceID: resourceID, State: StateFailed,
		ReservedAt: s.clock.Now().UTC(), Error: &w}
	err := s.commitOps(ctx, []port.Op{port.Put(item(key, sub, attrState, string(StateFailed)), port.NotExists())})
	if _, ok := port.FailedOp(err); ok {
		cur, _, _, gerr := getRecord[Submission](ctx, s.store, key)
		if gerr != nil {
			return gerr
		}
		_, rerr := replay(cur, fp)
		return rerr
	}
	if err != nil {
		return fmt.Errorf("%s: recording failure: %w", op, err)
	}
	return de
}

func (s *Service) publishOnce(ctx context.Context, p *Principal, coll Collection, key port.Key, req MemoryPublishRequest, fp string, expected int64, ch memoryChanges) (MemoryPublishResult, bool, error) {
	collKey := keyCollection(p.SpaceID, coll.CollectionID)
	it, found, err := s.store.Get(ctx, collKey)
	if err != nil {
		return MemoryPublishResult{}, false, err
	}
	if !found {
		return MemoryPublishResult{}, false, Errorf(CodeNotFound, "no such collection")
	}
	head, _ := strconv.ParseInt(it.Attr(attrVersion), 10, 64)
	conflict := func(cur int64) error {
		return s.failSubmission(ctx, key, OpMemoryPublish, req.RequestID, fp, coll.CollectionID,
			Errorf(CodeRevisionConflict, "expected_revision %d is not the current revision %d", expected, cur).WithDetails("current_revision", cur))
	}
	if head != expected {
		return MemoryPublishResult{}, false, conflict(head)
	}
	cur, _, err := s.stateAt(ctx, p.SpaceID, coll.CollectionID, head)
	if err != nil {
		return MemoryPublishResult{}, false, err
	}
	next := head + 1
	st, changed, upserted, deleted := applyChanges(cur, req.Mode, ch, next)
	if path, dup := duplicateActivePath(st); dup {
		// RFC §10.4: different items must not use the same path (their identity in an export), also across
		// the items a delta leaves in place.
		if req.ManifestBlobID != "" {
			return MemoryPublishResult{}, false, s.failSubmission(ctx, key, OpMemoryPublish, req.RequestID, fp, coll.CollectionID,
				Errorf(CodeInvalidManifest, "path %q would be used by two items", echo.Clip(path)))
		}
		return MemoryPublishResult{}, false, Errorf(CodeInvalidRequest, "path %q would be used by two items", echo.Clip(path)).WithDetails("field", "path")
	}
	if len(st.Entries) > s.limits.CollectionEntriesMax {
		return MemoryPublishResult{}, false, Errorf(CodeResourceLimit, "the collection would hold %d entries; at most %d", len(st.Entries), s.limits.CollectionEntriesMax).WithDetails("limit", s.limits.CollectionEntriesMax)
	}
	now := s.clock.Now().UTC()
	headCond := port.AttrEquals(attrVersion, strconv.FormatInt(head, 10))
	if !changed {
		res := MemoryPublishResult{CollectionID: coll.CollectionID, Revision: head, Changed: false, SubmissionState: StateCommitted, CommittedAt: now}
		sub := Submission{Operation: OpMemoryPublish, RequestID: req.RequestID, Fingerprint: fp, ResourceID: coll.CollectionID,
			State: StateCommitted, ReservedAt: now, Result: encode(res)}
		err := s.commitOps(ctx, []port.Op{port.Put(item(key, sub, attrState, string(StateCommitted)), port.NotExists()), genCheck(p), port.Check(collKey, headCond)})
		return s.publishOutcome(ctx, p, key, fp, res, err, conflict)
	}
	if next > s.limits.RevisionMax {
		return MemoryPublishResult{}, false, Errorf(CodeResourceLimit, "the collection reached revision_max")
	}
	// Prepare the complete next state as an immutable object and the references of the blobs it adds, then
	// commit (RFC §10.5).
	stateKey := memoryStateKey(p.SpaceID, coll.CollectionID, next, fp[:16])
	raw := encode(st)
	sum := sha256.Sum256(raw)
	quotas, err := s.spaceQuotas(ctx, p.SpaceID)
	if err != nil {
		return MemoryPublishResult{}, false, err
	}
	if err := s.precheckQuota(ctx, p.SpaceID, quotas, 1, int64(len(raw))); err != nil {
		return MemoryPublishResult{}, false, err
	}
	if _, err := s.blobs.Put(ctx, stateKey, int64(len(raw)), hex.EncodeToString(sum[:]), bytes.NewReader(raw)); err != nil && !errors.Is(err, port.ErrBlobExists) {
		return MemoryPublishResult{}, false, fmt.Errorf("memory.publish: writing state: %w", err)
	}
	if err := s.recordBlobRefs(ctx, p.SpaceID, coll.CollectionID, next, fp[:16], cur, st); err != nil {
		return MemoryPublishResult{}, false, err
	}
	var res MemoryPublishResult
	var pub port.Published
	_, err = s.store.Commit(ctx, port.Tx{Seq: sequence(p.SpaceID), Count: 1, Max: uint64(s.limits.VisibleSeqMax), Quota: quotas.quota(1, int64(len(raw))), Build: func(seq uint64) ([]port.Op, error) {
		vs := strconv.FormatUint(seq, 10)
		res = MemoryPublishResult{CollectionID: coll.CollectionID, Revision: next, Changed: true, SubmissionState: StateCommitted,
			Upserted: upserted, Deleted: deleted, CommittedAt: now, VisibleSeq: &vs}
		sub := Submission{Operation: OpMemoryPublish, RequestID: req.RequestID, Fingerprint: fp, ResourceID: coll.CollectionID,
			State: StateCommitted, ReservedAt: now, Result: encode(res)}
		rr := revisionRecord{Revision: next, StateKey: stateKey, StateSHA256: hex.EncodeToString(sum[:]), StateSize: int64(len(raw)),
			Mode: req.Mode, Upserted: upserted, Deleted: deleted, ProducerID: p.ActorID, CommittedAt: now, VisibleSeq: vs}
		fi := FeedItem{ItemID: newItemID(seq, coll.CollectionID+"#"+strconv.FormatInt(next, 10)), SpaceID: p.SpaceID, VisibleSeq: vs,
			ItemType: ItemMemoryRevision, ResourceID: coll.CollectionID, ResourceVersion: next, ProducerID: p.ActorID,
			RecipientIDs: []string{}, CommittedAt: now,
			Data: encode(MemoryRevisionItemData{CollectionID: coll.CollectionID, SourceActorID: coll.SourceActorID, Revision: next,
				Mode: req.Mode, Upserted: upserted, Deleted: deleted})}
		pub = port.Published{SpaceID: p.SpaceID, VisibleSeq: seq, ItemID: fi.ItemID}
		newColl := coll
		newColl.CurrentRevision = next
		fiData := encodeFeedItem(fi)
		return []port.Op{
			port.Put(item(key, sub, attrState, string(StateCommitted)), port.NotExists()),
			genCheck(p),
			port.Put(item(collKey, newColl, attrVersion, strconv.FormatInt(next, 10)), headCond),
			port.Put(item(keyRevision(p.SpaceID, coll.CollectionID, next), rr), port.NotExists()),
			port.Put(port.Item{Key: keyFeed(p.SpaceID, seq), Data: fiData}, port.NotExists()),
			port.Put(port.Item{Key: keyCollectionFeed(p.SpaceID, coll.CollectionID, seq), Data: fiData}, port.NotExists()),
		}, nil
	}})
	if err == nil {
		s.states.put(stateKey, st)
		s.notify(ctx, []port.Published{pub})
	}
	return s.publishOutcome(ctx, p, key, fp, res, err, conflict)
}

// publishOutcome maps a publish commit's error: op 0 (submission exists) replays, op 1 (authorization
// generation) re-authenticates and retries, op 2 (head moved) is a revision conflict.
func (s *Service) publishOutcome(ctx context.Context, p *Principal, key port.Key, fp string, res MemoryPublishResult, err error, conflict func(int64) error) (MemoryPublishResult, bool, error) {
	if err == nil {
		return res, false, nil
	}
	if errors.Is(err, port.ErrCounterExhausted) {
		return MemoryPublishResult{}, false, Errorf(CodeResourceLimit, "the space reached visible_seq_max")
	}
	if errors.Is(err, port.ErrQuotaExceeded) {
		q, qerr := s.spaceQuotas(ctx, p.SpaceID)
		if qerr != nil {
			return MemoryPublishResult{}, false, qerr
		}
		return MemoryPublishResult{}, false, s.quotaError(ctx, p.SpaceID, q, err)
	}
	idx, ok := port.FailedOp(err)
	if !ok {
		return MemoryPublishResult{}, false, fmt.Errorf("memory.publish: commit: %w", err)
	}
	switch idx {
	case 0:
		sub, _, _, gerr := getRecord[Submission](ctx, s.store, key)
		if gerr != nil {
			return MemoryPublishResult{}, false, gerr
		}
		r, rerr := decodeResult[MemoryPublishResult](replay(sub, fp))
		return r, false, rerr
	case 1:
		fresh, aerr := s.refresh(ctx, p)
		if aerr != nil {
			return MemoryPublishResult{}, false, aerr
		}
		*p = *fresh
		return MemoryPublishResult{}, true, nil
	default:
		cur, _, gerr := s.store.Get(ctx, keyCollection(p.SpaceID, res.CollectionID))
		if gerr != nil {
			return MemoryPublishResult{}, false, gerr
		}
		head, _ := strconv.ParseInt(cur.Attr(attrVersion), 10, 64)
		return MemoryPublishResult{}, false, conflict(head)
	}
}
