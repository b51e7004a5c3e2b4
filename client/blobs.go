package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/internal/verified"
)

// Blobs (RFC §9). A blob is uploaded in three steps, each safe to repeat:
//
//  1. PrepareBlob with a request_id, the size, type and SHA-256 of the content: the service fixes the
//     object key and returns an upload_id and the blob_id the blob will have.
//  2. UploadPrepared streams the bytes to the prepared upload_url: the service's route (PUT
//     /v0/uploads/{upload_id}/content, also UploadContent), or a presigned blob store URL (AWS, direct.go).
//     Repeating it with the same bytes answers already_uploaded; it is not a seal.
//  3. CommitBlob with another request_id seals the blob; only sealed blobs can be referenced.
//
// A client that saves both request IDs and the upload_id before sending can resume after any failure by
// repeating the steps with the same values.

// ErrContentMismatch reports downloaded blob bytes that do not have the size or SHA-256 the service
// announced for them.
var ErrContentMismatch = errors.New("client: downloaded content does not match its size and sha256")

// PrepareBlob reserves an upload (POST /v0/blobs, blob.prepare). req.RequestID must be set; repeating the
// call with the same request returns the same upload_id and blob_id.
func (c *Client) PrepareBlob(ctx context.Context, req domain.BlobPrepareRequest) (domain.BlobPrepareResult, error) {
	return call[domain.BlobPrepareResult](ctx, &c.t, http.MethodPost, "/v0/blobs", nil, req)
}

// UploadContent streams exactly size bytes of body as the content of a prepared upload
// (PUT /v0/uploads/{upload_id}/content) with Content-Length: size and the prepared contentType. The body is
// never buffered whole. The service checks size, type and SHA-256 of the bytes it receives: different
// bytes are CHECKSUM_MISMATCH or INVALID_BLOB, a repeat of stored bytes answers AlreadyUploaded, a PUT
// after the seal UPLOAD_SEALED.
//
// The exchange is not bounded by the client timeout as a whole (a large upload takes as long as it takes):
// it fails when no byte moved for that long, or when ctx ends. A body that ends before size bytes fails the
// exchange without completing the upload. A Read of body that blocks cannot be interrupted (net/http waits
// for it): give a body that returns, such as a file.
func (c *Client) UploadContent(ctx context.Context, uploadID, contentType string, size int64, body io.Reader) (domain.UploadResult, error) {
	if size < 0 {
		return domain.UploadResult{}, fmt.Errorf("client: upload %s: negative size %d", uploadID, size)
	}
	if body == nil {
		body = http.NoBody
	}
	path := "/v0/uploads/" + seg(uploadID) + "/content"
	resp, err := c.t.stream(ctx, rawRequest{method: http.MethodPut, path: path, body: body, size: size,
		contentType: contentType, accept: "application/json"})
	if err != nil {
		return domain.UploadResult{}, err
	}
	defer resp.Body.Close()
	var out domain.UploadResult
	err = c.t.decodeEnvelope(http.MethodPut, path, resp, &out)
	return out, err
}

// CommitBlob seals an uploaded blob (POST /v0/blobs/commit, blob.commit). req.RequestID must be set;
// repeating the call returns the original seal.
func (c *Client) CommitBlob(ctx context.Context, req domain.BlobCommitRequest) (domain.BlobInfo, error) {
	return call[domain.BlobInfo](ctx, &c.t, http.MethodPost, "/v0/blobs/commit", nil, req)
}

// GetBlob returns a blob's metadata (GET /v0/blobs/{blob_id}, blob.get). A blob the principal may not read
// is NOT_FOUND.
func (c *Client) GetBlob(ctx context.Context, blobID string) (domain.BlobInfo, error) {
	return call[domain.BlobInfo](ctx, &c.t, http.MethodGet, "/v0/blobs/"+seg(blobID), nil, nil)
}

// BlobContent is an open download of a sealed blob's bytes. Read verifies as it goes: at the end of the
// content it returns an error wrapping ErrContentMismatch, instead of io.EOF, when the bytes read do not
// have the announced size and SHA-256 (and as soon as more bytes come than announced, without handing them
// out). Close it when done.
type BlobContent struct {
	// SizeBytes is the announced size (Content-Length).
	SizeBytes int64
	// SHA256 is the announced digest (ETag), lowercase hex.
	SHA256 string
	// ContentType is the blob's media type.
	ContentType string

	body    io.ReadCloser
	content *verified.Reader
}

// Read reads the content, verifying size and SHA-256 at its end.
func (b *BlobContent) Read(p []byte) (int, error) {
	n, err := b.content.Read(p)
	if err == nil || err == io.EOF {
		return n, err
	}
	if m, ok := errors.AsType[*verified.Mismatch](err); ok {
		return n, fmt.Errorf("%w: %w", ErrContentMismatch, m)
	}
	return n, fmt.Errorf("client: reading blob content: %w", err)
}

// Close releases the download.
func (b *BlobContent) Close() error { return b.body.Close() }

// OpenBlobContent opens a sealed blob's bytes for streaming (GET /v0/blobs/{blob_id}/content). The
// download is bounded by the client timeout only between two reads (no progress), and by ctx.
func (c *Client) OpenBlobContent(ctx context.Context, blobID string) (*BlobContent, error) {
	path := "/v0/blobs/" + seg(blobID) + "/content"
	resp, err := c.t.stream(ctx, rawRequest{method: http.MethodGet, path: path, accept: "*/*"})
	if err != nil {
		return nil, err
	}
	etag := strings.Trim(resp.Header.Get("ETag"), `"`)
	size := resp.ContentLength
	if size < 0 || len(etag) != 64 {
		resp.Body.Close()
		return nil, &TransportError{Method: http.MethodGet, Path: path, HTTPStatus: resp.StatusCode,
			Err: errors.New("blob content response without Content-Length and a SHA-256 ETag")}
	}
	return &BlobContent{SizeBytes: size, SHA256: etag, ContentType: resp.Header.Get("Content-Type"), body: resp.Body,
		content: verified.NewReader(resp.Body, size, etag)}, nil
}
