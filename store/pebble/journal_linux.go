package pebble

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// syncData is fdatasync: the file's data, and its size where that changed, not its other metadata.
func syncData(f *os.File) error {
	for {
		err := unix.Fdatasync(int(f.Fd()))
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}
