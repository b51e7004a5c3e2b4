package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
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

// rawRequest describes one streamed exchange.
type rawRequest struct {
	method, path string
	query        url.Values
	body         io.Reader // nil for none
	size         int64     // Content-Length of body
	contentType  string
	accept       string
}

// stream performs a streamed exchange. A 2xx response is returned open, its body wrapped so that reads
// keep the watchdog alive and Close releases it; anything else is decoded as an error envelope (*Error),
// or reported as a *TransportError.
func (t *transport) stream(ctx context.Context, rr rawRequest) (*http.Response, error) {
	if t.badURL != nil {
		return nil, t.badURL
	}
	ctx, wd := newWatchdog(ctx, t.opts.timeout)
	target := t.base + rr.path
	if len(rr.query) > 0 {
		target += "?" + rr.query.Encode()
	}
	var body io.Reader
	if rr.body != nil {
		body = &progressReader{r: rr.body, w: wd}
		if rr.size == 0 {
			body = http.NoBody // a zero ContentLength with a body would be sent chunked
		}
	}
	req, err := http.NewRequestWithContext(ctx, rr.method, target, body)
	if err != nil {
		wd.stop()
		return nil, fmt.Errorf("client: building %s %s request: %w", rr.method, rr.path, err)
	}
	if rr.body != nil {
		req.ContentLength = rr.size
	}
	if rr.contentType != "" {
		req.Header.Set("Content-Type", rr.contentType)
	}
	if rr.accept != "" {
		req.Header.Set("Accept", rr.accept)
	}
	if t.opts.userAgent != "" {
		req.Header.Set("User-Agent", t.opts.userAgent)
	}
	if t.cred != "" {
		req.Header.Set("Authorization", "Bearer "+t.cred)
	}
	resp, err := t.hc.Do(req)
	if err != nil {
		err = stripURL(err)
		if cause := context.Cause(ctx); cause != nil && errors.Is(cause, errStalled) {
			err = fmt.Errorf("%w: %w", cause, err)
		}
		wd.stop()
		return nil, &TransportError{Method: rr.method, Path: rr.path, Err: err}
	}
	wd.touch()
	if resp.StatusCode/100 != 2 {
		defer wd.stop()
		defer resp.Body.Close()
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

// decodeEnvelope reads an RFC §5.2 envelope from resp and decodes its data into out (when not nil), with
// the same rules as the JSON exchanges.
func (t *transport) decodeEnvelope(method, path string, resp *http.Response, out any) error {
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		return &TransportError{Method: method, Path: path, HTTPStatus: resp.StatusCode, Err: fmt.Errorf("reading response: %w", err)}
	}
	if len(raw) > maxResponseBytes {
		return &TransportError{Method: method, Path: path, HTTPStatus: resp.StatusCode, Err: fmt.Errorf("response larger than %d bytes", maxResponseBytes)}
	}
	var env rawEnvelope
	if err := json.Unmarshal(raw, &env); err != nil || env.OK == nil {
		return &TransportError{Method: method, Path: path, HTTPStatus: resp.StatusCode,
			Err: fmt.Errorf("response is not a Waypost result envelope (Content-Type %q)", resp.Header.Get("Content-Type"))}
	}
	if !*env.OK {
		if env.Error == nil {
			return &TransportError{Method: method, Path: path, HTTPStatus: resp.StatusCode, Err: errors.New("error envelope without an error object")}
		}
		e := &Error{Code: env.Error.Code, Message: env.Error.Message, Retryable: env.Error.Retryable, Details: env.Error.Details,
			HTTPStatus: resp.StatusCode, RequestID: env.RequestID, RetryAfter: retryAfter(resp.Header.Get("Retry-After"))}
		if e.Details == nil {
			e.Details = map[string]any{}
		}
		return e
	}
	if out == nil {
		return nil
	}
	if len(env.Data) == 0 || string(env.Data) == "null" {
		return &TransportError{Method: method, Path: path, HTTPStatus: resp.StatusCode, Err: errors.New("success envelope without data")}
	}
	if err := json.Unmarshal(env.Data, out); err != nil {
		return &TransportError{Method: method, Path: path, HTTPStatus: resp.StatusCode, Err: fmt.Errorf("decoding data: %w", err)}
	}
	return nil
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
