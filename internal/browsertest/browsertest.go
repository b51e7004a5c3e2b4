// Package browsertest drives real headless Chromium (Debian's chromium) from Go tests through chromedp, and
// watches what a page does: console errors, uncaught exceptions, failed requests, requests to any host but
// the ones a test allows, and JavaScript dialogs (alert, confirm, prompt). A test that opens a browser with
// New fails at its end if any of them happened, unless it said it expected them.
//
// Chromium is started the way this workplace's closed network needs (no background networking, no
// component updates, no QUIC) and with a host resolver that answers only loopback names, so a page can never
// dial a public address.
package browsertest

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// RequireEnv names the environment variable that turns a missing Chromium into a failure instead of a skip
// (scripts/test sets it after installing Chromium).
const RequireEnv = "WAYPOST_REQUIRE_BROWSER"

// Binary returns the Chromium executable: $WAYPOST_CHROMIUM, else chromium or chromium-browser on PATH. It
// skips the test when none is found, or fails it when RequireEnv is set.
func Binary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("WAYPOST_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv(RequireEnv) != "" {
		t.Fatalf("chromium not found on PATH and %s is set (install Debian's chromium package)", RequireEnv)
	}
	t.Skip("chromium not installed (apt-get install chromium); scripts/test installs it")
	return ""
}

// Options configures a browser.
type Options struct {
	// Width and Height are the window size in CSS pixels (default 1280×900).
	Width, Height int
	// Mobile emulates a touch phone at that size (device scale factor 2).
	Mobile bool
	// AllowHosts lists the host:port pairs the page may request besides the one of the first page
	// navigated to (whose host is allowed automatically).
	AllowHosts []string
	// Timeout bounds the whole browser session (default 2 minutes).
	Timeout time.Duration
}

// Browser is one headless Chromium with its own profile, and what its pages did.
type Browser struct {
	// Ctx is the chromedp context of the browser's first tab: pass it to chromedp.Run.
	Ctx context.Context

	mu       sync.Mutex
	allowed  map[string]bool
	problems []string
	dialogs  []string
	requests []string
	expected map[string]bool
}

// New starts a headless Chromium for the test; it is closed, and its problems reported, when the test ends.
func New(t testing.TB, opts Options) *Browser {
	t.Helper()
	bin := Binary(t)
	if opts.Width == 0 {
		opts.Width, opts.Height = 1280, 900
	}
	if opts.Timeout == 0 {
		opts.Timeout = 2 * time.Minute
	}
	// The profile lives outside t.TempDir: Chromium's helpers may still be writing to it for a moment after
	// the browser is cancelled, and t.TempDir's removal fails the test on that.
	profile, err := os.MkdirTemp("", "waypost-chromium-")
	if err != nil {
		t.Fatalf("browsertest: profile dir: %v", err)
	}
	allocOpts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin),
		chromedp.UserDataDir(profile),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-features", "Translate,OptimizationHints,MediaRouter,InterestFeedContentSuggestions"),
		// Only loopback names resolve: a page cannot reach a public or private address, even by mistake.
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1"),
		chromedp.WindowSize(opts.Width, opts.Height),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), allocOpts...)
	tctx, cancelTimeout := context.WithTimeout(actx, opts.Timeout)
	ctx, cancelCtx := chromedp.NewContext(tctx, chromedp.WithErrorf(t.Logf))
	b := &Browser{Ctx: ctx, allowed: map[string]bool{}, expected: map[string]bool{}}
	for _, h := range opts.AllowHosts {
		b.allowed[h] = true
	}
	chromedp.ListenTarget(ctx, b.onEvent)
	start := []chromedp.Action{network.Enable(), runtime.Enable(), page.Enable(), cdplog.Enable()}
	if opts.Mobile {
		start = append(start, chromedp.EmulateViewport(int64(opts.Width), int64(opts.Height),
			chromedp.EmulateScale(2), chromedp.EmulateMobile, chromedp.EmulateTouch))
	}
	if err := chromedp.Run(ctx, start...); err != nil {
		cancelCtx()
		cancelTimeout()
		cancelAlloc()
		t.Fatalf("browsertest: starting chromium: %v", err)
	}
	t.Cleanup(func() {
		cancelCtx()
		cancelTimeout()
		cancelAlloc()
		for i := 0; i < 20 && os.RemoveAll(profile) != nil; i++ {
			time.Sleep(100 * time.Millisecond)
		}
		for _, p := range b.Problems() {
			t.Errorf("browser: %s", p)
		}
	})
	return b
}

// Expect marks a problem text (a substring) as expected: Problems leaves it out. For a test that provokes a
// failed request on purpose (a 401 the page handles, say).
func (b *Browser) Expect(substr string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.expected[substr] = true
}

// Allow adds a host:port the page may request.
func (b *Browser) Allow(hostport string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.allowed[hostport] = true
}

// Problems returns the console errors, exceptions, failed requests, requests to hosts not allowed and
// dialogs seen so far, less the expected ones.
func (b *Browser) Problems() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, p := range append(append([]string(nil), b.problems...), b.dialogs...) {
		skip := false
		for e := range b.expected {
			if strings.Contains(p, e) {
				skip = true
				break
			}
		}
		if !skip {
			out = append(out, p)
		}
	}
	return out
}

// Dialogs returns the JavaScript dialogs the pages opened (each was dismissed).
func (b *Browser) Dialogs() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.dialogs...)
}

// Requests returns every URL the pages requested, in order.
func (b *Browser) Requests() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.requests...)
}

func (b *Browser) addProblem(format string, args ...any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.problems = append(b.problems, fmt.Sprintf(format, args...))
}

func (b *Browser) onEvent(ev any) {
	switch e := ev.(type) {
	case *network.EventRequestWillBeSent:
		u, err := url.Parse(e.Request.URL)
		b.mu.Lock()
		b.requests = append(b.requests, e.Request.URL)
		if err == nil && (u.Scheme == "http" || u.Scheme == "https" || u.Scheme == "ws" || u.Scheme == "wss") {
			if len(b.allowed) == 0 {
				b.allowed[u.Host] = true // the first page's host
			}
			if !b.allowed[u.Host] {
				b.problems = append(b.problems, fmt.Sprintf("request to a host not allowed: %s", e.Request.URL))
			}
		}
		b.mu.Unlock()
	case *network.EventLoadingFailed:
		if !e.Canceled {
			b.addProblem("request failed (%s): %s", e.Type, e.ErrorText)
		}
	case *network.EventResponseReceived:
		if e.Response.Status >= 400 {
			b.addProblem("HTTP %d from %s", int(e.Response.Status), e.Response.URL)
		}
	case *runtime.EventConsoleAPICalled:
		if e.Type == runtime.APITypeError || e.Type == runtime.APITypeAssert {
			var parts []string
			for _, a := range e.Args {
				parts = append(parts, string(a.Value)+a.Description)
			}
			b.addProblem("console.%s: %s", e.Type, strings.Join(parts, " "))
		}
	case *runtime.EventExceptionThrown:
		d := e.ExceptionDetails
		msg := d.Text
		if d.Exception != nil {
			msg += " " + d.Exception.Description
		}
		b.addProblem("uncaught exception: %s", msg)
	case *cdplog.EventEntryAdded:
		// Content-Security-Policy refusals and other browser-side errors arrive here.
		// (network entries repeat what EventResponseReceived and EventLoadingFailed already report).
		if e.Entry.Level == cdplog.LevelError && e.Entry.Source != cdplog.SourceNetwork {
			b.addProblem("browser log (%s): %s %s", e.Entry.Source, e.Entry.Text, e.Entry.URL)
		}
	case *page.EventJavascriptDialogOpening:
		b.mu.Lock()
		b.dialogs = append(b.dialogs, fmt.Sprintf("dialog %s: %q", e.Type, e.Message))
		b.mu.Unlock()
		go func() {
			_ = chromedp.Run(b.Ctx, page.HandleJavaScriptDialog(false))
		}()
	}
}
