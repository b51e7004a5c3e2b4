package openapitest_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/waypost/waypost/api/apitest"
	"github.com/waypost/waypost/api/openapi/openapitest"
)

// TestServedDocumentIsValidOpenAPI: GET /v0/openapi.json answers, without a credential, the checked-in
// document, and the third-party validator accepts it as OpenAPI 3.1 (NewChecker validates it against the
// specification's schema).
func TestServedDocumentIsValidOpenAPI(t *testing.T) {
	t.Parallel()
	s := apitest.New(t, apitest.Options{})
	res, err := s.Client(t).Get(s.URL + "/v0/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	served, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /v0/openapi.json: %d %s %v", res.StatusCode, res.Header.Get("Content-Type"), err)
	}
	checkedIn, err := os.ReadFile(filepath.Join("..", "..", "..", "schemas", "openapi", "openapi.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(served, checkedIn) {
		t.Fatal("the served document differs from schemas/openapi/openapi.json")
	}
	if !bytes.Contains(served, []byte(`"openapi": "3.1.1"`)) {
		t.Fatal("not an OpenAPI 3.1 document")
	}
	if _, err := openapitest.NewChecker(served, nil); err != nil {
		t.Fatal(err)
	}
}

// drifting serves /v0/describe with the given status and body, as a server whose answer drifted from the
// document would.
func drifting(t *testing.T, status int, body string) string {
	t.Helper()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(hs.Close)
	return hs.URL
}

// TestDriftedAnswersFail: the checking client reports an answer that drifted from the document — a
// success without a required member of its data, an error code the route does not document, a status it
// does not document, an error envelope without its error — and accepts the route's real answer.
func TestDriftedAnswersFail(t *testing.T) {
	t.Parallel()
	c, err := openapitest.Shared()
	if err != nil {
		t.Fatal(err)
	}
	s := apitest.New(t, apitest.Options{})
	w := s.World(t)
	get := func(base string) (*http.Request, *http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequest("GET", base+"/v0/describe", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+w.TokA)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		return req, res, body
	}
	req, res, real := get(s.URL)
	if err := c.Check(req, res.StatusCode, res.Header, real); err != nil {
		t.Fatalf("the real describe answer: %v", err)
	}
	cases := map[string]struct {
		status int
		body   string
	}{
		"data without actor_id": {200, strings.Replace(string(real), `"actor_id"`, `"actor"`, 1)},
		"undocumented code":     {409, `{"ok":false,"request_id":"rq_1","error":{"code":"UPLOAD_SEALED","message":"x","retryable":false,"details":{}}}`},
		"undocumented status":   {418, `{"ok":false,"request_id":"rq_1","error":{"code":"INTERNAL","message":"x","retryable":true,"details":{}}}`},
		"error without error":   {404, `{"ok":false,"request_id":"rq_1"}`},
	}
	for name, tc := range cases {
		req, res, body := get(drifting(t, tc.status, tc.body))
		if err := c.Check(req, res.StatusCode, res.Header, body); err == nil {
			t.Errorf("%s: accepted", name)
		}
		var reported []error
		tr := &openapitest.Transport{Checker: c, Report: func(err error) { reported = append(reported, err) }}
		res2, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(res2.Body)
		res2.Body.Close()
		if len(reported) != 1 || !bytes.Equal(got, body) {
			t.Errorf("%s: the transport reported %v and handed on %q", name, reported, got)
		}
	}
}
