package web_test

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/waypost/waypost/web"
)

func get(t *testing.T, h http.Handler, path string) *http.Response {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	return rec.Result()
}

// TestHandlerServesTheAppWithItsSecurityHeaders: every file of the app, the index and the favicon are
// served with the strict policy, nosniff, no referrer and their right types.
func TestHandlerServesTheAppWithItsSecurityHeaders(t *testing.T) {
	h := web.Handler()
	cases := map[string]string{
		"/ui/":               "text/html; charset=utf-8",
		"/ui/style.css":      "text/css; charset=utf-8",
		"/ui/js/app.js":      "text/javascript; charset=utf-8",
		"/ui/favicon.svg":    "image/svg+xml",
		"/favicon.ico":       "image/svg+xml",
		"/ui/js/console.js":  "text/javascript; charset=utf-8",
		"/ui/js/download.js": "text/javascript; charset=utf-8",
	}
	for path, ctype := range cases {
		res := get(t, h, path)
		if res.StatusCode != 200 {
			t.Errorf("%s: HTTP %d", path, res.StatusCode)
			continue
		}
		if got := res.Header.Get("Content-Type"); got != ctype {
			t.Errorf("%s: Content-Type %q, want %q", path, got, ctype)
		}
		csp := res.Header.Get("Content-Security-Policy")
		for _, d := range []string{"default-src 'self'", "script-src 'self'", "style-src 'self'", "connect-src 'self'",
			"img-src 'self' data:", "frame-ancestors 'none'", "base-uri 'none'", "form-action 'self'", "object-src 'none'"} {
			if !strings.Contains(csp, d) {
				t.Errorf("%s: the policy %q lacks %q", path, csp, d)
			}
		}
		if strings.Contains(csp, "unsafe-") {
			t.Errorf("%s: the policy allows something unsafe: %q", path, csp)
		}
		if res.Header.Get("X-Content-Type-Options") != "nosniff" || res.Header.Get("Referrer-Policy") != "no-referrer" {
			t.Errorf("%s: headers %v", path, res.Header)
		}
	}
	if res := get(t, h, "/ui"); res.StatusCode != http.StatusMovedPermanently || res.Header.Get("Location") != "/ui/" {
		t.Errorf("/ui: HTTP %d to %q, want a redirect to /ui/", res.StatusCode, res.Header.Get("Location"))
	}
	for _, path := range []string{"/ui/missing.js", "/ui/js/", "/elsewhere"} {
		if res := get(t, h, path); res.StatusCode != http.StatusNotFound {
			t.Errorf("%s: HTTP %d, want 404", path, res.StatusCode)
		}
	}
}

// TestAppHasNoInlineScriptOrHTMLSinks reads every file of the app: no inline script or style, no event
// handler attributes, and no JavaScript that parses strings as HTML or code (the policy would refuse
// the first; the second would make message content live).
func TestAppHasNoInlineScriptOrHTMLSinks(t *testing.T) {
	sinks := regexp.MustCompile(`innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function|setTimeout\(\s*["'\x60]|DOMParser|createContextualFragment|srcdoc`)
	inline := regexp.MustCompile(`(?i)<script(?:\s[^>]*)?>\s*[^<\s]|\son[a-z]+=|<style|style=|javascript:`)
	n := 0
	err := fs.WalkDir(web.Files(), ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		f, err := web.Files().Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		b, err := io.ReadAll(f)
		if err != nil {
			return err
		}
		n++
		switch {
		case strings.HasSuffix(path, ".js"):
			if m := sinks.Find(b); m != nil {
				t.Errorf("%s uses %q", path, m)
			}
		case strings.HasSuffix(path, ".html"):
			if m := inline.Find(b); m != nil {
				t.Errorf("%s has inline code or style: %q", path, m)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 10 {
		t.Fatalf("only %d files in the app", n)
	}
}
