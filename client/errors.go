package client

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/waypost/waypost/domain"
)

// Error is a failure reported by the service in the RFC §5.2 envelope (`ok: false`). It carries the public
// error object unchanged plus what the HTTP exchange said about it. Use errors.As to get it from any error
// returned by this package.
type Error struct {
	// Code is the public error code (SUPPLEMENT §11.4).
	Code domain.Code
	// Message is the service's human-readable message; it never contains secrets.
	Message string
	// Retryable reports whether the same semantic request may be tried again (with the same request_id).
	Retryable bool
	// Details is the envelope's error.details object (never nil).
	Details map[string]any
	// HTTPStatus is the status code of the response.
	HTTPStatus int
	// RequestID is the envelope's request_id: the caller's for writes, a tracking ID for reads.
	RequestID string
	// RetryAfter is the delay the service asked for in a Retry-After header (0 when absent).
	RetryAfter time.Duration
}

// Error formats the error as "CODE: message".
func (e *Error) Error() string { return fmt.Sprintf("%s: %s", e.Code, e.Message) }

// TransportError reports that no valid Waypost envelope came back: the connection failed, timed out, or
// the response was not a result envelope (a proxy error page, a truncated body). The request may or may
// not have reached the service; a write must be checked with Status and retried with the same request_id.
type TransportError struct {
	// Method and Path identify the call (the path never contains credentials).
	Method, Path string
	// HTTPStatus is the response status when a response arrived, 0 otherwise.
	HTTPStatus int
	// Err is the underlying failure.
	Err error
}

// Error describes the failed exchange.
func (e *TransportError) Error() string {
	if e.HTTPStatus != 0 {
		return fmt.Sprintf("transport error: %s %s: HTTP %d: %v", e.Method, e.Path, e.HTTPStatus, e.Err)
	}
	return fmt.Sprintf("transport error: %s %s: %v", e.Method, e.Path, e.Err)
}

// Unwrap returns the underlying failure.
func (e *TransportError) Unwrap() error { return e.Err }

// CodeOf returns the public error code carried by err, or "" when err is nil or not a service error.
func CodeOf(err error) domain.Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// IsCode reports whether err is a service error with one of the given codes.
func IsCode(err error, codes ...domain.Code) bool {
	c := CodeOf(err)
	return c != "" && slices.Contains(codes, c)
}

// IsTransport reports whether err is a transport failure (outcome unknown).
func IsTransport(err error) bool {
	var t *TransportError
	return errors.As(err, &t)
}

// IsRetryable reports whether the same request may be tried again with the same request_id: a transport
// failure, or a service error marked retryable.
func IsRetryable(err error) bool {
	var e *Error
	if errors.As(err, &e) {
		return e.Retryable
	}
	return IsTransport(err)
}
