package server

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/waypost/waypost/internal/dirsync"
	"github.com/waypost/waypost/internal/metrics"
	"github.com/waypost/waypost/store/pebble"
)

// DataFormat names the layout of the data directory this build reads and writes: the item store in
// items/ (store/pebble, layout pebble.Format), message bodies and blobs in blobs/, and the generated secrets.
// It is recorded in the directory's FORMAT file on first start and checked on every start.
const DataFormat = "waypost-data-3"

// formatFile is the file of the data directory that records its DataFormat.
const formatFile = "FORMAT"

// ErrDataFormat reports a data directory of another format than DataFormat.
var ErrDataFormat = errors.New("data directory of another format")

// checkDataFormat checks the format recorded in dir, recording DataFormat in a directory that holds no
// store yet. A directory written by another format (including the bbolt file waypost.db of format
// waypost-data-1, which recorded no FORMAT file) is refused: there is no migration.
func checkDataFormat(dir string) error {
	path := filepath.Join(dir, formatFile)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		if got := strings.TrimSpace(string(b)); got != DataFormat {
			return fmt.Errorf("server: %w: %s records format %q, this server reads %q; there is no migration: "+
				"start it with an empty --data directory, or use the build that wrote this one", ErrDataFormat, path, got, DataFormat)
		}
		return nil
	case !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("server: reading %s: %w", path, err)
	}
	for name, format := range map[string]string{"waypost.db": "waypost-data-1 (bbolt)", "items": "unknown"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return fmt.Errorf("server: %w: %s holds %s without a %s file, a store of format %s; this server reads %q "+
				"and there is no migration: start it with an empty --data directory, or use the build that wrote this one",
				ErrDataFormat, dir, name, formatFile, format, DataFormat)
		}
	}
	if err := writeFileSync(path, []byte(DataFormat+"\n")); err != nil {
		return fmt.Errorf("server: recording the data format: %w", err)
	}
	return nil
}

// writeFileSync creates path with data (mode 0600), syncing the file and its directory.
func writeFileSync(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return dirsync.Sync(filepath.Dir(path))
}

// openItems opens the item store of a data directory.
func openItems(dir string, cfg Config, rec metrics.Recorder) (*pebble.Store, error) {
	return pebble.Open(filepath.Join(dir, "items"), pebble.Options{NoSync: cfg.NoSync, Logger: cfg.Logger, OnBatch: rec.Batch,
		FS: cfg.ItemFS, RecoverEvery: cfg.RecoverEvery})
}
