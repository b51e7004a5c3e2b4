package oauth

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	_ "embed" // the consent page's stylesheet
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"html/template"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/ory/fosite"

	"github.com/waypost/waypost/domain"
)

//go:embed consent.css
var consentCSS []byte

// The consent form's own fields; none is an OAuth parameter, so fosite reads the request unchanged.
const (
	fieldCSRF       = "wp_csrf"
	fieldDecision   = "wp_decision"
	fieldSpace      = "wp_space"
	fieldActor      = "wp_actor"
	fieldActorName  = "wp_actor_name"
	fieldConsumer   = "wp_consumer"
	fieldScope      = "wp_scope"
	fieldSecret     = "wp_admin_secret"
	fieldContinue   = "wp_continue"
	optionNew       = "_new"
	ownerCookieHTTP = "waypost_owner"
	ownerCookieTLS  = "__Host-waypost_owner"
	loginCookieHTTP = "waypost_login"
	loginCookieTLS  = "__Host-waypost_login"
)

// authorize is the authorization endpoint and the owner's consent page. GET validates the request and shows
// the page (after the owner's sign-in); POST carries the owner's decision.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	if r.Method == http.MethodPost {
		r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	}
	// state is optional (OAuth 2.1 §4.1.1: PKCE, always required here, binds the code to the client); fosite
	// demands one, so a request without it carries a placeholder that no redirect repeats (redirectWriter).
	if err := r.ParseForm(); err == nil && r.Form.Get("state") == "" {
		r.Form.Set("state", noState)
	}
	ar, err := s.provider.NewAuthorizeRequest(ctx, r)
	if err == nil {
		err = s.checkAuthorizeRequest(r, ar)
	}
	if err != nil {
		s.authorizeError(w, r, ar, err)
		return
	}
	nonce, signedIn := s.ownerSession(r)
	if !signedIn {
		s.renderLogin(w, r, http.StatusOK, "")
		return
	}
	if r.Method == http.MethodGet {
		s.renderConsent(w, r, ar, nonce, http.StatusOK, "")
		return
	}
	if !hmac.Equal([]byte(r.PostFormValue(fieldCSRF)), []byte(s.mac("csrf", nonce))) {
		s.renderMessage(w, http.StatusForbidden, "This form has expired", "Reload the page the application sent you to and decide again.")
		return
	}
	if r.PostFormValue(fieldDecision) != "approve" {
		s.authorizeError(w, r, ar, fosite.ErrAccessDenied.WithHint("The owner denied the request."))
		return
	}
	sess, scopes, msg, err := s.bind(ctx, r, ar, nonce)
	if err != nil {
		s.log.ErrorContext(ctx, "oauth consent failed", "error", err.Error())
		s.renderConsent(w, r, ar, nonce, http.StatusServiceUnavailable, "The approval could not be stored. Try again in a moment.")
		return
	}
	if msg != "" {
		s.renderConsent(w, r, ar, nonce, http.StatusBadRequest, msg)
		return
	}
	for _, sc := range scopes {
		ar.GrantScope(sc)
	}
	if slices.Contains(ar.GetRequestedScopes(), offlineScope) {
		ar.GrantScope(offlineScope)
	}
	resp, err := s.provider.NewAuthorizeResponse(ctx, ar, sess)
	if err != nil {
		s.authorizeError(w, r, ar, err)
		return
	}
	s.log.InfoContext(ctx, "oauth authorization approved", "client_id", ar.GetClient().GetID(), "space_id", sess.SpaceID,
		"actor_id", sess.ActorID, "consumer_id", sess.ConsumerID, "scopes", strings.Join(scopes, " "))
	s.provider.WriteAuthorizeResponse(ctx, &redirectWriter{ResponseWriter: w, iss: s.Issuer(r)}, ar, resp)
}

// checkAuthorizeRequest adds what fosite leaves to the server: PKCE S256 named before the owner is asked
// (fosite checks it again when the code is issued), and resource indicators naming this server (RFC 8707).
func (s *Server) checkAuthorizeRequest(r *http.Request, ar fosite.AuthorizeRequester) error {
	form := ar.GetRequestForm()
	if form.Get("code_challenge") == "" {
		return fosite.ErrInvalidRequest.WithHint("PKCE is required: send code_challenge with code_challenge_method=S256.")
	}
	if form.Get("code_challenge_method") != "S256" {
		return fosite.ErrInvalidRequest.WithHint("Only the S256 code_challenge_method is accepted.")
	}
	for _, v := range form["resource"] {
		if !slices.Contains(s.resources(r), v) {
			return errInvalidTarget().WithHintf("The resource %q is not served by this server.", v)
		}
	}
	return nil
}

// authorizeError answers a refused authorization: back to the client with the error and iss (RFC 9207) when
// its redirect URI is known good, otherwise a page for the person (never a redirect to an unchecked URI).
func (s *Server) authorizeError(w http.ResponseWriter, r *http.Request, ar fosite.AuthorizeRequester, err error) {
	ctx := r.Context()
	s.refused(ctx, "authorize", err)
	rfc := fosite.ErrorToRFC6749Error(err)
	if ar == nil || !ar.IsRedirectURIValid() {
		s.renderMessage(w, rfc.CodeField, "This authorization request cannot be served",
			rfc.ErrorField+": "+strings.TrimSpace(rfc.DescriptionField+" "+rfc.HintField))
		return
	}
	s.provider.WriteAuthorizeError(ctx, &redirectWriter{ResponseWriter: w, iss: s.Issuer(r)}, ar, err)
}

// noState stands for the state a client did not send (see authorize).
const noState = "waypost-no-state"

// redirectWriter finishes the redirect fosite writes back to the client, success or error: it adds iss
// (RFC 9207 §2) and drops the placeholder of an absent state.
type redirectWriter struct {
	http.ResponseWriter
	iss string
}

// WriteHeader implements http.ResponseWriter.
func (w *redirectWriter) WriteHeader(code int) {
	if loc := w.Header().Get("Location"); loc != "" {
		if u, err := url.Parse(loc); err == nil {
			q := u.Query()
			q.Set("iss", w.iss)
			if q.Get("state") == noState {
				q.Del("state")
			}
			u.RawQuery = q.Encode()
			w.Header().Set("Location", u.String())
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

// bind applies the owner's choices: the space, the actor (an existing one or a new one), the consumer (an
// existing one of that actor, a new one, or none) and the scopes. A choice the owner must correct returns a
// message; a store failure an error. Creating the actor and the consumer is idempotent per form (a double
// submit creates one of each).
func (s *Server) bind(ctx context.Context, r *http.Request, ar fosite.AuthorizeRequester, nonce string) (*Session, []string, string, error) {
	spaceID := r.PostFormValue(fieldSpace)
	if _, err := s.svc.GetSpace(ctx, spaceID); err != nil {
		return nil, nil, "Choose a space.", nil
	}
	var scopes []string
	for _, sc := range r.PostForm[fieldScope] {
		if !slices.Contains(scopeNames(), sc) {
			return nil, nil, "Unknown scope " + sc + ".", nil
		}
		if !slices.Contains(scopes, sc) {
			scopes = append(scopes, sc)
		}
	}
	if len(scopes) == 0 {
		return nil, nil, "Choose at least one scope, or deny the request.", nil
	}
	// One request ID per form and object: a second submit of the same form replays the first creation.
	rid := func(what string) string {
		return "consent-" + what + "-" + s.mac(what, nonce+"|"+r.URL.RawQuery+"|"+spaceID)[:32]
	}
	actorID := r.PostFormValue(fieldActor)
	if actorID == optionNew {
		name := strings.TrimSpace(r.PostFormValue(fieldActorName))
		if name == "" {
			name = ar.GetClient().GetID()
			if c, found, err := s.svc.GetOAuthClient(ctx, ar.GetClient().GetID()); err == nil && found && c.ClientName != "" {
				name = c.ClientName
			}
		}
		if len(name) > 100 {
			name = strings.ToValidUTF8(name[:100], "") // never a rune cut in two
		}
		a, err := s.svc.CreateActor(ctx, spaceID, domain.CreateActorRequest{RequestID: rid("actor"), DisplayName: name})
		if err != nil {
			return domainMessage(err)
		}
		actorID = a.ActorID
	} else if live, err := s.svc.ActorLive(ctx, spaceID, actorID); err != nil {
		return nil, nil, "", err
	} else if !live {
		return nil, nil, "Choose an actor of this space, or a new one.", nil
	}
	consumerID := r.PostFormValue(fieldConsumer)
	switch consumerID {
	case optionNew:
		c, err := s.svc.CreateConsumer(ctx, spaceID, domain.CreateConsumerRequest{RequestID: rid("consumer"), ActorID: actorID, View: domain.ViewInbox})
		if err != nil {
			return domainMessage(err)
		}
		consumerID = c.ConsumerID
	case "":
	default:
		list, err := s.svc.ListConsumers(ctx, spaceID)
		if err != nil {
			return nil, nil, "", err
		}
		if !slices.ContainsFunc(list.Consumers, func(c domain.ConsumerResult) bool { return c.ConsumerID == consumerID && c.ActorID == actorID }) {
			return nil, nil, "The consumer " + consumerID + " does not belong to the chosen actor: choose one of its consumers, a new one, or none.", nil
		}
	}
	resource := ""
	if res := ar.GetRequestForm()["resource"]; len(res) > 0 {
		resource = res[0]
	}
	return &Session{SpaceID: spaceID, ActorID: actorID, ConsumerID: consumerID, Resource: resource}, scopes, "", nil
}

// domainMessage turns a domain refusal into a message for the owner, and anything else into an error.
func domainMessage(err error) (*Session, []string, string, error) {
	de := domain.AsError(err)
	if de.Code == domain.CodeInternal || de.Code == domain.CodeStorageUnavailable {
		return nil, nil, "", err
	}
	return nil, nil, de.Message, nil
}

// login checks the admin secret once per browser session and starts the owner's session.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil {
		s.renderMessage(w, http.StatusBadRequest, "Bad form", "Reload the page and sign in again.")
		return
	}
	cont, err := url.ParseQuery(r.PostFormValue(fieldContinue))
	if err != nil || cont.Get("client_id") == "" {
		s.renderMessage(w, http.StatusBadRequest, "Nothing to continue", "Start again from the application that sent you here.")
		return
	}
	// The continuation is rebuilt from its parsed parameters, always to /authorize on this server: never an
	// open redirect. r's URL carries it so that the page shown on a mistake posts it again.
	r.URL.RawQuery = cont.Encode()
	c, err := r.Cookie(s.cookieName(r, loginCookieHTTP, loginCookieTLS))
	if err != nil || !hmac.Equal([]byte(r.PostFormValue(fieldCSRF)), []byte(s.mac("login", c.Value))) {
		s.renderLogin(w, r, http.StatusForbidden, "This sign-in form has expired. Sign in again.")
		return
	}
	if !s.admin.Matches(r.PostFormValue(fieldSecret)) {
		s.log.WarnContext(r.Context(), "oauth consent: wrong admin secret", "remote", r.RemoteAddr)
		s.renderLogin(w, r, http.StatusUnauthorized, "That is not this server's admin secret.")
		return
	}
	s.startOwnerSession(w, r)
	http.SetCookie(w, s.cookie(r, loginCookieHTTP, loginCookieTLS, "", -1))
	http.Redirect(w, r, "/authorize?"+cont.Encode(), http.StatusSeeOther)
}

// secure reports whether the page is served over HTTPS (cookies then carry Secure and the __Host- prefix).
func (s *Server) secure(r *http.Request) bool {
	return r.TLS != nil || strings.HasPrefix(s.opts.Issuer, "https://")
}

func (s *Server) cookieName(r *http.Request, plain, tls string) string {
	if s.secure(r) {
		return tls
	}
	return plain
}

// cookie is an HttpOnly, SameSite=Strict cookie of the whole site (Secure over HTTPS); maxAge < 0 deletes it.
func (s *Server) cookie(r *http.Request, plain, tls, value string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: s.cookieName(r, plain, tls), Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, Secure: s.secure(r), SameSite: http.SameSiteStrictMode}
}

// mac is base64url(HMAC(cookie key, label|value)).
func (s *Server) mac(label, value string) string {
	m := hmac.New(sha256.New, s.cookieKey)
	m.Write([]byte(label + "|" + value))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func randomToken() string {
	b := make([]byte, 18)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// startOwnerSession sets the owner's session cookie: its expiry and a nonce, authenticated with the cookie
// key (derived from the admin secret: rotating the secret ends every session). The secret itself never
// reaches the browser beyond the sign-in form.
func (s *Server) startOwnerSession(w http.ResponseWriter, r *http.Request) {
	var exp [8]byte
	binary.BigEndian.PutUint64(exp[:], uint64(time.Now().Add(s.opts.OwnerSessionLifespan).Unix()))
	payload := hex.EncodeToString(exp[:]) + "." + randomToken()
	http.SetCookie(w, s.cookie(r, ownerCookieHTTP, ownerCookieTLS, payload+"."+s.mac("session", payload), int(s.opts.OwnerSessionLifespan.Seconds())))
}

// ownerSession returns the nonce of a valid owner session cookie.
func (s *Server) ownerSession(r *http.Request) (string, bool) {
	c, err := r.Cookie(s.cookieName(r, ownerCookieHTTP, ownerCookieTLS))
	if err != nil {
		return "", false
	}
	i := strings.LastIndexByte(c.Value, '.')
	if i < 0 {
		return "", false
	}
	payload, sig := c.Value[:i], c.Value[i+1:]
	if !hmac.Equal([]byte(sig), []byte(s.mac("session", payload))) {
		return "", false
	}
	expHex, nonce, ok := strings.Cut(payload, ".")
	exp, err := hex.DecodeString(expHex)
	if !ok || err != nil || len(exp) != 8 || time.Now().Unix() >= int64(binary.BigEndian.Uint64(exp)) {
		return "", false
	}
	return nonce, true
}

// securityHeaders are the headers of every page: no framing, no script at all, forms only to this server
// (and, for the consent form, to the client's redirect URI, where the approval redirects).
func securityHeaders(w http.ResponseWriter, formTargets ...string) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self' data:; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"+
		strings.Join(append([]string{""}, formTargets...), " "))
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Type", "text/html; charset=utf-8")
}

func (s *Server) stylesheet(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/css; charset=utf-8")
	w.Header().Set("Cache-Control", "public, max-age=3600")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(consentCSS)
}

func (s *Server) render(w http.ResponseWriter, status int, name string, data any, formTargets ...string) {
	var buf bytes.Buffer
	if err := pages.ExecuteTemplate(&buf, name, data); err != nil {
		s.log.Error("oauth: rendering a page", "page", name, "error", err.Error())
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	securityHeaders(w, formTargets...)
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

func (s *Server) renderMessage(w http.ResponseWriter, status int, title, detail string) {
	if status < 400 {
		status = http.StatusBadRequest
	}
	s.render(w, status, "message", map[string]string{"Title": title, "Detail": detail})
}

// renderLogin asks for the admin secret, with a fresh login CSRF cookie.
func (s *Server) renderLogin(w http.ResponseWriter, r *http.Request, status int, problem string) {
	nonce := randomToken()
	http.SetCookie(w, s.cookie(r, loginCookieHTTP, loginCookieTLS, nonce, 600))
	s.render(w, status, "login", map[string]any{
		"Problem": problem, "CSRF": s.mac("login", nonce), "Continue": r.URL.RawQuery, "ClientID": r.URL.Query().Get("client_id"),
		"Fields": map[string]string{"CSRF": fieldCSRF, "Secret": fieldSecret, "Continue": fieldContinue},
	})
}

// consentView is what the consent page shows.
type consentView struct {
	Problem       string
	ClientName    string
	ClientID      string
	ClientURI     string
	RedirectURI   string
	RedirectHost  string
	Loopback      bool
	Requested     []string
	Params        []param
	Spaces        []domain.SpaceResult
	Space         string
	Actors        []domain.ActorResult
	Consumers     []domain.ConsumerResult
	Scopes        []scopeChoice
	CSRF          string
	Fields        map[string]string
	NewOption     string
	ActorDefault  string
	ActorNameHint string
}

type param struct{ Name, Value string }

type scopeChoice struct {
	Name    string
	Checked bool
}

// renderConsent shows the client, what it asks for, and the owner's choices.
func (s *Server) renderConsent(w http.ResponseWriter, r *http.Request, ar fosite.AuthorizeRequester, nonce string, status int, problem string) {
	ctx := r.Context()
	v := consentView{Problem: problem, ClientID: ar.GetClient().GetID(), CSRF: s.mac("csrf", nonce), NewOption: optionNew,
		Requested: ar.GetRequestedScopes(),
		Fields: map[string]string{"CSRF": fieldCSRF, "Decision": fieldDecision, "Space": fieldSpace, "Actor": fieldActor,
			"ActorName": fieldActorName, "Consumer": fieldConsumer, "Scope": fieldScope}}
	if c, found, err := s.svc.GetOAuthClient(ctx, v.ClientID); err == nil && found {
		v.ClientName, v.ClientURI = c.ClientName, c.ClientURI
	}
	v.ActorNameHint = v.ClientName
	if ru := ar.GetRedirectURI(); ru != nil {
		v.RedirectURI, v.RedirectHost = ru.String(), ru.Host
		if ip := net.ParseIP(ru.Hostname()); ru.Hostname() == "localhost" || ip != nil && ip.IsLoopback() {
			v.Loopback = true
		}
	}
	// Every OAuth parameter travels in the forms as hidden fields (never the owner's own fields).
	form := ar.GetRequestForm()
	for _, k := range sortedKeys(form) {
		if strings.HasPrefix(k, "wp_") {
			continue
		}
		for _, val := range form[k] {
			v.Params = append(v.Params, param{k, val})
		}
	}
	spaces, err := s.svc.ListSpaces(ctx)
	if err != nil {
		s.log.ErrorContext(ctx, "oauth consent: listing spaces", "error", err.Error())
		s.renderMessage(w, http.StatusServiceUnavailable, "The server cannot read its spaces", "Try again in a moment.")
		return
	}
	v.Spaces = spaces.Spaces
	v.Space = r.FormValue(fieldSpace)
	if !slices.ContainsFunc(v.Spaces, func(sp domain.SpaceResult) bool { return sp.SpaceID == v.Space }) {
		v.Space = ""
		if len(v.Spaces) > 0 {
			v.Space = v.Spaces[0].SpaceID
		}
	}
	v.ActorDefault = optionNew
	if v.Space != "" {
		actors, err := s.svc.ListActors(ctx, v.Space)
		if err == nil {
			for _, a := range actors.Actors {
				if !a.Revoked {
					v.Actors = append(v.Actors, a)
				}
			}
		}
		if consumers, err := s.svc.ListConsumers(ctx, v.Space); err == nil {
			v.Consumers = consumers.Consumers
		}
	}
	if a := r.FormValue(fieldActor); a != "" {
		v.ActorDefault = a
	}
	requested := map[string]bool{}
	for _, sc := range ar.GetRequestedScopes() {
		requested[sc] = true
	}
	for _, sc := range scopeNames() {
		checked := requested[sc]
		if len(requested) == 0 || (len(requested) == 1 && requested[offlineScope]) {
			checked = sc != string(domain.ScopeSpaceObserve) && sc != string(domain.ScopeSubscriptionManage)
		}
		if r.Method == http.MethodPost {
			checked = slices.Contains(r.PostForm[fieldScope], sc)
		}
		v.Scopes = append(v.Scopes, scopeChoice{Name: sc, Checked: checked})
	}
	var targets []string
	if ru := ar.GetRedirectURI(); ru != nil {
		targets = append(targets, (&url.URL{Scheme: ru.Scheme, Host: ru.Host}).String())
	}
	s.render(w, status, "consent", v, targets...)
}

func sortedKeys(v url.Values) []string {
	keys := make([]string, 0, len(v))
	for k := range v {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// pages are the consent page's templates (html/template escapes every value: client names and URIs are
// the client's own words, shown as text).
var pages = template.Must(template.New("pages").Parse(pagesText))
