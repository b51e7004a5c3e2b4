package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// notServedByHTTPAPI are the routes of the stack that api/httpapi does not register, with where they are
// served instead.
func notServedByHTTPAPI() map[string]string {
	return map[string]string{
		"ANY /mcp":                  "the MCP handler (api/mcpapi) that functions/mcp serves",
		"ANY /internal/v0/{proxy+}": "the channel service's internal API (channel/chanservice in the channel container)",
	}
}

// expectedTarget is where a path of the Waypost API must go, written independently of Routes().
func expectedTarget(path string) string {
	switch {
	case strings.HasPrefix(path, "/admin/"):
		return FnAdmin
	case strings.HasPrefix(path, "/v0/collections/"):
		return FnMemory
	case path == "/v0/blobs" || strings.HasPrefix(path, "/v0/blobs/") || strings.HasPrefix(path, "/v0/uploads/"):
		return FnBlobs
	case path == "/v0/feed/wait" || strings.HasPrefix(path, "/internal/"):
		return TargetChannel
	case path == "/mcp":
		return FnMCP
	default:
		return FnMailbox
	}
}

// TestRoutesMatchServer parses api/httpapi and checks that every method and path it registers is a route
// of the stack, integrated with the function of its group, and that the stack has no route the server
// does not serve (except those of notServedByHTTPAPI).
func TestRoutesMatchServer(t *testing.T) {
	served := httpapiPatterns(t, filepath.Join("..", "api", "httpapi"))
	if len(served) < 30 {
		t.Fatalf("found only %d routes in api/httpapi: the parser no longer understands it", len(served))
	}
	stack := map[string]Route{}
	for _, r := range Routes() {
		if _, dup := stack[r.Key()]; dup {
			t.Errorf("route %s twice in Routes()", r.Key())
		}
		stack[r.Key()] = r
		if want := expectedTarget(r.Path); r.Target != want {
			t.Errorf("route %s goes to %s, want %s", r.Key(), r.Target, want)
		}
	}
	for _, key := range served {
		if _, ok := stack[key]; !ok {
			t.Errorf("api/httpapi serves %s, which the stack does not route", key)
			continue
		}
		delete(stack, key)
	}
	for key := range stack {
		if where, ok := notServedByHTTPAPI()[key]; ok {
			t.Logf("%s: served by %s", key, where)
			continue
		}
		t.Errorf("the stack routes %s, which api/httpapi does not serve", key)
	}
}

// httpapiPatterns returns the "METHOD /path" patterns registered with HandleFunc or Handle in the Go
// package in dir (tests excluded), in API Gateway syntax. Patterns without a method (catch-alls) are
// skipped: the stack's $default route covers them.
func httpapiPatterns(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var out []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		consts := map[string]string{} // string constants declared anywhere in the file
		ast.Inspect(f, func(n ast.Node) bool {
			if vs, ok := n.(*ast.ValueSpec); ok {
				for i, id := range vs.Names {
					if i < len(vs.Values) {
						if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
							consts[id.Name], _ = strconv.Unquote(lit.Value)
						}
					}
				}
			}
			return true
		})
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) != 2 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || (sel.Sel.Name != "HandleFunc" && sel.Sel.Name != "Handle") {
				return true
			}
			pattern, ok := evalString(call.Args[0], consts)
			if !ok {
				t.Errorf("%s: cannot evaluate the pattern of %s", fset.Position(call.Pos()), sel.Sel.Name)
				return true
			}
			method, path, found := strings.Cut(pattern, " ")
			if !found {
				return true
			}
			path = strings.TrimSuffix(path, "{$}")
			path = strings.ReplaceAll(path, "...}", "+}")
			out = append(out, method+" "+strings.TrimSpace(path))
			return true
		})
	}
	sort.Strings(out)
	return out
}

// evalString evaluates a constant string expression of literals, named constants and "+".
func evalString(e ast.Expr, consts map[string]string) (string, bool) {
	switch x := e.(type) {
	case *ast.BasicLit:
		if x.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(x.Value)
		return s, err == nil
	case *ast.Ident:
		s, ok := consts[x.Name]
		return s, ok
	case *ast.ParenExpr:
		return evalString(x.X, consts)
	case *ast.BinaryExpr:
		if x.Op != token.ADD {
			return "", false
		}
		l, ok1 := evalString(x.X, consts)
		r, ok2 := evalString(x.Y, consts)
		return l + r, ok1 && ok2
	}
	return "", false
}
