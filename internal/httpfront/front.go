// Package httpfront serves the embedded server's hottest requests on a connection loop of its own and hands
// every other connection to net/http.
//
// A request the front serves is a plain HTTP/1.1 POST, with a Content-Length body, to one of a fixed set of
// paths (message.send, inbox.read, inbox.ack), that has arrived whole (head and
// body in the connection's 8 KiB read buffer) and has nothing net/http would refuse or treat specially in
// its head (no Transfer-Encoding, Expect or Upgrade, one Host, one Content-Length, well-formed field names
// and values). The front calls the same http.Handler as net/http does, with the body in memory, and writes
// the answer with a Content-Length in one system call. net/http spends about twice the CPU on the same
// request/answer pair, most of it not in parsing but in its per-request bookkeeping: a goroutine that
// watches the connection while the handler runs (started once the body is read, stopped before the next
// request), four or five read-deadline changes, a cancellable context (docs/benchmarks.md, issue 31).
//
// The first request on a connection that is not of that kind — any other method or path, a query string,
// HTTP/1.0, chunked bodies, a body still on its way, a larger request, anything malformed — hands the
// connection to net/http for
// good, with the bytes already read replayed in front of it: net/http then answers that request and every
// later one exactly as it would have without the front (its errors, its limits, streaming, upgrades).
//
// What the front does not give a request that net/http would: the request's context is not cancelled when
// the client goes away mid-request (it is cancelled when the handler returns), and the answer is not
// streamed (it is written whole; the three operations answer small JSON envelopes).
package httpfront

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"
)

// readBufferSize is a connection's read buffer: a request (head and body) that does not fit goes to net/http.
const readBufferSize = 8 << 10

// Front serves connections from a listener: hot requests itself, the rest through Fallback.
type Front struct {
	// Handler answers every request the front serves (the same handler as Fallback's).
	Handler http.Handler
	// Paths are the paths whose POSTs the front serves.
	Paths []string
	// Fallback serves the connections handed over (its Serve runs on the front's hand-over listener; its
	// Handler is normally Handler). Its ReadHeaderTimeout and IdleTimeout (or ReadTimeout where they are
	// zero, as net/http takes them) bound the front's connections too.
	Fallback *http.Server
	// Log receives panics of the handler (nil: discarded).
	Log *slog.Logger

	ln       net.Listener
	handoff  *handoffListener
	shutting atomic.Bool
	mu       sync.Mutex
	conns    map[*conn]struct{}
	active   sync.WaitGroup
}

// deadline is when a wait of timeout, net/http's way (the first non-zero of timeout and the fallback
// server's ReadTimeout), ends from now; zero (no deadline) when both are zero.
func (f *Front) deadline(timeout time.Duration) time.Time {
	if timeout == 0 {
		timeout = f.Fallback.ReadTimeout
	}
	if timeout <= 0 {
		return time.Time{}
	}
	return time.Now().Add(timeout)
}

// Serve accepts connections from ln until it fails or Shutdown is called; it returns http.ErrServerClosed
// after Shutdown, like http.Server.Serve.
func (f *Front) Serve(ln net.Listener) error {
	if f.Log == nil {
		f.Log = slog.New(slog.DiscardHandler)
	}
	f.mu.Lock()
	f.conns = map[*conn]struct{}{}
	f.ln, f.handoff = ln, newHandoffListener(ln.Addr())
	f.mu.Unlock()
	fallbackDone := make(chan error, 1)
	go func() { fallbackDone <- f.Fallback.Serve(f.handoff) }()
	for {
		c, err := ln.Accept()
		if err != nil {
			if f.shutting.Load() {
				return http.ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(5 * time.Millisecond)
				continue
			}
			f.handoff.Close()
			<-fallbackDone
			return fmt.Errorf("httpfront: accepting: %w", err)
		}
		cn := &conn{f: f, c: c}
		if !f.track(cn) {
			_ = c.Close()
			return http.ErrServerClosed
		}
		go cn.serve()
	}
}

// track registers a connection the front serves; false once shutting down.
func (f *Front) track(cn *conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.shutting.Load() {
		return false
	}
	f.conns[cn] = struct{}{}
	f.active.Add(1)
	return true
}

func (f *Front) untrack(cn *conn) {
	f.mu.Lock()
	delete(f.conns, cn)
	f.mu.Unlock()
	f.active.Done()
}

// Shutdown closes the listener Serve runs on, ends idle connections, lets requests in progress finish (their
// connections close after the answer), and shuts down the fallback server, all within ctx.
func (f *Front) Shutdown(ctx context.Context) error {
	f.mu.Lock()
	f.shutting.Store(true)
	if f.ln != nil {
		_ = f.ln.Close()
	}
	for cn := range f.conns {
		cn.wakeIfIdle()
	}
	f.mu.Unlock()
	done := make(chan struct{})
	go func() { f.active.Wait(); close(done) }()
	err := f.Fallback.Shutdown(ctx)
	select {
	case <-done:
	case <-ctx.Done():
		f.mu.Lock()
		for cn := range f.conns {
			_ = cn.c.Close()
		}
		f.mu.Unlock()
		if err == nil {
			err = ctx.Err()
		}
	}
	return err
}

// conn is one connection the front serves.
type conn struct {
	f      *Front
	c      net.Conn
	br     *bufio.Reader
	idle   atomic.Bool // waiting for the next request
	remote string      // the client's address, for Request.RemoteAddr
	out    []byte      // the answer being written, reused
	resp   []byte      // the handler's answer body, reused
	body   []byte      // the request body, reused (handlers read it through a bytes.Reader, which copies)
}

// wakeIfIdle ends the wait of an idle connection for its next request (Shutdown).
func (cn *conn) wakeIfIdle() {
	if cn.idle.Load() {
		_ = cn.c.SetReadDeadline(time.Now())
	}
}

func (cn *conn) serve() {
	handedOver := false
	defer func() {
		if !handedOver {
			_ = cn.c.Close()
		}
		cn.f.untrack(cn)
	}()
	cn.br = bufio.NewReaderSize(cn.c, readBufferSize)
	cn.remote = cn.c.RemoteAddr().String()
	for {
		cn.idle.Store(true)
		_ = cn.c.SetReadDeadline(cn.f.deadline(cn.f.Fallback.IdleTimeout))
		if cn.f.shutting.Load() {
			return
		}
		if _, err := cn.br.Peek(1); err != nil {
			return // closed, idle too long, or shutting down
		}
		cn.idle.Store(false)
		_ = cn.c.SetReadDeadline(cn.f.deadline(cn.f.Fallback.ReadHeaderTimeout))
		h, ok, err := cn.readHead()
		if err != nil {
			return // the head did not arrive in time, or the connection failed
		}
		if !ok || cn.br.Buffered() < h.size+int(h.contentLength) {
			// Not a request the front serves, or its body is not all here yet: a body that is still on its
			// way is net/http's (the API's body deadline and minimum rate, the in-progress bound that counts
			// a request while its body arrives), as is everything after it on this connection.
			handedOver = cn.handOver()
			return
		}
		if !cn.serveOne(h) {
			return
		}
	}
}

// handOver passes the connection, with what was read of it, to the fallback server; false when it is
// closed or the server shut down.
func (cn *conn) handOver() bool {
	_ = cn.c.SetReadDeadline(time.Time{})
	return cn.f.handoff.deliver(&replayConn{Conn: cn.c, r: cn.br})
}

// head is a parsed request head the front serves.
type head struct {
	path          string
	header        http.Header
	host          string
	contentLength int64
	close         bool
	size          int // bytes of the head, the blank line included
}

// readHead reads a whole request head into the buffer without consuming it and parses it; false when the
// request is not one the front serves or its head does not fit the buffer; an error when the connection
// failed or the head did not arrive within the deadline.
func (cn *conn) readHead() (head, bool, error) {
	for {
		buf, _ := cn.br.Peek(cn.br.Buffered())
		if i := bytes.Index(buf, []byte("\r\n\r\n")); i >= 0 {
			h, ok := parseHead(buf[:i+4], cn.f.Paths)
			return h, ok, nil
		}
		if cn.br.Buffered() >= cn.br.Size() {
			return head{}, false, nil
		}
		if _, err := cn.br.Peek(cn.br.Buffered() + 1); err != nil {
			return head{}, false, err
		}
	}
}

// parseHead parses a request head (ending with its blank line) and reports whether the front serves it.
func parseHead(b []byte, paths []string) (head, bool) {
	h := head{size: len(b), contentLength: -1}
	line, rest, _ := bytes.Cut(b, []byte("\r\n"))
	method, line, ok1 := bytes.Cut(line, []byte(" "))
	target, proto, ok2 := bytes.Cut(line, []byte(" "))
	if !ok1 || !ok2 || string(method) != "POST" || string(proto) != "HTTP/1.1" {
		return head{}, false
	}
	for _, p := range paths {
		if string(target) == p {
			h.path = p
			break
		}
	}
	if h.path == "" {
		return head{}, false
	}
	h.header = make(http.Header, 8)
	hosts := 0
	for len(rest) > 2 { // the final "\r\n" is the blank line
		var field []byte
		field, rest, _ = bytes.Cut(rest, []byte("\r\n"))
		name, value, ok := bytes.Cut(field, []byte(":"))
		if !ok || !httpguts.ValidHeaderFieldName(string(name)) {
			return head{}, false // includes obsolete line folding (a field starting with white space)
		}
		value = bytes.Trim(value, " \t")
		if !httpguts.ValidHeaderFieldValue(string(value)) {
			return head{}, false
		}
		key := textproto.CanonicalMIMEHeaderKey(string(name))
		switch key {
		case "Transfer-Encoding", "Expect", "Upgrade", "Te", "Trailer":
			return head{}, false
		case "Host":
			hosts++
			h.host = string(value)
			continue // net/http moves it to Request.Host
		case "Content-Length":
			if h.contentLength >= 0 {
				return head{}, false
			}
			n, err := strconv.ParseInt(string(value), 10, 64)
			if err != nil || n < 0 || n > readBufferSize || value[0] == '+' { // a larger body cannot arrive whole
				return head{}, false
			}
			h.contentLength = n
		case "Connection":
			for _, opt := range bytes.Split(value, []byte(",")) {
				switch string(bytes.ToLower(bytes.TrimSpace(opt))) {
				case "close":
					h.close = true
				case "keep-alive", "":
				default:
					return head{}, false // a hop-by-hop header named in Connection: net/http's business
				}
			}
		}
		h.header[key] = append(h.header[key], string(value))
	}
	if hosts != 1 || h.host == "" || !httpguts.ValidHostHeader(h.host) { // net/http's check; it also takes an empty one
		return head{}, false
	}
	if h.contentLength < 0 {
		h.contentLength = 0
	}
	return h, true
}

// serveOne reads the body of the request whose head is h, runs the handler and writes its answer; false
// when the connection ends after it.
func (cn *conn) serveOne(h head) (keep bool) {
	if _, err := cn.br.Discard(h.size); err != nil {
		return false
	}
	var body io.ReadCloser = http.NoBody
	if h.contentLength > 0 { // already buffered (serve)
		if int64(cap(cn.body)) < h.contentLength {
			cn.body = make([]byte, h.contentLength)
		}
		raw := cn.body[:h.contentLength]
		if _, err := io.ReadFull(cn.br, raw); err != nil {
			return false
		}
		body = io.NopCloser(bytes.NewReader(raw))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req := (&http.Request{
		Method: "POST", URL: &url.URL{Path: h.path}, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h.header, Body: body, ContentLength: h.contentLength, Host: h.host, Close: h.close,
		RemoteAddr: cn.remote, RequestURI: h.path,
	}).WithContext(ctx)
	w := &responseWriter{header: make(http.Header, 8), body: cn.resp[:0]}
	if !cn.run(w, req) {
		return false
	}
	out, closing := answer(cn.out[:0], w, h.close)
	cn.out, cn.resp = out[:0], w.body[:0]
	if _, err := cn.c.Write(out); err != nil {
		return false
	}
	return !closing
}

// run calls the handler, recovering a panic as net/http does (logged; the connection is closed unanswered).
func (cn *conn) run(w *responseWriter, req *http.Request) (ok bool) {
	defer func() {
		if p := recover(); p != nil {
			if p != http.ErrAbortHandler {
				cn.f.Log.Error("httpfront: panic serving a request", "path", req.URL.Path, "panic", fmt.Sprint(p))
			}
			ok = false
		}
	}()
	cn.f.Handler.ServeHTTP(w, req)
	return true
}

// answer appends to out the whole answer written for w (status line, header fields in key order, Date,
// Content-Length, body) and reports whether the connection ends after it.
func answer(out []byte, w *responseWriter, reqClose bool) ([]byte, bool) {
	status := w.status
	if status == 0 {
		status = http.StatusOK
	}
	body := w.body
	bodyAllowed := status >= 200 && status != http.StatusNoContent && status != http.StatusNotModified
	if !bodyAllowed {
		body = body[:0]
	}
	hdr := w.header
	closing := reqClose || httpguts.HeaderValuesContainsToken(hdr["Connection"], "close")
	if _, ok := hdr["Content-Type"]; !ok && len(body) > 0 {
		hdr.Set("Content-Type", http.DetectContentType(body))
	}
	hdr.Del("Content-Length")
	hdr.Del("Transfer-Encoding")
	if closing {
		hdr.Set("Connection", "close")
	}
	out = slices.Grow(out, 256+len(body))
	out = append(out, "HTTP/1.1 "...)
	out = strconv.AppendInt(out, int64(status), 10)
	out = append(out, ' ')
	out = append(out, http.StatusText(status)...)
	out = append(out, "\r\n"...)
	keys := make([]string, 0, len(hdr))
	for k := range hdr {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !httpguts.ValidHeaderFieldName(k) {
			continue
		}
		for _, v := range hdr[k] {
			out = append(out, k...)
			out = append(out, ": "...)
			out = appendFieldValue(out, v)
			out = append(out, "\r\n"...)
		}
	}
	if _, ok := hdr["Date"]; !ok {
		out = append(out, "Date: "...)
		out = time.Now().UTC().AppendFormat(out, http.TimeFormat)
		out = append(out, "\r\n"...)
	}
	if bodyAllowed {
		out = append(out, "Content-Length: "...)
		out = strconv.AppendInt(out, int64(len(body)), 10)
		out = append(out, "\r\n"...)
	}
	out = append(out, "\r\n"...)
	return append(out, body...), closing
}

// appendFieldValue appends a header field value with CR and LF turned into spaces, as net/http writes it.
func appendFieldValue(b []byte, v string) []byte {
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c == '\r' || c == '\n' {
			c = ' '
		}
		b = append(b, c)
	}
	return b
}

// responseWriter collects a handler's answer. It has a connection's read deadline for
// http.ResponseController (the body is already read: setting it does nothing) and no Flush: the answer is
// written whole when the handler returns.
type responseWriter struct {
	header http.Header
	status int
	body   []byte
}

func (w *responseWriter) Header() http.Header { return w.header }

func (w *responseWriter) WriteHeader(code int) {
	if w.status != 0 || code < 200 { // informational answers are not sent
		return
	}
	w.status = code
}

func (w *responseWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	w.body = append(w.body, p...)
	return len(p), nil
}

// SetReadDeadline implements http.ResponseController's read deadline: the body is already read.
func (w *responseWriter) SetReadDeadline(time.Time) error { return nil }

// replayConn is a handed-over connection: reads take what the front had buffered first.
type replayConn struct {
	net.Conn
	r io.Reader
}

func (c *replayConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// handoffListener is the fallback server's listener: it accepts the connections the front hands over.
type handoffListener struct {
	addr   net.Addr
	ch     chan net.Conn
	done   chan struct{}
	closed sync.Once
}

func newHandoffListener(addr net.Addr) *handoffListener {
	return &handoffListener{addr: addr, ch: make(chan net.Conn), done: make(chan struct{})}
}

// deliver hands c to the fallback server; false (c closed) once the listener is closed.
func (l *handoffListener) deliver(c net.Conn) bool {
	select {
	case l.ch <- c:
		return true
	case <-l.done:
		_ = c.Close()
		return false
	}
}

// Accept implements net.Listener.
func (l *handoffListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close implements net.Listener.
func (l *handoffListener) Close() error {
	l.closed.Do(func() { close(l.done) })
	return nil
}

// Addr implements net.Listener.
func (l *handoffListener) Addr() net.Addr { return l.addr }
