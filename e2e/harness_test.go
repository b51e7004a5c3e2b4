// Package e2e tests the real `waypost` binary over real HTTP, as a third-party client would: TestMain builds
// the binary once, each test starts `waypost serve` as a subprocess on a loopback port with its own data
// directory, and talks to it with a small raw-HTTP helper (no Waypost client library). Every response body is
// validated against the published JSON Schemas (package schemas), and every answer of a documented route
// against the OpenAPI document (package openapitest: a drift fails the test).
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/waypost/waypost/api/openapi/openapitest"
	"github.com/waypost/waypost/e2e/wire"
	"github.com/waypost/waypost/schemas"
)

// binPath is the waypost binary built by TestMain.
var binPath string

// registry validates response bodies against the response schemas.
var registry *schemas.Registry

// TestMain builds ./cmd/waypost once (with -race when the tests themselves run with -race, so the server's
// concurrency is checked too), then runs the tests.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "waypost-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	if registry, err = schemas.New(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: loading schemas:", err)
		return 1
	}
	binPath = filepath.Join(dir, "waypost")
	root, err := moduleRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	args := []string{"build", "-o", binPath}
	if raceEnabled {
		args = append(args, "-race")
	}
	args = append(args, "./cmd/waypost")
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: go %s: %v\n%s", strings.Join(args, " "), err, out)
		return 1
	}
	return m.Run()
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside the waypost module")
	}
	return filepath.Dir(mod), nil
}

// adminSecret is the WAYPOST_ADMIN_SECRET every test server gets.
const adminSecret = "wpa_e2e_0123456789abcdefghijklmnopqrstuvwxyzABCDEF"

// server is one `waypost serve` subprocess over a data directory that outlives restarts.
type server struct {
	t    testing.TB
	data string
	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
	base string        // http://127.0.0.1:port
	logs *bytes.Buffer // stdout and stderr of every run so far
	http *http.Client
	args []string // extra `waypost serve` flags
}

// startServer starts a server on a fresh data directory, with extra `waypost serve` flags; it is stopped
// (SIGTERM) when the test ends.
func startServer(t testing.TB, args ...string) *server {
	t.Helper()
	return startServerOn(t, t.TempDir(), args...)
}

// startServerOn starts a server on the data directory dir (a fresh one, or an existing one such as a
// restored backup), with extra `waypost serve` flags; it is stopped (SIGTERM) when the test ends.
func startServerOn(t testing.TB, dir string, args ...string) *server {
	t.Helper()
	s := &server{t: t, data: dir, logs: &bytes.Buffer{}, http: openapitest.Client(t, newHTTPClient()), args: args}
	s.start()
	t.Cleanup(func() {
		s.stop()
		if t.Failed() {
			t.Logf("server output (tail):\n%s", s.tail(4000))
		}
	})
	return s
}

func newHTTPClient() *http.Client {
	return &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			Proxy:               nil, // loopback only: never a proxy from the environment
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
			MaxIdleConns:        256,
			MaxIdleConnsPerHost: 256,
			IdleConnTimeout:     30 * time.Second,
		},
	}
}

// lockedWriter serializes the subprocess's stdout and stderr into one buffer.
type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (s *server) tail(n int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.logs.Bytes()
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// start launches `waypost serve` on a free loopback port and waits until it answers HTTP.
func (s *server) start() {
	s.t.Helper()
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		if lastErr = s.tryStart(); lastErr == nil {
			return
		}
		if !strings.Contains(s.tail(4000), "address already in use") {
			break // only a lost race for the free port is worth another try
		}
	}
	s.t.Fatalf("starting waypost serve: %v\n%s", lastErr, s.tail(4000))
}

func (s *server) tryStart() error {
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	cmd := exec.Command(binPath, append([]string{"serve", "--addr", addr, "--data", s.data, "--log-level", "warn"}, s.args...)...)
	cmd.Env = append(os.Environ(), "WAYPOST_ADMIN_SECRET="+adminSecret)
	w := lockedWriter{mu: &s.mu, b: s.logs}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", binPath, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.cmd, s.done, s.base = cmd, done, "http://"+addr
	deadline := time.Now().Add(60 * time.Second) // a -race build can be slow to start on a busy machine
	for time.Now().Before(deadline) {
		select {
		case <-done:
			return fmt.Errorf("waypost serve exited during start-up: %v", cmd.ProcessState)
		default:
		}
		if s.ready() {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.kill()
	return errors.New("waypost serve did not answer within 60 s")
}

// ready reports whether the server answers /v0/describe with the documented 401 envelope.
func (s *server) ready() bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.base+"/v0/describe", nil)
	resp, err := s.http.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode == http.StatusUnauthorized
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("finding a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// stop sends SIGTERM and waits for a clean exit (SIGKILL after 20 s, which fails the test).
func (s *server) stop() {
	if s.cmd == nil {
		return
	}
	select {
	case <-s.done:
		s.cmd = nil
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
		if !s.cmd.ProcessState.Success() {
			s.t.Errorf("waypost serve exited with %v after SIGTERM", s.cmd.ProcessState)
		}
	case <-time.After(20 * time.Second):
		s.t.Errorf("waypost serve did not exit within 20 s of SIGTERM")
		s.kill()
	}
	s.cmd = nil
	s.http.CloseIdleConnections()
}

// kill sends SIGKILL and waits for the process to be gone: the crash of SUPPLEMENT §7.4's last row.
func (s *server) kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
	s.http.CloseIdleConnections()
}

// restart starts the server again on the same data directory (on a new port).
func (s *server) restart() {
	s.t.Helper()
	s.start()
}

// ---- raw HTTP ----

// response is one HTTP exchange.
type response struct {
	Method, Path string
	Status       int
	Header       http.Header
	Body         []byte
	Env          wire.Envelope
}

func (r response) String() string {
	return fmt.Sprintf("%s %s → %d %s", r.Method, r.Path, r.Status, bytes.TrimSpace(r.Body))
}

// code returns the error code of an error envelope ("" for a success).
func (r response) code() string {
	if r.Env.Error == nil {
		return ""
	}
	return r.Env.Error.Code
}

// raw is a request body sent byte for byte.
type raw []byte

// request describes one call; Body is marshalled as JSON unless it is raw or nil.
type request struct {
	Method, Path, Token string
	// Auth, when set, is sent as the Authorization header verbatim (instead of "Bearer "+Token).
	Auth string
	Body any
	// Chunked sends the body without a Content-Length.
	Chunked bool
}

// roundTrip performs one request and decodes the envelope; it returns an error only for transport
// failures and bodies that are not an envelope. It is safe for concurrent use.
func (s *server) roundTrip(ctx context.Context, rq request) (response, error) {
	var body io.Reader
	var payload []byte
	switch b := rq.Body.(type) {
	case nil:
	case raw:
		payload = b
	default:
		var err error
		if payload, err = json.Marshal(b); err != nil {
			return response{}, fmt.Errorf("encoding request: %w", err)
		}
	}
	if payload != nil {
		body = bytes.NewReader(payload)
		if rq.Chunked {
			body = io.MultiReader(body) // hides the length: net/http sends Transfer-Encoding: chunked
		}
	}
	req, err := http.NewRequestWithContext(ctx, rq.Method, s.base+rq.Path, body)
	if err != nil {
		return response{}, err
	}
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	switch {
	case rq.Auth != "":
		req.Header.Set("Authorization", rq.Auth)
	case rq.Token != "":
		req.Header.Set("Authorization", "Bearer "+rq.Token)
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	out := response{Method: rq.Method, Path: rq.Path, Status: resp.StatusCode, Header: resp.Header}
	if out.Body, err = io.ReadAll(resp.Body); err != nil {
		return out, fmt.Errorf("reading response: %w", err)
	}
	if err := json.Unmarshal(out.Body, &out.Env); err != nil {
		return out, fmt.Errorf("%s: response is not a JSON envelope: %w", out, err)
	}
	return out, nil
}

// call performs a request and checks the envelope contract: JSON content type, ok ⇔ 200, the error's HTTP
// status and retryable flag as in SUPPLEMENT §11.4, a non-empty request_id, the body valid against the
// success or error envelope schema, and a success's data valid against the operation's response schema.
func (s *server) call(t testing.TB, rq request) response {
	t.Helper()
	r, err := s.roundTrip(context.Background(), rq)
	if err != nil {
		t.Fatalf("%s %s: %v", rq.Method, rq.Path, err)
	}
	if err := checkEnvelope(r); err != nil {
		t.Fatalf("%v", err)
	}
	return r
}

// errorTable is SUPPLEMENT §11.4: HTTP status and retryability of the codes these tests can reach.
var errorTable = map[string]struct {
	status    int
	retryable bool
}{
	"INVALID_REQUEST":      {400, false},
	"UNAUTHENTICATED":      {401, false},
	"FORBIDDEN":            {403, false},
	"NOT_FOUND":            {404, false},
	"IDEMPOTENCY_CONFLICT": {409, false},
	"SUBMISSION_PENDING":   {409, true},
	"INVALID_CURSOR":       {400, false},
	"CURSOR_SCOPE_CHANGED": {409, false},
	"RESOURCE_LIMIT":       {422, false},
	"PAYLOAD_TOO_LARGE":    {413, false},
	"RATE_LIMITED":         {429, true},
	"STORAGE_UNAVAILABLE":  {503, true},
	"INTERNAL":             {500, true},
	// M2 (webhooks)
	"FORBIDDEN_TARGET":            {422, false},
	"WEBHOOK_VERIFICATION_FAILED": {422, false},
}

// checkEnvelope verifies the contract every response must keep (see call).
func checkEnvelope(r response) error {
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return fmt.Errorf("%s: Content-Type %q", r, ct)
	}
	if r.Env.RequestID == "" {
		return fmt.Errorf("%s: empty request_id", r)
	}
	if r.Env.OK {
		if r.Status != http.StatusOK || r.Env.Error != nil {
			return fmt.Errorf("%s: ok envelope with status %d or an error", r, r.Status)
		}
		if err := registry.Validate("envelope.success", r.Body); err != nil {
			return fmt.Errorf("%s: envelope.success schema: %v", r, err)
		}
		name := responseSchema(r.Method, r.Path)
		if name == "" {
			return fmt.Errorf("%s: the tests know no response schema for this route", r)
		}
		if err := registry.Validate(name, r.Env.Data); err != nil {
			return fmt.Errorf("%s: %s schema: %v", r, name, err)
		}
		return nil
	}
	if r.Env.Error == nil {
		return fmt.Errorf("%s: not ok but no error object", r)
	}
	if err := registry.Validate("envelope.error", r.Body); err != nil {
		return fmt.Errorf("%s: envelope.error schema: %v", r, err)
	}
	want, known := errorTable[r.Env.Error.Code]
	if !known {
		return fmt.Errorf("%s: error code outside the M0 table", r)
	}
	if r.Status != want.status || r.Env.Error.Retryable != want.retryable {
		return fmt.Errorf("%s: %s must be HTTP %d retryable=%v", r, r.Env.Error.Code, want.status, want.retryable)
	}
	if r.Env.Error.Code == "UNAUTHENTICATED" && r.Header.Get("WWW-Authenticate") == "" {
		return fmt.Errorf("%s: 401 without WWW-Authenticate", r)
	}
	return nil
}

var responseSchemas = []struct {
	method string
	path   *regexp.Regexp
	schema string
}{
	{"GET", regexp.MustCompile(`^/v0/describe$`), "describe.response"},
	{"GET", regexp.MustCompile(`^/v0/status(\?.*)?$`), "status.response"},
	{"POST", regexp.MustCompile(`^/v0/messages$`), "message.send.response"},
	{"GET", regexp.MustCompile(`^/v0/messages/[^/]+$`), "message.get.response"},
	{"POST", regexp.MustCompile(`^/v0/inbox/read$`), "inbox.read.response"},
	{"POST", regexp.MustCompile(`^/v0/inbox/ack$`), "inbox.ack.response"},
	{"POST", regexp.MustCompile(`^/admin/v0/spaces$`), "admin.space.create.response"},
	{"GET", regexp.MustCompile(`^/admin/v0/spaces/[^/]+$`), "admin.space.get.response"},
	{"PATCH", regexp.MustCompile(`^/admin/v0/spaces/[^/]+$`), "admin.space.get.response"},
	{"DELETE", regexp.MustCompile(`^/admin/v0/spaces/[^/]+$`), "admin.space.get.response"},
	{"GET", regexp.MustCompile(`^/admin/v0/spaces/[^/]+/stats(\?.*)?$`), "admin.space.stats.response"},
	{"POST", regexp.MustCompile(`^/admin/v0/spaces/[^/]+/actors$`), "admin.actor.create.response"},
	{"POST", regexp.MustCompile(`^/admin/v0/spaces/[^/]+/actors/[^/]+/revoke$`), "admin.actor.revoke.response"},
	{"POST", regexp.MustCompile(`^/admin/v0/spaces/[^/]+/consumers$`), "admin.consumer.response"},
	{"PATCH", regexp.MustCompile(`^/admin/v0/spaces/[^/]+/consumers/[^/]+$`), "admin.consumer.response"},
	{"POST", regexp.MustCompile(`^/admin/v0/spaces/[^/]+/collections$`), "admin.collection.create.response"},
	{"POST", regexp.MustCompile(`^/admin/v0/spaces/[^/]+/grants$`), "admin.grant.create.response"},
	{"POST", regexp.MustCompile(`^/admin/v0/spaces/[^/]+/grants/[^/]+/revoke$`), "admin.grant.revoke.response"},
	{"POST", regexp.MustCompile(`^/admin/v0/spaces/[^/]+/tokens$`), "admin.token.response"},
	{"POST", regexp.MustCompile(`^/admin/v0/spaces/[^/]+/tokens/[^/]+/rotate$`), "admin.token.response"},
	{"POST", regexp.MustCompile(`^/admin/v0/spaces/[^/]+/tokens/[^/]+/revoke$`), "admin.token.revoke.response"},
	{"POST", regexp.MustCompile(`^/v0/blobs$`), "blob.prepare.response"},
	{"POST", regexp.MustCompile(`^/v0/blobs/commit$`), "blob.info"},
	{"GET", regexp.MustCompile(`^/v0/feed/wait(\?.*)?$`), "inbox.read.response"},
	{"GET", regexp.MustCompile(`^/v0/subscriptions$`), "subscription.list.response"},
	{"POST", regexp.MustCompile(`^/v0/subscriptions$`), "subscription.upsert.response"},
	{"POST", regexp.MustCompile(`^/v0/subscriptions/[^/]+/stop$`), "subscription.stop.response"},
	{"GET", regexp.MustCompile(`^/admin/v0/spaces/[^/]+/deliveries(\?.*)?$`), "admin.deliveries.response"},
	{"POST", regexp.MustCompile(`^/admin/v0/spaces/[^/]+/deliveries/[^/]+/redeliver$`), "admin.delivery.response"},
	{"GET", regexp.MustCompile(`^/admin/v0/spaces$`), "admin.space.list.response"},
	{"GET", regexp.MustCompile(`^/admin/v0/spaces/[^/]+/actors$`), "admin.actor.list.response"},
	{"GET", regexp.MustCompile(`^/admin/v0/spaces/[^/]+/consumers$`), "admin.consumer.list.response"},
	{"GET", regexp.MustCompile(`^/admin/v0/spaces/[^/]+/tokens$`), "admin.token.list.response"},
	{"GET", regexp.MustCompile(`^/admin/v0/oauth/clients$`), "admin.oauth.client.list.response"},
	{"POST", regexp.MustCompile(`^/admin/v0/oauth/clients/[^/]+/revoke$`), "admin.oauth.client.response"},
}

// responseSchema names the response schema of a route's data ("" for a route the tests do not know).
func responseSchema(method, path string) string {
	for _, rs := range responseSchemas {
		if rs.method == method && rs.path.MatchString(path) {
			return rs.schema
		}
	}
	return ""
}

// ok performs a request that must succeed and decodes its data into a T.
func ok[T any](t testing.TB, s *server, rq request) (T, response) {
	t.Helper()
	r := s.call(t, rq)
	var v T
	if !r.Env.OK {
		t.Fatalf("want success: %s", r)
	}
	if err := json.Unmarshal(r.Env.Data, &v); err != nil {
		t.Fatalf("%s: decoding data: %v", r, err)
	}
	return v, r
}

// fail performs a request that must fail with code and returns the response.
func fail(t testing.TB, s *server, rq request, code string) response {
	t.Helper()
	r := s.call(t, rq)
	if r.Env.OK || r.code() != code {
		t.Fatalf("want %s: %s", code, r)
	}
	return r
}

// ---- control-plane helpers ----

// admin is the control plane of one space.
type admin struct {
	s     *server
	space wire.Space
	n     int
}

func (a *admin) rid(prefix string) string { a.n++; return fmt.Sprintf("%s-%d", prefix, a.n) }

// newSpace creates a space through the control plane.
func newSpace(t testing.TB, s *server, name string) *admin {
	t.Helper()
	a := &admin{s: s}
	a.space, _ = ok[wire.Space](t, s, request{Method: "POST", Path: "/admin/v0/spaces", Token: adminSecret,
		Body: map[string]any{"request_id": "space-" + name, "display_name": name}})
	if a.space.SpaceID == "" || a.space.DefaultRecipientID == "" || !strings.HasPrefix(a.space.SourceURI, "urn:uuid:") {
		t.Fatalf("space %+v: want space_id, default_recipient_id and a urn:uuid source_uri", a.space)
	}
	return a
}

func (a *admin) path(rest string) string { return "/admin/v0/spaces/" + a.space.SpaceID + rest }

// rateLimits sets the space's per-credential rate limits (PATCH /admin/v0/spaces/{space_id}).
func (a *admin) rateLimits(t testing.TB, perSecond, burst int) {
	t.Helper()
	sp, _ := ok[map[string]any](t, a.s, request{Method: "PATCH", Path: a.path(""), Token: adminSecret,
		Body: map[string]any{"rate_limits": map[string]any{"requests_per_second": perSecond, "burst": burst}}})
	if rl, _ := sp["rate_limits"].(map[string]any); rl["requests_per_second"] != float64(perSecond) || rl["burst"] != float64(burst) {
		t.Fatalf("rate limits after PATCH: %v", sp)
	}
}

func (a *admin) actor(t testing.TB, name string) string {
	t.Helper()
	d, _ := ok[wire.Actor](t, a.s, request{Method: "POST", Path: a.path("/actors"), Token: adminSecret,
		Body: map[string]any{"request_id": a.rid("actor"), "display_name": name}})
	return d.ActorID
}

func (a *admin) consumer(t testing.TB, actorID, view string) string {
	t.Helper()
	d, _ := ok[wire.Consumer](t, a.s, request{Method: "POST", Path: a.path("/consumers"), Token: adminSecret,
		Body: map[string]any{"request_id": a.rid("consumer"), "actor_id": actorID, "view": view}})
	if d.ConsumerID == "" || d.ViewRevision < 1 {
		t.Fatalf("consumer %+v", d)
	}
	return d.ConsumerID
}

// token issues a token; consumerID may be empty.
func (a *admin) token(t testing.TB, actorID, consumerID string, scopes ...string) wire.Token {
	t.Helper()
	body := map[string]any{"request_id": a.rid("token"), "actor_id": actorID, "scopes": scopes}
	if consumerID != "" {
		body["consumer_id"] = consumerID
	}
	d, _ := ok[wire.Token](t, a.s, request{Method: "POST", Path: a.path("/tokens"), Token: adminSecret, Body: body})
	if d.Token == "" || d.TokenID == "" {
		t.Fatalf("token %+v: want token and token_id", d)
	}
	return d
}

func (a *admin) grant(t testing.TB, actorID, permission string) {
	t.Helper()
	ok[map[string]any](t, a.s, request{Method: "POST", Path: a.path("/grants"), Token: adminSecret,
		Body: map[string]any{"request_id": a.rid("grant"), "actor_id": actorID, "permission": permission}})
}

// participant is an actor with one inbox consumer and a token bound to it.
type participant struct {
	actor, consumer, token string
}

var allScopes = []string{"message.send", "message.read", "receipt.write"}

func (a *admin) participant(t testing.TB, name string) participant {
	t.Helper()
	p := participant{actor: a.actor(t, name)}
	p.consumer = a.consumer(t, p.actor, "inbox")
	p.token = a.token(t, p.actor, p.consumer, allScopes...).Token
	return p
}

// observer is an actor with a space_log consumer (space.observe scope and grant): it sees the whole feed.
func (a *admin) observer(t testing.TB) participant {
	t.Helper()
	p := participant{actor: a.actor(t, "observer")}
	a.grant(t, p.actor, "space.observe")
	p.consumer = a.consumer(t, p.actor, "space_log")
	p.token = a.token(t, p.actor, p.consumer, "message.read", "space.observe").Token
	return p
}

// ---- data-plane helpers ----

func send(t testing.TB, s *server, token string, body map[string]any) wire.Send {
	t.Helper()
	d, r := ok[wire.Send](t, s, request{Method: "POST", Path: "/v0/messages", Token: token, Body: body})
	if r.Env.RequestID != body["request_id"] {
		t.Fatalf("%s: request_id %q, want the request's %q", r, r.Env.RequestID, body["request_id"])
	}
	if d.SubmissionState != "committed" || d.ResourceID == "" || d.ThreadID == "" || d.CommittedAt == "" || d.VisibleSeq == "" {
		t.Fatalf("%s: incomplete committed result", r)
	}
	return d
}

func read(t testing.TB, s *server, p participant, cursor *string, limit int) wire.RawPage {
	t.Helper()
	body := map[string]any{"consumer_id": p.consumer, "cursor": cursor}
	if limit > 0 {
		body["limit"] = limit
	}
	d, _ := ok[wire.RawPage](t, s, request{Method: "POST", Path: "/v0/inbox/read", Token: p.token, Body: body})
	if d.NextCursor == "" {
		t.Fatalf("read: empty next_cursor")
	}
	return d
}

// readAll pages from cursor to the end of the consumer's feed; it returns the items and the final cursor.
func readAll(t testing.TB, s *server, p participant, cursor *string) ([]wire.FeedItem, string) {
	t.Helper()
	var all []wire.FeedItem
	for pages := 0; ; pages++ {
		if pages > 10000 {
			t.Fatalf("readAll: more than 10000 pages")
		}
		pg := read(t, s, p, cursor, 200)
		all = append(all, pg.Feed(t)...)
		c := pg.NextCursor
		cursor = &c
		if !pg.HasMore {
			return all, c
		}
	}
}

func ack(t testing.TB, s *server, p participant, requestID string, items []map[string]string, checkpoint *string) wire.Ack {
	t.Helper()
	body := map[string]any{"request_id": requestID, "consumer_id": p.consumer, "items": items}
	if checkpoint != nil {
		body["checkpoint_cursor"] = *checkpoint
	}
	d, r := ok[wire.Ack](t, s, request{Method: "POST", Path: "/v0/inbox/ack", Token: p.token, Body: body})
	if r.Env.RequestID != requestID {
		t.Fatalf("%s: request_id %q, want %q", r, r.Env.RequestID, requestID)
	}
	return d
}

func ptr[T any](v T) *T { return &v }

// decodeData decodes an item's type-specific data strictly into a map.
func decodeData(t testing.TB, raw json.RawMessage) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("item data %s: %v", raw, err)
	}
	return m
}
