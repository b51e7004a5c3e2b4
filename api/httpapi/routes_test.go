package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/waypost/waypost/api/apitest"
	"github.com/waypost/waypost/api/ops"
)

// TestEveryOperationIsRouted sends each operation of api/ops to its method and path, without a
// credential: none may fall through to the catch-all (NOT_FOUND "no such route") or answer 405, and each
// asks for the credential of its plane.
func TestEveryOperationIsRouted(t *testing.T) {
	t.Parallel()
	s := apitest.New(t, apitest.Options{})
	for _, o := range ops.List() {
		if o.Embedded { // mounted by package server, not by this stack
			continue
		}
		path := o.Path
		for _, p := range o.PathParams() {
			path = strings.ReplaceAll(path, "{"+p+"}", "x1")
		}
		req, err := http.NewRequest(o.Method, s.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := s.Client(t).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var env struct {
			Error struct{ Code, Message string }
		}
		_ = json.NewDecoder(resp.Body).Decode(&env)
		resp.Body.Close()
		switch {
		case strings.HasPrefix(env.Error.Message, "no such route"), resp.StatusCode == http.StatusMethodNotAllowed:
			t.Errorf("%s %s (%s) is not routed: %d %s", o.Method, o.Path, o.Name, resp.StatusCode, env.Error.Message)
		case o.Plane != ops.Public && resp.StatusCode != http.StatusUnauthorized:
			t.Errorf("%s %s (%s) without a credential: %d %s, want 401", o.Method, o.Path, o.Name, resp.StatusCode, env.Error.Code)
		}
	}
}
