package pebble

import (
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/sys/unix"
)

// engineFS is the database's file system: vfs.Default, except that the space pebble preallocates for a
// write-ahead log file becomes part of the file (fallocate without FALLOC_FL_KEEP_SIZE) rather than
// reserved beyond its end. Appending to a file changes its size, and an fdatasync after an append must
// also journal that size; writing inside the file does not. On ext4 here a 1.2 KB write plus fdatasync took
// about 110 µs inside an extended file and 150 µs as an append (docs/benchmarks.md), and the embedded
// server syncs once per group of commits: a lone client waits for every one of those syncs. Pebble already
// recycles its old logs for the same reason, but a new data directory, and every restart, starts on a new
// log. Reading a log stops at the first zeroed chunk (the unwritten rest of the file reads as zeros), as it
// does in a recycled log at the first record of an older one.
func engineFS() vfs.FS { return extendingFS{vfs.Default} }

// extendingFS creates write-ahead logs as extendingFiles.
type extendingFS struct{ vfs.FS }

// Create implements vfs.FS.
func (fs extendingFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, category)
	if err != nil || !strings.HasSuffix(name, ".log") {
		return f, err
	}
	return extendingFile{f}, nil
}

// extendingFile preallocates by extending the file.
type extendingFile struct{ vfs.File }

// Preallocate implements vfs.File; where the file system cannot extend a file with fallocate, it keeps
// pebble's reservation.
func (f extendingFile) Preallocate(offset, length int64) error {
	if fd := f.Fd(); fd != vfs.InvalidFd {
		if err := unix.Fallocate(int(fd), 0, offset, length); err == nil {
			return nil
		}
	}
	return f.File.Preallocate(offset, length)
}
