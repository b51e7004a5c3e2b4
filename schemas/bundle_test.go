package schemas_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/waypost/waypost/schemas"
)

// TestBundledSchemasStandAlone checks that every bundled schema has no external reference, compiles on
// its own, and accepts and rejects the same examples as the original.
func TestBundledSchemasStandAlone(t *testing.T) {
	t.Parallel()
	forEachBundled(t, func(name string, b []byte) {
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
	})
}

// forEachBundled calls check with the bundled form of every schema but the shared definitions.
func forEachBundled(t *testing.T, check func(name string, bundled []byte)) {
	t.Helper()
	reg := schemas.MustNew()
	for _, name := range reg.Names() {
		if name == schemas.CommonName {
			continue
		}
		b, err := reg.Bundled(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		check(name, b)
	}
}

// TestPortableSchemasKeepMeaning checks that the portable form of every bundled schema (what MCP clients
// receive) has no type array and accepts and rejects exactly the examples the original does.
func TestPortableSchemasKeepMeaning(t *testing.T) {
	t.Parallel()
	reg := schemas.MustNew()
	forEachBundled(t, func(name string, b []byte) {
		p, err := schemas.Portable(b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if strings.Contains(string(p), `"type":[`) {
			t.Errorf("%s: the portable form still has a type array", name)
		}
		compiled, err := reg.Compile(name+" (portable)", p)
		if err != nil {
			t.Fatalf("%s: the portable form does not compile: %v", name, err)
		}
		files, _ := filepath.Glob(filepath.Join("testdata", name, "*", "*.json"))
		for _, f := range files {
			inst, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			want, got := reg.Validate(name, inst) == nil, compiled.Validate(inst) == nil
			if want != got {
				t.Errorf("%s: %s: original accepts=%v, portable accepts=%v", name, f, want, got)
			}
		}
	})
}

// TestStandaloneFailuresNameTheMember checks that a standalone schema reports failures like the registry's,
// with Field naming a missing or undeclared member, and never more than 100 bytes of a member name.
func TestStandaloneFailuresNameTheMember(t *testing.T) {
	t.Parallel()
	reg := schemas.MustNew()
	s, err := reg.Compile("args", []byte(`{"type":"object","required":["message_id"],"additionalProperties":false,`+
		`"properties":{"message_id":{"type":"string","pattern":"^[a-z]+$"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("k", 500)
	for _, c := range []struct{ in, field string }{
		{`{}`, "/message_id"},
		{`{"message_id":"BAD"}`, "/message_id"},
		{`{"message_id":"ok","` + long + `":1}`, "/" + long[:100] + "…"},
	} {
		err := s.Validate([]byte(c.in))
		ve, ok := errors.AsType[*schemas.ValidationError](err)
		if !ok || len(ve.Failures) == 0 || ve.Failures[0].Field != c.field {
			t.Errorf("%.40s: %v; want a failure at field %.40q", c.in, err, c.field)
			continue
		}
		if strings.Contains(err.Error(), long[:101]) {
			t.Errorf("%.40s: the message repeats more than 100 bytes of a member name", c.in)
		}
	}
}
