package domain

import (
	"errors"
	"fmt"
	"maps"
)

// Code is a public error code of SUPPLEMENT §11.4.
type Code string

// The error codes of SUPPLEMENT §11.4 (and M2's webhook codes).
const (
	CodeInvalidRequest        Code = "INVALID_REQUEST"
	CodeUnauthenticated       Code = "UNAUTHENTICATED"
	CodeForbidden             Code = "FORBIDDEN"
	CodeNotFound              Code = "NOT_FOUND"
	CodeIdempotencyConflict   Code = "IDEMPOTENCY_CONFLICT"
	CodeSubmissionPending     Code = "SUBMISSION_PENDING"
	CodeRevisionConflict      Code = "REVISION_CONFLICT"
	CodeBlobNotSealed         Code = "BLOB_NOT_SEALED"
	CodeChecksumMismatch      Code = "CHECKSUM_MISMATCH"
	CodeInvalidBlob           Code = "INVALID_BLOB"
	CodeInvalidManifest       Code = "INVALID_MANIFEST"
	CodeUploadExpired         Code = "UPLOAD_EXPIRED"
	CodeUploadContentConflict Code = "UPLOAD_CONTENT_CONFLICT"
	CodeUploadSealed          Code = "UPLOAD_SEALED"
	CodeInvalidCursor         Code = "INVALID_CURSOR"
	CodeCursorScopeChanged    Code = "CURSOR_SCOPE_CHANGED"
	CodeCursorExpired         Code = "CURSOR_EXPIRED"
	CodeResourceLimit         Code = "RESOURCE_LIMIT"
	CodePayloadTooLarge       Code = "PAYLOAD_TOO_LARGE"
	CodeUnsupported           Code = "UNSUPPORTED"
	CodeRateLimited           Code = "RATE_LIMITED"
	CodeStorageUnavailable    Code = "STORAGE_UNAVAILABLE"
	CodeInternal              Code = "INTERNAL"
	CodeWebhookVerification   Code = "WEBHOOK_VERIFICATION_FAILED"
	CodeForbiddenTarget       Code = "FORBIDDEN_TARGET"
)

type codeInfo struct {
	status    int
	retryable bool
}

// codeTable is SUPPLEMENT §11.4: HTTP status and retryability of every code.
func codeTable(c Code) codeInfo {
	switch c {
	case CodeInvalidRequest, CodeInvalidCursor, CodeUnsupported:
		return codeInfo{400, false}
	case CodeUnauthenticated:
		return codeInfo{401, false}
	case CodeForbidden:
		return codeInfo{403, false}
	case CodeNotFound:
		return codeInfo{404, false}
	case CodeIdempotencyConflict, CodeRevisionConflict, CodeBlobNotSealed, CodeUploadContentConflict,
		CodeUploadSealed, CodeCursorScopeChanged:
		return codeInfo{409, false}
	case CodeSubmissionPending:
		return codeInfo{409, true}
	case CodeChecksumMismatch, CodeInvalidBlob, CodeInvalidManifest, CodeResourceLimit,
		CodeWebhookVerification, CodeForbiddenTarget:
		return codeInfo{422, false}
	case CodeUploadExpired, CodeCursorExpired:
		return codeInfo{410, false}
	case CodePayloadTooLarge:
		return codeInfo{413, false}
	case CodeRateLimited:
		return codeInfo{429, true}
	case CodeStorageUnavailable:
		return codeInfo{503, true}
	default:
		return codeInfo{500, true}
	}
}

// HTTPStatus is the HTTP status that carries the code.
func (c Code) HTTPStatus() int { return codeTable(c).status }

// Retryable reports whether the same semantic request may be tried again.
func (c Code) Retryable() bool { return codeTable(c).retryable }

// AllCodes lists every public error code.
func AllCodes() []Code {
	return []Code{CodeInvalidRequest, CodeUnauthenticated, CodeForbidden, CodeNotFound, CodeIdempotencyConflict,
		CodeSubmissionPending, CodeRevisionConflict, CodeBlobNotSealed, CodeChecksumMismatch, CodeInvalidBlob,
		CodeInvalidManifest, CodeUploadExpired, CodeUploadContentConflict, CodeUploadSealed, CodeInvalidCursor,
		CodeCursorScopeChanged, CodeCursorExpired, CodeResourceLimit, CodePayloadTooLarge, CodeUnsupported,
		CodeRateLimited, CodeStorageUnavailable, CodeInternal, CodeWebhookVerification, CodeForbiddenTarget}
}

// Error is a domain failure with a public code. Message is safe to show to clients; it never contains secrets.
type Error struct {
	Code    Code
	Message string
	Details map[string]any
	cause   error
}

func (e *Error) Error() string {
	if e.cause != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.cause)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// Unwrap returns the underlying cause, if any.
func (e *Error) Unwrap() error { return e.cause }

// Errorf returns a new *Error with a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// WithDetails returns a copy of e with the given details (key, value, key, value…) added to its own; e
// itself is never changed, so a shared *Error (a package-level value, one error returned to many callers)
// can be refined safely.
func (e *Error) WithDetails(kv ...any) *Error {
	c := *e
	c.Details = make(map[string]any, len(e.Details)+len(kv)/2)
	maps.Copy(c.Details, e.Details)
	for i := 0; i+1 < len(kv); i += 2 {
		c.Details[fmt.Sprint(kv[i])] = kv[i+1]
	}
	return &c
}

// AsError converts any error into an *Error: domain errors pass through, storage unavailability becomes
// STORAGE_UNAVAILABLE, anything else INTERNAL (its text stays in logs only).
func AsError(err error) *Error {
	if err == nil {
		return nil
	}
	var de *Error
	if errors.As(err, &de) {
		return de
	}
	if isUnavailable(err) {
		return &Error{Code: CodeStorageUnavailable, Message: "storage is temporarily unavailable; retry with the same request_id", cause: err}
	}
	return &Error{Code: CodeInternal, Message: "internal error", cause: err}
}

// CodeOf returns the public code of err: "" for nil, INTERNAL for unknown errors.
func CodeOf(err error) Code {
	if err == nil {
		return ""
	}
	return AsError(err).Code
}
