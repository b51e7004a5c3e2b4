package metrics_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/internal/metrics"
	"github.com/waypost/waypost/store/mem"
)

type commit struct {
	outcome string
	ops     int
}

type fakeRecorder struct {
	metrics.Nop
	mu      sync.Mutex
	commits []commit
}

func (f *fakeRecorder) Commit(outcome string, ops int, _ time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.commits = append(f.commits, commit{outcome, ops})
}

// TestStoreRecordsCommits: every commit through the wrapper is recorded with its ops and outcome.
func TestStoreRecordsCommits(t *testing.T) {
	rec := &fakeRecorder{}
	st := metrics.Store(mem.New(), rec)
	ctx := context.Background()
	key := port.Key{PK: "p", SK: "s"}
	tx := func(cond port.Cond) port.Tx {
		return port.Tx{Build: func(uint64) ([]port.Op, error) {
			return []port.Op{port.Put(port.Item{Key: key}, cond), port.Check(port.Key{PK: "p", SK: "t"}, port.NotExists())}, nil
		}}
	}
	if _, err := st.Commit(ctx, tx(port.NotExists())); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Commit(ctx, tx(port.NotExists())); err == nil {
		t.Fatal("a failed condition committed")
	}
	want := []commit{{metrics.CommitOK, 2}, {metrics.CommitCondition, 2}}
	if len(rec.commits) != 2 || rec.commits[0] != want[0] || rec.commits[1] != want[1] {
		t.Errorf("recorded %v, want %v", rec.commits, want)
	}
}

// TestEMF: Flush writes CloudWatch embedded metric format documents: every dimension and metric a
// directive names is a member of the document, values are numbers or arrays of at most 100, and what was
// flushed is not written again.
func TestEMF(t *testing.T) {
	var buf bytes.Buffer
	e := metrics.NewEMF(&buf, "mailbox")
	for i := range 150 {
		e.Request("message.send", metrics.OutcomeOK, time.Duration(i)*time.Millisecond)
	}
	e.Request("message.send", "RATE_LIMITED", time.Millisecond)
	e.Commit(metrics.CommitOK, 6, 3*time.Millisecond)
	e.Commit(metrics.CommitCondition, 2, time.Millisecond)
	if err := e.Flush(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d documents, want 4:\n%s", len(lines), buf.String())
	}
	for _, line := range lines {
		var doc map[string]any
		if err := json.Unmarshal([]byte(line), &doc); err != nil {
			t.Fatalf("not JSON: %s", line)
		}
		meta := doc["_aws"].(map[string]any)
		if _, ok := meta["Timestamp"].(float64); !ok {
			t.Errorf("no Timestamp: %s", line)
		}
		for _, d := range meta["CloudWatchMetrics"].([]any) {
			dir := d.(map[string]any)
			if dir["Namespace"] != metrics.EMFNamespace {
				t.Errorf("namespace %v", dir["Namespace"])
			}
			for _, set := range dir["Dimensions"].([]any) {
				for _, dim := range set.([]any) {
					if _, ok := doc[dim.(string)].(string); !ok {
						t.Errorf("dimension %v is not a string member: %s", dim, line)
					}
				}
			}
			for _, m := range dir["Metrics"].([]any) {
				switch v := doc[m.(map[string]any)["Name"].(string)].(type) {
				case float64:
				case []any:
					if len(v) == 0 || len(v) > 100 {
						t.Errorf("metric %v has %d values", m, len(v))
					}
				default:
					t.Errorf("metric %v is %T: %s", m, v, line)
				}
			}
		}
	}
	for _, want := range []string{`"Outcome":"RATE_LIMITED"`, `"RequestErrors":1`, `"CommitConflicts":1`, `"CommitOps":[6]`} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("no %s in:\n%s", want, buf.String())
		}
	}
	buf.Reset()
	if err := e.Flush(); err != nil || buf.Len() != 0 {
		t.Errorf("a second flush wrote %q (%v)", buf.String(), err)
	}
}

type expiring struct{ port.ItemStore }

func (expiring) ExpiresItems() bool { return true }

type costly struct{ port.ItemStore }

func (costly) PointReadsCostly() bool { return true }

// TestStoreKeepsCapabilities: the wrapper keeps the optional capabilities of the store it wraps, each on
// its own, and adds none.
func TestStoreKeepsCapabilities(t *testing.T) {
	if _, ok := metrics.Store(mem.New(), metrics.Nop{}).(port.Expirer); ok {
		t.Errorf("a store that does not expire items became one")
	}
	if _, ok := metrics.Store(mem.New(), metrics.Nop{}).(port.PointReadCoster); ok {
		t.Errorf("a store with cheap point reads became one with costly ones")
	}
	e, ok := metrics.Store(expiring{mem.New()}, metrics.Nop{}).(port.Expirer)
	if !ok || !e.ExpiresItems() {
		t.Errorf("the wrapper hid port.Expirer")
	}
	if c, ok := metrics.Store(expiring{mem.New()}, metrics.Nop{}).(port.PointReadCoster); ok && c.PointReadsCostly() {
		t.Errorf("an expiring store's wrapper says its point reads are costly")
	}
	c, ok := metrics.Store(costly{mem.New()}, metrics.Nop{}).(port.PointReadCoster)
	if !ok || !c.PointReadsCostly() {
		t.Errorf("the wrapper hid port.PointReadCoster")
	}
	if e, ok := metrics.Store(costly{mem.New()}, metrics.Nop{}).(port.Expirer); ok && e.ExpiresItems() {
		t.Errorf("a costly store's wrapper says it expires items")
	}
}
