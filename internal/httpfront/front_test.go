package httpfront

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// echo answers with what it was asked, and says which server served it: net/http puts its *http.Server in
// every request's context, the front does not.
func echo(w http.ResponseWriter, r *http.Request) {
	by := "front"
	if r.Context().Value(http.ServerContextKey) != nil {
		by = "net/http"
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		panic(err)
	}
	switch string(body) {
	case "panic":
		panic("asked to")
	case "nocontent":
		w.WriteHeader(http.StatusNoContent)
		return
	}
	w.Header().Set("X-Served-By", by)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Add("X-Multi", "a")
	w.Header().Add("X-Multi", "b\r\nInjected: no")
	if string(body) == "teapot" {
		w.WriteHeader(http.StatusTeapot)
	}
	keys := make([]string, 0, len(r.Header))
	for k := range r.Header {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	fmt.Fprintf(w, "%s %s %s host=%s len=%d close=%v\n", r.Method, r.URL.Path, r.Proto, r.Host, r.ContentLength, r.Close)
	for _, k := range keys {
		fmt.Fprintf(w, "%s=%q\n", k, r.Header[k])
	}
	fmt.Fprintf(w, "body=%q\n", body)
}

// start serves h on a loopback listener through a Front (front true) or net/http alone, and returns the
// address and a function that shuts it down.
func start(t *testing.T, front bool, configure func(*Front)) (string, func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(echo), ReadHeaderTimeout: time.Second,
		ErrorLog: log.New(io.Discard, "", 0)} // the panics the cases cause
	done := make(chan error, 1)
	shutdown := srv.Shutdown
	if front {
		f := &Front{Handler: srv.Handler, Paths: []string{"/hot", "/also/hot"}, Fallback: srv}
		if configure != nil {
			configure(f)
		}
		go func() { done <- f.Serve(ln) }()
		shutdown = f.Shutdown
	} else {
		go func() { done <- srv.Serve(ln) }()
	}
	return ln.Addr().String(), func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve returned %v", err)
		}
	}
}

// exchange writes raw on a new connection, then reads answers until the server closes it (or n answers
// were read, with n > 0); each answer is rendered as text without its Date, and closed says whether the
// server closed the connection after them.
func exchange(t *testing.T, addr, raw string, n int) (answers []string, closed bool) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	for n <= 0 || len(answers) < n {
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			return answers, true
		}
		body, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		res.Header.Del("Date")
		var b strings.Builder
		fmt.Fprintf(&b, "%s %v len=%d te=%v close=%v\n", res.Status, res.Header, res.ContentLength, res.TransferEncoding, res.Close)
		b.Write(body)
		answers = append(answers, b.String())
		if res.Close {
			_, err := br.ReadByte()
			return answers, err != nil
		}
	}
	_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	_, err = br.ReadByte()
	var ne net.Error
	return answers, !(errors.As(err, &ne) && ne.Timeout())
}

// TestFrontAnswersAsNetHTTP: for hot requests and every kind of request it hands over, on one connection or
// several in a row, the front's answers are net/http's (status, header fields, framing, body, whether the
// connection stays open), and the hot ones are served by the front, the others by net/http.
func TestFrontAnswersAsNetHTTP(t *testing.T) {
	post := func(path, body string, extra ...string) string {
		return "POST " + path + " HTTP/1.1\r\nHost: example.test:80\r\nContent-Type: text/plain\r\n" + strings.Join(extra, "") +
			fmt.Sprintf("Content-Length: %d\r\n\r\n", len(body)) + body
	}
	cases := []struct {
		name  string
		raw   string
		n     int
		front []bool // which answers the front serves
	}{
		{"hot", post("/hot", "hello"), 1, []bool{true}},
		{"hot twice pipelined", post("/hot", "one") + post("/also/hot", "two"), 2, []bool{true, true}},
		{"hot, empty body", post("/hot", ""), 1, []bool{true}},
		{"hot, connection close", post("/hot", "bye", "Connection: close\r\n"), 0, []bool{true}},
		{"hot, header forms", post("/hot", "x", "x-lower: v\r\nX-Dup: 1\r\nX-Dup: 2\r\nX-Space:   padded \t\r\nAuthorization: Bearer abc\r\n"), 1, []bool{true}},
		{"hot, teapot status", post("/hot", "teapot"), 1, []bool{true}},
		{"hot, no content", post("/hot", "nocontent"), 1, []bool{true}},
		{"hot then other then hot", post("/hot", "a") + "GET /other HTTP/1.1\r\nHost: h\r\n\r\n" + post("/hot", "b"), 3, []bool{true, false, false}},
		{"other first", "GET /hot HTTP/1.1\r\nHost: h\r\n\r\n" + post("/hot", "b"), 2, []bool{false, false}},
		{"query string", post("/hot?x=1", "q"), 1, []bool{false}},
		{"chunked", "POST /hot HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", 1, []bool{false}},
		{"expect continue", post("/hot", "e", "Expect: 100-continue\r\n"), 1, []bool{false}},
		{"HTTP/1.0", "POST /hot HTTP/1.0\r\nHost: h\r\nContent-Length: 1\r\n\r\nz", 0, []bool{false}},
		{"no host", "POST /hot HTTP/1.1\r\nContent-Length: 1\r\n\r\nz", 0, nil},
		{"host of any characters net/http allows", "POST /hot HTTP/1.1\r\nHost: a!b~c\r\nContent-Length: 1\r\n\r\nz", 1, []bool{true}},
		{"empty host", "POST /hot HTTP/1.1\r\nHost: \r\nContent-Length: 1\r\n\r\nz", 1, []bool{false}},
		{"bad host", "POST /hot HTTP/1.1\r\nHost: a b\r\nContent-Length: 1\r\n\r\nz", 0, nil},
		{"two hosts", "POST /hot HTTP/1.1\r\nHost: a\r\nHost: b\r\nContent-Length: 1\r\n\r\nz", 0, nil},
		{"two lengths", "POST /hot HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nzz", 0, nil},
		{"bad length", "POST /hot HTTP/1.1\r\nHost: a\r\nContent-Length: +1\r\n\r\nz", 0, nil},
		{"folded header", "POST /hot HTTP/1.1\r\nHost: a\r\nX-A: b\r\n c\r\nContent-Length: 1\r\n\r\nz", 1, []bool{false}},
		{"bad header name", "POST /hot HTTP/1.1\r\nHost: a\r\nX A: b\r\nContent-Length: 1\r\n\r\nz", 0, nil},
		{"control in value", "POST /hot HTTP/1.1\r\nHost: a\r\nX-A: b\x01c\r\nContent-Length: 1\r\n\r\nz", 0, nil},
		{"huge head", "POST /hot HTTP/1.1\r\nHost: a\r\nX-Big: " + strings.Repeat("b", 9000) + "\r\nContent-Length: 1\r\n\r\nz", 1, []bool{false}},
		{"panic", post("/hot", "panic"), 0, nil},
		{"panic on net/http", post("/other", "panic"), 0, nil},
	}
	frontAddr, stopFront := start(t, true, nil)
	defer stopFront()
	plainAddr, stopPlain := start(t, false, nil)
	defer stopPlain()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, gotClosed := exchange(t, frontAddr, tc.raw, tc.n)
			want, wantClosed := exchange(t, plainAddr, tc.raw, tc.n)
			if len(got) != len(want) || gotClosed != wantClosed {
				t.Fatalf("front: %d answers, closed %v; net/http: %d, closed %v\nfront: %q\nnet/http: %q", len(got), gotClosed, len(want), wantClosed, got, want)
			}
			for i := range got {
				by := "net/http"
				if i < len(tc.front) && tc.front[i] {
					by = "front"
				}
				if !strings.Contains(got[i], "X-Served-By:["+by+"]") && !strings.HasPrefix(got[i], "1") && !strings.HasPrefix(got[i], "204") && !strings.HasPrefix(got[i], "4") {
					t.Errorf("answer %d not served by %s: %s", i, by, got[i])
				}
				if w := strings.ReplaceAll(want[i], "X-Served-By:[net/http]", "X-Served-By:["+by+"]"); got[i] != w {
					t.Errorf("answer %d:\nfront:    %s\nnet/http: %s", i, got[i], w)
				}
			}
		})
	}
}

// TestFrontTimeouts: a connection idle past the fallback server's IdleTimeout and a head slower than its
// ReadHeaderTimeout are closed.
func TestFrontTimeouts(t *testing.T) {
	addr, stop := start(t, true, func(f *Front) {
		f.Fallback.IdleTimeout, f.Fallback.ReadHeaderTimeout = 200*time.Millisecond, 200*time.Millisecond
	})
	defer stop()
	for _, tc := range []struct{ name, first string }{
		{"idle", ""},
		{"head", "POST /hot HTTP/1.1\r\nHost: h\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := io.WriteString(c, tc.first); err != nil {
				t.Fatal(err)
			}
			_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
			start := time.Now()
			n, err := c.Read(make([]byte, 1))
			if n != 0 || err != io.EOF {
				t.Fatalf("read %d bytes, %v; want the server to close the connection", n, err)
			}
			if d := time.Since(start); d < 150*time.Millisecond {
				t.Fatalf("closed after %v, before the timeout", d)
			}
		})
	}
}

// TestFrontLateBody: a hot request whose body arrives after its head is net/http's, and so is the rest of
// its connection.
func TestFrontLateBody(t *testing.T) {
	addr, stop := start(t, true, nil)
	defer stop()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(c)
	for i, part := range []string{"POST /hot HTTP/1.1\r\nHost: h\r\nContent-Length: 6\r\n\r\nabc", "def",
		"POST /hot HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nghi"} {
		if _, err := io.WriteString(c, part); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		if by := res.Header.Get("X-Served-By"); by != "net/http" || !bytes.Contains(body, []byte("len=")) {
			t.Fatalf("answer %d served by %q: %s", i, by, body)
		}
	}
}

// TestFrontShutdown: Shutdown closes idle connections at once, lets a request in progress finish with its
// answer, and makes Serve return http.ErrServerClosed (start's stop checks it).
func TestFrontShutdown(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release
		_, _ = io.WriteString(w, "finished")
	})
	f := &Front{Handler: h, Paths: []string{"/hot"}, Fallback: &http.Server{Handler: h}}
	done := make(chan error, 1)
	go func() { done <- f.Serve(ln) }()
	idle, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	busy, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	if _, err := io.WriteString(busy, "POST /hot HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	<-entered
	stopped := make(chan error, 1)
	go func() { stopped <- f.Shutdown(context.Background()) }()
	_ = idle.SetReadDeadline(time.Now().Add(3 * time.Second))
	if _, err := idle.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("idle connection: %v, want it closed", err)
	}
	close(release)
	res, err := http.ReadResponse(bufio.NewReader(busy), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	if string(body) != "finished" {
		t.Fatalf("answer %q", body)
	}
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		t.Fatalf("Serve returned %v", err)
	}
}

// FuzzParseHead: whatever the head, parseHead does not panic, and a head it serves is one net/http reads
// the same way (method, path, host, length, every header field).
func FuzzParseHead(f *testing.F) {
	for _, s := range []string{
		"POST /hot HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\n",
		"POST /hot HTTP/1.1\r\nHost: a:1\r\nx-y: z\r\nConnection: close\r\n\r\n",
		"POST /hot HTTP/1.1\r\nHost: a\r\nContent-Length: 00\r\nX: \t v \t\r\n\r\n",
		"GET /hot HTTP/1.1\r\nHost: a\r\n\r\n",
		"POST /hot HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, close\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		i := bytes.Index(raw, []byte("\r\n\r\n"))
		if i < 0 {
			return
		}
		raw = raw[:i+4]
		h, ok := parseHead(raw, []string{"/hot"})
		if !ok {
			return
		}
		req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(raw)))
		if err != nil {
			t.Fatalf("parseHead serves %q, net/http refuses it: %v", raw, err)
		}
		if req.Method != "POST" || req.URL.Path != h.path || req.RequestURI != h.path || req.Host != h.host ||
			req.ContentLength != h.contentLength || req.Close != h.close || h.size != len(raw) {
			t.Fatalf("%q: parseHead %+v, net/http %s %s host %q length %d close %v", raw, h, req.Method, req.RequestURI, req.Host, req.ContentLength, req.Close)
		}
		for k, v := range req.Header {
			if k == "Host" {
				continue
			}
			if !slices.Equal(h.header[k], v) {
				t.Fatalf("%q: header %s: parseHead %q, net/http %q", raw, k, h.header[k], v)
			}
		}
		for k := range h.header {
			if _, ok := req.Header[k]; !ok && k != "Host" {
				t.Fatalf("%q: header %s only in parseHead", raw, k)
			}
		}
	})
}
