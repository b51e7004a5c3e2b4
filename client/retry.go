package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/internal/wait"
)

// MaxSendRetries is how many times SendWithRetry re-sends a message after the first attempt (RFC §13.1.4:
// at most two automatic retries with the same key).
const MaxSendRetries = 2

// ErrNoRequestID is returned by SendWithRetry for a request without a request_id: the caller must choose
// and durably save one before the first attempt, or a retry after a crash could publish twice.
var ErrNoRequestID = errors.New("client: SendWithRetry needs a request_id chosen and saved by the caller before sending")

// SendWithRetry publishes a message following the Skill rule of RFC §13.1.4. The caller has already saved
// req.RequestID. After a transport failure or a retryable service error it asks Status about the
// original submission: a committed submission is returned as it is, a failed one returns its stored error;
// otherwise (not found, reserved, prepared, or status itself unavailable) it sends the same request with
// the same request_id again, at most MaxSendRetries times (Status is asked once more after the last
// attempt, so a committed result whose response was lost is still reported as committed). It stops at once on any non-retryable error,
// notably IDEMPOTENCY_CONFLICT, UNAUTHENTICATED and FORBIDDEN, and when ctx ends.
func (c *Client) SendWithRetry(ctx context.Context, req domain.SendRequest) (domain.SendResult, error) {
	if req.RequestID == "" {
		return domain.SendResult{}, ErrNoRequestID
	}
	res, err := c.Send(ctx, req)
	for retry := 1; ; retry++ {
		if err == nil {
			return res, nil
		}
		if !IsRetryable(err) || ctx.Err() != nil {
			return domain.SendResult{}, err
		}
		done, sres, serr := c.recoverSend(ctx, req.RequestID)
		if done {
			return sres, serr
		}
		if retry > MaxSendRetries {
			return domain.SendResult{}, fmt.Errorf("message.send %s: gave up after %d retries with the same request_id: %w", req.RequestID, MaxSendRetries, err)
		}
		if c.t.opts.onRetry != nil {
			c.t.opts.onRetry(retry, err)
		}
		if werr := wait.Sleep(ctx, c.t.opts.retryDelay(retry, err)); werr != nil {
			return domain.SendResult{}, fmt.Errorf("message.send %s: %w (while waiting to retry after: %v)", req.RequestID, werr, err)
		}
		res, err = c.Send(ctx, req)
	}
}

// recoverSend asks Status about the original submission. done is true when the answer is final: the
// committed result, the stored permanent failure, or an authentication failure (which stops retries).
func (c *Client) recoverSend(ctx context.Context, requestID string) (done bool, res domain.SendResult, err error) {
	st, serr := c.Status(ctx, domain.OpMessageSend, requestID)
	if serr != nil {
		if IsCode(serr, domain.CodeUnauthenticated, domain.CodeForbidden) {
			return true, res, serr
		}
		return false, res, nil // NOT_FOUND (never reserved), or status unavailable: re-send with the same key
	}
	switch st.SubmissionState {
	case domain.StateCommitted:
		if err := json.Unmarshal(st.Result, &res); err != nil {
			return true, res, fmt.Errorf("message.send %s: decoding the committed result from status: %w", requestID, err)
		}
		return true, res, nil
	case domain.StateFailed:
		if st.Error == nil {
			return true, res, fmt.Errorf("message.send %s: status reports failed without an error", requestID)
		}
		d := st.Error.Details
		if d == nil {
			d = map[string]any{}
		}
		return true, res, &Error{Code: st.Error.Code, Message: st.Error.Message, Retryable: st.Error.Retryable, Details: d, RequestID: requestID}
	default: // reserved or prepared: the same request resumes it
		return false, res, nil
	}
}
