package server_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/internal/syncbuf"
	"github.com/waypost/waypost/server"
)

// tolerance is what a busy test machine may add to a documented deadline before the server's answer or
// close is observed.
const tolerance = 5 * time.Second

// start opens a server on cfg (Addr: any free loopback port), listens and serves until the test ends; its
// logs (JSON) are returned, and shown when the test failed.
func start(t *testing.T, cfg server.Config) (*server.Server, *syncbuf.Buffer) {
	t.Helper()
	logs := &syncbuf.Buffer{}
	cfg.Addr = "127.0.0.1:0"
	cfg.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	srv, err := server.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
		srv.Close()
		if t.Failed() {
			t.Logf("server logs:\n%s", logs.String())
		}
	})
	return srv, logs
}

// served is a listening server with one space: actor A (every scope, consumer CA, token bound to it).
type served struct {
	srv  *server.Server
	addr string
	tok  string
	con  string
	logs *syncbuf.Buffer
	p    *domain.Principal
}

func serve(t *testing.T, cfg server.Config) *served {
	t.Helper()
	cfg.DataDir, cfg.NoSync = t.TempDir(), true
	srv, logs := start(t, cfg)
	ctx := context.Background()
	svc := srv.Service()
	sp, err := svc.CreateSpace(ctx, domain.CreateSpaceRequest{RequestID: "sp"})
	if err != nil {
		t.Fatal(err)
	}
	con, err := svc.CreateConsumer(ctx, sp.SpaceID, domain.CreateConsumerRequest{RequestID: "con", ActorID: sp.DefaultRecipientID, View: "inbox"})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := svc.CreateToken(ctx, sp.SpaceID, domain.CreateTokenRequest{RequestID: "tok", ActorID: sp.DefaultRecipientID,
		ConsumerID: con.ConsumerID, Scopes: domain.AllScopes()})
	if err != nil {
		t.Fatal(err)
	}
	p, err := svc.Authenticate(ctx, tok.Token)
	if err != nil {
		t.Fatal(err)
	}
	return &served{srv: srv, addr: srv.Addr(), tok: tok.Token, con: con.ConsumerID, logs: logs, p: p}
}

// prepare prepares an upload of size bytes and returns its ID and content.
func (s *served) prepare(t *testing.T, size int) (string, []byte) {
	t.Helper()
	content := []byte(strings.Repeat("u", size))
	sum := sha256.Sum256(content)
	prep, err := s.srv.Service().PrepareBlob(context.Background(), s.p, domain.BlobPrepareRequest{RequestID: fmt.Sprintf("prep-%d-%d", size, time.Now().UnixNano()),
		ContentType: "text/plain", SizeBytes: int64(size), SHA256: hex.EncodeToString(sum[:])})
	if err != nil {
		t.Fatal(err)
	}
	return prep.UploadID, content
}

// rawConn is one client connection speaking HTTP/1.1 by hand.
type rawConn struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c, br: bufio.NewReader(c)}
}

// head sends a request head declaring a body of length bytes (-1: none) and the first bytes of the body.
func (r *rawConn) head(method, path, token, contentType string, length int, first []byte) {
	r.t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: waypost.test\r\n", method, path)
	if token != "" {
		fmt.Fprintf(&b, "Authorization: Bearer %s\r\n", token)
	}
	if contentType != "" {
		fmt.Fprintf(&b, "Content-Type: %s\r\n", contentType)
	}
	if length >= 0 {
		fmt.Fprintf(&b, "Content-Length: %d\r\n", length)
	}
	b.WriteString("\r\n")
	if _, err := r.c.Write(append([]byte(b.String()), first...)); err != nil {
		r.t.Fatal(err)
	}
}

// envelopeError is the error of an RFC §5.2 envelope.
type envelopeError struct {
	OK        bool   `json:"ok"`
	RequestID string `json:"request_id"`
	Error     *struct {
		Code    string         `json:"code"`
		Details map[string]any `json:"details"`
	} `json:"error"`
}

// response reads one response within d and decodes its envelope.
func (r *rawConn) response(d time.Duration) (*http.Response, envelopeError) {
	r.t.Helper()
	_ = r.c.SetReadDeadline(time.Now().Add(d))
	resp, err := http.ReadResponse(r.br, nil)
	if err != nil {
		r.t.Fatalf("no response within %s: %v", d, err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		r.t.Fatalf("reading the response body: %v", err)
	}
	var env envelopeError
	if err := json.Unmarshal(body, &env); err != nil {
		r.t.Fatalf("HTTP %d: not an envelope: %q", resp.StatusCode, body)
	}
	return resp, env
}

// closedWithin requires the server to close the connection within d (reads see EOF or a reset).
func (r *rawConn) closedWithin(d time.Duration) {
	r.t.Helper()
	_ = r.c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, r.br)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		r.t.Fatalf("the connection is still open after %s", d)
	}
}

// TestSlowBodiesAreCut: a body that trickles in is cut at the documented deadline — at once when the request
// is unauthenticated (the 401 does not wait for the body), at BodyTimeout for a JSON body, when an upload
// falls under the minimum rate over a window — each answered with an envelope and its connection closed.
// A body that keeps up is accepted, and a long poll on a kept-alive connection outlives the body deadline.
func TestSlowBodiesAreCut(t *testing.T) {
	const bodyTimeout = time.Second
	s := serve(t, server.Config{BodyTimeout: bodyTimeout, MinUploadRate: 1000})
	uploadID, _ := s.prepare(t, 50_000)

	for _, tc := range []struct {
		name, method, path, token, contentType string
		length                                 int
		status                                 int
		code, reason                           string
	}{
		{"unauthenticated JSON", "POST", "/v0/messages", "", "application/json", 60_000, 401, "UNAUTHENTICATED", ""},
		{"wrong token JSON", "POST", "/v0/messages", "wpt_" + strings.Repeat("x", 43), "application/json", 60_000, 401, "UNAUTHENTICATED", ""},
		{"unauthenticated upload", "PUT", "/v0/uploads/" + uploadID + "/content", "", "text/plain", 50_000, 401, "UNAUTHENTICATED", ""},
		{"unauthenticated admin", "POST", "/admin/v0/spaces", "", "application/json", 60_000, 401, "UNAUTHENTICATED", ""},
		{"unauthenticated MCP", "POST", "/mcp", "", "application/json", 60_000, 401, "", ""},
		{"authenticated JSON", "POST", "/v0/messages", s.tok, "application/json", 60_000, 400, "INVALID_REQUEST", "body_timeout"},
		{"authenticated upload", "PUT", "/v0/uploads/" + uploadID + "/content", s.tok, "text/plain", 50_000, 400, "INVALID_REQUEST", "body_too_slow"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialRaw(t, s.addr)
			start := time.Now()
			c.head(tc.method, tc.path, tc.token, tc.contentType, tc.length, []byte(`{"request_id":"slow",`))
			stop := make(chan struct{})
			defer close(stop)
			go func() { // one byte every 100 ms: 10 bytes/s
				for {
					select {
					case <-stop:
						return
					case <-time.After(100 * time.Millisecond):
						if _, err := c.c.Write([]byte(" ")); err != nil {
							return
						}
					}
				}
			}()
			deadline := bodyTimeout + tolerance
			if tc.status == 401 {
				deadline = tolerance // no body byte is needed to refuse it
			}
			resp, env := c.response(deadline)
			if resp.StatusCode != tc.status || (tc.code != "" && (env.Error == nil || env.Error.Code != tc.code)) {
				t.Fatalf("HTTP %d %+v, want %d %s", resp.StatusCode, env.Error, tc.status, tc.code)
			}
			if tc.reason != "" && env.Error.Details["reason"] != tc.reason {
				t.Fatalf("reason %v, want %s", env.Error.Details["reason"], tc.reason)
			}
			if !resp.Close { // Connection: close
				t.Fatalf("an answer before the end of the body keeps the connection: %v", resp.Header)
			}
			c.closedWithin(deadline - time.Since(start) + time.Second)
		})
	}

	t.Run("upload keeping up with the minimum rate", func(t *testing.T) {
		// 5000 bytes/s for 3 s, three windows five times above the minimum (room for a slow machine).
		id, content := s.prepare(t, 15000)
		c := dialRaw(t, s.addr)
		c.head("PUT", "/v0/uploads/"+id+"/content", s.tok, "text/plain", len(content), nil)
		for i := 0; i < len(content); i += 500 {
			time.Sleep(100 * time.Millisecond)
			if _, err := c.c.Write(content[i : i+500]); err != nil {
				t.Fatal(err)
			}
		}
		if resp, env := c.response(tolerance); resp.StatusCode != 200 || !env.OK {
			t.Fatalf("HTTP %d %+v", resp.StatusCode, env.Error)
		}
	})

	t.Run("long poll after a body on a kept-alive connection", func(t *testing.T) {
		c := dialRaw(t, s.addr)
		body := fmt.Sprintf(`{"consumer_id":%q}`, s.con)
		c.head("POST", "/v0/inbox/read", s.tok, "application/json", len(body), []byte(body))
		if resp, env := c.response(tolerance); resp.StatusCode != 200 || !env.OK {
			t.Fatalf("read: HTTP %d %+v", resp.StatusCode, env.Error)
		}
		c.head("GET", "/v0/feed/wait?consumer_id="+s.con+"&timeout_ms=2500", s.tok, "", -1, nil)
		if resp, env := c.response(2500*time.Millisecond + tolerance); resp.StatusCode != 200 || !env.OK {
			t.Fatalf("wait: HTTP %d %+v", resp.StatusCode, env.Error)
		}
	})
}

// TestConnectionBound: connections above MaxConnections are answered at once with 429 RATE_LIMITED and
// Retry-After in the standard envelope, and closed; the refusals show in Load and in the logs; a freed
// place serves the next connection.
func TestConnectionBound(t *testing.T) {
	s := serve(t, server.Config{MaxConnections: 4})
	held := make([]*rawConn, 4)
	for i := range held {
		held[i] = dialRaw(t, s.addr)
		held[i].head("GET", "/v0/describe", s.tok, "", -1, nil) // each is accepted and answered
		if resp, _ := held[i].response(tolerance); resp.StatusCode != 200 {
			t.Fatalf("connection %d: HTTP %d", i, resp.StatusCode)
		}
	}
	extra := dialRaw(t, s.addr)
	extra.head("GET", "/v0/describe", s.tok, "", -1, nil)
	resp, env := extra.response(tolerance)
	if resp.StatusCode != 429 || env.Error == nil || env.Error.Code != "RATE_LIMITED" || env.RequestID == "" ||
		env.Error.Details["limit"] != "max_connections" || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("over the bound: HTTP %d %v %+v", resp.StatusCode, resp.Header, env.Error)
	}
	extra.closedWithin(tolerance)
	if l := s.srv.Load(); l.MaxConnections != 4 || l.Connections != 4 || l.RefusedConnections < 1 {
		t.Fatalf("Load() = %+v", l)
	}
	if logs := s.logs.String(); !strings.Contains(logs, `"msg":"shedding load: max_connections reached"`) || !strings.Contains(logs, `"max":4`) {
		t.Fatalf("no shedding line with the figures in the logs:\n%s", logs)
	}
	held[0].c.Close()
	deadline := time.Now().Add(tolerance)
	for {
		c := dialRaw(t, s.addr)
		c.head("GET", "/v0/describe", s.tok, "", -1, nil)
		if resp, _ := c.response(tolerance); resp.StatusCode == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a freed place does not serve a new connection")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestInflightBound: requests above MaxInflight are answered at once with 429 RATE_LIMITED and
// Retry-After; feed.wait long polls are not counted; once the requests in progress end, others pass.
func TestInflightBound(t *testing.T) {
	s := serve(t, server.Config{MaxInflight: 2, BodyTimeout: 3 * time.Second})
	// Three requests at once whose bodies trickle: exactly one is refused at once, two stay in progress.
	type answer struct {
		resp *http.Response
		env  envelopeError
		err  error
	}
	answers := make(chan answer, 3)
	for range 3 {
		c := dialRaw(t, s.addr)
		c.head("POST", "/v0/inbox/read", s.tok, "application/json", 100, []byte("{"))
		go func() {
			_ = c.c.SetReadDeadline(time.Now().Add(3*time.Second + tolerance))
			resp, err := http.ReadResponse(c.br, nil)
			var env envelopeError
			if err == nil {
				err = json.NewDecoder(resp.Body).Decode(&env)
			}
			answers <- answer{resp, env, err}
		}()
	}
	first := <-answers
	if first.err != nil || first.resp.StatusCode != 429 || first.env.Error.Code != "RATE_LIMITED" ||
		first.env.Error.Details["limit"] != "max_inflight" || first.resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("first answer: %+v %+v %v", first.resp, first.env.Error, first.err)
	}
	w := dialRaw(t, s.addr) // a long poll still passes while two requests are in progress
	w.head("GET", "/v0/feed/wait?consumer_id="+s.con+"&timeout_ms=10", s.tok, "", -1, nil)
	if resp, _ := w.response(tolerance); resp.StatusCode != 200 {
		t.Fatalf("feed.wait while at the bound: HTTP %d", resp.StatusCode)
	}
	if l := s.srv.Load(); l.RefusedRequests != 1 || l.MaxInflight != 2 || l.Inflight != 2 {
		t.Fatalf("Load() = %+v", l)
	}
	for range 2 { // the trickling bodies are cut at the body timeout
		a := <-answers
		if a.err != nil || a.resp.StatusCode != 400 || a.env.Error.Details["reason"] != "body_timeout" {
			t.Fatalf("in progress: %+v %+v %v", a.resp, a.env.Error, a.err)
		}
	}
	c := dialRaw(t, s.addr)
	c.head("GET", "/v0/describe", s.tok, "", -1, nil)
	if resp, _ := c.response(tolerance); resp.StatusCode != 200 {
		t.Fatalf("after the requests in progress ended: HTTP %d", resp.StatusCode)
	}
	if logs := s.logs.String(); !strings.Contains(logs, `"msg":"shedding load: max_inflight reached"`) {
		t.Fatalf("no shedding line in the logs:\n%s", logs)
	}
}

// TestWaitersBoundOverHTTP: describe publishes the waiter bound of a space; feed.wait requests above it
// get 429 RATE_LIMITED with Retry-After at once.
func TestWaitersBoundOverHTTP(t *testing.T) {
	s := serve(t, server.Config{MaxWaitersPerSpace: 2})
	d := dialRaw(t, s.addr)
	d.head("GET", "/v0/describe", s.tok, "", -1, nil)
	_ = d.c.SetReadDeadline(time.Now().Add(tolerance))
	resp, err := http.ReadResponse(d.br, nil)
	if err != nil {
		t.Fatal(err)
	}
	var desc struct {
		Data struct {
			Limits map[string]int `json:"limits"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&desc); err != nil || desc.Data.Limits["feed_wait_waiters_max"] != 2 {
		t.Fatalf("describe limits %v (%v)", desc.Data.Limits, err)
	}
	// Three long polls at once: exactly one is refused, at once; the other two wait.
	type answer struct {
		resp *http.Response
		err  error
	}
	answers := make(chan answer, 3)
	for range 3 {
		w := dialRaw(t, s.addr)
		w.head("GET", "/v0/feed/wait?consumer_id="+s.con+"&timeout_ms=30000", s.tok, "", -1, nil)
		go func() {
			_ = w.c.SetReadDeadline(time.Now().Add(tolerance))
			resp, err := http.ReadResponse(w.br, nil)
			answers <- answer{resp, err}
		}()
	}
	refused, waiting := 0, 0
	for range 3 {
		a := <-answers
		var ne net.Error
		switch {
		case errors.As(a.err, &ne) && ne.Timeout():
			waiting++
		case a.err == nil && a.resp.StatusCode == 429:
			var env envelopeError
			_ = json.NewDecoder(a.resp.Body).Decode(&env)
			if env.Error == nil || env.Error.Code != "RATE_LIMITED" || env.Error.Details["limit"] != "feed_wait_waiters_max" || a.resp.Header.Get("Retry-After") != "1" {
				t.Fatalf("HTTP 429 %v %+v", a.resp.Header, env.Error)
			}
			refused++
		default:
			t.Fatalf("unexpected answer: %+v %v", a.resp, a.err)
		}
	}
	if refused != 1 || waiting != 2 {
		t.Fatalf("%d refused and %d waiting, want 1 and 2", refused, waiting)
	}
}
