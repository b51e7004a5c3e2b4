package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestBenchConn: the load generator's own HTTP/1.1 client sends the method, path, bearer token and body it
// is given, reads answers with a Content-Length and chunked ones, keeps its connection alive, dials again
// after a Connection: close, and reports an error envelope by its code.
func TestBenchConn(t *testing.T) {
	var conns, requests atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := requests.Add(1)
		if r.Method != "POST" || r.URL.Path != "/v0/x" || r.Header.Get("Authorization") != "Bearer tok" ||
			r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("request %d: %s %s %v", n, r.Method, r.URL.Path, r.Header)
		}
		var body bytes.Buffer
		if _, err := body.ReadFrom(r.Body); err != nil || body.String() != `{"n":1}` {
			t.Errorf("request %d: body %q, %v", n, body.String(), err)
		}
		switch n {
		case 2: // chunked: flushed before the end
			w.Write([]byte(`{"ok":true,`))
			w.(http.Flusher).Flush()
			w.Write([]byte(`"data":{"v":"chunked"}}`))
		case 3:
			w.Header().Set("Connection", "close")
			w.Write([]byte(`{"ok":true,"data":{"v":"closing"}}`))
		case 4: // chunked with a trailer
			w.Header().Set("Trailer", "X-Check")
			w.Write([]byte(`{"ok":true,"data":{"v":"trailer"}}`))
			w.Header().Set("X-Check", "done")
		case 5:
			w.WriteHeader(http.StatusTooManyRequests)
			w.Write([]byte(`{"ok":false,"error":{"code":"RATE_LIMITED","message":"slow down"}}`))
		default:
			w.Write([]byte(`{"ok":true,"data":{"v":"plain"}}`))
		}
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	c, err := newBenchClient(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	bc := c.conn()
	defer bc.close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i, want := range []string{"plain", "chunked", "closing", "trailer"} {
		var out struct {
			V string `json:"v"`
		}
		if err := bc.call(ctx, "POST", "/v0/x", "tok", []byte(`{"n":1}`), &out); err != nil || out.V != want {
			t.Fatalf("request %d: %q, %v; want %q", i+1, out.V, err, want)
		}
	}
	err = bc.call(ctx, "POST", "/v0/x", "tok", []byte(`{"n":1}`), nil)
	if errorCode(err) != "RATE_LIMITED" {
		t.Fatalf("error envelope: %v", err)
	}
	if n := conns.Load(); n != 2 {
		t.Fatalf("%d connections for 5 requests, want 2 (one more after Connection: close)", n)
	}
}

// TestReadBenchResponse: the load generator's answer reader takes the status and body of each framing, says
// when the connection ends with the answer, and refuses what it cannot read.
func TestReadBenchResponse(t *testing.T) {
	for _, tc := range []struct {
		name, raw   string
		status      int
		body        string
		closing     bool
		fails       bool
		leftForNext string
	}{
		{name: "content-length", raw: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\ncontent-type: x\r\n\r\nhelloNEXT", status: 200, body: "hello", leftForNext: "NEXT"},
		{name: "chunked with trailer", raw: "HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\nX-T: 1\r\n\r\nNEXT", status: 404, body: "abcde", leftForNext: "NEXT"},
		{name: "connection close", raw: "HTTP/1.1 503 x\r\nconnection: Close\r\nContent-Length: 2\r\n\r\nok", status: 503, body: "ok", closing: true},
		{name: "HTTP/1.0 until the end", raw: "HTTP/1.0 200 OK\r\n\r\nall of it", status: 200, body: "all of it", closing: true},
		{name: "malformed status", raw: "HTTP/1.1 2x0 OK\r\n\r\n", fails: true},
		{name: "not HTTP", raw: "SSH-2.0\r\n\r\n", fails: true},
		{name: "too large", raw: "HTTP/1.1 200 OK\r\nContent-Length: 99999999999\r\n\r\n", fails: true},
		{name: "short body", raw: "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc", fails: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			br := bufio.NewReader(strings.NewReader(tc.raw))
			var body bytes.Buffer
			status, closing, err := readBenchResponse(br, &body)
			if tc.fails {
				if err == nil {
					t.Fatalf("read %d %q, want an error", status, body.String())
				}
				return
			}
			if err != nil || status != tc.status || body.String() != tc.body || closing != tc.closing {
				t.Fatalf("got %d %q closing=%v err=%v", status, body.String(), closing, err)
			}
			if rest, _ := io.ReadAll(br); string(rest) != tc.leftForNext {
				t.Fatalf("left %q for the next answer, want %q", rest, tc.leftForNext)
			}
		})
	}
}
