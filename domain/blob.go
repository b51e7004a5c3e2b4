package domain

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"mime"
	"regexp"
	"strings"
	"time"
	"unicode"

	"github.com/waypost/waypost/domain/port"
)

// Blob operation names (idempotency).
const (
	OpBlobPrepare = "blob.prepare"
	OpBlobCommit  = "blob.commit"
)

// BlobState is the lifecycle state of a blob (RFC §9).
type BlobState string

// The blob states. pending → sealed is the normal path; pending → expiring → expired is the sweeper's.
const (
	BlobPending  BlobState = "pending"
	BlobSealed   BlobState = "sealed"
	BlobExpiring BlobState = "expiring"
	BlobExpired  BlobState = "expired"
)

// blobRecord is the stored blob metadata; its state attribute guards seal and cleanup (one winner).
type blobRecord struct {
	BlobID      string     `json:"blob_id"`
	UploadID    string     `json:"upload_id"`
	OwnerID     string     `json:"owner_id"`
	ContentType string     `json:"content_type"`
	Filename    string     `json:"filename,omitempty"`
	SizeBytes   int64      `json:"size_bytes"`
	SHA256      string     `json:"sha256"`
	State       BlobState  `json:"state"`
	CreatedAt   time.Time  `json:"created_at"`
	ExpiresAt   time.Time  `json:"expires_at"`
	SealedAt    *time.Time `json:"sealed_at,omitempty"`
}

// uploadPointer maps an upload ID to its blob.
type uploadPointer struct {
	BlobID  string `json:"blob_id"`
	OwnerID string `json:"owner_id"`
}

// BlobPrepareRequest is the body of blob.prepare (RFC §9.1).
type BlobPrepareRequest struct {
	RequestID   string `json:"request_id"`
	ContentType string `json:"content_type"`
	SizeBytes   int64  `json:"size_bytes"`
	SHA256      string `json:"sha256"`
	Filename    string `json:"filename,omitempty"`
}

// BlobPrepareResult tells the client where and how to upload.
type BlobPrepareResult struct {
	UploadID      string            `json:"upload_id"`
	BlobID        string            `json:"blob_id"`
	UploadURL     string            `json:"upload_url"`
	UploadMethod  string            `json:"upload_method"`
	UploadHeaders map[string]string `json:"upload_headers"`
	ExpiresAt     time.Time         `json:"expires_at"`
	SizeBytes     int64             `json:"size_bytes"`
	SHA256        string            `json:"sha256"`
	State         BlobState         `json:"state"`
}

// UploadResult is the result of PUT /v0/uploads/{upload_id}/content. It is not a seal receipt.
type UploadResult struct {
	UploadID        string `json:"upload_id"`
	BlobID          string `json:"blob_id"`
	AlreadyUploaded bool   `json:"already_uploaded"`
	SizeBytes       int64  `json:"size_bytes"`
	SHA256          string `json:"sha256"`
}

// BlobCommitRequest is the body of blob.commit.
type BlobCommitRequest struct {
	RequestID string `json:"request_id"`
	UploadID  string `json:"upload_id"`
}

// BlobInfo is the public metadata of a blob (blob.commit and blob.get).
type BlobInfo struct {
	BlobID      string     `json:"blob_id"`
	State       BlobState  `json:"state"`
	SizeBytes   int64      `json:"size_bytes"`
	SHA256      string     `json:"sha256"`
	ContentType string     `json:"content_type"`
	Filename    string     `json:"filename,omitempty"`
	OwnerID     string     `json:"owner_id"`
	CreatedAt   time.Time  `json:"created_at"`
	SealedAt    *time.Time `json:"sealed_at,omitempty"`
	// DownloadURL is the authorized download path (same bearer credential), present when sealed; where the
	// blob store offers direct transfer, blob.get answers a short-lived presigned URL instead (no credential),
	// valid until DownloadExpiresAt.
	DownloadURL       string     `json:"download_url,omitempty"`
	DownloadExpiresAt *time.Time `json:"download_expires_at,omitempty"`
}

func (b blobRecord) info() BlobInfo {
	i := BlobInfo{BlobID: b.BlobID, State: b.State, SizeBytes: b.SizeBytes, SHA256: b.SHA256, ContentType: b.ContentType,
		Filename: b.Filename, OwnerID: b.OwnerID, CreatedAt: b.CreatedAt, SealedAt: b.SealedAt}
	if b.State == BlobSealed {
		i.DownloadURL = "/v0/blobs/" + b.BlobID + "/content"
	}
	return i
}

var sha256Pattern = regexp.MustCompile(`^[0-9a-f]{64}$`)

func checkContentType(ct string) error {
	if len(ct) == 0 || len(ct) > 255 {
		return Errorf(CodeInvalidRequest, "content_type must be a media type of 1 to 255 bytes").WithDetails("field", "content_type")
	}
	if _, _, err := mime.ParseMediaType(ct); err != nil {
		return Errorf(CodeInvalidRequest, "content_type is not a valid media type").WithDetails("field", "content_type")
	}
	return nil
}

func checkFilename(name string) error {
	if len(name) > 255 || strings.ContainsAny(name, "/\\") || name == "." || name == ".." {
		return Errorf(CodeInvalidRequest, "filename must be a plain file name of at most 255 bytes").WithDetails("field", "filename")
	}
	for _, r := range name {
		if unicode.IsControl(r) {
			return Errorf(CodeInvalidRequest, "filename has a control character").WithDetails("field", "filename")
		}
	}
	return nil
}

// sameMediaType compares media types ignoring case, spacing and parameter order.
func sameMediaType(a, b string) bool {
	ma, pa, errA := mime.ParseMediaType(a)
	mb, pb, errB := mime.ParseMediaType(b)
	if errA != nil || errB != nil || ma != mb || len(pa) != len(pb) {
		return false
	}
	for k, v := range pa {
		if pb[k] != v {
			return false
		}
	}
	return true
}

// PrepareBlob reserves an upload (blob.prepare): the service fixes the object key, size, type and SHA-256;
// the bytes arrive later through Upload and are sealed by CommitBlob.
func (s *Service) PrepareBlob(ctx context.Context, p *Principal, req BlobPrepareRequest) (BlobPrepareResult, error) {
	if err := requireScope(p, ScopeBlobWrite); err != nil {
		return BlobPrepareResult{}, err
	}
	if err := checkRequestID(req.RequestID); err != nil {
		return BlobPrepareResult{}, err
	}
	if !sha256Pattern.MatchString(req.SHA256) {
		return BlobPrepareResult{}, Errorf(CodeInvalidRequest, "sha256 must be 64 lowercase hexadecimal digits").WithDetails("field", "sha256")
	}
	if req.SizeBytes < 0 {
		return BlobPrepareResult{}, Errorf(CodeInvalidRequest, "size_bytes must not be negative").WithDetails("field", "size_bytes")
	}
	if req.SizeBytes > s.limits.MaxBlobBytes {
		return BlobPrepareResult{}, Errorf(CodePayloadTooLarge, "size_bytes is larger than max_blob_bytes (%d)", s.limits.MaxBlobBytes).WithDetails("limit", s.limits.MaxBlobBytes)
	}
	if err := checkContentType(req.ContentType); err != nil {
		return BlobPrepareResult{}, err
	}
	if err := checkFilename(req.Filename); err != nil {
		return BlobPrepareResult{}, err
	}
	fp, ferr := fingerprintOf(OpBlobPrepare, map[string]any{"content_type": req.ContentType, "size_bytes": req.SizeBytes, "sha256": req.SHA256, "filename": req.Filename})
	if ferr != nil {
		return BlobPrepareResult{}, ferr
	}
	raw, _, err := s.runOnce(ctx, onceSpec{
		key: keySubmission(p.SpaceID, p.ActorID, OpBlobPrepare, req.RequestID), operation: OpBlobPrepare, requestID: req.RequestID, fingerprint: fp,
		prepare: func(ctx context.Context) (*onceTx, error) {
			// A blob that cannot fit is refused now; blob.commit, which counts it, checks again.
			if q, err := s.spaceQuotas(ctx, p.SpaceID); err != nil {
				return nil, err
			} else if err := s.precheckQuota(ctx, p.SpaceID, q, 0, req.SizeBytes); err != nil {
				return nil, err
			}
			now := s.clock.Now().UTC()
			b := blobRecord{BlobID: s.ids.NewID("blob"), UploadID: s.ids.NewID("upl"), OwnerID: p.ActorID, ContentType: req.ContentType,
				Filename: req.Filename, SizeBytes: req.SizeBytes, SHA256: req.SHA256, State: BlobPending, CreatedAt: now,
				ExpiresAt: now.Add(time.Duration(s.limits.UploadTTLSeconds) * time.Second)}
			return &onceTx{resourceID: b.BlobID, build: func(uint64) ([]port.Op, any, []port.Published) {
				return []port.Op{
						genCheck(p),
						port.Put(item(keyBlob(p.SpaceID, b.BlobID), b, attrState, string(BlobPending)), port.NotExists()),
						port.Put(item(keyUpload(p.SpaceID, b.UploadID), uploadPointer{BlobID: b.BlobID, OwnerID: b.OwnerID}), port.NotExists()),
						port.Put(port.Item{Key: keyUploadExpiry(b.ExpiresAt, p.SpaceID, b.UploadID), Data: encode(uploadPointer{BlobID: b.BlobID})}, port.NotExists()),
					}, BlobPrepareResult{UploadID: b.UploadID, BlobID: b.BlobID, UploadURL: "/v0/uploads/" + b.UploadID + "/content",
						UploadMethod: "PUT", UploadHeaders: map[string]string{"Content-Type": b.ContentType},
						ExpiresAt: b.ExpiresAt, SizeBytes: b.SizeBytes, SHA256: b.SHA256, State: BlobPending}, nil
			}}, nil
		},
	})
	res, err := decodeResult[BlobPrepareResult](raw, err)
	if err != nil {
		return res, err
	}
	return s.presignUpload(ctx, p.SpaceID, res)
}

// upload returns the blob record behind an upload of the caller.
func (s *Service) upload(ctx context.Context, p *Principal, uploadID string) (blobRecord, error) {
	notFound := Errorf(CodeNotFound, "no such upload").WithDetails("upload_id", uploadID)
	ptr, _, found, err := getNamed[uploadPointer](ctx, s.store, uploadID, keyUpload(p.SpaceID, uploadID))
	if err != nil {
		return blobRecord{}, err
	}
	if !found || ptr.OwnerID != p.ActorID {
		return blobRecord{}, notFound
	}
	b, _, found, err := getRecord[blobRecord](ctx, s.store, keyBlob(p.SpaceID, ptr.BlobID))
	if err != nil {
		return blobRecord{}, err
	}
	if !found {
		return blobRecord{}, notFound
	}
	return b, nil
}

func (s *Service) checkUploadable(b blobRecord) error {
	switch {
	case b.State == BlobSealed:
		return Errorf(CodeUploadSealed, "the blob is already sealed; its content cannot change").WithDetails("blob_id", b.BlobID)
	case b.State != BlobPending || !s.clock.Now().Before(b.ExpiresAt):
		return Errorf(CodeUploadExpired, "the upload expired at %s", b.ExpiresAt.Format(time.RFC3339)).WithDetails("upload_id", b.UploadID)
	}
	return nil
}

// Upload streams the bytes of a prepared upload into the blob store (PUT /v0/uploads/{id}/content). Size,
// type and SHA-256 are checked on the bytes actually received; the object is create-only. A repeated PUT of
// the same bytes answers already_uploaded; different bytes UPLOAD_CONTENT_CONFLICT; after seal UPLOAD_SEALED.
// contentLength is -1 when unknown.
func (s *Service) Upload(ctx context.Context, p *Principal, uploadID, contentType string, contentLength int64, body io.Reader) (UploadResult, error) {
	if err := requireScope(p, ScopeBlobWrite); err != nil {
		return UploadResult{}, err
	}
	b, err := s.upload(ctx, p, uploadID)
	if err != nil {
		return UploadResult{}, err
	}
	if err := s.checkUploadable(b); err != nil {
		return UploadResult{}, err
	}
	if contentType != "" && !sameMediaType(contentType, b.ContentType) {
		return UploadResult{}, Errorf(CodeInvalidBlob, "Content-Type differs from the prepared content_type").WithDetails("expected", b.ContentType)
	}
	if contentLength >= 0 && contentLength != b.SizeBytes {
		if contentLength > s.limits.MaxBlobBytes {
			return UploadResult{}, Errorf(CodePayloadTooLarge, "the upload is larger than max_blob_bytes").WithDetails("limit", s.limits.MaxBlobBytes)
		}
		return UploadResult{}, Errorf(CodeInvalidBlob, "Content-Length differs from the prepared size_bytes").WithDetails("expected", b.SizeBytes)
	}
	res := UploadResult{UploadID: b.UploadID, BlobID: b.BlobID, SizeBytes: b.SizeBytes, SHA256: b.SHA256}
	key := blobObjectKey(p.SpaceID, b.BlobID)
	if _, err := s.blobs.Head(ctx, key); err == nil {
		// Stored before (perhaps its metadata response was lost): compare the new bytes with it.
		return s.compareRepeated(res, body)
	} else if !errors.Is(err, port.ErrBlobNotFound) {
		return UploadResult{}, fmt.Errorf("upload: checking object: %w", err)
	}
	seen := &receivedDigest{h: sha256.New()}
	_, err = s.blobs.Put(ctx, key, b.SizeBytes, b.SHA256, io.TeeReader(body, seen))
	switch {
	case err == nil:
		return s.uploadStored(ctx, p, key, res)
	case errors.Is(err, port.ErrBlobChecksum):
		return UploadResult{}, Errorf(CodeChecksumMismatch, "the uploaded bytes do not hash to the prepared sha256").WithDetails("expected", b.SHA256)
	case errors.Is(err, port.ErrBlobSize):
		return UploadResult{}, Errorf(CodeInvalidBlob, "the uploaded bytes are not of the prepared size").WithDetails("expected", b.SizeBytes)
	case errors.Is(err, port.ErrBlobExists):
		// A concurrent PUT stored it first, and the store may have refused before reading these bytes: compare
		// all of them (what it read, then the rest) with the stored object, which has the prepared digest.
		if _, err := io.Copy(seen, io.LimitReader(body, res.SizeBytes+1-seen.n)); err != nil {
			return UploadResult{}, fmt.Errorf("upload: reading repeated content: %w", err)
		}
		if seen.n != res.SizeBytes || hex.EncodeToString(seen.h.Sum(nil)) != res.SHA256 {
			return UploadResult{}, Errorf(CodeUploadContentConflict, "the stored object differs from these bytes; it is never overwritten").WithDetails("blob_id", res.BlobID)
		}
		res.AlreadyUploaded = true
		return res, nil
	default:
		return UploadResult{}, fmt.Errorf("upload: storing object: %w", err)
	}
}

// uploadStored checks, after the bytes were stored, that the upload still exists: the space may have been
// deleted while they streamed in (DeleteSpace removes the records first), and bytes without their record
// would be left behind. Then it removes them again and answers NOT_FOUND.
func (s *Service) uploadStored(ctx context.Context, p *Principal, key string, res UploadResult) (UploadResult, error) {
	if _, _, found, err := getRecord[blobRecord](ctx, s.store, keyBlob(p.SpaceID, res.BlobID)); err != nil || found {
		return res, err
	}
	if err := s.blobs.Delete(ctx, key); err != nil {
		return UploadResult{}, fmt.Errorf("upload: removing the bytes of a deleted upload: %w", err)
	}
	return UploadResult{}, Errorf(CodeNotFound, "no such upload").WithDetails("upload_id", res.UploadID)
}

// receivedDigest hashes and counts the bytes of an upload body as the blob store reads them.
type receivedDigest struct {
	h hash.Hash
	n int64
}

func (d *receivedDigest) Write(p []byte) (int, error) { d.n += int64(len(p)); return d.h.Write(p) }

func (s *Service) compareRepeated(res UploadResult, body io.Reader) (UploadResult, error) {
	var h hash.Hash = sha256.New()
	n, err := io.Copy(h, io.LimitReader(body, res.SizeBytes+1))
	if err != nil {
		return UploadResult{}, fmt.Errorf("upload: reading repeated content: %w", err)
	}
	if n != res.SizeBytes || hex.EncodeToString(h.Sum(nil)) != res.SHA256 {
		return UploadResult{}, Errorf(CodeUploadContentConflict, "the stored object differs from these bytes; it is never overwritten").WithDetails("blob_id", res.BlobID)
	}
	res.AlreadyUploaded = true
	return res, nil
}

// CommitBlob seals an uploaded blob (blob.commit): the stored object must exist with the prepared size and
// SHA-256; sealing is a condition on the pending state, so seal and cleanup have one winner.
func (s *Service) CommitBlob(ctx context.Context, p *Principal, req BlobCommitRequest) (BlobInfo, error) {
	if err := requireScope(p, ScopeBlobWrite); err != nil {
		return BlobInfo{}, err
	}
	if err := checkRequestID(req.RequestID); err != nil {
		return BlobInfo{}, err
	}
	fp, ferr := fingerprintOf(OpBlobCommit, map[string]any{"upload_id": req.UploadID})
	if ferr != nil {
		return BlobInfo{}, ferr
	}
	raw, _, err := s.runOnce(ctx, onceSpec{
		key: keySubmission(p.SpaceID, p.ActorID, OpBlobCommit, req.RequestID), operation: OpBlobCommit, requestID: req.RequestID, fingerprint: fp,
		prepare: func(ctx context.Context) (*onceTx, error) {
			b, err := s.upload(ctx, p, req.UploadID)
			if err != nil {
				return nil, err
			}
			if b.State == BlobSealed { // sealed by an earlier commit with another request ID
				return &onceTx{resourceID: b.BlobID, build: func(uint64) ([]port.Op, any, []port.Published) {
					return []port.Op{port.Check(keyBlob(p.SpaceID, b.BlobID), port.AttrEquals(attrState, string(BlobSealed)))}, b.info(), nil
				}}, nil
			}
			if err := s.checkUploadable(b); err != nil {
				return nil, err
			}
			info, err := s.blobs.Head(ctx, blobObjectKey(p.SpaceID, b.BlobID))
			if errors.Is(err, port.ErrBlobNotFound) {
				// The sweeper may have expired the upload and deleted its bytes since we read it: then the
				// sweep won the race and the answer is UPLOAD_EXPIRED, not "nothing uploaded".
				if cur, rerr := s.upload(ctx, p, req.UploadID); rerr == nil && cur.State != BlobPending {
					return nil, s.checkUploadable(cur)
				}
				return nil, Errorf(CodeInvalidBlob, "no content was uploaded for this upload yet").WithDetails("upload_id", b.UploadID)
			}
			if err != nil {
				return nil, fmt.Errorf("blob.commit: checking object: %w", err)
			}
			if info.Size != b.SizeBytes || info.SHA256 != b.SHA256 {
				return nil, Errorf(CodeInvalidBlob, "the stored object does not match the prepared size and sha256")
			}
			quotas, err := s.spaceQuotas(ctx, p.SpaceID)
			if err != nil {
				return nil, err
			}
			now := s.clock.Now().UTC()
			sealed := b
			sealed.State, sealed.SealedAt = BlobSealed, &now
			// Sealing counts the blob's bytes (and its record) in the space's usage, under its quota.
			return &onceTx{resourceID: b.BlobID, seqSpace: p.SpaceID, quota: quotas.quota(0, b.SizeBytes), quotas: quotas,
				build: func(uint64) ([]port.Op, any, []port.Published) {
					return []port.Op{
						genCheck(p),
						port.Put(item(keyBlob(p.SpaceID, b.BlobID), sealed, attrState, string(BlobSealed)), port.AttrEquals(attrState, string(BlobPending))),
						port.Delete(keyUploadExpiry(b.ExpiresAt, p.SpaceID, b.UploadID), port.Cond{}),
					}, sealed.info(), nil
				}}, nil
		},
	})
	return decodeResult[BlobInfo](raw, err)
}

// readableBlob returns a blob the principal may read: its owner, or (sealed only) a reader of a message
// or collection that references it. Anything else is NOT_FOUND.
func (s *Service) readableBlob(ctx context.Context, p *Principal, blobID string) (blobRecord, error) {
	notFound := Errorf(CodeNotFound, "no such blob").WithDetails("blob_id", blobID)
	b, _, found, err := getNamed[blobRecord](ctx, s.store, blobID, keyBlob(p.SpaceID, blobID))
	if err != nil {
		return blobRecord{}, err
	}
	if !found {
		return blobRecord{}, notFound
	}
	if b.OwnerID == p.ActorID && (p.HasScope(ScopeBlobRead) || p.HasScope(ScopeBlobWrite)) {
		return b, nil
	}
	if b.State != BlobSealed || !p.HasScope(ScopeBlobRead) {
		return blobRecord{}, notFound
	}
	ok, err := s.referencedForReader(ctx, p, blobID)
	if err != nil {
		return blobRecord{}, err
	}
	if !ok {
		return blobRecord{}, notFound
	}
	return b, nil
}

// referencedForReader reports whether a message visible to p, or a revision of a collection p may read,
// references the blob.
func (s *Service) referencedForReader(ctx context.Context, p *Principal, blobID string) (bool, error) {
	sources := map[string]bool{} // collection → p is its source
	for refs, err := range s.pages(ctx, port.Query{PK: pkBlobRefs(p.SpaceID, blobID), Limit: 100}) {
		if err != nil {
			return false, err
		}
		for _, r := range refs {
			kind, id, _ := strings.Cut(r.SK, "#")
			switch kind {
			case "msg":
				if _, err := s.visibleMessage(ctx, p, id); err == nil {
					return true, nil
				} else if CodeOf(err) != CodeNotFound {
					return false, err
				}
			case "col":
				if ok, err := s.memoryRefReadable(ctx, p, id, sources); err != nil || ok {
					return ok, err
				}
			}
		}
	}
	return false, nil
}

// GetBlob returns a blob's metadata and, when sealed, its authorized download path, or a short-lived
// presigned URL where the blob store offers direct transfer (blob.get).
func (s *Service) GetBlob(ctx context.Context, p *Principal, blobID string) (BlobInfo, error) {
	b, err := s.readableBlob(ctx, p, blobID)
	if err != nil {
		return BlobInfo{}, err
	}
	info := b.info()
	link, ok, err := s.presignDownload(ctx, p.SpaceID, b)
	if err != nil {
		return BlobInfo{}, err
	}
	if ok {
		info.DownloadURL, info.DownloadExpiresAt = link.URL, &link.ExpiresAt
	}
	return info, nil
}

// OpenBlob opens a sealed blob's bytes for a principal allowed to read it.
func (s *Service) OpenBlob(ctx context.Context, p *Principal, blobID string) (io.ReadCloser, BlobInfo, error) {
	b, err := s.readableBlob(ctx, p, blobID)
	if err != nil {
		return nil, BlobInfo{}, err
	}
	if b.State != BlobSealed {
		return nil, BlobInfo{}, Errorf(CodeBlobNotSealed, "the blob is not sealed").WithDetails("blob_id", blobID)
	}
	rc, _, err := s.blobs.Get(ctx, blobObjectKey(p.SpaceID, blobID))
	if err != nil {
		return nil, BlobInfo{}, fmt.Errorf("blob.get: opening object: %w", err)
	}
	return rc, b.info(), nil
}

// referencableBlob checks that p may put a blob into a new message or revision: it must be sealed, and p
// must own it or hold blob.reference for it (RFC §9.2; see referencableBlobs).
func (s *Service) referencableBlob(ctx context.Context, p *Principal, blobID string) (blobRecord, error) {
	bs, err := s.referencableBlobs(ctx, p, []string{blobID})
	if err != nil {
		return blobRecord{}, err
	}
	return bs[0], nil
}

// referencableBlobs checks, in the order of ids, that p may put each blob into a new message or revision:
// it must be sealed, and p must own it or hold a blob.reference grant for it. A blob p may read but not
// re-reference is FORBIDDEN; one it cannot see is NOT_FOUND. The records are read with one GetMany: a
// manifest names up to memory_manifest_changes_max blobs, one round trip per hundred on DynamoDB.
func (s *Service) referencableBlobs(ctx context.Context, p *Principal, ids []string) ([]blobRecord, error) {
	keys := make([]port.Key, len(ids))
	for i, id := range ids {
		keys[i] = keyBlob(p.SpaceID, id)
	}
	bs, found, err := getRecords[blobRecord](ctx, s.store, keys)
	if err != nil {
		return nil, err
	}
	for i, id := range ids {
		if !found[i] {
			return nil, Errorf(CodeNotFound, "no such blob").WithDetails("blob_id", id)
		}
		b := bs[i]
		if b.OwnerID != p.ActorID && !p.hasBlobGrant(id) {
			if _, rerr := s.readableBlob(ctx, p, id); rerr == nil {
				return nil, Errorf(CodeForbidden, "re-referencing a blob needs ownership or a blob.reference grant").WithDetails("blob_id", id)
			}
			return nil, Errorf(CodeNotFound, "no such blob").WithDetails("blob_id", id)
		}
		if b.State != BlobSealed {
			return nil, Errorf(CodeBlobNotSealed, "the blob is not sealed; nothing was published").WithDetails("blob_id", id)
		}
	}
	return bs, nil
}

// SweepUploads expires unsealed uploads whose time passed: it first marks each one expiring under a
// condition on the pending state (so a concurrent seal and the sweep have one winner), then deletes the
// bytes, then marks it expired. It returns how many uploads it expired.
//
// The expiry index is sharded: the sweep works it shard by shard, at most limit entries in all.
func (s *Service) SweepUploads(ctx context.Context, limit int) (int, error) {
	now := s.clock.Now().UTC()
	n, seen := 0, 0
	for _, pk := range indexPartitions(pkUploadExpiry) {
		if seen >= limit {
			break
		}
		due, err := s.store.Query(ctx, port.Query{PK: pk, UpTo: now.Format("20060102T150405.000000000Z") + "#~", Limit: limit - seen}) // "~" sorts after every ID character
		if err != nil {
			return n, fmt.Errorf("sweep: listing expired uploads: %w", err)
		}
		seen += len(due)
		k, err := s.sweepUploads(ctx, due)
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// sweepUploads expires the uploads of due entries of the expiry index and returns how many it expired.
func (s *Service) sweepUploads(ctx context.Context, due []port.Item) (int, error) {
	n := 0
	for _, d := range due {
		parts := strings.SplitN(d.SK, "#", 3)
		if len(parts) != 3 {
			continue
		}
		space := parts[1]
		ptr, err := decodeItem[uploadPointer](d)
		if err != nil {
			return n, err
		}
		b, it, found, err := getRecord[blobRecord](ctx, s.store, keyBlob(space, ptr.BlobID))
		if err != nil {
			return n, err
		}
		if !found || b.State != BlobPending {
			if err := s.commitOps(ctx, []port.Op{port.Delete(d.Key, port.Cond{})}); err != nil {
				return n, fmt.Errorf("sweep: dropping index entry: %w", err)
			}
			continue
		}
		expiring := b
		expiring.State = BlobExpiring
		err = s.commitOps(ctx, []port.Op{
			port.Put(item(it.Key, expiring, attrState, string(BlobExpiring)), port.AttrEquals(attrState, string(BlobPending))),
			port.Delete(d.Key, port.Cond{}),
		})
		if _, lost := port.FailedOp(err); lost {
			continue // sealed concurrently: the seal won
		}
		if err != nil {
			return n, fmt.Errorf("sweep: marking expiring: %w", err)
		}
		if err := s.blobs.Delete(ctx, blobObjectKey(space, b.BlobID)); err != nil {
			return n, fmt.Errorf("sweep: deleting bytes: %w", err)
		}
		expired := expiring
		expired.State = BlobExpired
		if err := s.commitOps(ctx, []port.Op{port.Put(item(it.Key, expired, attrState, string(BlobExpired)), port.AttrEquals(attrState, string(BlobExpiring)))}); err != nil {
			return n, fmt.Errorf("sweep: marking expired: %w", err)
		}
		n++
	}
	return n, nil
}
