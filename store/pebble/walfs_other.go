//go:build !linux

package pebble

import "github.com/cockroachdb/pebble/v2/vfs"

// engineFS is the database's file system: vfs.Default (see walfs_linux.go for what Linux adds).
func engineFS() vfs.FS { return vfs.Default }
