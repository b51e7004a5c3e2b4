package pebble

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"pgregory.net/rapid"

	cerrors "github.com/cockroachdb/errors"
	pdb "github.com/cockroachdb/pebble/v2"

	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/store/kv"
)

func TestMapErr(t *testing.T) {
	for _, err := range []error{
		syscall.EIO, syscall.ENOSPC,
		&fs.PathError{Op: "write", Path: "/x", Err: syscall.EIO},
		cerrors.Wrapf(&fs.PathError{Op: "sync", Path: "/x/000001.log", Err: syscall.EIO}, "pebble: sync"),
	} {
		if got := mapErr(err); !errors.Is(got, port.ErrUnavailable) || !errors.Is(got, err) {
			t.Errorf("mapErr(%v) = %v, want it wrapped with ErrUnavailable", err, got)
		}
	}
	if got := mapErr(pdb.ErrClosed); !errors.Is(got, ErrClosed) || errors.Is(got, port.ErrUnavailable) {
		t.Errorf("closed: %v", got)
	}
	for _, err := range []error{kv.ErrInvalidTx, port.ErrTooManyOps, pdb.ErrNotFound, context.Canceled} {
		if got := mapErr(err); got != err {
			t.Errorf("mapErr(%v) = %v, want it unchanged", err, got)
		}
	}
}

func TestValueCodec(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		k := port.Key{PK: rapid.String().Draw(t, "pk"), SK: rapid.String().Draw(t, "sk")}
		it := port.Item{Key: k, Attrs: rapid.MapOf(rapid.String(), rapid.String()).Draw(t, "attrs"),
			Data: rapid.SliceOf(rapid.Byte()).Draw(t, "data")}
		got, err := decodeValue(k, encodeValue(it))
		if err != nil {
			t.Fatal(err)
		}
		if got.Key != k || len(got.Attrs) != len(it.Attrs) || string(got.Data) != string(it.Data) {
			t.Fatalf("round trip %+v -> %+v", it, got)
		}
		for n, v := range it.Attrs {
			if w, ok := got.Attrs[n]; !ok || w != v {
				t.Fatalf("attr %q: %q, want %q", n, w, v)
			}
		}
		// Every strict prefix of a value without data is rejected, never misread.
		raw := encodeValue(port.Item{Key: k, Attrs: it.Attrs})
		for i := 0; i < len(raw); i++ {
			if _, err := decodeValue(k, raw[:i]); !errors.Is(err, kv.ErrCorrupt) {
				t.Fatalf("prefix %d of %d: %v, want ErrCorrupt", i, len(raw), err)
			}
		}
	})
	if _, err := decodeValue(port.Key{PK: "p", SK: "s"}, []byte{2, 0}); !errors.Is(err, kv.ErrCorrupt) {
		t.Fatalf("unknown version: %v", err)
	}
	if _, err := decodeValue(port.Key{PK: "p", SK: "s"}, []byte{1, 1, 5, 'a'}); !errors.Is(err, kv.ErrCorrupt) {
		t.Fatalf("truncated attribute: %v", err)
	}
}

func TestKeyEncodingOrder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		pk := rapid.String().Draw(t, "pk")
		a, b := rapid.String().Draw(t, "a"), rapid.String().Draw(t, "b")
		ka, kb := string(encodeKey(port.Key{PK: pk, SK: a})), string(encodeKey(port.Key{PK: pk, SK: b}))
		if (a < b) != (ka < kb) {
			t.Fatalf("order of %q, %q not kept", a, b)
		}
		other := rapid.String().Draw(t, "other")
		if other != pk && len(ka) >= len(partitionPrefix(other)) && ka[:len(partitionPrefix(other))] == string(partitionPrefix(other)) {
			t.Fatalf("key of partition %q has the prefix of partition %q", pk, other)
		}
	})
}

// TestPartialWriteRolledBack makes the second write of a transaction fail while other transactions share
// its batch: the failing transaction leaves nothing, the others commit.
func TestPartialWriteRolledBack(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "db"), Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	boom := errors.New("injected write failure")
	s.failWrite = func(k port.Key) error {
		if k.PK == "bad" && k.SK == "2" {
			return boom
		}
		return nil
	}
	ctr := port.Key{PK: "bad", SK: "ctr"}
	var wg sync.WaitGroup
	errs := make([]error, 9)
	for i := range errs {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if i == 4 {
				_, errs[i] = s.Commit(context.Background(), port.Tx{Counter: &ctr, Count: 1, Max: 9, Build: func(uint64) ([]port.Op, error) {
					return []port.Op{
						port.Put(port.Item{Key: port.Key{PK: "bad", SK: "1"}}, port.Cond{}),
						port.Put(port.Item{Key: port.Key{PK: "bad", SK: "2"}}, port.Cond{}),
						port.Put(port.Item{Key: port.Key{PK: "bad", SK: "3"}}, port.Cond{}),
					}, nil
				}})
				return
			}
			_, errs[i] = s.Commit(context.Background(), port.Tx{Build: func(uint64) ([]port.Op, error) {
				return []port.Op{port.Put(port.Item{Key: port.Key{PK: "good", SK: fmt.Sprint(i)}}, port.NotExists())}, nil
			}})
		}(i)
	}
	wg.Wait()
	for i, err := range errs {
		if i == 4 {
			if !errors.Is(err, boom) {
				t.Fatalf("failing tx: %v, want the write error", err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("tx %d: %v", i, err)
		}
		if _, ok, _ := s.Get(context.Background(), port.Key{PK: "good", SK: fmt.Sprint(i)}); !ok {
			t.Fatalf("tx %d not committed", i)
		}
	}
	for _, sk := range []string{"1", "2", "3", "ctr"} {
		if _, ok, _ := s.Get(context.Background(), port.Key{PK: "bad", SK: sk}); ok {
			t.Fatalf("bad|%s written by a failed transaction", sk)
		}
	}
}
