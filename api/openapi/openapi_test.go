package openapi_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/waypost/waypost/api/openapi"
	"github.com/waypost/waypost/api/ops"
	"github.com/waypost/waypost/schemas"
)

var update = flag.Bool("update", false, "rewrite schemas/openapi/openapi.json from the operation descriptors")

// checkedIn is the document as checked in.
var checkedIn = filepath.Join("..", "..", "schemas", "openapi", "openapi.json")

// TestCheckedInDocument: the checked-in document is exactly what the descriptors generate (CI fails on a
// descriptor or schema changed without `go generate ./api/openapi`).
func TestCheckedInDocument(t *testing.T) {
	got, err := openapi.Generate(schemas.MustNew(), ops.List(), openapi.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(checkedIn, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(checkedIn)
	if err != nil {
		t.Fatalf("%v (run go generate ./api/openapi)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from what api/ops generates: run go generate ./api/openapi", checkedIn)
	}
}
