package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Streamed exchanges (blob content up and down, export downloads) cannot be bounded by one deadline for the
// whole exchange: a 1 GiB upload takes as long as it takes. They are bounded instead by a watchdog that
// cancels the request when no byte moved for the client's timeout (WithTimeout), and by the caller's context.

// errStalled is the cause of a streamed request cancelled by its watchdog.
var errStalled = errors.New("no progress within the client timeout")

// watchdog cancels a context when touch was not called for timeout.
type watchdog struct {
	timeout time.Duration
	last    atomic.Int64 // unix nanoseconds of the last progress
	cancel  context.CancelCauseFunc
	done    chan struct{}
	once    sync.Once
}

// newWatchdog returns a context derived from ctx that the watchdog cancels after timeout without progress.
// With timeout <= 0 there is no watchdog, only the cancel of the returned stop function.
func newWatchdog(ctx context.Context, timeout time.Duration) (context.Context, *watchdog) {
	ctx, cancel := context.WithCancelCause(ctx)
	w := &watchdog{timeout: timeout, cancel: cancel, done: make(chan struct{})}
	w.touch()
	if timeout > 0 {
		go w.run(ctx)
	}
	return ctx, w
}

func (w *watchdog) run(ctx context.Context) {
	tick := max(w.timeout/8, 5*time.Millisecond)
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-w.done:
			return
		case <-ctx.Done():
			return
		case now := <-t.C:
			if now.UnixNano()-w.last.Load() > int64(w.timeout) {
				w.cancel(fmt.Errorf("%w (%s)", errStalled, w.timeout))
				return
			}
		}
	}
}

// touch records progress.
func (w *watchdog) touch() { w.last.Store(time.Now().UnixNano()) }

// stop ends the watchdog and cancels its context.
func (w *watchdog) stop() {
	w.once.Do(func() {
		close(w.done)
		w.cancel(context.Canceled)
	})
}

// progressReader touches a watchdog on every read.
type progressReader struct {
	r io.Reader
	w *watchdog
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.w.touch()
	return n, err
}

// streamBody is a streamed response body: reads touch the watchdog; Close stops it.
type streamBody struct {
	body io.ReadCloser
	w    *watchdog
	ctx  context.Context
}

func (s *streamBody) Read(b []byte) (int, error) {
	n, err := s.body.Read(b)
	s.w.touch()
	if err != nil && err != io.EOF {
		if cause := context.Cause(s.ctx); cause != nil && errors.Is(cause, errStalled) {
			err = fmt.Errorf("%w: %w", cause, err)
		}
	}
	return n, err
}

func (s *streamBody) Close() error {
	err := s.body.Close()
	s.w.stop()
	return err
}

// stream performs a streamed exchange. A 2xx response is returned open, its body wrapped so that reads
// keep the watchdog alive and Close releases it; anything else is decoded as an error envelope (*Error),
// or reported as a *TransportError.
func (t *transport) stream(ctx context.Context, rr rawRequest) (*http.Response, error) {
	if t.badURL != nil {
		return nil, t.badURL
	}
	ctx, wd := newWatchdog(ctx, t.opts.timeout)
	if rr.body != nil {
		rr.body = &progressReader{r: rr.body, w: wd}
	}
	rr.stream = true
	resp, err := t.send(ctx, rr)
	if err != nil {
		wd.stop()
		return nil, err
	}
	wd.touch()
	if loc := resp.Header.Get("Location"); isRedirect(resp.StatusCode) && loc != "" && rr.method == http.MethodGet && rr.target == "" {
		// A download the service authorized and handed to the blob store (a presigned GET): follow it once,
		// without the credential. The service's entity tag (the content's SHA-256) replaces the store's.
		resp.Body.Close()
		next, err := resp.Request.URL.Parse(loc)
		if err != nil || (next.Scheme != "http" && next.Scheme != "https") {
			wd.stop()
			return nil, &TransportError{Method: rr.method, Path: rr.path, HTTPStatus: resp.StatusCode, Err: errors.New("redirect to an invalid location")}
		}
		etag, digest := resp.Header.Get("ETag"), resp.Header.Get("Repr-Digest")
		rr = rawRequest{method: http.MethodGet, path: rr.path, accept: rr.accept, stream: true, target: next.String()}
		if resp, err = t.send(ctx, rr); err != nil {
			wd.stop()
			return nil, err
		}
		wd.touch()
		if resp.StatusCode/100 == 2 {
			if etag != "" {
				resp.Header.Set("ETag", etag)
			}
			if digest != "" {
				resp.Header.Set("Repr-Digest", digest)
			}
		}
	}
	if resp.StatusCode/100 != 2 {
		defer wd.stop()
		defer resp.Body.Close()
		if rr.target != "" {
			return nil, storageError(rr.method, rr.path, resp)
		}
		return nil, t.envelopeError(rr.method, rr.path, resp)
	}
	resp.Body = &streamBody{body: resp.Body, w: wd, ctx: ctx}
	return resp, nil
}

// envelopeError turns a non-2xx response into the *Error its envelope carries, or a *TransportError.
func (t *transport) envelopeError(method, path string, resp *http.Response) error {
	err := t.decodeEnvelope(method, path, resp, nil)
	if err == nil {
		return &TransportError{Method: method, Path: path, HTTPStatus: resp.StatusCode, Err: errors.New("success envelope with an error status")}
	}
	return err
}

// withTimeout returns a copy of the transport whose per-exchange timeout is at least d (unchanged when the
// client has no timeout at all).
func (t *transport) withTimeout(d time.Duration) *transport {
	c := *t
	if c.opts.timeout > 0 && c.opts.timeout < d {
		c.opts.timeout = d
	}
	return &c
}

func isRedirect(status int) bool {
	switch status {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return true
	}
	return false
}
