package kv_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/store/kv"
)

// mapView is a minimal View and Ranger that records the order of calls and can fail a chosen write.
type mapView struct {
	items   map[port.Key]port.Item
	log     []string
	failPut int // fail the n-th Put (1-based); 0 never
	failGet error
	puts    int
}

func newView() *mapView { return &mapView{items: map[port.Key]port.Item{}} }

func (v *mapView) Get(k port.Key) (port.Item, bool, error) {
	v.log = append(v.log, "get "+k.String())
	if v.failGet != nil {
		return port.Item{}, false, v.failGet
	}
	it, ok := v.items[k]
	return it, ok, nil
}

func (v *mapView) Put(it port.Item) error {
	v.log = append(v.log, "put "+it.Key.String())
	v.puts++
	if v.puts == v.failPut {
		return errors.New("disk on fire")
	}
	v.items[it.Key] = kv.CloneItem(it) // the caller's memory (kv.View)
	return nil
}

func (v *mapView) Delete(k port.Key) error {
	v.log = append(v.log, "delete "+k.String())
	delete(v.items, k)
	return nil
}

func (v *mapView) Scan(pk, after string, fn func(port.Item) bool) error {
	var sks []string
	for k := range v.items {
		if k.PK == pk && k.SK > after {
			sks = append(sks, k.SK)
		}
	}
	sort.Strings(sks)
	for _, sk := range sks {
		if !fn(kv.CloneItem(v.items[port.Key{PK: pk, SK: sk}])) {
			break
		}
	}
	return nil
}

func build(ops ...port.Op) func(uint64) ([]port.Op, error) {
	return func(uint64) ([]port.Op, error) { return ops, nil }
}

func k(pk, sk string) port.Key { return port.Key{PK: pk, SK: sk} }

// TestReadsBeforeWrites checks that every condition and the counter are read before the first write.
func TestReadsBeforeWrites(t *testing.T) {
	v := newView()
	v.items[k("p", "a")] = port.Item{Key: k("p", "a")}
	ctr := k("p", "ctr")
	_, err := kv.Commit(context.Background(), v, port.Tx{Counter: &ctr, Count: 1, Max: 9, Build: build(
		port.Put(port.Item{Key: k("p", "b")}, port.NotExists()),
		port.Delete(k("p", "a"), port.Exists()),
		port.Check(k("p", "c"), port.NotExists()),
		port.Put(port.Item{Key: k("p", "d")}, port.Cond{}),
	)}, 10)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"get p|ctr", "get p|b", "get p|a", "get p|c", "put p|b", "delete p|a", "put p|d", "put p|ctr"}
	if strings.Join(v.log, ",") != strings.Join(want, ",") {
		t.Fatalf("calls %q, want %q", v.log, want)
	}
}

func TestWriteErrorReported(t *testing.T) {
	v := newView()
	v.failPut = 2
	_, err := kv.Commit(context.Background(), v, port.Tx{Build: build(
		port.Put(port.Item{Key: k("p", "a")}, port.Cond{}),
		port.Put(port.Item{Key: k("p", "b")}, port.Cond{}),
	)}, 10)
	if err == nil || !strings.Contains(err.Error(), "disk on fire") || !strings.Contains(err.Error(), "op 1") {
		t.Fatalf("err %v, want the write error of op 1", err)
	}
}

func TestReadErrorWritesNothing(t *testing.T) {
	v := newView()
	boom := errors.New("read failed")
	v.failGet = boom
	_, err := kv.Commit(context.Background(), v, port.Tx{Build: build(port.Put(port.Item{Key: k("p", "a")}, port.Exists()))}, 10)
	if !errors.Is(err, boom) || v.puts != 0 {
		t.Fatalf("err %v, %d puts", err, v.puts)
	}
}

func TestInvalidTx(t *testing.T) {
	ctr := k("p", "ctr")
	for name, tx := range map[string]port.Tx{
		"nil build":         {},
		"count 0":           {Counter: &ctr, Max: 5, Build: build()},
		"unknown op":        {Build: build(port.Op{Kind: 7, Item: port.Item{Key: k("p", "a")}})},
		"unknown cond":      {Build: build(port.Put(port.Item{Key: k("p", "a")}, port.Cond{Kind: 9}))},
		"attr cond no name": {Build: build(port.Put(port.Item{Key: k("p", "a")}, port.AttrEquals("", "x")))},
		"check no cond":     {Build: build(port.Check(k("p", "a"), port.Cond{}))},
		"empty attr name":   {Build: build(port.Put(port.Item{Key: k("p", "a"), Attrs: map[string]string{"": "x"}}, port.Cond{}))},
		"empty pk":          {Build: build(port.Put(port.Item{Key: k("", "a")}, port.Cond{}))},
		"empty counter sk":  {Counter: &port.Key{PK: "p"}, Count: 1, Max: 5, Build: build()},
		"duplicate":         {Build: build(port.Check(k("p", "a"), port.NotExists()), port.Delete(k("p", "a"), port.Cond{}))},
	} {
		v := newView()
		_, err := kv.Commit(context.Background(), v, tx, 10)
		if !errors.Is(err, kv.ErrInvalidTx) {
			t.Errorf("%s: %v, want ErrInvalidTx", name, err)
		}
		if v.puts != 0 || len(v.items) != 0 {
			t.Errorf("%s: wrote", name)
		}
	}
	_, err := kv.Commit(context.Background(), newView(), port.Tx{Counter: &ctr, Count: 1, Max: 5,
		Build: build(port.Put(port.Item{Key: ctr}, port.Cond{}))}, 10)
	if !errors.Is(err, kv.ErrDuplicateKey) || !strings.Contains(err.Error(), "counter") {
		t.Fatalf("op on the counter: %v", err)
	}
}

func TestCorruptCounter(t *testing.T) {
	for _, bad := range []string{"", "-1", "1.0", "x", "18446744073709551616", " 1"} {
		v := newView()
		ctr := k("p", "ctr")
		v.items[ctr] = port.Item{Key: ctr, Attrs: map[string]string{port.CounterAttr: bad}}
		_, err := kv.Commit(context.Background(), v, port.Tx{Counter: &ctr, Count: 1, Max: 5, Build: build()}, 10)
		if !errors.Is(err, kv.ErrCorrupt) {
			t.Errorf("counter %q: %v, want ErrCorrupt", bad, err)
		}
	}
}

func TestValidateKey(t *testing.T) {
	ok := []port.Key{k("p", "s"), k(strings.Repeat("p", kv.MaxPKBytes), strings.Repeat("s", kv.MaxSKBytes)), k("é", "\x00")}
	bad := []port.Key{k("", "s"), k("p", ""), k(strings.Repeat("p", kv.MaxPKBytes+1), "s"), k("p", strings.Repeat("s", kv.MaxSKBytes+1))}
	for _, key := range ok {
		if err := kv.ValidateKey(key); err != nil {
			t.Errorf("%.20s: %v", key, err)
		}
	}
	for _, key := range bad {
		if err := kv.ValidateKey(key); !errors.Is(err, kv.ErrInvalidKey) {
			t.Errorf("%.20s: %v, want ErrInvalidKey", key, err)
		}
	}
}

func TestCloneItem(t *testing.T) {
	if c := kv.CloneItem(port.Item{}); c.Attrs != nil || c.Data != nil {
		t.Fatal("nil fields became non-nil")
	}
	if c := kv.CloneItem(port.Item{Attrs: map[string]string{}, Data: []byte{}}); c.Attrs == nil || c.Data == nil {
		t.Fatal("empty fields became nil")
	}
	it := port.Item{Key: k("p", "s"), Attrs: map[string]string{"a": "1"}, Data: []byte("xy")}
	c := kv.CloneItem(it)
	c.Attrs["a"] = "2"
	c.Data[0] = 'z'
	if it.Attrs["a"] != "1" || string(it.Data) != "xy" {
		t.Fatal("clone shares memory")
	}
}

func TestQueryDefaultPage(t *testing.T) {
	v := newView()
	for i := 0; i < kv.DefaultPageSize+5; i++ {
		key := k("p", fmt.Sprintf("%04d", i))
		v.items[key] = port.Item{Key: key}
	}
	got, err := kv.Query(context.Background(), v, port.Query{PK: "p"})
	if err != nil || len(got) != kv.DefaultPageSize {
		t.Fatalf("%d items, %v; want %d", len(got), err, kv.DefaultPageSize)
	}
	if _, err := kv.Query(context.Background(), v, port.Query{PK: "p", Limit: -1}); !errors.Is(err, kv.ErrInvalidQuery) {
		t.Fatalf("negative limit: %v", err)
	}
}
