// Package dirsync makes a directory's entries durable: after a file is created, renamed or removed in a
// directory, the entry itself reaches the disk only when the directory is synced.
package dirsync

import (
	"fmt"
	"os"
)

// Sync fsyncs directory dir, so that the files created, renamed or removed in it so far stay so after a
// crash.
func Sync(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("dirsync: %w", err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("dirsync: %s: %w", dir, err)
	}
	return nil
}
