// Package metrics carries the measurements Waypost publishes about itself — request latency per
// operation, store commit latency and size, group-commit batch size — to a Recorder, and has the two
// recorders a deployment uses without extra dependencies: Nop, and EMF (CloudWatch embedded metric format
// written to the Lambda log, so that CloudWatch extracts the metrics without a single API call). The
// Prometheus recorder of `waypost serve` lives in package prom, so that Lambda binaries never link the
// Prometheus client.
package metrics

import (
	"context"
	"errors"
	"time"

	"github.com/waypost/waypost/domain/port"
)

// Outcomes of a store commit.
const (
	CommitOK        = "ok"
	CommitCondition = "condition_failed" // a condition did not hold: nothing written (optimistic retry follows)
	CommitError     = "error"            // the store failed (transient or not)
)

// OutcomeOK is the outcome of a request that succeeded; a failed one is named by its error code.
const OutcomeOK = "ok"

// Recorder receives measurements. Implementations are safe for concurrent use and never block for long.
type Recorder interface {
	// Request records one served operation: its name (message.send, admin.space.delete, …), its outcome
	// (OutcomeOK or the error code) and how long it took.
	Request(operation, outcome string, d time.Duration)
	// Commit records one store transaction: its outcome, how many operations it held, and its latency.
	Commit(outcome string, ops int, d time.Duration)
	// Batch records one durable write of the embedded store: how many transactions it carried (group
	// commit) and how long it took.
	Batch(transactions int, d time.Duration)
}

// Nop records nothing.
type Nop struct{}

// Request does nothing.
func (Nop) Request(string, string, time.Duration) {}

// Commit does nothing.
func (Nop) Commit(string, int, time.Duration) {}

// Batch does nothing.
func (Nop) Batch(int, time.Duration) {}

// CommitOutcome classifies a commit's error.
func CommitOutcome(err error) string {
	switch {
	case err == nil:
		return CommitOK
	case errors.As(err, new(*port.ConditionFailedError)):
		return CommitCondition
	default:
		return CommitError
	}
}

// Store returns inner with every Commit recorded on r (latency, number of ops, outcome). The wrapper keeps
// inner's optional capabilities (see withCapabilities).
func Store(inner port.ItemStore, r Recorder) port.ItemStore {
	return withCapabilities(&store{ItemStore: inner, r: r}, inner)
}

type store struct {
	port.ItemStore
	r Recorder
}

func (s *store) Commit(ctx context.Context, tx port.Tx) (uint64, error) {
	ops := 0
	build := tx.Build
	tx.Build = func(first uint64) ([]port.Op, error) {
		o, err := build(first)
		ops = len(o)
		return o, err
	}
	start := time.Now()
	first, err := s.ItemStore.Commit(ctx, tx)
	s.r.Commit(CommitOutcome(err), ops, time.Since(start))
	return first, err
}

// withCapabilities returns w, extended with the optional capabilities of inner (the interfaces of port a
// store may also implement), so that the wrapper hides none of them from the domain.
func withCapabilities(w *store, inner port.ItemStore) port.ItemStore {
	e, expires := inner.(port.Expirer)
	c, costly := inner.(port.PointReadCoster)
	if !expires && !costly {
		return w
	}
	return capableStore{store: w, expires: expires && e.ExpiresItems(), costly: costly && c.PointReadsCostly()}
}

// capableStore is a store wrapper over a store with optional capabilities (port.Expirer,
// port.PointReadCoster): it reports the inner store's answers, and false for a capability the inner store
// does not have, which is what its absence means.
type capableStore struct {
	*store
	expires, costly bool
}

// ExpiresItems reports the inner store's answer.
func (s capableStore) ExpiresItems() bool { return s.expires }

// PointReadsCostly reports the inner store's answer.
func (s capableStore) PointReadsCostly() bool { return s.costly }
