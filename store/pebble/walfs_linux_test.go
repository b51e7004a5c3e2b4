package pebble_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/store/pebble"
)

// TestLogIsExtendedAhead: on Linux the write-ahead log in use is extended ahead of its writes (its size is
// pebble's preallocation, about 1.1 × the memtable, not the bytes written), and a store closed with that
// zeroed tail, or copied as it is while open (as a crash leaves it), reopens with every commit.
func TestLogIsExtendedAhead(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "items")
	s := openStore(t, dir, pebble.Options{})
	const n = 20
	for i := range n {
		it := port.Item{Key: port.Key{PK: "P", SK: fmt.Sprintf("%03d", i)}, Data: []byte("value")}
		if _, err := s.Commit(context.Background(), port.Tx{Build: func(uint64) ([]port.Op, error) {
			return []port.Op{port.Put(it, port.NotExists())}, nil
		}}); err != nil {
			t.Fatal(err)
		}
	}
	logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil || len(logs) == 0 {
		t.Fatalf("no write-ahead log in %s (%v)", dir, err)
	}
	var largest int64
	for _, l := range logs {
		fi, err := os.Stat(l)
		if err != nil {
			t.Fatal(err)
		}
		largest = max(largest, fi.Size())
	}
	if largest < 16<<20 {
		t.Fatalf("largest write-ahead log is %d bytes after %d small commits, want it extended ahead (≥ 16 MiB)", largest, n)
	}
	// A copy of the open store's files is what a crash leaves: the log's tail is zeros.
	crashed := filepath.Join(t.TempDir(), "crashed")
	copyDir(t, dir, crashed)
	for _, d := range []string{crashed, dir} {
		if d == dir {
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		}
		r := openStore(t, d, pebble.Options{})
		got, err := r.Query(context.Background(), port.Query{PK: "P"})
		if err != nil || len(got) != n {
			t.Fatalf("%s reopened with %d items (%v), want %d", d, len(got), err, n)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// copyDir copies the regular files of src into a new directory dst.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o700); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() || e.Name() == "LOCK" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}
