package port

import (
	"context"
	"errors"
	"io"
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
