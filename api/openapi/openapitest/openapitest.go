// Package openapitest checks HTTP answers against the OpenAPI 3.1 document of the Waypost API (package
// openapi) with a third-party validator (github.com/pb33f/libopenapi-validator): the status must be one the
// route documents and a JSON body must match that status's schema — the success envelope with the
// operation's result, or the error envelope with one of the error codes the route documents. The test
// clients of api/apitest, api/httpapi and e2e send every request through [Transport], so that a route whose
// answer drifts from the document fails the test that called it.
package openapitest

import (
	"bytes"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"

	"github.com/waypost/waypost/api/openapi"
	"github.com/waypost/waypost/api/ops"
	"github.com/waypost/waypost/schemas"
)

// Checker validates answers against one document. It is safe for concurrent use.
type Checker struct {
	mu     sync.Mutex // the validator's caches are not documented as safe for concurrent use
	v      validator.Validator
	routes *http.ServeMux // the documented routes: what is checked (others, such as /mcp, are not)
}

// NewChecker returns a checker of answers against doc (an OpenAPI 3.1 document as JSON) whose operations
// are list (for telling a documented route from another one).
func NewChecker(doc []byte, list []*ops.Op) (*Checker, error) {
	d, err := libopenapi.NewDocument(doc)
	if err != nil {
		return nil, fmt.Errorf("openapitest: parsing the document: %w", err)
	}
	v, errs := validator.NewValidator(d, config.WithFormatAssertions())
	if len(errs) > 0 {
		return nil, fmt.Errorf("openapitest: building the validator: %v", errs)
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		return nil, fmt.Errorf("openapitest: the document is not valid OpenAPI: %s", describe(verrs))
	}
	c := &Checker{v: v, routes: http.NewServeMux()}
	for _, o := range list {
		c.routes.HandleFunc(o.Method+" "+o.Path, func(http.ResponseWriter, *http.Request) {})
	}
	return c, nil
}

// Current returns a checker of the document the descriptors generate now (what GET /v0/openapi.json
// serves), for the whole operation list.
func Current() (*Checker, error) {
	reg, err := schemas.New()
	if err != nil {
		return nil, fmt.Errorf("openapitest: %w", err)
	}
	doc, err := openapi.Generate(reg, ops.List(), openapi.Options{})
	if err != nil {
		return nil, fmt.Errorf("openapitest: %w", err)
	}
	return NewChecker(doc, ops.List())
}

// shared is the checker of the current document, built once per test binary: building one compiles every
// schema of the document (about 1.5 s), too slow to do for each test. It never changes once built.
var shared = sync.OnceValues(Current)

// Shared returns the checker of the current document, built on first use and shared by the whole test
// binary.
func Shared() (*Checker, error) { return shared() }

// Documented reports whether req goes to a route of the document.
func (c *Checker) Documented(req *http.Request) bool {
	_, pattern := c.routes.Handler(req)
	return pattern != ""
}

// Check validates one answer to req (status, header and body as received) against the document; an answer
// to a route the document does not describe is not checked.
func (c *Checker) Check(req *http.Request, status int, header http.Header, body []byte) error {
	if !c.Documented(req) {
		return nil
	}
	res := &http.Response{StatusCode: status, Header: header, Body: http.NoBody, Request: req}
	if isJSON(header.Get("Content-Type")) {
		res.Body = io.NopCloser(bytes.NewReader(body))
	}
	c.mu.Lock()
	ok, errs := c.v.ValidateHttpResponse(req, res)
	c.mu.Unlock()
	if ok {
		return nil
	}
	snippet := string(body)
	if len(snippet) > 600 {
		snippet = snippet[:600] + "…"
	}
	return fmt.Errorf("%s %s answered %d, which the OpenAPI document does not allow: %s\nbody: %s",
		req.Method, req.URL.Path, status, describe(errs), snippet)
}

func isJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

func describe[E interface{ Error() string }](errs []E) string {
	var b strings.Builder
	for i, e := range errs {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

// Transport is an http.RoundTripper that checks every answer with Checker and reports a drift to Report
// (the answer is still returned as received). A JSON body is read whole and handed on unchanged; other
// bodies (blob bytes, archives) are left to stream.
type Transport struct {
	Base    http.RoundTripper // nil: http.DefaultTransport
	Checker *Checker
	Report  func(error)
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	res, err := base.RoundTrip(req)
	if err != nil || !t.Checker.Documented(req) {
		return res, err
	}
	var body []byte
	if isJSON(res.Header.Get("Content-Type")) {
		body, err = io.ReadAll(res.Body)
		_ = res.Body.Close()
		res.Body = io.NopCloser(bytes.NewReader(body))
		if err != nil {
			return res, nil // the caller sees the short body; nothing to check
		}
	}
	if err := t.Checker.Check(req, res.StatusCode, res.Header, body); err != nil {
		t.Report(err)
	}
	return res, nil
}

// CloseIdleConnections closes the idle connections of Base (http.Client.CloseIdleConnections reaches it
// through the wrapper).
func (t *Transport) CloseIdleConnections() {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	if c, ok := base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// Client returns base (nil: a new http.Client) with its transport wrapped to check every answer of a
// documented route against the current document (Shared), failing tb (Errorf: safe from any goroutine) on a drift.
func Client(tb testing.TB, base *http.Client) *http.Client {
	tb.Helper()
	c, err := Shared()
	if err != nil {
		tb.Fatalf("openapitest: %v", err)
	}
	out := &http.Client{}
	if base != nil {
		*out = *base //nolint:govet // copying a client's settings, not a lock
	}
	out.Transport = &Transport{Base: out.Transport, Checker: c, Report: func(err error) { tb.Errorf("%v", err) }}
	return out
}
