package storetest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync/atomic"
	"testing"

	"pgregory.net/rapid"

	"github.com/waypost/waypost/domain/port"
)

// testModel runs random transactions against the store and against a model written independently of the
// adapters, and compares outcomes and state after every step. Each rapid run uses its own partitions, so one
// store serves all runs. Reproduce a failure with -rapid.seed.
func testModel(t *testing.T, s port.ItemStore) {
	var run atomic.Int64
	rapid.Check(t, func(rt *rapid.T) {
		ns := fmt.Sprintf("model%d#", run.Add(1))
		m := &model{items: map[port.Key]port.Item{}}
		pks := []string{ns + "p", ns + "q"}
		sortKeys := []string{"a", "b", "c", "d"}
		ctr := port.Key{PK: ns + "p", SK: "ctr"}
		genKey := rapid.Custom(func(t *rapid.T) port.Key {
			return port.Key{PK: rapid.SampledFrom(pks).Draw(t, "pk"), SK: rapid.SampledFrom(sortKeys).Draw(t, "sk")}
		})
		genCond := rapid.Custom(func(t *rapid.T) port.Cond {
			switch rapid.IntRange(0, 4).Draw(t, "cond") {
			case 0:
				return port.Cond{}
			case 1:
				return port.Exists()
			case 2:
				return port.NotExists()
			default:
				return port.AttrEquals("v", rapid.SampledFrom([]string{"0", "1", "2"}).Draw(t, "value"))
			}
		})
		genOp := rapid.Custom(func(t *rapid.T) port.Op {
			k := genKey.Draw(t, "key")
			c := genCond.Draw(t, "cond")
			switch rapid.IntRange(0, 2).Draw(t, "kind") {
			case 0:
				it := port.Item{Key: k, Data: rapid.SliceOfN(rapid.Byte(), 0, 8).Draw(t, "data")}
				if rapid.Bool().Draw(t, "hasAttr") {
					it.Attrs = map[string]string{"v": rapid.SampledFrom([]string{"0", "1", "2"}).Draw(t, "v")}
				}
				return port.Put(it, c)
			case 1:
				return port.Delete(k, c)
			default:
				if c.Kind == port.CondNone {
					c = port.Exists()
				}
				return port.Check(k, c)
			}
		})
		steps := rapid.IntRange(1, 25).Draw(rt, "steps")
		for step := 0; step < steps; step++ {
			ops := rapid.SliceOfN(genOp, 0, 4).Draw(rt, "ops")
			tx := port.Tx{Build: func(uint64) ([]port.Op, error) { return ops, nil }}
			if rapid.Bool().Draw(rt, "useCounter") {
				tx.Counter = &ctr
				tx.Count = rapid.Uint64Range(1, 3).Draw(rt, "count")
				tx.Max = rapid.Uint64Range(0, 15).Draw(rt, "max")
			}
			want := m.commit(tx, ops)
			first, err := s.Commit(context.Background(), tx)
			switch {
			case want.err == errWantOK:
				if err != nil {
					rt.Fatalf("step %d %s: %v, want success", step, describe(ops), err)
				}
				if first != want.first {
					rt.Fatalf("step %d: first %d, want %d", step, first, want.first)
				}
			case want.err == errWantCond:
				var cf *port.ConditionFailedError
				if !errors.As(err, &cf) || cf.Index != want.index || cf.Key != ops[want.index].Item.Key {
					rt.Fatalf("step %d %s: %v, want condition failure on op %d", step, describe(ops), err, want.index)
				}
			case want.err == errWantExhausted:
				if !errors.Is(err, port.ErrCounterExhausted) {
					rt.Fatalf("step %d: %v, want ErrCounterExhausted", step, err)
				}
			case want.err == errWantRejected:
				if err == nil {
					rt.Fatalf("step %d %s: committed a transaction with two actions on one key", step, describe(ops))
				}
				if _, ok := port.FailedOp(err); ok {
					rt.Fatalf("step %d %s: condition failure for two actions on one key: %v", step, describe(ops), err)
				}
			}
			// Compare the whole state.
			for _, pk := range pks {
				got, err := s.Query(context.Background(), port.Query{PK: pk})
				if err != nil {
					rt.Fatalf("query: %v", err)
				}
				wantItems := m.partition(pk)
				if len(got) != len(wantItems) {
					rt.Fatalf("step %d: partition %s holds %q, model %q", step, pk, sks(got), sks(wantItems))
				}
				for i := range got {
					if !sameItem(got[i], wantItems[i]) {
						rt.Fatalf("step %d: %s, model %s", step, show(got[i]), show(wantItems[i]))
					}
				}
			}
		}
	})
}

var (
	errWantOK        = errors.New("ok")
	errWantCond      = errors.New("condition failed")
	errWantExhausted = errors.New("exhausted")
	errWantRejected  = errors.New("rejected")
)

type outcome struct {
	err   error
	first uint64
	index int
}

type model struct {
	items map[port.Key]port.Item
}

func (m *model) commit(tx port.Tx, ops []port.Op) outcome {
	seen := map[port.Key]bool{}
	dup := false
	if tx.Counter != nil {
		seen[*tx.Counter] = true
	}
	for _, op := range ops {
		if seen[op.Item.Key] {
			dup = true
		}
		seen[op.Item.Key] = true
	}
	var cur uint64
	if tx.Counter != nil {
		if it, ok := m.items[*tx.Counter]; ok {
			fmt.Sscan(it.Attrs[port.CounterAttr], &cur)
		}
		// Exhausted when cur+Count > Max (no overflow with these small numbers).
		if cur+tx.Count > tx.Max {
			if dup {
				return outcome{err: errWantRejected} // either rejection is fine; nothing changes
			}
			return outcome{err: errWantExhausted}
		}
	}
	if dup {
		return outcome{err: errWantRejected}
	}
	for i, op := range ops {
		it, ok := m.items[op.Item.Key]
		holds := false
		switch op.Cond.Kind {
		case port.CondNone:
			holds = true
		case port.CondExists:
			holds = ok
		case port.CondNotExists:
			holds = !ok
		case port.CondAttrEquals:
			v, has := it.Attrs[op.Cond.Attr]
			holds = ok && has && v == op.Cond.Value
		}
		if !holds {
			return outcome{err: errWantCond, index: i}
		}
	}
	for _, op := range ops {
		switch op.Kind {
		case port.OpPut:
			m.items[op.Item.Key] = op.Item
		case port.OpDelete:
			delete(m.items, op.Item.Key)
		}
	}
	var first uint64
	if tx.Counter != nil {
		first = cur + 1
		it := m.items[*tx.Counter]
		it.Key = *tx.Counter
		it.Attrs = map[string]string{port.CounterAttr: fmt.Sprint(cur + tx.Count)}
		m.items[*tx.Counter] = it
	}
	return outcome{err: errWantOK, first: first}
}

func (m *model) partition(pk string) []port.Item {
	var out []port.Item
	for k, it := range m.items {
		if k.PK == pk {
			out = append(out, it)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].SK < out[j].SK })
	return out
}
