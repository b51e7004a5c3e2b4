package browsertest_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/waypost/waypost/internal/browsertest"
)

// TestWatchesWhatAPageDoes checks the watcher itself: a dialog, a console error, a CSP refusal, a failed
// request and a request to a host not allowed are all reported; a clean page reports nothing.
func TestWatchesWhatAPageDoes(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/clean", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte(`<!doctype html><title>clean</title><link rel="icon" href="data:,"><p id="p">hello</p>`))
	})
	mux.HandleFunc("/dirty", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Content-Security-Policy", "script-src 'self'")
		w.Write([]byte(`<!doctype html><title>dirty</title><link rel="icon" href="data:,"><script src="/dirty.js"></script>
<script>alert("inline ran")</script><img src="http://example.invalid/x.png"><p id="p">x</p>`))
	})
	mux.HandleFunc("/dirty.js", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/javascript")
		w.Write([]byte(`console.error("boom"); alert("script ran"); fetch("/missing");`))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	t.Run("clean", func(t *testing.T) {
		b := browsertest.New(t, browsertest.Options{})
		var text string
		if err := chromedp.Run(b.Ctx, chromedp.Navigate(srv.URL+"/clean"), chromedp.Text("#p", &text)); err != nil {
			t.Fatal(err)
		}
		if text != "hello" || len(b.Problems()) != 0 {
			t.Fatalf("text %q, problems %v", text, b.Problems())
		}
	})
	t.Run("dirty", func(t *testing.T) {
		b := browsertest.New(t, browsertest.Options{})
		if err := chromedp.Run(b.Ctx, chromedp.Navigate(srv.URL+"/dirty"), chromedp.WaitVisible("#p"),
			chromedp.Sleep(700*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		all := strings.Join(b.Problems(), "\n")
		for _, want := range []string{"boom", "script ran", "HTTP 404", "example.invalid", "Content Security Policy"} {
			if !strings.Contains(all, want) {
				t.Errorf("problems lack %q:\n%s", want, all)
			}
		}
		if strings.Contains(all, "inline ran") {
			t.Errorf("the inline script ran despite the CSP:\n%s", all)
		}
		// Everything seen was expected here: the cleanup must not fail the test.
		for _, p := range []string{"boom", "script ran", "HTTP 404", "example.invalid", "Content Security Policy", "request failed"} {
			b.Expect(p)
		}
		if rest := b.Problems(); len(rest) != 0 {
			t.Errorf("unexpected problems: %v", rest)
		}
	})
}
