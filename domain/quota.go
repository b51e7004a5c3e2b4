package domain

import (
	"context"
	"errors"
	"fmt"

	"github.com/waypost/waypost/domain/port"
)

// Capacity quotas (RFC §8: no automatic pruning, so a deployment publishes its capacity and refuses new
// writes when full instead of losing old mail). Each space has a limit on the bytes it stores — metadata
// (the records a write puts: message, feed item, inbox copies, submission, revision…) and blob-store bytes
// (bodies, blobs, memory states) — and on the items it publishes (messages and memory revisions). The usage
// lives in the space's sequence counter and is added in the same atomic step that takes a write's
// visible_seq (port.Quota), so a write that would pass a limit is refused with RESOURCE_LIMIT and leaves
// nothing published and the usage unchanged.
//
// What counts: a send (its records, its body object), a memory revision (its records, its state object), a
// sealed blob (its bytes and record, at blob.commit), the receipts an ack publishes (their records; acks are
// never refused, so that consumers can always acknowledge what they received — they may take a space past
// its byte limit). Control-plane records and unsealed uploads do not count.

// Quotas are a space's capacity limits. In an UpdateSpaceRequest a zero member is absent (omitted from the
// JSON): the patch keeps its value.
type Quotas struct {
	// MaxStoredBytes bounds the bytes the space stores: metadata records and blob-store objects.
	MaxStoredBytes int64 `json:"max_stored_bytes,omitempty"`
	// MaxItems bounds the items the space publishes: messages and memory revisions.
	MaxItems int64 `json:"max_items,omitempty"`
}

// QuotaUsage is what a space uses of its quotas.
type QuotaUsage struct {
	StoredBytes int64 `json:"stored_bytes"`
	Items       int64 `json:"items"`
}

// Default and largest quotas.
const (
	DefaultSpaceMaxStoredBytes = 10 << 30 // 10 GiB
	DefaultSpaceMaxItems       = 10_000_000
	MaxSpaceStoredBytes        = 1 << 50 // 1 PiB
	MaxSpaceItems              = 1 << 40
)

// DefaultQuotas returns the quotas of a space whose owner set none.
func DefaultQuotas() Quotas {
	return Quotas{MaxStoredBytes: DefaultSpaceMaxStoredBytes, MaxItems: DefaultSpaceMaxItems}
}

// check validates quotas an owner (or a deployment) asks for.
func (q Quotas) check() error {
	if q.MaxStoredBytes < 1 || q.MaxStoredBytes > MaxSpaceStoredBytes {
		return Errorf(CodeInvalidRequest, "quotas.max_stored_bytes must be between 1 and %d", int64(MaxSpaceStoredBytes)).
			WithDetails("field", "quotas.max_stored_bytes")
	}
	if q.MaxItems < 1 || q.MaxItems > MaxSpaceItems {
		return Errorf(CodeInvalidRequest, "quotas.max_items must be between 1 and %d", int64(MaxSpaceItems)).
			WithDetails("field", "quotas.max_items")
	}
	return nil
}

// merge returns base with the non-zero members of q (a merge patch: a zero member is absent).
func (q Quotas) merge(base Quotas) Quotas {
	patch(&base.MaxStoredBytes, q.MaxStoredBytes)
	patch(&base.MaxItems, q.MaxItems)
	return base
}

// patch sets *dst to v unless v is zero: the member of a merge patch that is absent.
func patch[T comparable](dst *T, v T) {
	var zero T
	if v != zero {
		*dst = v
	}
}

// effectiveQuotas returns a space's quotas: its owner's, or the deployment's defaults.
func (s *Service) effectiveQuotas(sp Space) Quotas {
	if sp.Quotas != nil {
		return *sp.Quotas
	}
	return s.quotas
}

// spaceQuotas returns the quotas in force for a space (its record possibly cached, see space).
func (s *Service) spaceQuotas(ctx context.Context, spaceID string) (Quotas, error) {
	sp, err := s.space(ctx, spaceID)
	if err != nil {
		return Quotas{}, err
	}
	return s.effectiveQuotas(sp), nil
}

// quota is the port.Quota of a write that publishes items and stores extra bytes outside the item store.
func (q Quotas) quota(items, extra int64) *port.Quota {
	return &port.Quota{Extra: extra, Items: items, MaxBytes: q.MaxStoredBytes, MaxItems: q.MaxItems}
}

// usage reads a space's usage from its sequence counter.
func (s *Service) usage(ctx context.Context, spaceID string) (QuotaUsage, error) {
	it, _, err := s.store.Get(ctx, keySeq(spaceID))
	if err != nil {
		return QuotaUsage{}, fmt.Errorf("reading usage: %w", err)
	}
	b, i := port.UsageOf(it)
	return QuotaUsage{StoredBytes: b, Items: i}, nil
}

// quotaRefusal is the RESOURCE_LIMIT of a write refused by the space's quotas.
func quotaRefusal(q Quotas, u *QuotaUsage) *Error {
	e := Errorf(CodeResourceLimit, "the space is full: it may store %d bytes and %d items (space_max_stored_bytes, space_max_items); "+
		"nothing was published. The owner can raise the quotas", q.MaxStoredBytes, q.MaxItems).
		WithDetails("reason", "quota", "space_max_stored_bytes", q.MaxStoredBytes, "space_max_items", q.MaxItems)
	if u != nil {
		e = e.WithDetails("stored_bytes", u.StoredBytes, "items", u.Items)
	}
	return e
}

// quotaError maps a commit refused by the quotas to RESOURCE_LIMIT (with the usage as it is now); nil
// otherwise.
func (s *Service) quotaError(ctx context.Context, spaceID string, q Quotas, err error) error {
	if !errors.Is(err, port.ErrQuotaExceeded) {
		return nil
	}
	u, uerr := s.usage(ctx, spaceID)
	if uerr != nil {
		return quotaRefusal(q, nil)
	}
	return quotaRefusal(q, &u)
}

// precheckQuota refuses, before anything is written, a write that cannot fit: one whose bytes outside the
// item store (a body or state object, a blob) would alone pass the byte limit with the usage as it is, or
// that would pass the item limit. The commit checks again, atomically; this only spares writing an object
// that could not be published.
func (s *Service) precheckQuota(ctx context.Context, spaceID string, q Quotas, items, extra int64) error {
	u, err := s.usage(ctx, spaceID)
	if err != nil {
		return err
	}
	if u.StoredBytes+extra > q.MaxStoredBytes || u.Items+items > q.MaxItems {
		return quotaRefusal(q, &u)
	}
	return nil
}
