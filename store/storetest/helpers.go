package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"testing"

	"github.com/waypost/waypost/domain/port"
)

// contractCheck is one named check of a store contract.
type contractCheck[S any] struct {
	name string
	fn   func(*testing.T, S)
}

// runContract runs each check as a subtest on a fresh, empty store from newStore.
func runContract[S any](t *testing.T, newStore func(t *testing.T) S, checks []contractCheck[S]) {
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) { c.fn(t, newStore(t)) })
	}
}

// ops returns a Build function that ignores its argument and returns ops.
func ops(o ...port.Op) func(uint64) ([]port.Op, error) {
	return func(uint64) ([]port.Op, error) { return o, nil }
}

func item(pk, sk string, data string, attrs ...string) port.Item {
	it := port.Item{Key: port.Key{PK: pk, SK: sk}, Data: []byte(data)}
	if len(attrs)%2 != 0 {
		panic("storetest: odd attrs")
	}
	if len(attrs) > 0 {
		it.Attrs = make(map[string]string, len(attrs)/2)
		for i := 0; i < len(attrs); i += 2 {
			it.Attrs[attrs[i]] = attrs[i+1]
		}
	}
	return it
}

func key(pk, sk string) port.Key { return port.Key{PK: pk, SK: sk} }

func commit(t testing.TB, s port.ItemStore, o ...port.Op) {
	t.Helper()
	if _, err := s.Commit(context.Background(), port.Tx{Build: ops(o...)}); err != nil {
		t.Fatalf("commit %v: %v", describe(o), err)
	}
}

func put(t testing.TB, s port.ItemStore, items ...port.Item) {
	t.Helper()
	o := make([]port.Op, len(items))
	for i, it := range items {
		o[i] = port.Put(it, port.Cond{})
	}
	commit(t, s, o...)
}

func get(t testing.TB, s port.ItemStore, k port.Key) (port.Item, bool) {
	t.Helper()
	it, ok, err := s.Get(context.Background(), k)
	if err != nil {
		t.Fatalf("get %s: %v", k, err)
	}
	if ok && it.Key != k {
		t.Fatalf("get %s returned key %s", k, it.Key)
	}
	return it, ok
}

func mustGet(t testing.TB, s port.ItemStore, k port.Key) port.Item {
	t.Helper()
	it, ok := get(t, s, k)
	if !ok {
		t.Fatalf("get %s: absent, want present", k)
	}
	return it
}

func mustAbsent(t testing.TB, s port.ItemStore, k port.Key) {
	t.Helper()
	if it, ok := get(t, s, k); ok {
		t.Fatalf("get %s: present (%s), want absent", k, show(it))
	}
}

func query(t testing.TB, s port.ItemStore, q port.Query) []port.Item {
	t.Helper()
	items, err := s.Query(context.Background(), q)
	if err != nil {
		t.Fatalf("query %+v: %v", q, err)
	}
	for _, it := range items {
		if it.PK != q.PK {
			t.Fatalf("query %+v returned item of partition %q", q, it.PK)
		}
	}
	return items
}

// all reads a whole partition, paging with After.
func all(t testing.TB, s port.ItemStore, pk string) []port.Item {
	t.Helper()
	var out []port.Item
	after := ""
	for {
		page := query(t, s, port.Query{PK: pk, After: after})
		if len(page) == 0 {
			return out
		}
		out = append(out, page...)
		after = page[len(page)-1].SK
	}
}

func sks(items []port.Item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.SK
	}
	return out
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// sameItem compares items, treating nil and empty Attrs and Data alike.
func sameItem(a, b port.Item) bool {
	if a.Key != b.Key || !bytes.Equal(a.Data, b.Data) || len(a.Attrs) != len(b.Attrs) {
		return false
	}
	for k, v := range a.Attrs {
		if w, ok := b.Attrs[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func wantItem(t testing.TB, s port.ItemStore, want port.Item) {
	t.Helper()
	got := mustGet(t, s, want.Key)
	if !sameItem(got, want) {
		t.Fatalf("get %s = %s, want %s", want.Key, show(got), show(want))
	}
}

func show(it port.Item) string {
	names := make([]string, 0, len(it.Attrs))
	for n := range it.Attrs {
		names = append(names, n)
	}
	sort.Strings(names)
	var b bytes.Buffer
	fmt.Fprintf(&b, "{%s attrs{", it.Key)
	for i, n := range names {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%s=%q", n, it.Attrs[n])
	}
	fmt.Fprintf(&b, "} data %q}", it.Data)
	return b.String()
}

func describe(o []port.Op) string {
	var b bytes.Buffer
	for i, op := range o {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s(%s if %s)", [...]string{"put", "delete", "check"}[op.Kind], op.Item.Key, condName(op.Cond))
	}
	return "[" + b.String() + "]"
}

func condName(c port.Cond) string {
	switch c.Kind {
	case port.CondNone:
		return "none"
	case port.CondExists:
		return "exists"
	case port.CondNotExists:
		return "not-exists"
	case port.CondAttrEquals:
		return fmt.Sprintf("%s=%q", c.Attr, c.Value)
	}
	return fmt.Sprintf("kind%d", c.Kind)
}

// counterValue reads a counter item's value (0 when absent).
func counterValue(t testing.TB, s port.ItemStore, k port.Key) uint64 {
	t.Helper()
	it, ok := get(t, s, k)
	if !ok {
		return 0
	}
	var n uint64
	if _, err := fmt.Sscan(it.Attr(port.CounterAttr), &n); err != nil {
		t.Fatalf("counter %s holds %q: %v", k, it.Attr(port.CounterAttr), err)
	}
	if fmt.Sprint(n) != it.Attr(port.CounterAttr) {
		t.Fatalf("counter %s holds %q, not canonical decimal", k, it.Attr(port.CounterAttr))
	}
	return n
}

// wantRejected checks that err is a rejection of an invalid request: an error, not a condition failure, not
// a transient failure.
func wantRejected(t testing.TB, what string, err error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error, want a rejection", what)
	}
	if i, ok := port.FailedOp(err); ok {
		t.Fatalf("%s: condition failure on op %d, want a rejection: %v", what, i, err)
	}
	if errors.Is(err, port.ErrUnavailable) {
		t.Fatalf("%s: transient error, want a rejection: %v", what, err)
	}
}

func wantCondFailed(t testing.TB, err error, index int, k port.Key) {
	t.Helper()
	var cf *port.ConditionFailedError
	if !errors.As(err, &cf) {
		t.Fatalf("commit: %v, want *port.ConditionFailedError on op %d", err, index)
	}
	if cf.Index != index || cf.Key != k {
		t.Fatalf("condition failed on op %d (%s), want op %d (%s)", cf.Index, cf.Key, index, k)
	}
	if i, ok := port.FailedOp(err); !ok || i != index {
		t.Fatalf("port.FailedOp = %d, %v; want %d, true", i, ok, index)
	}
}
