package domain

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/waypost/waypost/domain/port"
)

// MemoryReadRequest is the input of memory.read (RFC §10.6). Revision and IncludeTombstones are nil when
// the caller does not give them: the head and false on a first page, the cursor's values on a later one.
type MemoryReadRequest struct {
	Revision          *int64  `json:"revision"`
	Limit             int     `json:"limit,omitempty"`
	Cursor            *string `json:"cursor"`
	IncludeTombstones *bool   `json:"include_tombstones,omitempty"`
}

// MemoryPage is one page of a collection state.
type MemoryPage struct {
	CollectionID string        `json:"collection_id"`
	Revision     int64         `json:"revision"`
	Items        []MemoryEntry `json:"items"`
	NextCursor   *string       `json:"next_cursor"`
	HasMore      bool          `json:"has_more"`
}

// memoryCursorBody binds a memory.read cursor: collection, revision, tombstone choice, the reader's rights
// and the last item ID returned.
type memoryCursorBody struct {
	Proto      string `json:"p"`
	Space      string `json:"s"`
	Collection string `json:"c"`
	Revision   int64  `json:"r"`
	Tombstones bool   `json:"t"`
	GrantFP    string `json:"g"`
	After      string `json:"a"`
}

const memoryCursorProtocol = "wpm1"

func (c cursorCodec) encodeMemory(b memoryCursorBody) string {
	b.Proto = memoryCursorProtocol
	return c.seal(b)
}

func (c cursorCodec) decodeMemory(s string) (memoryCursorBody, error) {
	var b memoryCursorBody
	if !c.open(s, &b) || b.Proto != memoryCursorProtocol {
		return b, errInvalidCursor
	}
	return b, nil
}

// ReadMemory pages through one revision of a collection in item-ID order (memory.read). The first call
// without revision reads the head and returns the actual revision; every later page is pinned to the
// cursor's revision, tombstone choice and rights: a later page that omits revision or include_tombstones
// continues with the cursor's, one that gives another value is INVALID_CURSOR.
func (s *Service) ReadMemory(ctx context.Context, p *Principal, collID string, req MemoryReadRequest) (MemoryPage, error) {
	coll, _, err := s.collectionAccess(ctx, p, collID, false)
	if err != nil {
		return MemoryPage{}, err
	}
	limit := req.Limit
	if limit == 0 {
		limit = s.limits.MemoryReadPageDefault
	}
	if err := checkPageLimit(limit, s.limits.MemoryReadPageMax); err != nil {
		return MemoryPage{}, err
	}
	gfp := p.grantFingerprint()
	rev, after, tomb := coll.CurrentRevision, "", req.IncludeTombstones != nil && *req.IncludeTombstones
	if req.Cursor != nil && *req.Cursor != "" {
		b, err := s.cursors.decodeMemory(*req.Cursor)
		if err != nil {
			return MemoryPage{}, err
		}
		if b.Space != p.SpaceID || b.Collection != collID || b.GrantFP != gfp {
			return MemoryPage{}, Errorf(CodeCursorScopeChanged, "the cursor belongs to another collection or set of rights; read again without a cursor")
		}
		if (req.Revision != nil && *req.Revision != b.Revision) || (req.IncludeTombstones != nil && *req.IncludeTombstones != b.Tombstones) {
			return MemoryPage{}, Errorf(CodeInvalidCursor, "the cursor is pinned to revision %d and include_tombstones=%v", b.Revision, b.Tombstones)
		}
		rev, after, tomb = b.Revision, b.After, b.Tombstones
	} else if req.Revision != nil {
		if *req.Revision < 0 || *req.Revision > coll.CurrentRevision {
			return MemoryPage{}, Errorf(CodeNotFound, "no such revision").WithDetails("revision", *req.Revision)
		}
		rev = *req.Revision
	}
	st, _, err := s.stateAt(ctx, p.SpaceID, collID, rev)
	if err != nil {
		return MemoryPage{}, err
	}
	i := sort.Search(len(st.Entries), func(i int) bool { return st.Entries[i].ItemID > after })
	page := MemoryPage{CollectionID: collID, Revision: rev, Items: []MemoryEntry{}}
	for ; i < len(st.Entries); i++ {
		e := st.Entries[i]
		if e.State == entryTombstone && !tomb {
			continue
		}
		if len(page.Items) == limit {
			page.HasMore = true
			break
		}
		page.Items = append(page.Items, e)
	}
	if page.HasMore {
		c := s.cursors.encodeMemory(memoryCursorBody{Space: p.SpaceID, Collection: collID, Revision: rev, Tombstones: tomb,
			GrantFP: gfp, After: page.Items[len(page.Items)-1].ItemID})
		page.NextCursor = &c
	}
	return page, nil
}

// ExportItem is one item of a portable export: where it goes, what it is, and the source versions.
type ExportItem struct {
	ItemID      string          `json:"item_id"`
	Path        string          `json:"path"`
	BlobID      string          `json:"blob_id"`
	SHA256      string          `json:"sha256"`
	SizeBytes   int64           `json:"size_bytes"`
	ContentType string          `json:"content_type"`
	Metadata    json.RawMessage `json:"metadata"`
	Revision    int64           `json:"revision"`
}

// ExportTombstone records an item deleted in the exported state.
type ExportTombstone struct {
	ItemID            string `json:"item_id"`
	Path              string `json:"path"`
	DeletedInRevision int64  `json:"deleted_in_revision"`
}

// MemoryExport is the portable bundle of one revision (RFC §10.6): identity and source versions, never
// credentials. Item bytes are fetched with blob.get (or packed by the server ZIP export).
type MemoryExport struct {
	FormatVersion   string            `json:"format_version"`
	APIVersion      string            `json:"api_version"`
	ExportedAt      time.Time         `json:"exported_at"`
	SpaceID         string            `json:"space_id"`
	SourceURI       string            `json:"source_uri"`
	CollectionID    string            `json:"collection_id"`
	SourceActorID   string            `json:"source_actor_id"`
	Scope           string            `json:"scope"`
	Revision        int64             `json:"revision"`
	RevisionCreated *time.Time        `json:"revision_committed_at,omitempty"`
	Items           []ExportItem      `json:"items"`
	Tombstones      []ExportTombstone `json:"tombstones"`
}

// ExportMemory builds the portable bundle of a revision (head when nil) of a readable collection.
func (s *Service) ExportMemory(ctx context.Context, p *Principal, collID string, revision *int64) (MemoryExport, error) {
	coll, _, err := s.collectionAccess(ctx, p, collID, false)
	if err != nil {
		return MemoryExport{}, err
	}
	rev := coll.CurrentRevision
	if revision != nil {
		if *revision < 0 || *revision > coll.CurrentRevision {
			return MemoryExport{}, Errorf(CodeNotFound, "no such revision").WithDetails("revision", *revision)
		}
		rev = *revision
	}
	sp, err := s.space(ctx, p.SpaceID)
	if err != nil {
		return MemoryExport{}, err
	}
	st, rr, err := s.stateAt(ctx, p.SpaceID, collID, rev)
	if err != nil {
		return MemoryExport{}, err
	}
	ex := MemoryExport{FormatVersion: "waypost-memory-export/1", APIVersion: APIVersion, ExportedAt: s.clock.Now().UTC(),
		SpaceID: p.SpaceID, SourceURI: sp.SourceURI, CollectionID: collID, SourceActorID: coll.SourceActorID, Scope: coll.Scope,
		Revision: rev, Items: []ExportItem{}, Tombstones: []ExportTombstone{}}
	if rev > 0 {
		t := rr.CommittedAt
		ex.RevisionCreated = &t
	}
	// The blob records of the live items, read together: up to collection_entries_max of them, one round
	// trip per hundred on DynamoDB.
	var keys []port.Key
	for _, e := range st.Entries {
		if e.State != entryTombstone {
			keys = append(keys, keyBlob(p.SpaceID, e.BlobID))
		}
	}
	blobs, found, err := getRecords[blobRecord](ctx, s.store, keys)
	if err != nil {
		return MemoryExport{}, err
	}
	live := 0
	for _, e := range st.Entries {
		if e.State == entryTombstone {
			ex.Tombstones = append(ex.Tombstones, ExportTombstone{ItemID: e.ItemID, Path: e.Path, DeletedInRevision: *e.DeletedInRevision})
			continue
		}
		b, ok := blobs[live], found[live]
		live++
		if !ok {
			return MemoryExport{}, Errorf(CodeInternal, "a published item references a missing blob")
		}
		ex.Items = append(ex.Items, ExportItem{ItemID: e.ItemID, Path: e.Path, BlobID: e.BlobID, SHA256: b.SHA256, SizeBytes: b.SizeBytes,
			ContentType: b.ContentType, Metadata: e.Metadata, Revision: e.Revision})
	}
	return ex, nil
}

// memoryBlobRef is the blob reference (keyBlobRef) written for a blob that enters a collection with a
// revision: "col#<collection>#<revision>#<attempt>", the attempt being the one whose state object holds it.
func memoryBlobRef(coll string, rev int64, attempt string) string {
	return fmt.Sprintf("col#%s#%020d#%s", coll, rev, attempt)
}

// parseMemoryBlobRef inverts memoryBlobRef (given the part after "col#").
func parseMemoryBlobRef(rest string) (coll string, rev int64, attempt string, ok bool) {
	parts := strings.Split(rest, "#")
	if len(parts) != 3 {
		return "", 0, "", false
	}
	rev, err := strconv.ParseInt(parts[1], 10, 64)
	return parts[0], rev, parts[2], err == nil && ValidID(parts[0])
}

// recordBlobRefs writes, before revision rev commits, a reference from every blob that enters the collection
// with it (one that no entry of the current state holds) to this attempt. Every blob of every revision thus
// has a reference to a committed revision that holds it (a blob of the current state has one already), and
// readers of the collection may read it for as long as that revision is readable (blob.get). A reference of
// an attempt that did not commit names a state object no revision record points to and is ignored.
func (s *Service) recordBlobRefs(ctx context.Context, space, coll string, rev int64, attempt string, cur, next memoryState) error {
	held := make(map[string]bool, len(cur.Entries))
	for _, e := range cur.Entries {
		held[e.BlobID] = true
	}
	var ops []port.Op
	for _, e := range next.Entries {
		if !held[e.BlobID] {
			held[e.BlobID] = true
			ops = append(ops, port.Put(port.Item{Key: keyBlobRef(space, e.BlobID, memoryBlobRef(coll, rev, attempt))}, port.Cond{}))
		}
	}
	for len(ops) > 0 {
		batch := ops[:min(len(ops), s.store.MaxOps())]
		ops = ops[len(batch):]
		if err := s.commitOps(ctx, batch); err != nil {
			return fmt.Errorf("memory.publish: recording blob references: %w", err)
		}
	}
	return nil
}

// memoryRefReadable reports whether a memory blob reference lets p read the blob: p may read the
// collection (the memory.read scope, and its grant or being its source) and the reference's attempt is the
// committed revision.
func (s *Service) memoryRefReadable(ctx context.Context, p *Principal, rest string, sources map[string]bool) (bool, error) {
	coll, rev, attempt, ok := parseMemoryBlobRef(rest)
	if !ok || !p.HasScope(ScopeMemoryRead) {
		return false, nil
	}
	if !p.HasGrant(PermMemoryRead, coll) {
		source, known := sources[coll]
		if !known {
			c, _, found, err := getRecord[Collection](ctx, s.store, keyCollection(p.SpaceID, coll))
			if err != nil {
				return false, err
			}
			source = found && c.SourceActorID == p.ActorID
			sources[coll] = source
		}
		if !source {
			return false, nil
		}
	}
	rr, _, found, err := getRecord[revisionRecord](ctx, s.store, keyRevision(p.SpaceID, coll, rev))
	if err != nil {
		return false, err
	}
	return found && rr.StateKey == memoryStateKey(p.SpaceID, coll, rev, attempt), nil
}
