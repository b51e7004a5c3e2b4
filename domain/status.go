package domain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/waypost/waypost/domain/port"
)

// StatusResult is the result of status (RFC §11.2).
type StatusResult struct {
	Operation       string          `json:"operation"`
	RequestID       string          `json:"request_id"`
	SubmissionState SubmissionState `json:"submission_state"`
	ResourceID      string          `json:"resource_id,omitempty"`
	Result          json.RawMessage `json:"result,omitempty"`
	Error           *WireError      `json:"error,omitempty"`
}

// Status reports the state of the caller's own submission. An unknown request ID is NOT_FOUND, which is
// not proof that nothing happened elsewhere. Which operations record submissions is said by their
// descriptors (api/ops: Submission), whose status schema the transports check the operation against; here
// any other well-formed name simply has none.
func (s *Service) Status(ctx context.Context, p *Principal, operation, requestID string) (StatusResult, error) {
	if !validKind(operation) { // the shape of an operation name ("message.send")
		return StatusResult{}, Errorf(CodeInvalidRequest, "operation must be one of the write operations").WithDetails("field", "operation")
	}
	if err := checkRequestID(requestID); err != nil {
		return StatusResult{}, err
	}
	sub, _, found, err := getRecord[Submission](ctx, s.store, keySubmission(p.SpaceID, p.ActorID, operation, requestID))
	if err != nil {
		return StatusResult{}, err
	}
	if !found {
		return StatusResult{}, Errorf(CodeNotFound, "no submission with this operation and request_id for this caller")
	}
	res := StatusResult{Operation: operation, RequestID: requestID, SubmissionState: sub.State, ResourceID: sub.ResourceID}
	if sub.State == StateReserved && operation == OpMessageSend {
		prepared, err := s.sendPrepared(ctx, p.SpaceID, sub.ResourceID)
		if err != nil {
			return StatusResult{}, fmt.Errorf("status: checking body: %w", err)
		}
		if prepared {
			res.SubmissionState = StatePrepared
		}
	}
	switch sub.State {
	case StateCommitted:
		res.Result = sub.Result
	case StateFailed:
		res.Error = sub.Error
	}
	return res, nil
}

// sendPrepared reports whether a reserved message.send submission (of message msgID) is prepared: its
// immutable body object is stored (RFC §6.3); no separate write records it.
func (s *Service) sendPrepared(ctx context.Context, space, msgID string) (bool, error) {
	_, err := s.blobs.Head(ctx, messageBodyKey(space, msgID))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, port.ErrBlobNotFound):
		return false, nil
	default:
		return false, err
	}
}
