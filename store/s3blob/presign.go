package s3blob

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/waypost/waypost/domain/port"
)

// Presigned requests (port.BlobPresigner) and streamed puts (port.BlobStreamer).
//
// # Presigned PUT
//
// PresignPut signs a PutObject (SigV4, query-string authentication) whose signed headers are
//
//   - Content-Length: the declared size (S3 checks the signature against the length actually sent, so
//     another length is refused with 403 SignatureDoesNotMatch; a zero-byte blob signs no length, and its
//     checksum is that of nothing, so any byte sent is refused as BadDigest);
//   - x-amz-checksum-sha256: the declared digest; S3 hashes what it receives and refuses a mismatch with
//     400 BadDigest, storing nothing, and keeps the digest as the object's checksum, which HeadObject
//     returns with checksum mode enabled (Head reads it there: a presigned upload carries no metadata);
//   - If-None-Match: *: S3 stores the object only while the key is free (412 PreconditionFailed otherwise),
//     so the URL writes the key at most once and never overwrites anything;
//   - Content-Type: the prepared media type.
//
// The URL names one object key and expires at the given time (X-Amz-Expires, at most 7 days). A URL signed
// with temporary credentials (a Lambda role's) stops working when those credentials expire, whichever comes
// first; the Lambda runtime's credentials outlive an upload's hour.
//
// # Presigned GET
//
// PresignGet signs a GetObject with response-content-type and response-content-disposition overrides, so
// the bytes are served with the blob's media type as an attachment, and no-store caching.
//
// # PutStream
//
// PutStream stores a stream of unknown length with one buffer of PartSize bytes at a time: a body that fits
// in one part is one create-only PutObject; a longer one is a multipart upload (each part with its SHA-256
// checksum, completed with If-None-Match: *, aborted on any failure).

// PartSize is the part size of PutStream's multipart uploads (S3's minimum part is 5 MiB; at most 10,000
// parts make an object of at most 80 GiB).
const PartSize = 8 << 20

// maxPresignExpiry is the longest X-Amz-Expires SigV4 accepts.
const maxPresignExpiry = 7 * 24 * time.Hour

// ErrPresignUnavailable reports a store that cannot presign (its client is not an *s3.Client and
// Options.Presign is nil).
var ErrPresignUnavailable = errors.New("s3blob: presigning unavailable")

// multipartAPI is the part of the S3 client PutStream uses for bodies longer than one part.
type multipartAPI interface {
	CreateMultipartUpload(ctx context.Context, in *s3.CreateMultipartUploadInput, optFns ...func(*s3.Options)) (*s3.CreateMultipartUploadOutput, error)
	UploadPart(ctx context.Context, in *s3.UploadPartInput, optFns ...func(*s3.Options)) (*s3.UploadPartOutput, error)
	CompleteMultipartUpload(ctx context.Context, in *s3.CompleteMultipartUploadInput, optFns ...func(*s3.Options)) (*s3.CompleteMultipartUploadOutput, error)
	AbortMultipartUpload(ctx context.Context, in *s3.AbortMultipartUploadInput, optFns ...func(*s3.Options)) (*s3.AbortMultipartUploadOutput, error)
}

var (
	_ port.BlobPresigner = (*Store)(nil)
	_ port.BlobStreamer  = (*Store)(nil)
)

func (s *Store) presignExpiry(expires time.Time) (time.Duration, error) {
	if s.presign == nil {
		return 0, ErrPresignUnavailable
	}
	d := time.Until(expires).Truncate(time.Second)
	if d < time.Second {
		return 0, fmt.Errorf("s3blob: presign: expiry %s: %w", expires.UTC().Format(time.RFC3339), port.ErrPresignExpiry)
	}
	return min(d, maxPresignExpiry), nil
}

// PresignPut returns a create-only PUT of exactly size bytes hashing to sha256hex at key (see above).
func (s *Store) PresignPut(ctx context.Context, key string, size int64, sha256hex, contentType string, expires time.Time) (port.PresignedRequest, error) {
	k, err := s.objectKey(key)
	if err != nil {
		return port.PresignedRequest{}, fmt.Errorf("s3blob: presign put: %w", err)
	}
	raw, err := hex.DecodeString(sha256hex)
	if size < 0 || err != nil || len(raw) != sha256.Size || strings.ToLower(sha256hex) != sha256hex || contentType == "" {
		return port.PresignedRequest{}, fmt.Errorf("s3blob: presign put %s: %w: size %d, sha256 %q, content type %q", key, ErrInvalidArgument, size, sha256hex, contentType)
	}
	ttl, err := s.presignExpiry(expires)
	if err != nil {
		return port.PresignedRequest{}, err
	}
	in := &s3.PutObjectInput{
		Bucket:         aws.String(s.bucket),
		Key:            k,
		ContentType:    aws.String(contentType),
		ChecksumSHA256: aws.String(base64.StdEncoding.EncodeToString(raw)),
		IfNoneMatch:    aws.String("*"),
	}
	if size > 0 {
		in.ContentLength = aws.Int64(size)
	}
	out, err := s.presign.PresignPutObject(ctx, in, s3.WithPresignExpires(ttl))
	if err != nil {
		return port.PresignedRequest{}, fmt.Errorf("s3blob: presign put %s: %w", key, err)
	}
	req := port.PresignedRequest{Method: out.Method, URL: out.URL, Headers: signedHeaders(out.SignedHeader), ExpiresAt: time.Now().Add(ttl).UTC().Truncate(time.Second)}
	req.Headers["Content-Length"] = strconv.FormatInt(size, 10)
	return req, nil
}

// PresignGet returns a GET of the object at key served as contentType, an attachment named filename.
func (s *Store) PresignGet(ctx context.Context, key, contentType, filename string, expires time.Time) (port.PresignedRequest, error) {
	k, err := s.objectKey(key)
	if err != nil {
		return port.PresignedRequest{}, fmt.Errorf("s3blob: presign get: %w", err)
	}
	ttl, err := s.presignExpiry(expires)
	if err != nil {
		return port.PresignedRequest{}, err
	}
	disposition := "attachment"
	if filename != "" {
		if d := mime.FormatMediaType("attachment", map[string]string{"filename": filename}); d != "" {
			disposition = d
		}
	}
	in := &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: k, ResponseContentDisposition: aws.String(disposition),
		ResponseCacheControl: aws.String("private, no-store")}
	if contentType != "" {
		in.ResponseContentType = aws.String(contentType)
	}
	out, err := s.presign.PresignGetObject(ctx, in, s3.WithPresignExpires(ttl))
	if err != nil {
		return port.PresignedRequest{}, fmt.Errorf("s3blob: presign get %s: %w", key, err)
	}
	return port.PresignedRequest{Method: out.Method, URL: out.URL, Headers: signedHeaders(out.SignedHeader),
		ExpiresAt: time.Now().Add(ttl).UTC().Truncate(time.Second)}, nil
}

// signedHeaders lists the headers a presigned request must carry, without Host (the URL's).
func signedHeaders(h http.Header) map[string]string {
	out := map[string]string{}
	for k, v := range h {
		if strings.EqualFold(k, "Host") || len(v) == 0 {
			continue
		}
		out[http.CanonicalHeaderKey(k)] = strings.Join(v, ",")
	}
	return out
}

// PutStream stores r under key, create-only, with one part of memory at a time (see above).
func (s *Store) PutStream(ctx context.Context, key, contentType string, r io.Reader) (int64, error) {
	k, err := s.objectKey(key)
	if err != nil {
		return 0, fmt.Errorf("s3blob: put stream: %w", err)
	}
	buf := make([]byte, PartSize)
	n, err := io.ReadFull(r, buf)
	switch {
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		sum := sha256.Sum256(buf[:n])
		if _, err := s.Put(ctx, key, int64(n), hex.EncodeToString(sum[:]), bytes.NewReader(buf[:n])); err != nil {
			return 0, err
		}
		return int64(n), nil
	case err != nil:
		return 0, fmt.Errorf("s3blob: put stream %s: reading: %w", key, err)
	}
	mp, ok := s.api.(multipartAPI)
	if !ok {
		return 0, fmt.Errorf("s3blob: put stream %s: the client has no multipart upload", key)
	}
	created, err := mp.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(s.bucket), Key: k,
		ContentType: aws.String(contentType), ChecksumAlgorithm: types.ChecksumAlgorithmSha256})
	if err != nil {
		return 0, fmt.Errorf("s3blob: put stream %s: %w", key, classify(err))
	}
	var parts []types.CompletedPart
	var total int64
	fail := func(err error) (int64, error) {
		// Best effort: the bucket's lifecycle rule aborts what is left behind after a day.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_, _ = mp.AbortMultipartUpload(actx, &s3.AbortMultipartUploadInput{Bucket: aws.String(s.bucket), Key: k, UploadId: created.UploadId})
		return 0, err
	}
	for part := int32(1); n > 0; part++ {
		sum := sha256.Sum256(buf[:n])
		checksum := base64.StdEncoding.EncodeToString(sum[:])
		out, err := mp.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(s.bucket), Key: k, UploadId: created.UploadId,
			PartNumber: aws.Int32(part), Body: bytes.NewReader(buf[:n]), ContentLength: aws.Int64(int64(n)), ChecksumSHA256: aws.String(checksum)},
			withPayloadHash(hex.EncodeToString(sum[:])))
		if err != nil {
			return fail(fmt.Errorf("s3blob: put stream %s: part %d: %w", key, part, classify(err)))
		}
		parts = append(parts, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(part), ChecksumSHA256: aws.String(checksum)})
		total += int64(n)
		n, err = io.ReadFull(r, buf)
		if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
			return fail(fmt.Errorf("s3blob: put stream %s: reading: %w", key, err))
		}
	}
	_, err = mp.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String(s.bucket), Key: k, UploadId: created.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}, IfNoneMatch: aws.String("*")})
	if err != nil {
		if code := errorCode(err); code == "PreconditionFailed" || code == "ConditionalRequestConflict" {
			return fail(fmt.Errorf("s3blob: put stream %s: %w", key, port.ErrBlobExists))
		}
		return fail(fmt.Errorf("s3blob: put stream %s: completing: %w", key, classify(err)))
	}
	return total, nil
}
