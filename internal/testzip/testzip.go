// Package testzip is a test helper that reads a whole zip archive, failing the test on anything malformed.
package testzip

import (
	"archive/zip"
	"bytes"
	"io"
	"testing"
)

// Entries returns the content of every entry of archive by name, failing t if the archive or an entry does
// not read, or if a name stands in it twice.
func Entries(t testing.TB, archive []byte) map[string][]byte {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(archive), int64(len(archive)))
	if err != nil {
		t.Fatalf("zip archive does not open: %v", err)
	}
	got := make(map[string][]byte, len(zr.File))
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatalf("zip entry %s: %v", f.Name, err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatalf("zip entry %s: %v", f.Name, err)
		}
		if _, dup := got[f.Name]; dup {
			t.Fatalf("zip archive has %s twice", f.Name)
		}
		got[f.Name] = b
	}
	return got
}
