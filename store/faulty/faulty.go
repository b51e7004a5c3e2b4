// Package faulty wraps the storage ports with deterministic, armable faults for the failure matrix
// (SUPPLEMENT §7.4) and other fault tests.
//
// A test arms a fault on a wrapper; the fault fires on the Nth matching call after it was armed (the first
// when Nth is 0 or 1), once, or on every matching call from the Nth on when Repeat is set, until disarmed.
// Matching calls are counted in the order they reach the wrapper, under a mutex, so a single-goroutine test
// is fully deterministic and a concurrent one still fires exactly the requested number of times.
//
// Commit faults come in two modes. Before (the default) fails the commit with nothing applied; After applies
// the commit and then returns an error, as when the response is lost. A Before fault without Match counts
// every Commit call and fails it without reaching the inner store. A commit fault with Match inspects the ops
// that Build returns: the wrapper wraps Build, so in Before mode the fault aborts the transaction from inside
// Build (the inner store writes nothing and allocates nothing; this relies on the inner store returning
// Build's error wrapped, as every adapter does). After faults count only commits that succeed (and, with
// Match, whose final ops match). Blob put faults likewise fail before storing (the body is not read) or after
// storing. Hooks run at the start of every Commit, Query and blob Put (SetBeforeCommit, SetBeforeQuery,
// SetBeforePut), so a test can place another operation exactly between an operation's read and its write.
//
// A Random (SetRandom) fails calls at random instead, as a Plan says — reads, commits (before applying, or
// after: a lost response) and blob puts — reproducibly from its seed, for property tests.
//
// Injected errors wrap port.ErrUnavailable and ErrInjected unless the fault names its own error.
package faulty

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/waypost/waypost/domain/port"
)

// ErrInjected marks every error a wrapper injects with its default error.
var ErrInjected = errors.New("injected fault")

// Fault says which matching calls fail and how.
type Fault struct {
	// Nth selects the matching call that fails first: 1 (or 0) is the next matching call.
	Nth int
	// Repeat keeps the fault armed after it fires, failing every later matching call too.
	Repeat bool
	// Err is returned instead of the default error (which wraps port.ErrUnavailable and ErrInjected).
	Err error
}

// Armed is a fault that has been armed on a wrapper.
type Armed struct {
	mu       sync.Mutex
	fault    Fault
	seen     int
	fired    int
	disarmed bool
}

// Fired reports how many times the fault has fired.
func (a *Armed) Fired() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.fired
}

// Disarm stops the fault from firing again.
func (a *Armed) Disarm() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.disarmed = true
}

// hit counts one matching call and reports whether the fault fires on it.
func (a *Armed) hit() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.disarmed {
		return false
	}
	a.seen++
	nth := a.fault.Nth
	if nth < 1 {
		nth = 1
	}
	if a.seen < nth || (!a.fault.Repeat && a.fired > 0) {
		return false
	}
	a.fired++
	return true
}

func (a *Armed) live() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return !a.disarmed && (a.fault.Repeat || a.fired == 0)
}

func (a *Armed) err(what string) error {
	if a.fault.Err != nil {
		return a.fault.Err
	}
	return fmt.Errorf("faulty: %s: %w: %w", what, port.ErrUnavailable, ErrInjected)
}

// PutsPKPrefix returns a Match for commit faults: the ops contain a put to a partition key with the prefix.
func PutsPKPrefix(prefix string) func([]port.Op) bool {
	return func(ops []port.Op) bool {
		for _, op := range ops {
			if op.Kind == port.OpPut && strings.HasPrefix(op.Item.PK, prefix) {
				return true
			}
		}
		return false
	}
}

// TouchesPKPrefix returns a Match for commit faults: some op (of any kind) addresses a partition key with the
// prefix.
func TouchesPKPrefix(prefix string) func([]port.Op) bool {
	return func(ops []port.Op) bool {
		for _, op := range ops {
			if strings.HasPrefix(op.Item.PK, prefix) {
				return true
			}
		}
		return false
	}
}

// registry holds armed faults of one call kind, in arming order.
type registry[F any] struct {
	mu     sync.Mutex
	faults []armedFault[F]
}

type armedFault[F any] struct {
	a    *Armed
	spec F
}

func (r *registry[F]) add(f Fault, spec F) *Armed {
	a := &Armed{fault: f}
	r.mu.Lock()
	r.faults = append(r.faults, armedFault[F]{a: a, spec: spec})
	r.mu.Unlock()
	return a
}

// snapshot returns the faults that may still fire, pruning spent ones.
func (r *registry[F]) snapshot() []armedFault[F] {
	r.mu.Lock()
	defer r.mu.Unlock()
	live := r.faults[:0]
	for _, f := range r.faults {
		if f.a.live() {
			live = append(live, f)
		}
	}
	r.faults = live
	return append([]armedFault[F](nil), live...)
}

// fire returns the error of the first armed fault that accepts the call and fires on it (see Armed.hit),
// or nil. what names the call in the injected error.
func fire[F any](faults []armedFault[F], accepts func(F) bool, what string) error {
	for _, f := range faults {
		if accepts(f.spec) && f.a.hit() {
			return f.a.err(what)
		}
	}
	return nil
}

// matches applies a fault's Match to a call: a nil Match accepts every call.
func matches[T any](match func(T) bool, v T) bool { return match == nil || match(v) }

func (r *registry[F]) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range r.faults {
		f.a.Disarm()
	}
	r.faults = nil
}
