package dynamo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go"

	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/internal/wait"
)

// transientCodes are the DynamoDB error codes worth retrying as they are.
var transientCodes = map[string]bool{
	"ThrottlingException":                    true,
	"ProvisionedThroughputExceededException": true,
	"RequestLimitExceeded":                   true,
	"TransactionInProgressException":         true,
	"TransactionConflictException":           true,
	"InternalServerError":                    true,
	"InternalFailure":                        true,
	"ServiceUnavailable":                     true,
	"RequestTimeout":                         true,
	"RequestTimeoutException":                true,
}

// transient reports whether err is a failure that may pass on retry: a throttling, conflict or server
// error, an HTTP 5xx, a transport failure before any response, or a response whose body was lost on the way
// (the connection closed or reset while it was read: "deserialization failed … use of closed network
// connection", aws/aws-sdk-go-v2#2737). A lost body is a lost response: the request may have been applied,
// as with a connection reset before the answer, which is retried too (transactions carry their client
// request token, so a retried one is not applied twice). Context errors, client-side validation and other
// API errors are not transient.
func transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		if transientCodes[api.ErrorCode()] {
			return true
		}
		var re *awshttp.ResponseError
		return errors.As(err, &re) && re.HTTPStatusCode() >= 500
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode() >= 500 || re.HTTPStatusCode() == 429 || lostBody(err)
	}
	var ip *smithy.InvalidParamsError
	var se *smithy.SerializationError
	if errors.As(err, &ip) || errors.As(err, &se) {
		return false
	}
	var oe *smithy.OperationError
	return errors.As(err, &oe) // no response at all: connection refused, reset, timeout
}

// lostBody reports whether err says that reading a response's body failed on the connection: a network
// error (closed, reset, timed out) or a body cut short.
func lostBody(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) || errors.Is(err, io.ErrUnexpectedEOF)
}

// retry calls fn until it succeeds, fails for good (fn reports retry false), or Options.Retries retries
// are spent; the last transient error is returned wrapping port.ErrUnavailable.
func (s *Store) retry(ctx context.Context, fn func() (retry bool, err error)) error {
	for attempt := 0; ; attempt++ {
		retry, err := fn()
		if err == nil {
			return nil
		}
		if cerr := ctx.Err(); cerr != nil {
			return fmt.Errorf("%w (%w)", cerr, err)
		}
		if !retry {
			return err
		}
		if attempt >= s.opts.Retries {
			return fmt.Errorf("gave up after %d attempts: %w: %w", attempt+1, port.ErrUnavailable, err)
		}
		if err := s.sleep(ctx, attempt); err != nil {
			return err
		}
	}
}

// call sends one request with send (a method of API), retrying transient failures (retry).
func call[In, Out any](ctx context.Context, s *Store, in In, send func(context.Context, In, ...func(*dynamodb.Options)) (Out, error)) (Out, error) {
	var out Out
	err := s.retry(ctx, func() (bool, error) {
		var err error
		out, err = send(ctx, in)
		return transient(err), err
	})
	return out, err
}

// sleep waits a full-jitter exponential backoff for the given attempt, or until ctx ends.
func (s *Store) sleep(ctx context.Context, attempt int) error {
	ceil := s.opts.BaseBackoff << min(attempt, 20)
	if ceil <= 0 || ceil > s.opts.MaxBackoff {
		ceil = s.opts.MaxBackoff
	}
	return wait.Sleep(ctx, time.Duration(rand.Int64N(int64(ceil))+1))
}
