package httpapi

import (
	"errors"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/waypost/waypost/domain"
)

// Defaults of the request body deadlines (Options.BodyTimeout, Options.MinUploadRate).
const (
	// DefaultBodyTimeout is the total time a JSON request body (at most max_request_bytes, 64 KiB) may take
	// to arrive once its handler starts reading: at least 6.4 KiB/s for the largest one. It is also the
	// window over which an upload's minimum rate is measured.
	DefaultBodyTimeout = 10 * time.Second
	// DefaultMinUploadRate is the least rate, in bytes per second, at which an upload body must keep
	// arriving, measured over every BodyTimeout window (4 KiB/s: 40 KiB per 10 s).
	DefaultMinUploadRate = 4 << 10
)

// deadliner sets the read deadline of a request's connection (http.ResponseController does; behind API
// Gateway there is no connection and the calls fail harmlessly: the gateway buffers whole bodies).
type deadliner interface {
	SetReadDeadline(time.Time) error
}

// bodyGuard wraps a request body: it bounds how long reading may take (a total deadline by default, a
// minimum rate for streamed uploads), turns read failures into domain errors the envelope can carry, and
// records whether the body was read to its end, so that an answer given before that closes the connection
// instead of draining a body nobody wants (a slow client could hold the connection for minutes).
type bodyGuard struct {
	rc      io.ReadCloser
	conn    deadliner
	timeout time.Duration

	mu          sync.Mutex
	eof         bool
	streaming   bool
	minRate     int64
	windowBytes int64
	err         error
}

func newBodyGuard(rc io.ReadCloser, conn deadliner, timeout time.Duration) *bodyGuard {
	g := &bodyGuard{rc: rc, conn: conn, timeout: timeout}
	_ = conn.SetReadDeadline(time.Now().Add(timeout))
	return g
}

// stream switches the guard from the total deadline to a minimum rate: from now on, every window of
// g.timeout must bring at least minRate×timeout bytes (or the end of the body).
func (g *bodyGuard) stream(minRate int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.streaming, g.minRate, g.windowBytes = true, minRate, 0
	_ = g.conn.SetReadDeadline(time.Now().Add(g.timeout))
}

// Read reads from the body under the deadline.
func (g *bodyGuard) Read(p []byte) (int, error) {
	n, err := g.rc.Read(p)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.streaming && n > 0 {
		g.windowBytes += int64(n)
		if g.windowBytes >= g.minRate*int64(g.timeout/time.Second) {
			g.windowBytes = 0
			_ = g.conn.SetReadDeadline(time.Now().Add(g.timeout))
		}
	}
	switch {
	case err == io.EOF:
		g.eof = true
		// The connection's next read is the server's own (the next request, or watching for the client to
		// go away during a long answer): no deadline of ours may cut it.
		_ = g.conn.SetReadDeadline(time.Time{})
	case err != nil:
		if g.err == nil {
			g.err = g.classify(err)
		}
		return n, g.err
	}
	return n, err
}

// classify turns a body read failure into the domain error answered for it.
func (g *bodyGuard) classify(err error) error {
	var de *domain.Error
	if errors.As(err, &de) {
		return err
	}
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return err
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		if g.streaming {
			return domain.Errorf(domain.CodeInvalidRequest, "the upload body arrived slower than %d bytes/s over %s; the connection is closed",
				g.minRate, g.timeout).WithDetails("reason", "body_too_slow", "min_bytes_per_second", g.minRate, "window_ms", g.timeout.Milliseconds())
		}
		return domain.Errorf(domain.CodeInvalidRequest, "the request body did not arrive within %s; the connection is closed", g.timeout).
			WithDetails("reason", "body_timeout", "timeout_ms", g.timeout.Milliseconds())
	}
	return domain.Errorf(domain.CodeInvalidRequest, "reading the request body failed: %v", err).WithDetails("reason", "body_read_failed")
}

// Close closes the body.
func (g *bodyGuard) Close() error { return g.rc.Close() }

// complete reports whether the body was read to its end.
func (g *bodyGuard) complete() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.eof
}

// Bounds of the drain of a body left unread by an early answer (finish).
const (
	lingerTime  = time.Second
	lingerBytes = 256 << 10
)

// finish runs when the handler returned. A body not read to its end is never drained in full: after the
// answer is flushed, what the client is still sending is read and discarded for at most lingerTime and
// lingerBytes (so that a client that sent a refused body at full speed reads the answer rather than a
// connection reset), then the read deadline is moved to now, so the server's clean-up read fails at once and
// the connection closes (the answer carried Connection: close). A body already cut by its deadline is not
// drained at all.
func (g *bodyGuard) finish(w http.ResponseWriter) {
	if g.complete() {
		return
	}
	if !g.failed() {
		_ = http.NewResponseController(w).Flush()
		_ = g.conn.SetReadDeadline(time.Now().Add(lingerTime))
		_, _ = io.CopyN(io.Discard, g.rc, lingerBytes)
	}
	_ = g.conn.SetReadDeadline(time.Now())
}

// failed reports whether reading the body failed (a deadline, a broken connection).
func (g *bodyGuard) failed() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err != nil
}

// bodyCut reports whether the request answered through w had its body cut by the guard.
func bodyCut(w http.ResponseWriter) bool {
	rec, ok := w.(*statusRecorder)
	return ok && rec.body != nil && rec.body.failed()
}

// streamBody switches r's body, when it is guarded, to the minimum upload rate.
func (a *API) streamBody(r *http.Request) {
	if g, ok := r.Body.(*bodyGuard); ok {
		g.stream(a.minUploadRate)
	}
}
