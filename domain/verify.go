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

	"github.com/waypost/waypost/domain/port"
)

// Verify (RFC §19.2): metadata and blobs are checked together. Every published resource is followed to
// the bytes it needs — a message to its body (inline, against the digest recorded at commit, or its body
// object) and to each attachment; a memory revision to its state object and to the blob of each active
// item; every sealed blob (manifests included) to its object — and each object is read and checked by
// size and SHA-256. A resource whose bytes are missing or differ is unreadable: Verify reports each one
// (P04 would not hold for it) and never counts it as restored. It reads through the ports only, so the
// same check runs on the embedded store and on DynamoDB + S3.

// Verify problems.
const (
	ProblemMissingRecord  = "missing_record"  // a record the resource needs is absent
	ProblemMissingObject  = "missing_object"  // an object the resource needs is absent
	ProblemSizeMismatch   = "size_mismatch"   // the object's size is not the recorded one
	ProblemDigestMismatch = "digest_mismatch" // the bytes do not hash to the recorded SHA-256
	ProblemUndecodable    = "undecodable"     // a record or object cannot be decoded
	ProblemBlobUnreadable = "blob_unreadable" // a blob the resource references is unreadable
	ProblemBlobNotSealed  = "blob_not_sealed" // a blob the resource references is not sealed
)

// VerifyFinding names one unreadable resource.
type VerifyFinding struct {
	SpaceID string `json:"space_id"`
	// Kind is message, memory_revision, blob or inbox_entry.
	Kind string `json:"kind"`
	// ID is the message ID, "<collection_id>@<revision>", the blob ID or "<actor_id>@<visible_seq>".
	ID      string `json:"id"`
	Problem string `json:"problem"`
	// BlobID names the unreadable blob a message or revision references.
	BlobID string `json:"blob_id,omitempty"`
	// ItemIDs are the memory items of a revision that reference the blob.
	ItemIDs []string `json:"item_ids,omitempty"`
	// Detail says more (expected and found size or digest, the error).
	Detail string `json:"detail,omitempty"`
}

// String renders a finding on one line.
func (f VerifyFinding) String() string {
	s := fmt.Sprintf("%s %s %s: %s", f.SpaceID, f.Kind, f.ID, f.Problem)
	if f.BlobID != "" {
		s += " (blob " + f.BlobID
		if len(f.ItemIDs) > 0 {
			s += ", items " + strings.Join(f.ItemIDs, ",")
		}
		s += ")"
	}
	if f.Detail != "" {
		s += ": " + f.Detail
	}
	return s
}

// VerifyOptions adjust Verify.
type VerifyOptions struct {
	// SpaceIDs limits the check to these spaces; empty means every space of the deployment.
	SpaceIDs []string
	// HeadOnly compares each object's size and SHA-256 as the blob store recorded them at write time
	// (port.BlobStore.Head) instead of reading and hashing its bytes.
	HeadOnly bool
}

// VerifyReport sums up a Verify run.
type VerifyReport struct {
	Spaces          int64 `json:"spaces"`
	Messages        int64 `json:"messages"`
	MemoryRevisions int64 `json:"memory_revisions"`
	Blobs           int64 `json:"blobs"`
	Objects         int64 `json:"objects"`
	ObjectBytes     int64 `json:"object_bytes"`
	// SkippedSpaces are spaces being deleted or deleted, whose bytes are gone on purpose.
	SkippedSpaces []string `json:"skipped_spaces"`
	// Unreadable counts the findings reported.
	Unreadable int64 `json:"unreadable"`
}

// verifier holds one Verify run's state.
type verifier struct {
	s      *Service
	opts   VerifyOptions
	report func(VerifyFinding)
	rep    VerifyReport
	blobs  map[string]string // blob ID → problem ("" readable), for the space being checked
}

// Verify checks every reference of the given spaces (every space by default) against the blob store and
// calls report for each unreadable resource, in space and key order. An error means the check itself
// could not run (a storage failure), not that something is unreadable.
func (s *Service) Verify(ctx context.Context, opts VerifyOptions, report func(VerifyFinding)) (VerifyReport, error) {
	v := &verifier{s: s, opts: opts, report: report, rep: VerifyReport{SkippedSpaces: []string{}}}
	spaces := slices.Clone(opts.SpaceIDs)
	if len(spaces) == 0 {
		if err := s.eachItem(ctx, port.Query{PK: pkSpaces}, func(it port.Item) error {
			spaces = append(spaces, it.SK)
			return nil
		}); err != nil {
			return v.rep, err
		}
	}
	for _, space := range spaces {
		if err := v.space(ctx, space); err != nil {
			return v.rep, fmt.Errorf("verifying space %s: %w", space, err)
		}
	}
	return v.rep, nil
}

func (v *verifier) find(f VerifyFinding) {
	v.rep.Unreadable++
	if v.report != nil {
		v.report(f)
	}
}

func (v *verifier) space(ctx context.Context, space string) error {
	s := v.s
	sp, _, found, err := s.spaceRecord(ctx, space)
	if err != nil {
		return err
	}
	if !found {
		return Errorf(CodeNotFound, "no such space %s", space)
	}
	if sp.state() != SpaceActive {
		v.rep.SkippedSpaces = append(v.rep.SkippedSpaces, space)
		return nil
	}
	v.rep.Spaces++
	v.blobs = map[string]string{}
	// Sealed blobs first (manifests and unreferenced blobs included), then what references them.
	if err := s.eachItem(ctx, port.Query{PK: "SP#" + space, After: "UPL#", UpTo: "UPL#~"}, func(it port.Item) error {
		ptr, err := decodeItem[uploadPointer](it)
		if err != nil {
			return err
		}
		_, err = v.blob(ctx, space, ptr.BlobID)
		return err
	}); err != nil {
		return err
	}
	if err := s.eachItem(ctx, port.Query{PK: pkFeed(space)}, func(it port.Item) error {
		fi, err := decodeItem[FeedItem](it)
		if err != nil {
			return err
		}
		if fi.ItemType == ItemMessage {
			return v.message(ctx, space, fi.ResourceID)
		}
		return nil
	}); err != nil {
		return err
	}
	if err := v.inboxes(ctx, space); err != nil {
		return err
	}
	return s.eachItem(ctx, port.Query{PK: "SP#" + space, After: "COL#", UpTo: "COL#~"}, func(it port.Item) error {
		coll := strings.TrimPrefix(it.SK, "COL#")
		return s.eachItem(ctx, port.Query{PK: pkRevisions(space, coll)}, func(rit port.Item) error {
			return v.revision(ctx, space, coll, rit)
		})
	})
}

// inboxes follows every inbox entry of the space's actors that holds no copy of its feed item
// (inboxEntryPut) to its feed slot: an entry whose slot is absent is reported as kind inbox_entry, ID
// "<actor_id>@<visible_seq>", missing_record.
func (v *verifier) inboxes(ctx context.Context, space string) error {
	return v.s.eachItem(ctx, port.Query{PK: "SP#" + space, After: "ACT#", UpTo: "ACT#~"}, func(ait port.Item) error {
		actor := strings.TrimPrefix(ait.SK, "ACT#")
		for page, err := range v.s.pages(ctx, port.Query{PK: pkInbox(space, actor)}) {
			if err != nil {
				return fmt.Errorf("reading the inbox of %s: %w", actor, err)
			}
			refs, _, found, err := v.s.feedSlotsOf(ctx, space, page)
			if err != nil {
				return err
			}
			for n, r := range refs {
				if !found[n] {
					v.find(VerifyFinding{SpaceID: space, Kind: "inbox_entry", ID: actor + "@" + strconv.FormatUint(r.seq, 10),
						Problem: ProblemMissingRecord, Detail: "its feed slot is absent"})
				}
			}
		}
		return nil
	})
}

// blob checks a blob (once per run) and returns its problem, "" when it is sealed and readable. Unsealed
// blobs are not resources yet: they are reported only through what references them.
func (v *verifier) blob(ctx context.Context, space, blobID string) (string, error) {
	if p, ok := v.blobs[blobID]; ok {
		return p, nil
	}
	b, _, found, err := getRecord[blobRecord](ctx, v.s.store, keyBlob(space, blobID))
	if err != nil {
		return "", err
	}
	problem := ""
	switch {
	case !found:
		problem = ProblemMissingRecord
	case b.State != BlobSealed:
		problem = ProblemBlobNotSealed
	default:
		v.rep.Blobs++
		var detail string
		problem, detail, err = v.object(ctx, blobObjectKey(space, blobID), b.SizeBytes, b.SHA256)
		if err != nil {
			return "", err
		}
		if problem != "" {
			v.find(VerifyFinding{SpaceID: space, Kind: "blob", ID: blobID, Problem: problem, Detail: detail})
		}
	}
	v.blobs[blobID] = problem
	return problem, nil
}

// open opens an object for reading; missing is true (and rc nil) when it is absent.
func (v *verifier) open(ctx context.Context, key string) (rc io.ReadCloser, missing bool, err error) {
	v.rep.Objects++
	rc, _, err = v.s.blobs.Get(ctx, key)
	if errors.Is(err, port.ErrBlobNotFound) {
		return nil, true, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("reading object %s: %w", key, err)
	}
	return rc, false, nil
}

// readAll reads a whole small object (a body, a state); missing is true when it is absent, and readErr is
// a failure while reading (corrupt bytes, for stores that check digests as they read).
func (v *verifier) readAll(ctx context.Context, key string) (raw []byte, missing bool, readErr, err error) {
	rc, missing, err := v.open(ctx, key)
	if rc == nil {
		return nil, missing, nil, err
	}
	defer rc.Close()
	raw, readErr = io.ReadAll(rc)
	v.rep.ObjectBytes += int64(len(raw))
	return raw, false, readErr, nil
}

// object checks one object against its recorded size and SHA-256 (sha256 "" checks presence and size).
func (v *verifier) object(ctx context.Context, key string, size int64, sha256hex string) (problem, detail string, err error) {
	if v.opts.HeadOnly {
		v.rep.Objects++
		info, err := v.s.blobs.Head(ctx, key)
		if errors.Is(err, port.ErrBlobNotFound) {
			return ProblemMissingObject, key, nil
		}
		if err != nil {
			return "", "", fmt.Errorf("reading object %s: %w", key, err)
		}
		v.rep.ObjectBytes += info.Size
		problem, detail = compareObject(info.Size, info.SHA256, size, sha256hex)
		return problem, detail, nil
	}
	rc, missing, err := v.open(ctx, key)
	if rc == nil {
		if missing {
			return ProblemMissingObject, key, nil
		}
		return "", "", err
	}
	defer rc.Close()
	h := sha256.New()
	n, err := io.Copy(h, rc)
	v.rep.ObjectBytes += n
	if err != nil {
		// A store that checks digests while reading (the file store) reports corrupt bytes as a read error.
		return ProblemDigestMismatch, fmt.Sprintf("%s: %v", key, err), nil
	}
	problem, detail = compareObject(n, hex.EncodeToString(h.Sum(nil)), size, sha256hex)
	return problem, detail, nil
}

// compareObject compares an object's size and SHA-256 with the recorded ones (sha "" compares the size
// only) and returns the problem ("" none) and its detail.
func compareObject(gotSize int64, gotSHA string, size int64, sha string) (problem, detail string) {
	switch {
	case gotSize != size:
		return ProblemSizeMismatch, fmt.Sprintf("%d bytes, recorded %d", gotSize, size)
	case sha != "" && gotSHA != sha:
		return ProblemDigestMismatch, fmt.Sprintf("sha256 %s, recorded %s", gotSHA, sha)
	}
	return "", ""
}

// compareBytes is compareObject for bytes held in memory (an inline body, a state object read whole).
func compareBytes(raw []byte, size int64, sha string) (problem, detail string) {
	sum := sha256.Sum256(raw)
	return compareObject(int64(len(raw)), hex.EncodeToString(sum[:]), size, sha)
}

// message checks a message's record, body and attachments.
func (v *verifier) message(ctx context.Context, space, msgID string) error {
	s := v.s
	v.rep.Messages++
	bad := func(problem, blobID, detail string) {
		v.find(VerifyFinding{SpaceID: space, Kind: "message", ID: msgID, Problem: problem, BlobID: blobID, Detail: detail})
	}
	it, found, err := s.store.Get(ctx, keyMessage(space, msgID))
	if err != nil {
		return fmt.Errorf("reading message %s: %w", msgID, err)
	}
	if !found {
		bad(ProblemMissingRecord, "", "message record")
		return nil
	}
	m, err := decodeItem[storedMessage](it)
	if err != nil {
		bad(ProblemUndecodable, "", err.Error())
		return nil
	}
	if m.Inline {
		if m.BodySHA256 != "" {
			if p, detail := compareBytes(encode(m.Body), m.BodySize, m.BodySHA256); p != "" {
				bad(p, "", "inline body: "+detail)
			}
		}
	} else {
		key := messageBodyKey(space, msgID)
		var p, detail string
		if m.BodySHA256 != "" {
			p, detail, err = v.object(ctx, key, m.BodySize, m.BodySHA256)
		} else {
			p, detail, err = v.bodyDecodes(ctx, key) // a body stored before its digest was recorded
		}
		if err != nil {
			return err
		}
		if p != "" {
			bad(p, "", "body: "+detail)
		}
	}
	seen := map[string]bool{}
	for _, b := range m.AttachmentIDs {
		if seen[b] {
			continue
		}
		seen[b] = true
		p, err := v.blob(ctx, space, b)
		if err != nil {
			return err
		}
		if p != "" {
			bad(attachmentProblem(p), b, "attachment")
		}
	}
	return nil
}

// attachmentProblem is how a referencing resource reports a blob's problem.
func attachmentProblem(p string) string {
	if p == ProblemBlobNotSealed {
		return p
	}
	return ProblemBlobUnreadable
}

// bodyDecodes checks that a body object exists and decodes (bodies committed before their digest was
// recorded have nothing to compare with).
func (v *verifier) bodyDecodes(ctx context.Context, key string) (string, string, error) {
	raw, missing, readErr, err := v.readAll(ctx, key)
	var body MessageBody
	switch {
	case err != nil:
		return "", "", err
	case missing:
		return ProblemMissingObject, key, nil
	case readErr != nil || json.Unmarshal(raw, &body) != nil:
		return ProblemUndecodable, key, nil
	}
	return "", "", nil
}

// revision checks a memory revision's state object and the blobs of its active items.
func (v *verifier) revision(ctx context.Context, space, coll string, it port.Item) error {
	v.rep.MemoryRevisions++
	rr, err := decodeItem[revisionRecord](it)
	id := coll + "@" + strings.TrimLeft(it.SK, "0")
	if err != nil {
		v.find(VerifyFinding{SpaceID: space, Kind: "memory_revision", ID: id, Problem: ProblemUndecodable, Detail: err.Error()})
		return nil
	}
	bad := func(problem, blobID string, items []string, detail string) {
		v.find(VerifyFinding{SpaceID: space, Kind: "memory_revision", ID: id, Problem: problem, BlobID: blobID, ItemIDs: items, Detail: detail})
	}
	raw, missing, rerr, err := v.readAll(ctx, rr.StateKey)
	if err != nil {
		return err
	}
	if missing {
		bad(ProblemMissingObject, "", nil, "state "+rr.StateKey)
		return nil
	}
	if rerr != nil {
		bad(ProblemDigestMismatch, "", nil, fmt.Sprintf("state %s: %v", rr.StateKey, rerr))
		return nil
	}
	if rr.StateSHA256 != "" {
		if p, detail := compareBytes(raw, rr.StateSize, rr.StateSHA256); p != "" {
			bad(p, "", nil, "state: "+detail)
			return nil
		}
	}
	var st memoryState
	if err := json.NewDecoder(bytes.NewReader(raw)).Decode(&st); err != nil {
		bad(ProblemUndecodable, "", nil, "state: "+err.Error())
		return nil
	}
	byBlob := map[string][]string{}
	var order []string
	for _, e := range st.Entries {
		if e.State != entryActive {
			continue
		}
		if _, ok := byBlob[e.BlobID]; !ok {
			order = append(order, e.BlobID)
		}
		byBlob[e.BlobID] = append(byBlob[e.BlobID], e.ItemID)
	}
	for _, b := range order {
		p, err := v.blob(ctx, space, b)
		if err != nil {
			return err
		}
		if p != "" {
			bad(attachmentProblem(p), b, byBlob[b], "memory items")
		}
	}
	return nil
}
