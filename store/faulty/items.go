package faulty

import (
	"context"
	"errors"
	"sync"

	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/store/kv"
)

// CommitFault is a fault on ItemStore.Commit.
type CommitFault struct {
	Fault
	// After applies the commit and then returns the error (the response is lost). Otherwise the commit fails
	// with nothing applied.
	After bool
	// Match, when set, restricts the fault to commits whose ops (as Build returns them) it accepts.
	Match func(ops []port.Op) bool
}

// GetFault is a fault on ItemStore.Get.
type GetFault struct {
	Fault
	// Match, when set, restricts the fault to reads of the keys it accepts.
	Match func(port.Key) bool
}

// QueryFault is a fault on ItemStore.Query.
type QueryFault struct {
	Fault
	// Match, when set, restricts the fault to the queries it accepts.
	Match func(port.Query) bool
}

// ItemStore wraps a port.ItemStore with armable faults. It is safe for concurrent use.
type ItemStore struct {
	inner   port.ItemStore
	commits registry[CommitFault]
	gets    registry[GetFault]
	queries registry[QueryFault]

	mu           sync.Mutex
	beforeCommit func(tx port.Tx)
	beforeQuery  func(q port.Query)
	random       *Random
	intercept    func(ctx context.Context, tx port.Tx, next CommitStep) (uint64, error)
}

// CommitStep is what a Commit does after interception: the armed faults, then the inner store.
type CommitStep func(ctx context.Context, tx port.Tx) (uint64, error)

// SetInterceptCommit installs fn (nil removes it): every Commit, after the BeforeCommit hook and the random
// faults, goes through fn, which decides — fail it with nothing applied, call next and then fail (a lost
// response), or just call next. A test's own fault rule (the failure matrix picks transactions by what they
// store) lives in fn.
func (s *ItemStore) SetInterceptCommit(fn func(ctx context.Context, tx port.Tx, next CommitStep) (uint64, error)) {
	s.mu.Lock()
	s.intercept = fn
	s.mu.Unlock()
}

var _ port.ItemStore = (*ItemStore)(nil)

// NewItemStore wraps inner; with no fault armed it behaves exactly like inner.
func NewItemStore(inner port.ItemStore) *ItemStore { return &ItemStore{inner: inner} }

// Inner returns the wrapped store, for inspecting state without faults.
func (s *ItemStore) Inner() port.ItemStore { return s.inner }

// FailCommit arms a commit fault.
func (s *ItemStore) FailCommit(f CommitFault) *Armed { return s.commits.add(f.Fault, f) }

// FailGet arms a Get fault.
func (s *ItemStore) FailGet(f GetFault) *Armed { return s.gets.add(f.Fault, f) }

// FailQuery arms a Query fault.
func (s *ItemStore) FailQuery(f QueryFault) *Armed { return s.queries.add(f.Fault, f) }

// SetBeforeCommit installs fn (nil removes it), called at the start of every Commit, before any fault and
// before the inner store sees the transaction, so a test can act between the steps of an operation (for
// example revoke a credential).
func (s *ItemStore) SetBeforeCommit(fn func(tx port.Tx)) {
	s.mu.Lock()
	s.beforeCommit = fn
	s.mu.Unlock()
}

// SetBeforeQuery installs fn (nil removes it), called at the start of every Query, before any fault, so a
// test can place a write between an operation's range read and what it does with it.
func (s *ItemStore) SetBeforeQuery(fn func(q port.Query)) {
	s.mu.Lock()
	s.beforeQuery = fn
	s.mu.Unlock()
}

// SetRandom makes r inject random faults into Get, Query and Commit (nil: none).
func (s *ItemStore) SetRandom(r *Random) {
	s.mu.Lock()
	s.random = r
	s.mu.Unlock()
}

func (s *ItemStore) hooks() (func(port.Tx), func(port.Query), *Random) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.beforeCommit, s.beforeQuery, s.random
}

// Reset disarms every fault and removes the hooks and the random faults.
func (s *ItemStore) Reset() {
	s.commits.reset()
	s.gets.reset()
	s.queries.reset()
	s.mu.Lock()
	s.beforeCommit, s.beforeQuery, s.random, s.intercept = nil, nil, nil, nil
	s.mu.Unlock()
}

// MaxOps returns the inner store's MaxOps.
func (s *ItemStore) MaxOps() int { return s.inner.MaxOps() }

// ReservesSequences reports the inner store's answer.
func (s *ItemStore) ReservesSequences() bool { return s.inner.ReservesSequences() }

// Get reads through the inner store unless a Get fault (or a random one) fires.
func (s *ItemStore) Get(ctx context.Context, key port.Key) (port.Item, bool, error) {
	if _, _, r := s.hooks(); r.roll(planRead) {
		return port.Item{}, false, randomErr("get " + key.String())
	}
	if err := fire(s.gets.snapshot(), func(f GetFault) bool { return matches(f.Match, key) }, "get "+key.String()); err != nil {
		return port.Item{}, false, err
	}
	return s.inner.Get(ctx, key)
}

// GetMany reads each key with Get, so that a Get fault (or a random one) fires on the key it matches.
func (s *ItemStore) GetMany(ctx context.Context, keys []port.Key) ([]port.Item, []bool, error) {
	return kv.GetEach(ctx, keys, s.Get)
}

// Query runs the BeforeQuery hook, then reads through the inner store unless a Query fault (or a random
// one) fires.
func (s *ItemStore) Query(ctx context.Context, q port.Query) ([]port.Item, error) {
	_, hook, r := s.hooks()
	if hook != nil {
		hook(q)
	}
	if r.roll(planRead) {
		return nil, randomErr("query " + q.PK)
	}
	if err := fire(s.queries.snapshot(), func(f QueryFault) bool { return matches(f.Match, q) }, "query "+q.PK); err != nil {
		return nil, err
	}
	return s.inner.Query(ctx, q)
}

// DropSequence passes through to the inner store.
func (s *ItemStore) DropSequence(ctx context.Context, seq port.Sequence, limit int) (int, error) {
	return s.inner.DropSequence(ctx, seq, limit)
}

// Head reads through the inner store; no fault is injected on it.
func (s *ItemStore) Head(ctx context.Context, seq port.Sequence) (uint64, error) {
	return s.inner.Head(ctx, seq)
}

// errAbort carries a Before fault out of Build.
type errAbort struct{ err error }

func (e *errAbort) Error() string { return e.err.Error() }

// Commit runs the BeforeCommit hook, then commits through the inner store, injecting any armed fault that
// fires. Counting: a Before fault without Match counts every Commit call; a Before fault with Match counts a
// commit when Build first returns ops it accepts; an After fault counts commits that succeed (and whose final
// ops it accepts).
func (s *ItemStore) Commit(ctx context.Context, tx port.Tx) (uint64, error) {
	hook, _, r := s.hooks()
	if hook != nil {
		hook(tx)
	}
	if r.roll(planCommit) {
		if !r.draw(planLost, false) {
			return 0, randomErr("commit before apply")
		}
		if first, err := s.inner.Commit(ctx, tx); err != nil {
			return first, err
		}
		r.lostResponse()
		return 0, randomErr("commit applied, response lost")
	}
	s.mu.Lock()
	intercept := s.intercept
	s.mu.Unlock()
	if intercept != nil {
		return intercept(ctx, tx, s.commit)
	}
	return s.commit(ctx, tx)
}

// commit commits through the inner store, injecting any armed fault that fires.
func (s *ItemStore) commit(ctx context.Context, tx port.Tx) (uint64, error) {
	faults := s.commits.snapshot()
	var inBuild []armedFault[CommitFault]
	for _, f := range faults {
		switch {
		case f.spec.After:
		case f.spec.Match == nil:
			if f.a.hit() {
				return 0, f.a.err("commit before apply")
			}
		default:
			inBuild = append(inBuild, f)
		}
	}
	if len(faults) == 0 || tx.Build == nil {
		return s.inner.Commit(ctx, tx)
	}

	// Each Match fault counts this commit at most once, the first time it accepts the ops of a Build call
	// (an adapter may call Build more than once). lastOps are the ops of the last call, the ones applied.
	var (
		mu      sync.Mutex
		counted = make([]bool, len(inBuild))
		lastOps []port.Op
	)
	build := tx.Build
	wrapped := tx
	wrapped.Build = func(first uint64) ([]port.Op, error) {
		ops, err := build(first)
		if err != nil {
			return ops, err
		}
		mu.Lock()
		defer mu.Unlock()
		lastOps = ops
		for i, f := range inBuild {
			if !counted[i] && f.spec.Match(ops) {
				counted[i] = true
				if f.a.hit() {
					return nil, &errAbort{f.a.err("commit before apply")}
				}
			}
		}
		return ops, nil
	}
	first, err := s.inner.Commit(ctx, wrapped)
	var abort *errAbort
	if errors.As(err, &abort) {
		return 0, abort.err
	}
	if err != nil {
		return first, err
	}
	mu.Lock()
	ops := lastOps
	mu.Unlock()
	if err := fire(faults, func(f CommitFault) bool { return f.After && matches(f.Match, ops) }, "commit applied, response lost"); err != nil {
		return 0, err
	}
	return first, nil
}
