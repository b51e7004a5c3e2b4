// Package oauthtest drives Waypost's OAuth authorization server over HTTP as a client and as the owner at the
// consent page would, without a browser (forms posted with a cookie jar): registration, the authorization
// request, the owner's sign-in and decision, and the token endpoint. Tests of the protocol's rules use it;
// the browser tests drive the same pages in Chromium.
package oauthtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// Owner is a browser session of the owner at the consent page.
type Owner struct {
	t      testing.TB
	Base   string
	Secret string
	HTTP   *http.Client
}

// NewOwner returns an owner session against the server at base (no redirects followed).
func NewOwner(t testing.TB, base, adminSecret string) *Owner {
	jar, _ := cookiejar.New(nil)
	return &Owner{t: t, Base: base, Secret: adminSecret, HTTP: &http.Client{Jar: jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// PKCE is a code verifier and its S256 challenge.
type PKCE struct{ Verifier, Challenge string }

// NewPKCE makes a fresh verifier (43 characters) and its S256 challenge.
func NewPKCE() PKCE {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	v := base64.RawURLEncoding.EncodeToString(b)
	sum := sha256.Sum256([]byte(v))
	return PKCE{Verifier: v, Challenge: base64.RawURLEncoding.EncodeToString(sum[:])}
}

// Register registers a client with the given metadata and returns the status and the JSON answer.
func Register(t testing.TB, base string, metadata map[string]any) (int, map[string]any) {
	t.Helper()
	body, _ := json.Marshal(metadata)
	resp, err := http.Post(base+"/register", "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("oauthtest: register: %v", err)
	}
	return decode(t, resp)
}

// Token posts a token request (form) and returns the status and the JSON answer; basic, when set, is the
// client's id and secret for HTTP Basic authentication.
func Token(t testing.TB, base string, form url.Values, basic ...string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, base+"/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if len(basic) == 2 {
		req.SetBasicAuth(url.QueryEscape(basic[0]), url.QueryEscape(basic[1]))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("oauthtest: token: %v", err)
	}
	return decode(t, resp)
}

func decode(t testing.TB, resp *http.Response) (int, map[string]any) {
	t.Helper()
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if len(b) > 0 {
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("oauthtest: %s answered %d with non-JSON %q", resp.Request.URL.Path, resp.StatusCode, b)
		}
	}
	return resp.StatusCode, m
}

// Page is an HTML answer of the authorization endpoint.
type Page struct {
	Status   int
	Location string // set on a redirect
	Body     string
	Header   http.Header
}

// Get fetches a path of the server as the owner's browser.
func (o *Owner) Get(path string) Page {
	o.t.Helper()
	resp, err := o.HTTP.Get(o.Base + path)
	if err != nil {
		o.t.Fatalf("oauthtest: GET %s: %v", path, err)
	}
	return page(resp)
}

// Post posts a form as the owner's browser.
func (o *Owner) Post(path string, form url.Values) Page {
	o.t.Helper()
	resp, err := o.HTTP.PostForm(o.Base+path, form)
	if err != nil {
		o.t.Fatalf("oauthtest: POST %s: %v", path, err)
	}
	return page(resp)
}

func page(resp *http.Response) Page {
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return Page{Status: resp.StatusCode, Location: resp.Header.Get("Location"), Body: string(b), Header: resp.Header}
}

var hiddenRE = regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`)

// Hidden returns the hidden fields of the last form of a page.
func (p Page) Hidden() url.Values {
	body := p.Body
	if i := strings.LastIndex(body, "<form"); i >= 0 {
		body = body[i:]
	}
	v := url.Values{}
	for _, m := range hiddenRE.FindAllStringSubmatch(body, -1) {
		v.Add(html.UnescapeString(m[1]), html.UnescapeString(m[2]))
	}
	return v
}

// SignIn answers the sign-in page p with the admin secret and returns the page it leads to.
func (o *Owner) SignIn(p Page) Page {
	o.t.Helper()
	form := p.Hidden()
	form.Set("wp_admin_secret", o.Secret)
	next := o.Post("/authorize/login", form)
	if next.Status != http.StatusSeeOther {
		o.t.Fatalf("oauthtest: sign-in answered %d: %s", next.Status, next.Body)
	}
	u, _ := url.Parse(next.Location)
	return o.Get(u.RequestURI())
}

// Decide posts the consent form of page p with the owner's choices (wp_space, wp_actor, wp_consumer,
// wp_scope…) and decision ("approve" or "deny"), and returns the answer.
func (o *Owner) Decide(p Page, decision string, choices url.Values) Page {
	o.t.Helper()
	form := p.Hidden()
	for k, vs := range choices {
		form[k] = vs
	}
	form.Set("wp_decision", decision)
	return o.Post("/authorize", form)
}

// Authorize asks for authorization with q (as the client would send the person), signs in when asked, and
// returns the consent page (or whatever the endpoint answered instead).
func (o *Owner) Authorize(q url.Values) Page {
	o.t.Helper()
	p := o.Get("/authorize?" + q.Encode())
	if p.Status == http.StatusOK && strings.Contains(p.Body, `name="wp_admin_secret"`) {
		p = o.SignIn(p)
	}
	return p
}
