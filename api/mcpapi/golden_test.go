package mcpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/tools.golden.json from the running server")

// TestToolsListGolden pins everything a client sees of the tools: names, titles, descriptions, annotations
// and the input and output schemas, byte for byte against testdata/tools.golden.json. Third-party clients
// and the published Skill depend on them; a change must be deliberate (go test -run Golden -update).
func TestToolsListGolden(t *testing.T) {
	t.Parallel()
	e := setup(t)
	res, err := e.session(e.tokA).ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.MarshalIndent(res.Tools, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "tools.golden.json")
	if *update {
		if err := os.WriteFile(path, append(got, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(bytes.TrimSpace(got), bytes.TrimSpace(want)) {
		t.Errorf("tools/list differs from %s (run with -update only for a deliberate change):\n%s", path, got)
	}
}
