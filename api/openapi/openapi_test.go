package openapi_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/waypost/waypost/api/openapi"
	"github.com/waypost/waypost/api/openapi/openapitest"
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

// doc generates the document with opts and decodes it.
func doc(t *testing.T, opts openapi.Options) (raw []byte, d struct {
	Paths      map[string]map[string]map[string]any `json:"paths"`
	Components struct {
		SecuritySchemes map[string]map[string]any `json:"securitySchemes"`
	} `json:"components"`
}) {
	t.Helper()
	raw, err := openapi.Generate(schemas.MustNew(), ops.List(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	return raw, d
}

// TestEveryRouteIsDescribed: every operation of api/ops is in the document at its method and path, with a
// 200 answer and, per HTTP status, the error envelope listing exactly the codes openapi.ErrorCodes gives it;
// a PATCH takes application/merge-patch+json as well as application/json and says how it merges.
func TestEveryRouteIsDescribed(t *testing.T) {
	_, d := doc(t, openapi.Options{})
	for _, o := range ops.List() {
		op := d.Paths[o.Path][strings.ToLower(o.Method)]
		if op == nil || op["operationId"] != o.Name {
			t.Errorf("%s %s (%s) is not described", o.Method, o.Path, o.Name)
			continue
		}
		responses, _ := op["responses"].(map[string]any)
		if responses["200"] == nil {
			t.Errorf("%s: no 200 answer", o.Name)
		}
		want := map[string][]any{}
		for _, c := range openapi.ErrorCodes(o) {
			status := strconv.Itoa(c.HTTPStatus())
			want[status] = append(want[status], string(c))
		}
		for status, codes := range want {
			r, _ := responses[status].(map[string]any)
			raw, _ := json.Marshal(r)
			for _, c := range codes {
				if !strings.Contains(string(raw), `"`+c.(string)+`"`) {
					t.Errorf("%s: answer %s does not list %s", o.Name, status, c)
				}
			}
		}
		if o.Method == "PATCH" {
			body, _ := op["requestBody"].(map[string]any)
			content, _ := body["content"].(map[string]any)
			if content[openapi.MergePatchType] == nil || content["application/json"] == nil || body["description"] != o.Merge {
				t.Errorf("%s: the PATCH body is not described as a merge patch: %v", o.Name, body)
			}
		}
	}
}

// TestOAuthOption: with openapi.Options.OAuth the document adds an oauth2 authorizationCode scheme, offered
// on every data-plane operation (with the operation's scopes) beside the bearer token and on no control-plane
// one; without it there is none. The validator accepts both documents.
func TestOAuthOption(t *testing.T) {
	plain, d := doc(t, openapi.Options{})
	if d.Components.SecuritySchemes["oauth2"] != nil {
		t.Fatal("an oauth2 scheme without the option")
	}
	withOAuth, d := doc(t, openapi.Options{OAuth: &openapi.OAuth{AuthorizationURL: "https://waypost.example/oauth/authorize", TokenURL: "https://waypost.example/oauth/token"}})
	flows, _ := d.Components.SecuritySchemes["oauth2"]["flows"].(map[string]any)
	if d.Components.SecuritySchemes["oauth2"]["type"] != "oauth2" || flows["authorizationCode"] == nil {
		t.Fatalf("oauth2 scheme: %v", d.Components.SecuritySchemes["oauth2"])
	}
	send := d.Paths["/v0/messages"]["post"]["security"]
	raw, _ := json.Marshal(send)
	if !strings.Contains(string(raw), `{"oauth2":["message.send"]}`) || !strings.Contains(string(raw), `"bearerToken"`) {
		t.Errorf("message.send security: %s", raw)
	}
	admin, _ := json.Marshal(d.Paths["/admin/v0/spaces"]["post"]["security"])
	if strings.Contains(string(admin), "oauth2") {
		t.Errorf("the control plane offers OAuth: %s", admin)
	}
	for _, raw := range [][]byte{plain, withOAuth} {
		if _, err := openapitest.NewChecker(raw, ops.List()); err != nil {
			t.Error(err)
		}
	}
}
