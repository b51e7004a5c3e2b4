package domaintest

import (
	"sort"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/waypost/waypost/domain"
)

// PropOption adjusts RunProperties.
type PropOption func(*propConfig)

type propConfig struct {
	steps       int  // upper bound of random operations in one check
	concurrency int  // largest number of goroutines sending the same request (P01)
	perCheck    bool // a backend per rapid check instead of one per property (BackendPerCheck)
}

// MaxSteps bounds the number of random operations of one check (default 16). Slow adapters use fewer, so that
// each property stays within seconds under -race; rapid's check count (-rapid.checks) is unchanged.
func MaxSteps(n int) PropOption {
	return func(c *propConfig) {
		if n > 0 {
			c.steps = n
		}
	}
}

// BackendPerCheck gives every rapid check of a property a fixture on a fresh backend of its own, instead of
// fresh spaces on the one backend the property builds. The checks are independent either way (no check reads
// another's spaces); the option is for adapters whose every call costs in proportion to all that the backend
// holds: minidyn, the DynamoDB emulator, interprets the key condition of a Query on every item of the table
// and copies the whole table for every TransactWriteItems, so on one shared table a property's time grows
// with the square of its checks, on a table per check only linearly. RunProperties and RunFailureMatrix
// honour it; RunMemoryProperties and RunWebhookProperties accept it and ignore it.
func BackendPerCheck(on bool) PropOption {
	return func(c *propConfig) { c.perCheck = on }
}

// RunProperties runs the randomized, model-based properties of SUPPLEMENT §15 (P01, P02, P05, P06, P07, P08,
// P09, P14, P16, P18) through the service's public operations against the adapter nb makes, one subtest per
// property. Each property is a rapid check: a failure prints the seed that reproduces it
// (-rapid.seed=N, or the fail file rapid writes under testdata/rapid). Every property builds one fixture
// (one backend) and gives each check fresh spaces, so checks are independent without reopening storage
// (BackendPerCheck: a fixture on a fresh backend per check).
func RunProperties(t *testing.T, nb NewBackend, opts ...PropOption) {
	runProperties(t, nb, withOptions(propConfig{steps: 16, concurrency: 8}, opts), []property{
		{"P01_IdempotentSubmit", propP01},
		{"P02_Conflict", propP02},
		{"P05_Sequence", propP05},
		{"P06_IndependentConsumers", propP06},
		{"P07_Receipts", propP07},
		{"P08_Checkpoints", propP08},
		{"P09_Authorization", propP09},
		{"P14_CursorIntegrity", propP14},
		{"P16_Visibility", propP16},
		{"P18_Liveness", propP18},
	})
}

// property is one named property of a suite: run checks it on the adapter nb makes.
type property struct {
	name string
	run  func(t *testing.T, nb NewBackend, cfg propConfig)
}

// withOptions returns cfg, a suite's defaults, adjusted by opts.
func withOptions(cfg propConfig, opts []PropOption) propConfig {
	for _, o := range opts {
		o(&cfg)
	}
	return cfg
}

// runProperties runs each property as a parallel subtest of t, all with cfg.
func runProperties(t *testing.T, nb NewBackend, cfg propConfig, props []property) {
	for _, p := range props {
		t.Run(p.name, func(t *testing.T) { t.Parallel(); p.run(t, nb, cfg) })
	}
}

// steps draws the number of operations of one check.
func (c propConfig) draw(t *rapid.T, lo int) int {
	return rapid.IntRange(min(lo, c.steps), c.steps).Draw(t, "steps")
}

// runActions runs n actions chosen by name from actions, each drawn by rapid (so a failure shrinks to the
// shortest sequence of actions that still fails).
func runActions(t *rapid.T, n int, actions map[string]func()) {
	names := make([]string, 0, len(actions))
	for k := range actions {
		names = append(names, k)
	}
	sort.Strings(names)
	gen := rapid.SampledFrom(names)
	for range n {
		actions[gen.Draw(t, "action")]()
	}
}

// propInlineBodyMax is the service's InlineBodyMax in the properties: generated bodies are drawn on both
// sides of it, so message.send takes both of its paths (one inline transaction; reserve, body object,
// commit).
const propInlineBodyMax = 64

func newPropFixture(t testing.TB, nb NewBackend) *Fixture {
	return New(t, nb, func(c *domain.Config) { c.InlineBodyMax = propInlineBodyMax })
}

// check runs a property's checks under rapid.Check, each with its fixture: the property's one fixture, on
// which each check makes fresh spaces, or with BackendPerCheck a new fixture on a fresh backend, released when
// the check ends.
func (c propConfig) check(t *testing.T, nb NewBackend, body func(rt *rapid.T, f *Fixture)) {
	fixture := func(rt *rapid.T) *Fixture { return newPropFixture(mxRapidTB{TB: t, rt: rt}, nb) }
	if !c.perCheck {
		f := newPropFixture(t, nb)
		fixture = func(*rapid.T) *Fixture { return f }
	}
	rapid.Check(t, func(rt *rapid.T) { body(rt, fixture(rt)) })
}

// longBody pads text so that the body goes through the blob store.
func longBody(text string) string { return text + strings.Repeat(" long", propInlineBodyMax/5+1) }

// drawBody draws a body text that is committed inline or, about one time in three, goes through the blob
// store.
func drawBody(t *rapid.T, text string) string {
	if rapid.IntRange(0, 2).Draw(t, "blob body") == 0 {
		return longBody(text)
	}
	return text
}
