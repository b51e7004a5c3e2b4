package dirsync_test

import (
	"errors"
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/waypost/waypost/internal/dirsync"
)

func TestSync(t *testing.T) {
	if err := dirsync.Sync(t.TempDir()); err != nil {
		t.Fatalf("sync a directory: %v", err)
	}
	missing := filepath.Join(t.TempDir(), "missing")
	if err := dirsync.Sync(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("sync %s: %v, want fs.ErrNotExist wrapped", missing, err)
	}
}
