package server_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/waypost/waypost/server"
)

// TestDataFormat: a fresh directory records server.DataFormat and opens again; a directory of another
// recorded format, or one holding a store without a FORMAT file (the bbolt waypost.db of earlier builds),
// is refused with a message that names the directory, both formats and what to do, and is left untouched.
func TestDataFormat(t *testing.T) {
	open := func(dir string) error {
		srv, err := server.Open(server.Config{DataDir: dir, NoSync: true, AdminSecret: m1Admin})
		if err == nil {
			return srv.Close()
		}
		return err
	}
	dir := t.TempDir()
	if err := open(dir); err != nil {
		t.Fatalf("fresh directory: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "FORMAT")); err != nil || strings.TrimSpace(string(b)) != server.DataFormat {
		t.Fatalf("FORMAT: %q, %v", b, err)
	}
	if err := open(dir); err != nil {
		t.Fatalf("reopening: %v", err)
	}

	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "FORMAT"), []byte("waypost-data-9\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := open(other)
	if !errors.Is(err, server.ErrDataFormat) {
		t.Fatalf("other format: %v, want ErrDataFormat", err)
	}
	for _, want := range []string{other, `"waypost-data-9"`, server.DataFormat, "empty --data directory"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q does not name %s", err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(other, "items")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused directory got an item store: %v", err)
	}

	old := t.TempDir()
	if err := os.WriteFile(filepath.Join(old, "waypost.db"), []byte("bbolt"), 0o600); err != nil {
		t.Fatal(err)
	}
	err = open(old)
	if !errors.Is(err, server.ErrDataFormat) || !strings.Contains(err.Error(), "waypost.db") || !strings.Contains(err.Error(), "bbolt") {
		t.Fatalf("bbolt directory: %v", err)
	}
	if _, err := os.Stat(filepath.Join(old, "FORMAT")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused directory got a FORMAT file: %v", err)
	}
}
