package domain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/waypost/waypost/domain/port"
)

// onceSpec describes a write that completes in a single transaction together with its idempotency record
// (control-plane creates, acks). The submission record is op 0 of the transaction, guarded by NotExists.
type onceSpec struct {
	key         port.Key
	operation   string
	requestID   string
	fingerprint string
	// prepare reads current state and returns the transaction body; it is called again after a
	// condition failure on one of its ops (optimistic retry).
	prepare func(ctx context.Context) (*onceTx, error)
	// fresh, when set, receives the result as build returned it when this call commits (not when it
	// replays a stored one), so that the caller need not decode the result it has just encoded.
	fresh *any
}

type onceTx struct {
	resourceID string
	seqSpace   string // space whose sequence to allocate from, when count > 0 or quota is set
	count      uint64
	// quota, when set, adds the transaction's usage to seqSpace's counter under quotas (quota.go).
	quota  *port.Quota
	quotas Quotas
	build  func(first uint64) (ops []port.Op, result any, published []port.Published)
	// committed, when set, runs once this transaction committed (not when an earlier result is replayed):
	// it hands back what only the committing call may see, such as a token secret.
	committed func()
}

// replay returns the stored outcome of an existing submission with the same key.
func replay(sub Submission, fp string) (json.RawMessage, error) {
	if sub.Fingerprint != fp {
		return nil, Errorf(CodeIdempotencyConflict, "the request ID was already used with different content").
			WithDetails("request_id", sub.RequestID)
	}
	switch sub.State {
	case StateCommitted:
		return sub.Result, nil
	case StateFailed:
		if sub.Error != nil {
			return nil, &Error{Code: sub.Error.Code, Message: sub.Error.Message, Details: sub.Error.Details}
		}
		return nil, Errorf(CodeInternal, "failed submission without error")
	default:
		return nil, Errorf(CodeSubmissionPending, "the same request is still in flight").
			WithDetails("resource_id", sub.ResourceID)
	}
}

// runOnce executes spec: replaying a committed result, or committing the new write exactly once.
func (s *Service) runOnce(ctx context.Context, spec onceSpec) (json.RawMessage, []port.Published, error) {
	for attempt := 0; attempt < s.retries; attempt++ {
		sub, _, found, err := getRecord[Submission](ctx, s.store, spec.key)
		if err != nil {
			return nil, nil, err
		}
		if found {
			res, err := replay(sub, spec.fingerprint)
			return res, nil, err
		}
		otx, err := spec.prepare(ctx)
		if err != nil {
			return nil, nil, err
		}
		now := s.clock.Now().UTC()
		var result json.RawMessage
		var value any
		var published []port.Published
		tx := port.Tx{Build: func(first uint64) ([]port.Op, error) {
			ops, res, pub := otx.build(first)
			value, result, published = res, encode(res), pub
			sub := Submission{Operation: spec.operation, RequestID: spec.requestID, Fingerprint: spec.fingerprint,
				ResourceID: otx.resourceID, State: StateCommitted, ReservedAt: now, Result: result}
			return append([]port.Op{port.Put(item(spec.key, sub, attrState, string(StateCommitted)), port.NotExists())}, ops...), nil
		}}
		if otx.count > 0 || otx.quota != nil {
			tx.Seq, tx.Count, tx.Max, tx.Quota = sequence(otx.seqSpace), otx.count, uint64(s.limits.VisibleSeqMax), otx.quota
		}
		_, err = s.store.Commit(ctx, tx)
		if err == nil {
			if otx.committed != nil {
				otx.committed()
			}
			if spec.fresh != nil {
				*spec.fresh = value
			}
			return result, published, nil
		}
		if errors.Is(err, port.ErrCounterExhausted) {
			return nil, nil, Errorf(CodeResourceLimit, "the space reached visible_seq_max")
		}
		if qerr := s.quotaError(ctx, otx.seqSpace, otx.quotas, err); qerr != nil {
			return nil, nil, qerr
		}
		if _, ok := port.FailedOp(err); ok {
			continue // a concurrent write won; re-read and decide again
		}
		return nil, nil, fmt.Errorf("%s: commit: %w", spec.operation, err)
	}
	return nil, nil, Errorf(CodeStorageUnavailable, "too much contention; retry with the same request_id")
}

// decodeResult turns a stored result back into its typed form.
func decodeResult[T any](raw json.RawMessage, err error) (T, error) {
	var v T
	if err != nil {
		return v, err
	}
	if uerr := decodeStored(raw, &v); uerr != nil {
		return v, fmt.Errorf("decoding stored result: %w", uerr)
	}
	return v, nil
}
