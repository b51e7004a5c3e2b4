// Package s3blob is the port.BlobStore on Amazon S3 (or an S3-compatible server): create-only objects whose
// size and SHA-256 the server verifies on the bytes it actually receives, streamed without buffering.
//
// # Put
//
// Put sends one PutObject with
//
//   - If-None-Match: * — the server stores the object only if the key is free, so an object is never
//     overwritten and of concurrent puts exactly one wins; a loser's 412 Precondition Failed is answered
//     with HeadObject and the stored object's BlobInfo together with port.ErrBlobExists;
//   - Content-Length set to the declared size and the reader wrapped so that it delivers exactly that many
//     bytes: a short reader, or one with bytes left over, makes the request body end early, so the server
//     stores nothing, and Put reports port.ErrBlobSize;
//   - x-amz-checksum-sha256 (ChecksumSHA256, base64 of the declared digest) and, as the SigV4 payload hash,
//     the declared hex digest itself: the server hashes what it receives and refuses a mismatch
//     (BadDigest / XAmzContentSHA256Mismatch → port.ErrBlobChecksum) without storing anything. Because the
//     payload hash is known in advance the SDK neither reads the body twice nor buffers it, over HTTP and
//     HTTPS alike; memory stays flat whatever the size;
//   - the hex digest as user metadata (x-amz-meta-sha256), so Head and Get return it without computing it.
//
// # Head, Get, Delete
//
// Head is HeadObject with ChecksumMode ENABLED; the digest comes from the metadata or, for objects this
// store did not write, the stored SHA-256 checksum. Get streams GetObject's body through a reader that hashes
// and counts it and fails with port.ErrBlobChecksum or port.ErrBlobSize at the end if the bytes are not the
// ones recorded. Delete is DeleteObject (idempotent).
//
// # Object names
//
// Keys follow fsblob.ValidateKey ([A-Za-z0-9_./-], non-empty segments), so that every blob adapter accepts
// the same keys. The object name is Options.Prefix + key + "~": "~" never occurs in a key, so no object name
// is a "directory" of another. S3 does not care, but file-system-backed S3 servers (versitygw's posix
// backend, used by the tests) cannot store both "a" and "a/b"; with the suffix they store "a~" and "a/b~".
package s3blob

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"

	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/internal/verified"
	"github.com/waypost/waypost/store/fsblob"
)

// NameSuffix ends every object name (see the package documentation).
const NameSuffix = "~"

// MetaSHA256 is the user-metadata key holding the object's lowercase hex SHA-256 (x-amz-meta-sha256).
const MetaSHA256 = "sha256"

// ErrInvalidArgument reports a negative size or a digest that is not 64 lowercase hex digits.
var ErrInvalidArgument = errors.New("invalid blob argument")

// ErrCorrupt reports a stored object whose recorded digest is missing or inconsistent.
var ErrCorrupt = errors.New("corrupt blob object")

// API is the part of the S3 client the store uses; *s3.Client implements it.
type API interface {
	PutObject(ctx context.Context, in *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error)
	HeadObject(ctx context.Context, in *s3.HeadObjectInput, optFns ...func(*s3.Options)) (*s3.HeadObjectOutput, error)
	GetObject(ctx context.Context, in *s3.GetObjectInput, optFns ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	DeleteObject(ctx context.Context, in *s3.DeleteObjectInput, optFns ...func(*s3.Options)) (*s3.DeleteObjectOutput, error)
}

// Options tune a Store.
type Options struct {
	// Prefix is prepended to every key ("" for none); it should end with "/".
	Prefix string
	// Presign signs the presigned requests (presign.go); nil means a presign client of the store's client
	// when that is an *s3.Client, and none (ErrPresignUnavailable) otherwise.
	Presign *s3.PresignClient
}

// Store is a port.BlobStore on one S3 bucket. It is safe for concurrent use.
type Store struct {
	api     API
	presign *s3.PresignClient
	bucket  string
	prefix  string
}

var _ port.BlobStore = (*Store)(nil)

// New returns a store on bucket, which must exist.
func New(api API, bucket string, opts Options) (*Store, error) {
	if api == nil {
		return nil, errors.New("s3blob: nil client")
	}
	if bucket == "" {
		return nil, errors.New("s3blob: empty bucket name")
	}
	st := &Store{api: api, bucket: bucket, prefix: opts.Prefix, presign: opts.Presign}
	if c, ok := api.(*s3.Client); ok && st.presign == nil {
		st.presign = s3.NewPresignClient(c)
	}
	return st, nil
}

// ClientOptions returns the S3 client options for endpoint: none for real S3 (endpoint ""), and for an
// emulator its base URL with path-style addressing.
func ClientOptions(endpoint string) func(*s3.Options) {
	return func(o *s3.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
			o.UsePathStyle = true
		}
	}
}

// Bucket returns the bucket name.
func (s *Store) Bucket() string { return s.bucket }

func (s *Store) objectKey(key string) (*string, error) {
	if err := fsblob.ValidateKey(key); err != nil {
		return nil, err
	}
	return aws.String(s.prefix + key + NameSuffix), nil
}

// Put stores size bytes hashing to sha256hex under key, create-only (see the package documentation).
func (s *Store) Put(ctx context.Context, key string, size int64, sha256hex string, r io.Reader) (port.BlobInfo, error) {
	k, err := s.objectKey(key)
	if err != nil {
		return port.BlobInfo{}, fmt.Errorf("s3blob: put: %w", err)
	}
	raw, err := hex.DecodeString(sha256hex)
	if size < 0 || err != nil || len(raw) != sha256.Size || strings.ToLower(sha256hex) != sha256hex {
		return port.BlobInfo{}, fmt.Errorf("s3blob: put %s: %w: size %d, sha256 %q", key, ErrInvalidArgument, size, sha256hex)
	}
	if err := ctx.Err(); err != nil {
		return port.BlobInfo{}, fmt.Errorf("s3blob: put %s: %w", key, err)
	}
	body := &exactReader{r: r, left: size}
	if size == 0 {
		// No body is sent at all: look for stray bytes here, and check the digest of nothing.
		if _, err := body.Read(nil); err != nil && err != io.EOF {
			return port.BlobInfo{}, body.fail(key)
		}
		if sha256hex != emptySHA256 {
			return port.BlobInfo{}, fmt.Errorf("s3blob: put %s: empty body, want sha256 %s: %w", key, sha256hex, port.ErrBlobChecksum)
		}
	}
	in := &s3.PutObjectInput{
		Bucket:         aws.String(s.bucket),
		Key:            k,
		Body:           body,
		ContentLength:  aws.Int64(size),
		ContentType:    aws.String("application/octet-stream"),
		ChecksumSHA256: aws.String(base64.StdEncoding.EncodeToString(raw)),
		IfNoneMatch:    aws.String("*"),
		Metadata:       map[string]string{MetaSHA256: sha256hex},
	}
	_, err = s.api.PutObject(ctx, in, withPayloadHash(sha256hex))
	if err == nil {
		if body.left != 0 || body.err != io.EOF {
			// The server accepted fewer bytes than were declared; that cannot be with a Content-Length.
			return port.BlobInfo{}, fmt.Errorf("s3blob: put %s: server accepted a short body: %w", key, port.ErrBlobSize)
		}
		return port.BlobInfo{Size: size, SHA256: sha256hex}, nil
	}
	if body.err != nil && body.err != io.EOF {
		return port.BlobInfo{}, body.fail(key)
	}
	if cerr := ctx.Err(); cerr != nil {
		return port.BlobInfo{}, fmt.Errorf("s3blob: put %s: %w (%w)", key, cerr, err)
	}
	switch code := errorCode(err); code {
	case "PreconditionFailed", "ConditionalRequestConflict":
		// The key is taken (412), or a concurrent conditional write is in progress (409): report the stored
		// object. A conflict whose winner has not finished yet is transient.
		info, herr := s.headAfterConflict(ctx, *k, code == "ConditionalRequestConflict")
		if herr != nil {
			return port.BlobInfo{}, fmt.Errorf("s3blob: put %s: %s, then head: %w", key, code, herr)
		}
		return info, fmt.Errorf("s3blob: put %s: %w", key, port.ErrBlobExists)
	case "BadDigest", "XAmzContentSHA256Mismatch", "InvalidDigest":
		return port.BlobInfo{}, fmt.Errorf("s3blob: put %s: %w: %w", key, port.ErrBlobChecksum, err)
	case "IncompleteBody":
		return port.BlobInfo{}, fmt.Errorf("s3blob: put %s: %w: %w", key, port.ErrBlobSize, err)
	}
	return port.BlobInfo{}, fmt.Errorf("s3blob: put %s: %w", key, classify(err))
}

func (s *Store) headAfterConflict(ctx context.Context, k string, inProgress bool) (port.BlobInfo, error) {
	tries := 1
	if inProgress {
		tries = 5
	}
	for i := 0; ; i++ {
		info, err := s.head(ctx, k)
		if err == nil || !errors.Is(err, port.ErrBlobNotFound) || i+1 >= tries {
			if errors.Is(err, port.ErrBlobNotFound) {
				// Refused as taken, yet absent: deleted meanwhile, or the winner is still writing.
				return info, fmt.Errorf("%w: key refused as taken but absent: %w", port.ErrUnavailable, err)
			}
			return info, err
		}
		select {
		case <-ctx.Done():
			return port.BlobInfo{}, ctx.Err()
		case <-time.After(time.Duration(50<<i) * time.Millisecond):
		}
	}
}

// Head returns the size and digest of a stored object.
func (s *Store) Head(ctx context.Context, key string) (port.BlobInfo, error) {
	k, err := s.objectKey(key)
	if err != nil {
		return port.BlobInfo{}, fmt.Errorf("s3blob: head: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return port.BlobInfo{}, fmt.Errorf("s3blob: head %s: %w", key, err)
	}
	info, err := s.head(ctx, *k)
	if err != nil {
		return port.BlobInfo{}, fmt.Errorf("s3blob: head %s: %w", key, err)
	}
	return info, nil
}

func (s *Store) head(ctx context.Context, k string) (port.BlobInfo, error) {
	out, err := s.api.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(k), ChecksumMode: types.ChecksumModeEnabled})
	if err != nil {
		if notFound(err) {
			return port.BlobInfo{}, port.ErrBlobNotFound
		}
		return port.BlobInfo{}, classify(err)
	}
	return infoOf(aws.ToInt64(out.ContentLength), out.Metadata, out.ChecksumSHA256)
}

// infoOf builds BlobInfo from the metadata digest, checked against the stored checksum when there is one.
func infoOf(size int64, meta map[string]string, checksum *string) (port.BlobInfo, error) {
	info := port.BlobInfo{Size: size, SHA256: metaSHA(meta)}
	var fromChecksum string
	if c := aws.ToString(checksum); c != "" && !strings.Contains(c, "-") { // "-N" marks a multipart composite
		if raw, err := base64.StdEncoding.DecodeString(c); err == nil && len(raw) == sha256.Size {
			fromChecksum = hex.EncodeToString(raw)
		}
	}
	switch {
	case info.SHA256 == "" && fromChecksum == "":
		return port.BlobInfo{}, fmt.Errorf("%w: no SHA-256 recorded", ErrCorrupt)
	case info.SHA256 == "":
		info.SHA256 = fromChecksum
	case fromChecksum != "" && fromChecksum != info.SHA256:
		return port.BlobInfo{}, fmt.Errorf("%w: metadata sha256 %s, stored checksum %s", ErrCorrupt, info.SHA256, fromChecksum)
	}
	return info, nil
}

func metaSHA(meta map[string]string) string {
	for k, v := range meta { // header case varies between servers
		if strings.EqualFold(k, MetaSHA256) {
			return v
		}
	}
	return ""
}

// Get opens a stored object. The reader fails with port.ErrBlobChecksum or port.ErrBlobSize at the end if
// the bytes read do not match the recorded size and digest.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, port.BlobInfo, error) {
	k, err := s.objectKey(key)
	if err != nil {
		return nil, port.BlobInfo{}, fmt.Errorf("s3blob: get: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, port.BlobInfo{}, fmt.Errorf("s3blob: get %s: %w", key, err)
	}
	out, err := s.api.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: k})
	if err != nil {
		if notFound(err) {
			return nil, port.BlobInfo{}, fmt.Errorf("s3blob: get %s: %w", key, port.ErrBlobNotFound)
		}
		return nil, port.BlobInfo{}, fmt.Errorf("s3blob: get %s: %w", key, classify(err))
	}
	info := port.BlobInfo{Size: aws.ToInt64(out.ContentLength), SHA256: metaSHA(out.Metadata)}
	if info.SHA256 == "" {
		// Not written by this store: the stored checksum has the digest.
		if info, err = s.head(ctx, *k); err != nil {
			out.Body.Close()
			return nil, port.BlobInfo{}, fmt.Errorf("s3blob: get %s: %w", key, err)
		}
	}
	return &verifyingReader{rc: out.Body, content: verified.NewReader(out.Body, info.Size, info.SHA256), key: key}, info, nil
}

// Delete removes an object; an absent object is not an error.
func (s *Store) Delete(ctx context.Context, key string) error {
	k, err := s.objectKey(key)
	if err != nil {
		return fmt.Errorf("s3blob: delete: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("s3blob: delete %s: %w", key, err)
	}
	if _, err := s.api.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.bucket), Key: k}); err != nil && !notFound(err) {
		return fmt.Errorf("s3blob: delete %s: %w", key, classify(err))
	}
	return nil
}

const emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// withPayloadHash makes the SDK sign the request with the declared digest as the payload hash instead of
// reading the body to compute it (which needs a seekable body over HTTP) or sending UNSIGNED-PAYLOAD.
func withPayloadHash(hexDigest string) func(*s3.Options) {
	return func(o *s3.Options) {
		o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
			return stack.Finalize.Add(middleware.FinalizeMiddlewareFunc("WaypostDeclaredPayloadHash",
				func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
					return next.HandleFinalize(v4.SetPayloadHash(ctx, hexDigest), in)
				}), middleware.Before)
		})
	}
}

func errorCode(err error) string {
	var api smithy.APIError
	if errors.As(err, &api) {
		return api.ErrorCode()
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		switch re.HTTPStatusCode() {
		case http.StatusPreconditionFailed:
			return "PreconditionFailed"
		case http.StatusConflict:
			return "ConditionalRequestConflict"
		}
	}
	return ""
}

func notFound(err error) bool {
	var nf *types.NotFound
	var nsk *types.NoSuchKey
	if errors.As(err, &nf) || errors.As(err, &nsk) {
		return true
	}
	switch errorCode(err) {
	case "NotFound", "NoSuchKey":
		return true
	}
	var re *awshttp.ResponseError
	return errors.As(err, &re) && re.HTTPStatusCode() == http.StatusNotFound
}

// classify wraps port.ErrUnavailable around throttling, server and transport failures.
func classify(err error) error {
	switch errorCode(err) {
	case "SlowDown", "ServiceUnavailable", "InternalError", "RequestTimeout", "RequestTimeTooSkewed":
		return fmt.Errorf("%w: %w", port.ErrUnavailable, err)
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		if re.HTTPStatusCode() >= 500 || re.HTTPStatusCode() == http.StatusTooManyRequests {
			return fmt.Errorf("%w: %w", port.ErrUnavailable, err)
		}
		return err
	}
	var api smithy.APIError
	var hashErr *v4.HashComputationError
	var signErr *v4.SigningError
	if errors.As(err, &api) || errors.As(err, &hashErr) || errors.As(err, &signErr) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var oe *smithy.OperationError
	if errors.As(err, &oe) { // no response: connection refused, reset
		return fmt.Errorf("%w: %w", port.ErrUnavailable, err)
	}
	return err
}

// Errors exactReader ends a body with; the server then never sees a complete body.
var (
	errShortBody = errors.New("body shorter than declared")
	errLongBody  = errors.New("body longer than declared")
)

// exactReader delivers exactly left bytes of r. It fails (so the HTTP request is aborted before its last
// byte) when r ends early, when r has bytes beyond left — it looks one byte ahead before handing over the
// final bytes — or when r fails.
type exactReader struct {
	r    io.Reader
	left int64
	err  error // sticky: errShortBody, errLongBody, r's error, or io.EOF after a clean end
}

func (e *exactReader) Read(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	if e.left == 0 { // an empty body
		e.err = e.end()
		return 0, e.err
	}
	if int64(len(p)) > e.left {
		p = p[:e.left]
	}
	n, err := e.r.Read(p)
	e.left -= int64(n)
	if e.left == 0 {
		// Look ahead before giving out the last bytes: a longer body must not reach the server whole.
		if e.err = e.end(); e.err != io.EOF {
			return 0, e.err
		}
		return n, io.EOF
	}
	switch {
	case err == io.EOF:
		e.err = errShortBody
		return 0, e.err
	case err != nil:
		e.err = err
		return 0, err
	}
	return n, nil
}

// end looks one byte ahead once all declared bytes were read: io.EOF when r ends there, errLongBody when it
// has more, or r's error.
func (e *exactReader) end() error {
	var one [1]byte
	n, err := io.ReadFull(e.r, one[:])
	switch {
	case n > 0:
		return errLongBody
	case err == io.EOF:
		return io.EOF
	}
	return err
}

// fail turns the reader's failure into Put's error.
func (e *exactReader) fail(key string) error {
	switch e.err {
	case errShortBody, errLongBody:
		return fmt.Errorf("s3blob: put %s: %w: %w", key, port.ErrBlobSize, e.err)
	}
	return fmt.Errorf("s3blob: put %s: reading body: %w", key, e.err)
}

// verifyingReader checks what Get reads against the object's recorded size and digest (verified.Reader).
type verifyingReader struct {
	rc      io.ReadCloser
	content *verified.Reader
	key     string
}

func (v *verifyingReader) Read(p []byte) (int, error) {
	n, err := v.content.Read(p)
	if err == nil || err == io.EOF {
		return n, err
	}
	if m, ok := errors.AsType[*verified.Mismatch](err); ok {
		sentinel := port.ErrBlobSize
		if m.Digest() {
			sentinel = port.ErrBlobChecksum
		}
		return n, fmt.Errorf("s3blob: get %s: %w: %w", v.key, m, sentinel)
	}
	return n, fmt.Errorf("s3blob: get %s: %w", v.key, classify(err))
}

func (v *verifyingReader) Close() error { return v.rc.Close() }
