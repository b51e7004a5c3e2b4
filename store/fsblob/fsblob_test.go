package fsblob_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"go.uber.org/goleak"

	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/store/fsblob"
	"github.com/waypost/waypost/store/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newStore(t testing.TB) *fsblob.Store {
	t.Helper()
	s, _ := newStoreIn(t)
	return s
}

// newStoreIn returns a store in a fresh temporary directory, and the directory.
func newStoreIn(t testing.TB) (*fsblob.Store, string) {
	t.Helper()
	root := t.TempDir()
	s, err := fsblob.New(root)
	if err != nil {
		t.Fatal(err)
	}
	return s, root
}

// mustPut stores body at key.
func mustPut(t testing.TB, s *fsblob.Store, key string, body []byte) {
	t.Helper()
	if _, err := s.Put(context.Background(), key, int64(len(body)), digest(body), bytes.NewReader(body)); err != nil {
		t.Fatal(err)
	}
}

func TestContract(t *testing.T) {
	storetest.RunBlobStore(t, func(t *testing.T) port.BlobStore { return newStore(t) })
}

func digest(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

func TestInvalidKeys(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	body := []byte("x")
	for _, k := range []string{"", "/abs", "a/../b", "..", "../x", "a/..", "./a", "a/./b", "a//b", "a/", `a\b`, "a b",
		"é", "a:b", "a\x00b", "a*", strings.Repeat("k", fsblob.MaxKeyBytes+1)} {
		if err := fsblob.ValidateKey(k); !errors.Is(err, fsblob.ErrInvalidKey) {
			t.Errorf("ValidateKey(%q) = %v", k, err)
		}
		if _, err := s.Put(ctx, k, 1, digest(body), bytes.NewReader(body)); !errors.Is(err, fsblob.ErrInvalidKey) {
			t.Errorf("put %q: %v", k, err)
		}
		if _, err := s.Head(ctx, k); !errors.Is(err, fsblob.ErrInvalidKey) {
			t.Errorf("head %q: %v", k, err)
		}
		if _, _, err := s.Get(ctx, k); !errors.Is(err, fsblob.ErrInvalidKey) {
			t.Errorf("get %q: %v", k, err)
		}
		if err := s.Delete(ctx, k); !errors.Is(err, fsblob.ErrInvalidKey) {
			t.Errorf("delete %q: %v", k, err)
		}
	}
	for _, k := range []string{"a", "a.b", "..a", "a..b", "a/b.c/d-e_f", "A-Z_0.9", strings.Repeat("k", fsblob.MaxKeyBytes)} {
		if err := fsblob.ValidateKey(k); err != nil {
			t.Errorf("ValidateKey(%q) = %v", k, err)
		}
	}
	if _, err := s.Put(ctx, "neg", -1, digest(nil), bytes.NewReader(nil)); !errors.Is(err, fsblob.ErrInvalidArgument) {
		t.Errorf("negative size: %v", err)
	}
}

// TestNoLeftovers checks that failed puts leave no temporary files and that only the objects are on disk.
func TestNoLeftovers(t *testing.T) {
	s, root := newStoreIn(t)
	ctx := context.Background()
	body := []byte("some content")
	_, _ = s.Put(ctx, "k1", 5, digest(body), bytes.NewReader(body))                             // size
	_, _ = s.Put(ctx, "k1", int64(len(body)), digest(nil), bytes.NewReader(body))               // checksum
	_, _ = s.Put(ctx, "k1", int64(len(body)), digest(body), iotest.ErrReader(io.ErrClosedPipe)) // reader
	mustPut(t, s, "k2", body)
	_, _ = s.Put(ctx, "k2", int64(len(body)), digest(body), bytes.NewReader(body)) // exists
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 {
		t.Fatalf("files on disk: %q, want the one object", files)
	}
	st, err := os.Stat(files[0])
	if err != nil || st.Mode().Perm()&0o077 != 0 {
		t.Fatalf("object file mode %v, %v: want no group/other access", st.Mode(), err)
	}
}

// TestCorruptFile checks that a damaged object file is reported, not served.
func TestCorruptFile(t *testing.T) {
	s, root := newStoreIn(t)
	ctx := context.Background()
	mustPut(t, s, "c", []byte("content"))
	var obj string
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			obj = p
		}
		return nil
	})
	if err := os.WriteFile(obj, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Head(ctx, "c"); !errors.Is(err, fsblob.ErrCorrupt) {
		t.Fatalf("head of a corrupt file: %v", err)
	}
	if _, _, err := s.Get(ctx, "c"); !errors.Is(err, fsblob.ErrCorrupt) {
		t.Fatalf("get of a corrupt file: %v", err)
	}
}

// TestGetAfterDelete checks that an open reader keeps streaming after the object is deleted.
func TestGetAfterDelete(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	body := bytes.Repeat([]byte("z"), 1<<20)
	mustPut(t, s, "g", body)
	rc, info, err := s.Get(ctx, "g")
	if err != nil || info.Size != int64(len(body)) {
		t.Fatal(info, err)
	}
	defer rc.Close()
	if err := s.Delete(ctx, "g"); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("read %d bytes, %v", len(got), err)
	}
	if _, ok := rc.(io.Seeker); ok {
		t.Fatal("reader exposes Seek (and with it the file header)")
	}
}

// TestRemoveTemporaries: orphaned temporary files (a put killed mid-way) are removed by age or all at once;
// stored objects and a put in progress are left alone.
func TestRemoveTemporaries(t *testing.T) {
	s, root := newStoreIn(t)
	ctx := context.Background()
	content := []byte("kept")
	mustPut(t, s, "a/kept", content)
	// Orphans in a shard directory, one old and one fresh.
	shard := filepath.Join(root, "ab", "cd")
	if err := os.MkdirAll(shard, 0o700); err != nil {
		t.Fatal(err)
	}
	old, fresh := filepath.Join(shard, ".tmp-old"), filepath.Join(shard, ".tmp-fresh")
	for _, p := range []string{old, fresh} {
		if err := os.WriteFile(p, []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	past := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(old, past, past); err != nil {
		t.Fatal(err)
	}
	// A put in progress: its body blocks until the sweep is over.
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	big := bytes.Repeat([]byte("x"), 1<<16)
	go func() {
		_, err := s.Put(ctx, "a/slow", int64(len(big)), digest(big), pr)
		done <- err
	}()
	if _, err := pw.Write(big[:100]); err != nil {
		t.Fatal(err)
	}

	if n, err := s.RemoveTemporaries(ctx, time.Hour); err != nil || n != 1 {
		t.Fatalf("RemoveTemporaries(1h) = %d, %v; want the old orphan only", n, err)
	}
	if _, err := os.Stat(old); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("old orphan still there: %v", err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Fatalf("fresh temporary file removed: %v", err)
	}
	if _, err := pw.Write(big[100:]); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	if err := <-done; err != nil {
		t.Fatalf("the put in progress failed: %v", err)
	}
	if n, err := s.RemoveTemporaries(ctx, 0); err != nil || n != 1 {
		t.Fatalf("RemoveTemporaries(0) = %d, %v; want the fresh orphan", n, err)
	}
	for _, key := range []string{"a/kept", "a/slow"} {
		if _, err := s.Head(ctx, key); err != nil {
			t.Fatalf("stored object %s: %v", key, err)
		}
	}
}
