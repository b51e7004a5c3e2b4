package volumefs

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// EnvForce makes Volume use volumefs even as root.
const EnvForce = "WAYPOST_TEST_VOLUMEFS"

// Volume returns a directory on a volume of size bytes for a test, and the file system to reach it through:
// a tmpfs mounted for the test (unmounted when it ends) when the test runs as root, as CI does, otherwise —
// or with WAYPOST_TEST_VOLUMEFS=1 — a volumefs over a temporary directory. Either way the volume fills up
// and frees as a real one does; tmpfs reports true is whether it is a real mount (a process started by the
// test sees the same volume only then).
func Volume(t testing.TB, size int64) (dir string, fsys vfs.FS, tmpfs bool) {
	t.Helper()
	dir = t.TempDir()
	if os.Geteuid() == 0 && os.Getenv(EnvForce) == "" {
		out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d,mode=0700", size), "tmpfs", dir).CombinedOutput()
		if err == nil {
			t.Cleanup(func() {
				if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
					t.Errorf("umount %s: %v %s", dir, err, out)
				}
			})
			t.Logf("volume: tmpfs of %d bytes at %s", size, dir)
			return dir, vfs.Default, true
		}
		t.Logf("mount tmpfs: %v %s; using volumefs", err, out)
	}
	v, err := New(vfs.Default, dir, size)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("volume: volumefs of %d bytes over %s", size, dir)
	return dir, v, false
}

// Fill writes a file "filler" into dir through fsys until the volume has less than leave bytes free, and
// returns its path; removing it frees the room again.
func Fill(t testing.TB, fsys vfs.FS, dir string, leave int64) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := fsys.OpenReadWrite(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	off := info.Size()
	chunk := make([]byte, 64<<10)
	for {
		u, err := fsys.GetDiskUsage(dir)
		if err != nil {
			t.Fatal(err)
		}
		if int64(u.AvailBytes) < leave {
			if err := f.Sync(); err != nil {
				t.Fatal(err)
			}
			return path
		}
		n := min(int64(len(chunk)), int64(u.AvailBytes)-leave+1)
		if _, err := f.WriteAt(chunk[:n], off); err != nil {
			t.Fatalf("filling the volume: %v", err)
		}
		off += n
	}
}
