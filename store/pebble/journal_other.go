//go:build !linux

package pebble

import "os"

// syncData makes the file's data durable (fsync where fdatasync is not available).
func syncData(f *os.File) error { return f.Sync() }
