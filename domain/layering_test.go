package domain_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDomainDoesNoIO enforces the layering rule of the core (docs/contributing.md): nothing the domain
// packages link — `go list -deps` of ./domain/..., test support (domaintest, which wires real adapters
// into the contract suites and is never linked into a binary) aside — is net/http, an AWS SDK, bbolt or
// pebble, and no package of the module or a third party among them imports os or net itself. (The
// standard library's own use of os, as fmt's, is not the domain doing I/O.)
func TestDomainDoesNoIO(t *testing.T) {
	t.Parallel()
	list := exec.Command("go", "list", "-f", `{{if not (or (eq .Name "domaintest") (eq .Name "main"))}}{{.ImportPath}}{{end}}`, "./...")
	out, err := list.Output()
	if err != nil {
		t.Fatalf("go list ./...: %v", err)
	}
	pkgs := strings.Fields(string(out))
	if len(pkgs) < 2 {
		t.Fatalf("go list found only %v under domain/", pkgs)
	}
	deps := exec.Command("go", append([]string{"list", "-deps", "-f", `{{.ImportPath}} {{.Standard}} {{join .Imports " "}}`}, pkgs...)...)
	out, err = deps.Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	forbidden := []string{"net/http", "github.com/aws/", "go.etcd.io/bbolt", "github.com/cockroachdb/pebble"}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg, std, imports := f[0], f[1] == "true", f[2:]
		for _, bad := range forbidden {
			if pkg == bad || strings.HasPrefix(pkg, bad) && strings.HasSuffix(bad, "/") || strings.HasPrefix(pkg, bad+"/") {
				t.Errorf("the domain links %s", pkg)
			}
		}
		if std {
			continue
		}
		for _, imp := range imports {
			if imp == "os" || imp == "net" {
				t.Errorf("%s, which the domain links, imports %s", pkg, imp)
			}
		}
	}
}
