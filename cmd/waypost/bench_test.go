package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
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
	for i, want := range []string{"plain", "chunked", "closing", "plain"} {
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
