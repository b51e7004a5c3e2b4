package faulty

import (
	"fmt"
	"math/rand/v2"
	"sync"

	"github.com/waypost/waypost/domain/port"
)

// Plan says how often calls fail at random (each a chance between 0 and 1).
type Plan struct {
	// Seed seeds the decisions: a sequential test sees the same faults when it is replayed with the same
	// seed (a rapid check draws it).
	Seed uint64
	// Read is the chance that an ItemStore Get or Query fails before reading.
	Read float64
	// Commit is the chance that an ItemStore Commit fails; Lost, the share of those failures that happen
	// after the commit was applied (the response is lost).
	Commit, Lost float64
	// Put is the chance that a BlobStore Put fails before storing.
	Put float64
}

// Random injects faults at random as its plan says, into every wrapper it is set on (SetRandom); one Random
// may serve an ItemStore and a BlobStore together. The zero value injects nothing. It is safe for concurrent
// use. Injected errors wrap port.ErrUnavailable and ErrInjected.
type Random struct {
	mu       sync.Mutex
	rng      *rand.Rand
	plan     Plan
	injected int
	lost     int
}

// Start begins injecting faults as p says (again, from p.Seed, if already started).
func (r *Random) Start(p Plan) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rng = rand.New(rand.NewPCG(p.Seed, p.Seed^0x9e3779b97f4a7c15))
	r.plan = p
}

// Stop ends the faults (Start begins them again).
func (r *Random) Stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rng = nil
}

// Counts returns how many faults were injected since the Random was made, and how many of them were lost
// responses of applied commits.
func (r *Random) Counts() (injected, lost int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.injected, r.lost
}

// roll decides one call: whether it fails (an injected fault), with the chance the plan's field pick gives.
func (r *Random) roll(pick func(Plan) float64) bool { return r.draw(pick, true) }

// draw says yes with the chance the plan's field pick gives, counting a yes as an injected fault when count
// is set (how a failing commit fails is part of the one fault its roll counted).
func (r *Random) draw(pick func(Plan) float64, count bool) bool {
	if r == nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.rng == nil {
		return false
	}
	if p := pick(r.plan); p <= 0 || r.rng.Float64() >= p {
		return false
	}
	if count {
		r.injected++
	}
	return true
}

func (r *Random) lostResponse() {
	r.mu.Lock()
	r.lost++
	r.mu.Unlock()
}

func randomErr(what string) error {
	return fmt.Errorf("faulty: random %s: %w: %w", what, port.ErrUnavailable, ErrInjected)
}

func planRead(p Plan) float64   { return p.Read }
func planCommit(p Plan) float64 { return p.Commit }
func planLost(p Plan) float64   { return p.Lost }
func planPut(p Plan) float64    { return p.Put }
