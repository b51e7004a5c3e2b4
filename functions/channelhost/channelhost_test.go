package channelhost_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/waypost/waypost/channel/chanclient"
	"github.com/waypost/waypost/channel/livefeed"
	"github.com/waypost/waypost/e2e/wire"
	"github.com/waypost/waypost/functions/channelhost"
	"github.com/waypost/waypost/functions/channelhost/channelhosttest"
	"github.com/waypost/waypost/functions/config"
	"github.com/waypost/waypost/functions/internal/app"
	"github.com/waypost/waypost/functions/internal/emutest"
	"github.com/waypost/waypost/functions/internal/roles"
	"github.com/waypost/waypost/internal/emulator"
	"github.com/waypost/waypost/internal/syncbuf"
	"github.com/waypost/waypost/store/dynamo/dynamotest"
	"github.com/waypost/waypost/store/s3blob/s3test"
)

func TestMain(m *testing.M) { s3test.Main(m) }

const (
	adminSecret   = "wpa_channelhost-test-admin-secret-0123456789abcdefghijklmnopqrstuvwxyz"
	channelSecret = "wpc_channelhost-test-channel-secret"
	cursorKey     = "channelhost-test-cursor-key-0123456789abcdef"
)

// world is one deployment on the emulators: the table and bucket, and the environment of each process.
type world struct {
	env map[string]string // every variable with its test value
}

func newWorld(t *testing.T) *world {
	t.Helper()
	s3env := s3test.Require(t)
	ddb := dynamotest.New(t)
	for k, v := range emutest.AWSEnv(s3env) {
		t.Setenv(k, v)
	}
	return &world{env: map[string]string{
		config.EnvTable: ddb.Table(t), config.EnvBucket: s3env.Bucket(t), config.EnvBlobPrefix: "host/",
		config.EnvCursorKey: cursorKey, config.EnvAdminSecret: adminSecret, config.EnvChannelSecret: channelSecret,
		config.EnvDynamoDBEndpoint: ddb.URL, config.EnvS3Endpoint: s3env.Endpoint, config.EnvVersion: "host-test",
		config.EnvLogLevel: "debug",
	}}
}

func (w *world) lookup(k string) (string, bool) { v, ok := w.env[k]; return v, ok }

func (w *world) load(t *testing.T, fn string) config.Config {
	t.Helper()
	c, err := config.LoadFor(fn, w.lookup)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// lambda builds an HTTP function's handler in-process (the Lambda's wiring without the API Gateway adapter).
func (w *world) lambda(t *testing.T, role string, channelURL string) http.Handler {
	t.Helper()
	c, err := config.LoadFor(role, func(k string) (string, bool) {
		switch {
		case k == config.EnvChannelURL && channelURL != "":
			return channelURL, true
		case k == config.EnvChannelSecret && channelURL == "":
			return "", false
		}
		return w.lookup(k)
	})
	if err != nil {
		t.Fatal(err)
	}
	served, err := app.Build(context.Background(), roles.Specs()[role], c, os.LookupEnv, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return served.HTTP
}

// do sends one request to h (a handler, or a base URL when h is a string) and decodes the envelope.
func do(t *testing.T, h any, method, target, token string, body any) (int, wire.Envelope) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	var status int
	var raw []byte
	switch h := h.(type) {
	case http.Handler:
		req := httptest.NewRequest(method, target, rd)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		status, raw = rec.Code, rec.Body.Bytes()
	case string:
		req, err := http.NewRequest(method, h+target, rd)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Errorf("%s %s: %v", method, target, err)
			return 0, wire.Envelope{}
		}
		raw, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		status = resp.StatusCode
	}
	var env wire.Envelope
	if err := json.Unmarshal(raw, &env); err != nil {
		t.Errorf("%s %s: status %d, not an envelope: %s", method, target, status, raw)
	}
	return status, env
}

func data[T any](t *testing.T, h any, method, target, token string, body any) T {
	t.Helper()
	status, env := do(t, h, method, target, token, body)
	var v T
	if status != 200 || !env.OK {
		t.Fatalf("%s %s: status %d, %+v", method, target, status, env.Error)
	}
	if err := json.Unmarshal(env.Data, &v); err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	return v
}

type party struct{ space, actor, consumer, token string }

// setup creates a space with a reader (consumer and token) and a sender, through the admin function.
func setup(t *testing.T, admin http.Handler) (reader, sender party) {
	t.Helper()
	n := 0
	rid := func() string { n++; return fmt.Sprintf("setup-%d", n) }
	sp := data[wire.Space](t, admin, "POST", "/admin/v0/spaces", adminSecret, map[string]any{"request_id": rid()}).SpaceID
	mk := func() party {
		a := data[wire.Actor](t, admin, "POST", "/admin/v0/spaces/"+sp+"/actors", adminSecret, map[string]any{"request_id": rid()}).ActorID
		c := data[wire.Consumer](t, admin, "POST", "/admin/v0/spaces/"+sp+"/consumers", adminSecret, map[string]any{"request_id": rid(), "actor_id": a, "view": "inbox"}).ConsumerID
		tok := data[wire.Token](t, admin, "POST", "/admin/v0/spaces/"+sp+"/tokens", adminSecret, map[string]any{"request_id": rid(), "actor_id": a,
			"consumer_id": c, "scopes": []string{"message.send", "message.read", "receipt.write"}}).Token
		return party{space: sp, actor: a, consumer: c, token: tok}
	}
	return mk(), mk()
}

func waitPath(p party, cursor string, timeoutMS int) string {
	return channelhosttest.WaitPath(p.consumer, cursor, timeoutMS)
}

// A commit through the Lambda wiring (domain over the same table, announcing to the host through
// chanclient) wakes a pending feed.wait on the host; a feed.wait with nothing new answers an empty page at
// its timeout_ms; the host serves nothing but feed.wait, the internal API and /healthz.
func TestFeedWaitOnTheHost(t *testing.T) {
	w := newWorld(t)
	host, err := channelhost.New(context.Background(), w.load(t, config.Channel), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(host)
	t.Cleanup(srv.Close)
	admin := w.lambda(t, config.Admin, "")
	mailbox := w.lambda(t, config.Mailbox, srv.URL)
	reader, sender := setup(t, admin)

	// Nothing yet: the feed is empty; remember its cursor.
	start := time.Now()
	empty := data[wire.Page](t, srv.URL, "GET", waitPath(reader, "", 300), reader.token, nil)
	if len(empty.Items) != 0 || empty.NextCursor == "" || time.Since(start) < 300*time.Millisecond {
		t.Fatalf("first wait: %+v after %v", empty, time.Since(start))
	}

	// A long poll is pending on the host when the mailbox function commits a message to the reader.
	pending := channelhosttest.StartWait[wire.Page](t, srv.URL, channelSecret, reader.space, srv.URL+waitPath(reader, empty.NextCursor, 20000), reader.token)
	sent := data[struct {
		ResourceID string `json:"resource_id"`
		VisibleSeq string `json:"visible_seq"`
	}](t, mailbox, "POST", "/v0/messages", sender.token, map[string]any{"request_id": "wake-1", "recipient_ids": []string{reader.actor},
		"body": map[string]any{"text": "wake up"}})
	woke := pending.Answer(t)
	if woke.Err != nil {
		t.Fatal(woke.Err)
	}
	if len(woke.Page.Items) != 1 || woke.Page.Items[0].ResourceID != sent.ResourceID || woke.Page.Items[0].VisibleSeq != sent.VisibleSeq {
		t.Fatalf("woken page: %+v, sent %+v", woke.Page, sent)
	}
	if woke.Elapsed > 10*time.Second {
		t.Fatalf("the wait answered after %v: the timeout, not the announcement", woke.Elapsed)
	}

	// Nothing new after the message: the wait answers an empty page at its timeout, not before.
	start = time.Now()
	idle := data[wire.Page](t, srv.URL, "GET", waitPath(reader, woke.Page.NextCursor, 1500), reader.token, nil)
	if elapsed := time.Since(start); len(idle.Items) != 0 || elapsed < 1500*time.Millisecond || elapsed > 8*time.Second {
		t.Fatalf("idle wait: %d items after %v (timeout_ms 1500)", len(idle.Items), elapsed)
	}

	// The AWS limit of feed_wait_max_ms; authentication as everywhere.
	if status, env := do(t, srv.URL, "GET", waitPath(reader, "", 25001), reader.token, nil); status != 422 || env.Error == nil || env.Error.Code != "RESOURCE_LIMIT" {
		t.Fatalf("timeout_ms 25001: %d %+v", status, env.Error)
	}
	if status, env := do(t, srv.URL, "GET", waitPath(reader, "", 100), "", nil); status != 401 || env.Error == nil || env.Error.Code != "UNAUTHENTICATED" {
		t.Fatalf("no token: %d %+v", status, env.Error)
	}
	// No data plane, no control plane here.
	for _, target := range []string{"/v0/describe", "/v0/messages", "/admin/v0/spaces", "/mcp"} {
		if status, env := do(t, srv.URL, "GET", target, reader.token, nil); status != 404 || env.OK || env.Error.Code != "NOT_FOUND" || env.RequestID == "" {
			t.Errorf("GET %s on the host: %d %+v", target, status, env)
		}
	}
	resp, err := http.Get(srv.URL + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("/healthz: %v %v", resp, err)
	}
	resp.Body.Close()
	bad, err := chanclient.New(srv.URL, "wpc_not-the-channel-secret")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bad.Publish(context.Background(), reader.space, livefeed.ChannelName, "{}"); !errors.Is(err, chanclient.ErrUnauthorized) {
		t.Fatalf("publish with a wrong secret: %v", err)
	}
}

// A feed.wait whose context ends before it can answer (shutdown during its store read) answers 503
// STORAGE_UNAVAILABLE with Retry-After, never an empty response.
func TestFeedWaitCutShort(t *testing.T) {
	w := newWorld(t)
	host, err := channelhost.New(context.Background(), w.load(t, config.Channel), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	reader, _ := setup(t, w.lambda(t, config.Admin, ""))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req := httptest.NewRequest(http.MethodGet, waitPath(reader, "", 5000), nil).WithContext(ctx)
	req.Header.Set("Authorization", "Bearer "+reader.token)
	rec := httptest.NewRecorder()
	host.ServeHTTP(rec, req)
	var env wire.Envelope
	if err := json.Unmarshal(rec.Body.Bytes(), &env); err != nil || rec.Code != 503 || env.OK || env.Error.Code != "STORAGE_UNAVAILABLE" ||
		rec.Header().Get("Retry-After") != "1" || env.RequestID == "" {
		t.Fatalf("cut short: %d %v %s (%v)", rec.Code, rec.Header(), rec.Body, err)
	}
	// The same request, not cut short, answers its page.
	req = httptest.NewRequest(http.MethodGet, waitPath(reader, "", 0), nil)
	req.Header.Set("Authorization", "Bearer "+reader.token)
	rec = httptest.NewRecorder()
	host.ServeHTTP(rec, req)
	if rec.Code != 200 {
		t.Fatalf("not cut short: %d %s", rec.Code, rec.Body)
	}
}

// The command: --help lists the container's variables; a configuration error names the variable; it
// serves on --addr until its context ends, and a long poll pending then answers at once.
func TestRun(t *testing.T) {
	var out, errb bytes.Buffer
	if err := channelhost.Run(context.Background(), []string{"--help"}, func(string) (string, bool) { return "", false }, &out, &errb); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("--help: %v", err)
	}
	names, _ := config.VarsFor(config.Channel)
	for _, n := range append(names, "--addr", "/v0/feed/wait", "/healthz") {
		if !strings.Contains(out.String(), strings.TrimPrefix(n, "-")) {
			t.Errorf("--help does not mention %s:\n%s", n, out.String())
		}
	}
	var usage *channelhost.UsageError
	if err := channelhost.Run(context.Background(), []string{"extra"}, func(string) (string, bool) { return "", false }, &out, &errb); !errors.As(err, &usage) {
		t.Fatalf("an argument: %v", err)
	}
	out.Reset()
	if err := channelhost.Run(context.Background(), nil, func(string) (string, bool) { return "", false }, &out, &errb); err == nil ||
		!strings.Contains(out.String(), config.EnvChannelSecret) || !strings.Contains(out.String(), `"msg":"configuration"`) {
		t.Fatalf("no configuration: %v\n%s", err, out.String())
	}

	w := newWorld(t)
	admin := w.lambda(t, config.Admin, "")
	reader, _ := setup(t, admin)
	addr := emulator.FreeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	var logs syncbuf.Buffer
	exited := make(chan error, 1)
	go func() { exited <- channelhost.Run(ctx, []string{"--addr", addr}, w.lookup, &logs, &logs) }()
	base := "http://" + addr
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(base + "/healthz")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not serving on %s: %v\n%s", addr, err, logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	type result struct {
		p      wire.Page
		status int
		code   string
		err    error
	}
	done := make(chan result, 1)
	go func() {
		p, status, code, err := channelhosttest.FeedWait[wire.Page](base+waitPath(reader, "", 20000), reader.token)
		done <- result{p, status, code, err}
	}()
	channelhosttest.WaitSubscribed(t, base, channelSecret, reader.space, 1)
	start := time.Now()
	cancel()
	// An empty page and its cursor, or (shutdown cut its store read short) 503 STORAGE_UNAVAILABLE.
	select {
	case r := <-done:
		emptyPage := r.status == 200 && len(r.p.Items) == 0 && r.p.NextCursor != ""
		if r.err != nil || !(emptyPage || r.status == 503 && r.code == "STORAGE_UNAVAILABLE") {
			t.Fatalf("the pending wait answered %d %s %+v, %v at shutdown", r.status, r.code, r.p, r.err)
		}
	case <-time.After(channelhost.ShutdownTimeout):
		t.Fatal("the pending wait did not answer at shutdown")
	}
	if err := <-exited; err != nil {
		t.Fatalf("Run after its context ended: %v", err)
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Fatalf("shutdown took %v with a 20 s wait pending", elapsed)
	}
	for _, want := range []string{`"msg":"ready"`, `"function":"channel"`, `"msg":"shutting down"`, `"path":"/v0/feed/wait"`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("logs lack %s:\n%s", want, logs.String())
		}
	}
}
