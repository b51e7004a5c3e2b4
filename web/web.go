// Package web serves the browser app of Waypost at /ui/: a person's inbox and memory, and the owner's
// console. The app is plain JavaScript modules and CSS embedded in the binary (no build step) and speaks only
// the public /v0 and /admin/v0 HTTP APIs, so it behaves the same whichever deployment serves those.
//
// Every answer carries a strict Content-Security-Policy (no inline script, no eval, same-origin requests
// only, no framing), X-Content-Type-Options: nosniff and Referrer-Policy: no-referrer. The app renders
// messages and memory as text only (docs/web.md).
package web

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

// static holds the app's files (index.html, the modules under js/, the stylesheet and the icon).
//
//go:embed static
var static embed.FS

// Prefix is the path the app is served under.
const Prefix = "/ui/"

// ContentSecurityPolicy is the policy of every /ui/ answer: scripts, styles, requests and forms on this
// origin only, images from this origin or data: URLs, no plugins, no <base>, and no framing by any page.
const ContentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; connect-src 'self'; " +
	"img-src 'self' data:; object-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

// Files returns the app's files, rooted at the directory that holds index.html.
func Files() fs.FS {
	sub, err := fs.Sub(static, "static")
	if err != nil { // the embedded tree always has static/
		panic(err)
	}
	return sub
}

// Handler serves the app: GET /ui/ (index.html) and the files under it, /ui (a redirect to /ui/) and
// /favicon.ico (the app's icon, for browsers that ask for it whatever the page says). Mount it at
// "GET /ui/", "GET /ui" and "GET /favicon.ico".
func Handler() http.Handler {
	files := http.FileServerFS(Files())
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		secure(w.Header())
		switch {
		case r.URL.Path == "/ui":
			http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
		case r.URL.Path == "/favicon.ico":
			r2 := r.Clone(r.Context())
			r2.URL.Path = "/favicon.svg"
			w.Header().Set("Content-Type", "image/svg+xml")
			files.ServeHTTP(w, r2)
		case r.URL.Path != Prefix && strings.HasSuffix(r.URL.Path, "/"):
			http.NotFound(w, r) // no directory listings
		case strings.HasPrefix(r.URL.Path, Prefix):
			if strings.HasSuffix(r.URL.Path, ".js") {
				w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
			}
			http.StripPrefix(strings.TrimSuffix(Prefix, "/"), files).ServeHTTP(w, r)
		default:
			http.NotFound(w, r)
		}
	})
}

// secure sets the headers every answer of the app carries.
func secure(h http.Header) {
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cache-Control", "no-cache")
}
