package port

import (
	"context"
	"errors"
	"io"
	"time"
)

// BlobInfo describes a stored object.
type BlobInfo struct {
	Size   int64
	SHA256 string // lowercase hex
}

// ErrBlobExists reports that a create-only put found an object already stored at the key. The error is
// returned together with the existing object's BlobInfo so callers can compare it with what they meant to
// store (RFC §9.2).
var ErrBlobExists = errors.New("blob already exists")

// ErrBlobNotFound reports an absent object.
var ErrBlobNotFound = errors.New("blob not found")

// ErrBlobChecksum reports that the bytes received did not hash to the expected SHA-256; nothing is stored.
var ErrBlobChecksum = errors.New("blob checksum mismatch")

// ErrBlobSize reports that the bytes received were not of the expected size; nothing is stored.
var ErrBlobSize = errors.New("blob size mismatch")

// BlobStore is the create-only, checksum-verified object store port.
type BlobStore interface {
	// Put streams r to key, verifying that exactly size bytes hashing to sha256 (lowercase hex) arrive.
	// It never overwrites: if an object exists, it returns its info and an error wrapping ErrBlobExists.
	Put(ctx context.Context, key string, size int64, sha256 string, r io.Reader) (BlobInfo, error)
	// Head returns the info of a stored object, or ErrBlobNotFound.
	Head(ctx context.Context, key string) (BlobInfo, error)
	// Get opens a stored object for reading, or returns ErrBlobNotFound.
	Get(ctx context.Context, key string) (io.ReadCloser, BlobInfo, error)
	// Delete removes an object; deleting an absent object is not an error.
	Delete(ctx context.Context, key string) error
}

// PresignedRequest is an HTTP request a client may make straight to the blob store, without the service's
// credentials: the URL carries a signature over the method, the object and the headers, so the request works
// only as described here and only until ExpiresAt.
type PresignedRequest struct {
	// Method is the HTTP method (PUT or GET).
	Method string
	// URL is absolute and carries the signature.
	URL string
	// Headers must be sent exactly as given (they are signed); for a PUT they fix the length, the SHA-256
	// and the media type of the body and make the write create-only.
	Headers map[string]string
	// ExpiresAt is when the store stops accepting the request.
	ExpiresAt time.Time
}

// ErrPresignExpiry reports a presigned request asked for with an expiry that is not in the store's future.
var ErrPresignExpiry = errors.New("presign expiry is not in the future")

// BlobPresigner is a capability a BlobStore may offer besides the port: signed requests that move bytes
// between a client and the store directly, so that the service never carries them. A store that offers it
// must make a presigned PUT create-only (never overwriting an object), bound to the declared size and
// SHA-256 (the store itself refuses other bytes) and to the one key, and must make the SHA-256 it verified
// visible to Head. The domain decides when to use it; stores without it (the embedded file store) keep
// every byte on the service's own routes.
type BlobPresigner interface {
	// PresignPut returns a PUT that stores exactly size bytes hashing to sha256 (lowercase hex) of media
	// type contentType at key, only while no object exists there, until expires.
	PresignPut(ctx context.Context, key string, size int64, sha256, contentType string, expires time.Time) (PresignedRequest, error)
	// PresignGet returns a GET of the object at key until expires, answered with contentType and as an
	// attachment named filename ("" names none).
	PresignGet(ctx context.Context, key, contentType, filename string, expires time.Time) (PresignedRequest, error)
}

// BlobStreamer is a capability a BlobStore may offer besides the port: storing bytes whose length and
// digest are not known in advance (a generated export), streamed with bounded memory. Such objects are
// not blobs: they are never sealed or referenced, and the store's own retention removes them.
type BlobStreamer interface {
	// PutStream stores what r yields under key, create-only, and returns its size.
	PutStream(ctx context.Context, key, contentType string, r io.Reader) (int64, error)
}
