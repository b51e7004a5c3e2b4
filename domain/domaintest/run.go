package domaintest

import (
	"flag"
	"os"
	"strconv"
	"testing"

	"github.com/waypost/waypost/store/fsblob"
	"github.com/waypost/waypost/store/mem"
)

// Features declares what one adapter's run of the suites may do and how deep it goes, as an adapter's
// test states it once (Watermill's pubsub/tests do the same): RunAll runs every suite with them.
type Features struct {
	// Steps, MemorySteps and WebhookSteps bound the random operations of one check of the §15 properties,
	// the memory properties and the webhook properties (MaxSteps; 0: each suite's default). Adapters whose
	// every call is a real transaction or a round trip run fewer.
	Steps, MemorySteps, WebhookSteps int
	// PropertyChecks (the §15 and memory properties), MatrixChecks and WebhookChecks cap rapid's checks per
	// property of each suite, unless -rapid.checks or RAPID_CHECKS chose a count (0: rapid's).
	PropertyChecks, MatrixChecks, WebhookChecks int
	// BackendPerCheck runs every rapid check of the §15 properties and of the matrix properties P03 and P04
	// on a fresh backend of its own rather than on fresh spaces of one backend per property (see the
	// BackendPerCheck option): for adapters whose calls cost in proportion to everything stored.
	BackendPerCheck bool
}

// RunAll runs every domain suite against the backend nb makes, as subtests: the SUPPLEMENT §15 properties
// (RunProperties), the memory and blob properties (RunMemoryProperties), the webhook properties
// (RunWebhookProperties), the §7.4 failure matrix (RunFailureMatrix) and the owner's operations (stats,
// verify, space deletion, quotas: RunOperations). The suites run one after the other (each may set its own
// rapid check count); within a suite, the properties and scenarios are independent — each makes its own
// backend — and, but for the operations, which run one at a time, run in parallel.
func RunAll(t *testing.T, nb NewBackend, f Features) {
	t.Run("Properties", func(t *testing.T) {
		LimitRapidChecks(t, f.PropertyChecks)
		RunProperties(t, nb, MaxSteps(f.Steps), BackendPerCheck(f.BackendPerCheck))
	})
	t.Run("MemoryProperties", func(t *testing.T) {
		LimitRapidChecks(t, f.PropertyChecks)
		RunMemoryProperties(t, nb, MaxSteps(f.MemorySteps))
	})
	t.Run("WebhookProperties", func(t *testing.T) {
		LimitRapidChecks(t, f.WebhookChecks)
		RunWebhookProperties(t, nb, MaxSteps(f.WebhookSteps))
	})
	t.Run("FailureMatrix", func(t *testing.T) {
		LimitRapidChecks(t, f.MatrixChecks)
		RunFailureMatrix(t, nb, BackendPerCheck(f.BackendPerCheck))
	})
	t.Run("Operations", func(t *testing.T) { RunOperations(t, nb) })
}

// LimitRapidChecks sets rapid's check count to n for the rest of t, unless n is 0 or the user chose a count
// (-rapid.checks, RAPID_CHECKS). Rapid reads one global count: t's subtests may run in parallel, but no two
// tests that set a count may.
func LimitRapidChecks(t *testing.T, n int) {
	f := flag.Lookup("rapid.checks")
	if n <= 0 || f == nil || os.Getenv("RAPID_CHECKS") != "" {
		return
	}
	chosen := false
	flag.Visit(func(v *flag.Flag) { chosen = chosen || v.Name == "rapid.checks" })
	if chosen {
		return
	}
	old := f.Value.String()
	if err := f.Value.Set(strconv.Itoa(n)); err != nil {
		t.Fatalf("setting rapid.checks: %v", err)
	}
	t.Cleanup(func() { _ = f.Value.Set(old) })
}

// MemBackend is a fresh in-memory item store with a file blob store in a temporary directory, without fsync:
// the backend of tests that need a working service and nothing of a real storage engine.
func MemBackend(t testing.TB) Backend {
	return Backend{Store: mem.New(), Blobs: TempBlobs(t)}
}

// TempBlobs is a file blob store in a fresh temporary directory, without fsync (fsblob.Options.NoSync):
// flushing every object would dominate a suite's time without adding to what it checks.
func TempBlobs(t testing.TB) *fsblob.Store {
	t.Helper()
	blobs, err := fsblob.NewWithOptions(t.TempDir(), fsblob.Options{NoSync: true})
	if err != nil {
		t.Fatalf("fsblob: %v", err)
	}
	return blobs
}
