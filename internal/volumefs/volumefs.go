// Package volumefs is a fault-injecting file system for tests: a volume of fixed capacity over a directory
// of another file system (pebble's vfs.FS), whose writes fail with ENOSPC once the files under that
// directory would take more than the capacity, and whose GetDiskUsage reports that capacity and what is
// left of it. Tests that cannot mount a small tmpfs (not root) fill and free it as they would a real one.
package volumefs

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// FS is a volume of Capacity bytes holding the directory Root of the file system it wraps. Only writes of
// files under Root count; a write that would take the files under Root past Capacity writes nothing and
// fails with ENOSPC.
type FS struct {
	vfs.FS
	root     string
	capacity int64
	mu       sync.Mutex // serializes growing writes, so that two cannot pass the capacity together
}

// New returns a volume of capacity bytes holding root (created if absent) on base.
func New(base vfs.FS, root string, capacity int64) (*FS, error) {
	if err := base.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("volumefs: %w", err)
	}
	return &FS{FS: base, root: filepath.Clean(root), capacity: capacity}, nil
}

// Used returns the bytes the files under the root take (their sizes).
func (v *FS) Used() (int64, error) {
	var used int64
	err := filepath.WalkDir(v.root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed during the walk
			}
			return err
		}
		if d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				used += info.Size()
			}
		}
		return nil
	})
	return used, err
}

func (v *FS) inside(name string) bool {
	rel, err := filepath.Rel(v.root, filepath.Clean(name))
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// GetDiskUsage reports the volume's capacity and the room left in it.
func (v *FS) GetDiskUsage(path string) (vfs.DiskUsage, error) {
	if !v.inside(path) {
		return v.FS.GetDiskUsage(path)
	}
	used, err := v.Used()
	if err != nil {
		return vfs.DiskUsage{}, err
	}
	avail := max(v.capacity-used, 0)
	return vfs.DiskUsage{AvailBytes: uint64(avail), TotalBytes: uint64(v.capacity), UsedBytes: uint64(used)}, nil
}

func (v *FS) wrap(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil || !v.inside(name) {
		return f, err
	}
	return &file{File: f, v: v}, nil
}

// Create creates a file; under the root its writes count against the capacity.
func (v *FS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := v.FS.Create(name, category)
	return v.wrap(name, f, err)
}

// OpenReadWrite opens a file for writing; under the root its writes count against the capacity.
func (v *FS) OpenReadWrite(name string, category vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := v.FS.OpenReadWrite(name, category, opts...)
	return v.wrap(name, f, err)
}

// ReuseForWrite reuses a file; under the root its writes count against the capacity.
func (v *FS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := v.FS.ReuseForWrite(oldname, newname, category)
	return v.wrap(newname, f, err)
}

// Unwrap returns the wrapped file system.
func (v *FS) Unwrap() vfs.FS { return v.FS }

// file is a file under the root: a write that grows it is checked against the room left.
type file struct {
	vfs.File
	v   *FS
	mu  sync.Mutex
	off int64 // the offset of the next Write
}

// grow checks that the file may reach end bytes, holding the volume's lock until done is called.
func (f *file) grow(end int64) (done func(), err error) {
	info, err := f.File.Stat()
	if err != nil {
		return nil, err
	}
	if end <= info.Size() {
		return func() {}, nil
	}
	f.v.mu.Lock()
	used, err := f.v.Used()
	if err == nil && used+end-info.Size() > f.v.capacity {
		err = &fs.PathError{Op: "write", Path: "volume", Err: syscall.ENOSPC}
	}
	if err != nil {
		f.v.mu.Unlock()
		return nil, err
	}
	return f.v.mu.Unlock, nil
}

func (f *file) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	done, err := f.grow(f.off + int64(len(p)))
	if err != nil {
		return 0, err
	}
	defer done()
	n, err := f.File.Write(p)
	f.off += int64(n)
	return n, err
}

func (f *file) WriteAt(p []byte, off int64) (int, error) {
	done, err := f.grow(off + int64(len(p)))
	if err != nil {
		return 0, err
	}
	defer done()
	return f.File.WriteAt(p, off)
}

func (f *file) Preallocate(off, length int64) error {
	return nil // the room is checked when the bytes are written
}
