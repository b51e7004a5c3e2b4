package client

import (
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/waypost/waypost/domain"
)

// Direct transfer to the blob store. Where a deployment moves bytes directly between clients and its
// blob store (AWS), blob.prepare answers a presigned upload_url of the store, and the content and ZIP export
// downloads answer a redirect to a presigned GET. The client follows upload_url whatever it points at
// (UploadPrepared), and follows such redirects itself, never sending the bearer credential outside the
// service. The store's refusals are reported with the error codes the service's own upload route uses, so
// callers handle both paths alike:
//
//   - 400 BadDigest (the bytes do not hash to the declared SHA-256) → CHECKSUM_MISMATCH;
//   - 403 with an expired request → UPLOAD_EXPIRED;
//   - 403 SignatureDoesNotMatch (another length or other headers than the signed ones), IncompleteBody →
//     INVALID_BLOB;
//   - 5xx, SlowDown → STORAGE_UNAVAILABLE (retryable);
//   - 412 PreconditionFailed (the key already holds an object: the URL is create-only, and S3 accepted
//     that object only with the declared size and SHA-256) is not an error: UploadResult.AlreadyUploaded.

// UploadPrepared uploads exactly size bytes of body as the content of the prepared upload prep, to
// prep.UploadURL with prep.UploadHeaders: the service's upload route (with the bearer credential, as
// UploadContent), or a presigned blob store URL (without it). The result is not a seal: call CommitBlob.
// The exchange is bounded like UploadContent's.
func (c *Client) UploadPrepared(ctx context.Context, prep domain.BlobPrepareResult, size int64, body io.Reader) (domain.UploadResult, error) {
	contentType := prep.UploadHeaders["Content-Type"]
	target, direct := c.t.external(prep.UploadURL)
	if !direct {
		return c.UploadContent(ctx, prep.UploadID, contentType, size, body)
	}
	if size < 0 {
		return domain.UploadResult{}, fmt.Errorf("client: upload %s: negative size %d", prep.UploadID, size)
	}
	if body == nil {
		body = http.NoBody
	}
	headers := map[string]string{}
	for k, v := range prep.UploadHeaders {
		if strings.EqualFold(k, "Content-Length") {
			if v != strconv.FormatInt(size, 10) {
				return domain.UploadResult{}, fmt.Errorf("client: upload %s: %d bytes given, the upload is signed for %s", prep.UploadID, size, v)
			}
			continue // net/http sends the request's ContentLength
		}
		headers[k] = v
	}
	if size > 0 {
		// The store may refuse before reading the body (412 when the key is taken, 403 when expired): it
		// then says so without the whole body crossing the network first.
		headers["Expect"] = "100-continue"
	}
	method := prep.UploadMethod
	if method == "" {
		method = http.MethodPut
	}
	resp, err := c.t.stream(ctx, rawRequest{method: method, path: redactURL(target), target: target.String(), headers: headers,
		body: body, size: size, accept: "*/*"})
	res := domain.UploadResult{UploadID: prep.UploadID, BlobID: prep.BlobID, SizeBytes: prep.SizeBytes, SHA256: prep.SHA256}
	if e, ok := err.(*Error); ok && e.HTTPStatus == http.StatusPreconditionFailed {
		res.AlreadyUploaded = true
		return res, nil
	}
	if err != nil {
		return domain.UploadResult{}, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
	return res, nil
}

// external reports whether raw is an absolute URL outside the service (another scheme, host or path
// prefix than the base URL), and returns it parsed.
func (t *transport) external(raw string) (*url.URL, bool) {
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() {
		return nil, false
	}
	if raw == t.base || strings.HasPrefix(raw, t.base+"/") {
		return nil, false
	}
	return u, true
}

// redactURL names a presigned URL in errors and logs without its query, which holds the signature.
func redactURL(u *url.URL) string { return u.Scheme + "://" + u.Host + u.EscapedPath() }

// s3Error is the XML error document of S3 (and compatible stores).
type s3Error struct {
	Code    string `xml:"Code"`
	Message string `xml:"Message"`
}

// storageError turns a blob store's refusal of a presigned request into an *Error with the service's code
// for it (see above), or a *TransportError.
func storageError(method, path string, resp *http.Response) error {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	var doc s3Error
	_ = xml.Unmarshal(raw, &doc)
	if doc.Code == "" {
		doc.Code = http.StatusText(resp.StatusCode)
	}
	mk := func(code domain.Code, retryable bool, what string) error {
		return &Error{Code: code, Message: fmt.Sprintf("the blob store refused the request (%s: %s): %s", doc.Code, doc.Message, what),
			Retryable: retryable, HTTPStatus: resp.StatusCode,
			Details: map[string]any{"storage_code": doc.Code, "storage_status": resp.StatusCode}}
	}
	msg := strings.ToLower(doc.Message)
	switch {
	case resp.StatusCode == http.StatusPreconditionFailed:
		return mk(domain.CodeUploadContentConflict, false, "the key already holds an object, which is never overwritten")
	case doc.Code == "BadDigest" || doc.Code == "XAmzContentSHA256Mismatch" || doc.Code == "InvalidDigest":
		return mk(domain.CodeChecksumMismatch, false, "the bytes do not hash to the prepared sha256")
	case resp.StatusCode == http.StatusForbidden && (strings.Contains(msg, "expired") || doc.Code == "ExpiredToken"):
		return mk(domain.CodeUploadExpired, false, "the presigned request expired")
	case doc.Code == "SignatureDoesNotMatch" || doc.Code == "IncompleteBody" || doc.Code == "EntityTooLarge" || doc.Code == "EntityTooSmall":
		return mk(domain.CodeInvalidBlob, false, "the request differs from the signed size or headers")
	case resp.StatusCode >= 500 || doc.Code == "SlowDown" || resp.StatusCode == http.StatusTooManyRequests:
		return mk(domain.CodeStorageUnavailable, true, "try again")
	case resp.StatusCode == http.StatusNotFound:
		return mk(domain.CodeNotFound, false, "no such object")
	}
	return &TransportError{Method: method, Path: path, HTTPStatus: resp.StatusCode, Err: fmt.Errorf("blob store error %s: %s", doc.Code, doc.Message)}
}
