package domain

import (
	"context"
	"crypto/hmac"
	"encoding/base64"
	"encoding/json"
	"sort"
	"strings"
	"time"
)

// MemoryReadRequest is the input of memory.read (RFC §10.6).
type MemoryReadRequest struct {
	Revision          *int64
	Limit             int
	Cursor            *string
	IncludeTombstones bool
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
	payload := base64.RawURLEncoding.EncodeToString(encode(b))
	return payload + "." + c.mac(payload)
}

func (c cursorCodec) decodeMemory(s string) (memoryCursorBody, error) {
	var b memoryCursorBody
	payload, sig, ok := strings.Cut(s, ".")
	if !ok || len(s) > 2048 || !hmac.Equal([]byte(sig), []byte(c.mac(payload))) {
		return b, errInvalidCursor
	}
	raw, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil || json.Unmarshal(raw, &b) != nil || b.Proto != memoryCursorProtocol {
		return b, errInvalidCursor
	}
	return b, nil
}

// ReadMemory pages through one revision of a collection in item-ID order (memory.read). The first call
// without revision reads the head and returns the actual revision; every later page is pinned to the
// cursor's revision, tombstone choice and rights.
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
	rev, after, tomb := coll.CurrentRevision, "", req.IncludeTombstones
	if req.Cursor != nil && *req.Cursor != "" {
		b, err := s.cursors.decodeMemory(*req.Cursor)
		if err != nil {
			return MemoryPage{}, err
		}
		if b.Space != p.SpaceID || b.Collection != collID || b.GrantFP != gfp {
			return MemoryPage{}, Errorf(CodeCursorScopeChanged, "the cursor belongs to another collection or set of rights; read again without a cursor")
		}
		if (req.Revision != nil && *req.Revision != b.Revision) || b.Tombstones != tomb {
			return MemoryPage{}, Errorf(CodeInvalidCursor, "the cursor is pinned to revision %d and include_tombstones=%v", b.Revision, b.Tombstones)
		}
		rev, after = b.Revision, b.After
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
	for _, e := range st.Entries {
		if e.State == entryTombstone {
			ex.Tombstones = append(ex.Tombstones, ExportTombstone{ItemID: e.ItemID, Path: e.Path, DeletedInRevision: *e.DeletedInRevision})
			continue
		}
		b, _, found, err := getRecord[blobRecord](ctx, s.store, keyBlob(p.SpaceID, e.BlobID))
		if err != nil {
			return MemoryExport{}, err
		}
		if !found {
			return MemoryExport{}, Errorf(CodeInternal, "a published item references a missing blob")
		}
		ex.Items = append(ex.Items, ExportItem{ItemID: e.ItemID, Path: e.Path, BlobID: e.BlobID, SHA256: b.SHA256, SizeBytes: b.SizeBytes,
			ContentType: b.ContentType, Metadata: e.Metadata, Revision: e.Revision})
	}
	return ex, nil
}

// blobLookback is how many revisions, from the head back, a blob reference is searched in.
const blobLookback = 100

// collectionHasBlob reports whether a recent revision of a collection (the head and up to blobLookback-1
// before it) references a blob, as an active item or a tombstone; readers of those revisions may fetch it.
func (s *Service) collectionHasBlob(ctx context.Context, space, coll, blobID string) (bool, error) {
	it, found, err := s.store.Get(ctx, keyCollection(space, coll))
	if err != nil || !found {
		return false, err
	}
	head := attrInt(it, attrVersion)
	for rev := head; rev >= 1 && rev > head-blobLookback; rev-- {
		st, _, err := s.stateAt(ctx, space, coll, rev)
		if err != nil {
			return false, err
		}
		for _, e := range st.Entries {
			if e.BlobID == blobID {
				return true, nil
			}
		}
	}
	return false, nil
}
