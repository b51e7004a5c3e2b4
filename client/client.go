// Package client is a typed Go client for the Waypost HTTP API: the data plane under /v0 (SUPPLEMENT §11.1)
// with a bearer token, and the control plane under /admin/v0 (SUPPLEMENT §11.3) with the instance admin
// secret. Requests and results are the domain package's wire types, so there is one definition of every
// shape. Failures reported by the service are *Error; failures where no envelope came back are
// *TransportError.
//
// The client never logs, and never puts a credential in an error message or in its String form.
package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/waypost/waypost/domain"
)

// DefaultTimeout bounds one HTTP exchange unless WithTimeout says otherwise.
const DefaultTimeout = 30 * time.Second

// maxResponseBytes bounds the size of a response body the client reads.
const maxResponseBytes = 16 << 20

// Option configures a Client or an Admin.
type Option func(*options)

type options struct {
	httpClient *http.Client
	timeout    time.Duration
	userAgent  string
	retryDelay func(retry int, err error) time.Duration
	onRetry    func(retry int, err error)
}

// WithHTTPClient makes the client send its requests with hc (default: a dedicated http.Client).
func WithHTTPClient(hc *http.Client) Option { return func(o *options) { o.httpClient = hc } }

// WithTimeout bounds each HTTP exchange (connect, send, read the whole response). Zero or negative means no
// bound other than the caller's context.
func WithTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// WithUserAgent sets the User-Agent header.
func WithUserAgent(ua string) Option { return func(o *options) { o.userAgent = ua } }

// WithRetryDelay replaces the delay SendWithRetry waits before retry number retry (1 or 2) after err.
// The default honours Retry-After (capped at 30 s) and otherwise waits 500 ms, then 1 s.
func WithRetryDelay(f func(retry int, err error) time.Duration) Option {
	return func(o *options) { o.retryDelay = f }
}

// WithRetryNotify registers f, called by SendWithRetry before retry number retry (1 or 2) with the error
// that caused it. Use it to tell a user that a retry with the same request_id is under way.
func WithRetryNotify(f func(retry int, err error)) Option { return func(o *options) { o.onRetry = f } }

func defaultRetryDelay(retry int, err error) time.Duration {
	var e *Error
	if errors.As(err, &e) && e.RetryAfter > 0 {
		return min(e.RetryAfter, 30*time.Second)
	}
	return time.Duration(retry) * 500 * time.Millisecond
}

// transport performs envelope exchanges with one credential.
type transport struct {
	base string // scheme://host[/prefix], no trailing slash
	cred string // bearer credential; never printed
	hc   *http.Client
	// noFollow is hc that returns redirects instead of following them: streamed exchanges follow a
	// redirect to the blob store themselves, without the credential (stream.go).
	noFollow *http.Client
	opts     options
	badURL   error
}

func newTransport(baseURL, cred string, opts []Option) transport {
	o := options{timeout: DefaultTimeout, userAgent: "waypost-go-client/" + domain.APIVersion, retryDelay: defaultRetryDelay}
	for _, opt := range opts {
		opt(&o)
	}
	t := transport{cred: cred, opts: o, hc: o.httpClient}
	if t.hc == nil {
		t.hc = &http.Client{}
	}
	nf := *t.hc
	nf.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	t.noFollow = &nf
	u, err := url.Parse(strings.TrimSpace(baseURL))
	switch {
	case err != nil:
		t.badURL = fmt.Errorf("client: invalid base URL: %w", err)
	case u.Scheme != "http" && u.Scheme != "https", u.Host == "":
		t.badURL = fmt.Errorf("client: base URL %q must be http(s)://host[:port]", baseURL)
	case u.User != nil || u.RawQuery != "" || u.Fragment != "":
		t.badURL = fmt.Errorf("client: base URL must not carry credentials, a query or a fragment")
	default:
		t.base = strings.TrimRight(u.Scheme+"://"+u.Host+u.EscapedPath(), "/")
	}
	return t
}

// rawEnvelope is the RFC §5.2 result envelope as received.
type rawEnvelope struct {
	OK        *bool             `json:"ok"`
	RequestID string            `json:"request_id"`
	Data      json.RawMessage   `json:"data"`
	Error     *domain.WireError `json:"error"`
}

// rawRequest describes one exchange: a JSON call (do) or a streamed one (stream).
type rawRequest struct {
	method, path string
	query        url.Values
	body         io.Reader // nil for none
	size         int64     // Content-Length of body
	contentType  string
	accept       string
	// stream marks a streamed exchange: redirects are returned, not followed (stream follows them).
	stream bool
	// target, when set, is an absolute URL outside the service (a presigned blob store URL): it is sent
	// without the bearer credential, with headers added, and path names it in errors without its query.
	target  string
	headers map[string]string
}

// do sends one request and decodes the envelope's data into out (when out is not nil).
func (t *transport) do(ctx context.Context, method, path string, query url.Values, body, out any) error {
	if t.badURL != nil {
		return t.badURL
	}
	rr := rawRequest{method: method, path: path, query: query, accept: "application/json"}
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("client: encoding %s %s request: %w", method, path, err)
		}
		rr.body, rr.size, rr.contentType = bytes.NewReader(raw), int64(len(raw)), "application/json"
	}
	if t.opts.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t.opts.timeout)
		defer cancel()
	}
	resp, err := t.send(ctx, rr)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return t.decodeEnvelope(method, path, resp, out)
}

// call sends one request with t.do and returns the envelope's data decoded as a T (with whatever was decoded
// of it when the call failed, as t.do leaves it).
func call[T any](ctx context.Context, t *transport, method, path string, query url.Values, body any) (T, error) {
	var out T
	err := t.do(ctx, method, path, query, body, &out)
	return out, err
}

// callList is call for a result holding a list, which items points to: it returns the zero T when the call
// fails, and on success an empty list for a null one (the wire form has arrays).
func callList[T, E any](ctx context.Context, t *transport, method, path string, query url.Values, body any, items func(*T) *[]E) (T, error) {
	out, err := call[T](ctx, t, method, path, query, body)
	if err != nil {
		var zero T
		return zero, err
	}
	if l := items(&out); *l == nil {
		*l = []E{}
	}
	return out, nil
}

// pageItems points to a feed page's items (callList).
func pageItems(p *domain.Page) *[]domain.FeedItem { return &p.Items }

// send builds rr's request (target, Content-Length, Content-Type, Accept, User-Agent, credential) and sends
// it. A failure to get a response is a *TransportError; when a stream's watchdog cancelled ctx, its cause is
// part of the error. The response, whatever its status, is the caller's to close.
func (t *transport) send(ctx context.Context, rr rawRequest) (*http.Response, error) {
	target := t.base + rr.path
	if rr.target != "" {
		target = rr.target
	} else if len(rr.query) > 0 {
		target += "?" + rr.query.Encode()
	}
	body := rr.body
	if body != nil && rr.size == 0 {
		body = http.NoBody // a zero ContentLength with a body would be sent chunked
	}
	req, err := http.NewRequestWithContext(ctx, rr.method, target, body)
	if err != nil {
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
	for k, v := range rr.headers {
		req.Header.Set(k, v)
	}
	if t.cred != "" && rr.target == "" {
		req.Header.Set("Authorization", "Bearer "+t.cred)
	}
	hc := t.hc
	if rr.stream || rr.target != "" {
		hc = t.noFollow
	}
	resp, err := hc.Do(req)
	if err != nil {
		err = stripURL(err)
		if cause := context.Cause(ctx); cause != nil && errors.Is(cause, errStalled) {
			err = fmt.Errorf("%w: %w", cause, err)
		}
		return nil, &TransportError{Method: rr.method, Path: rr.path, Err: err}
	}
	return resp, nil
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

// stripURL removes the *url.Error wrapper (its text repeats the full URL) and keeps the cause.
func stripURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

func retryAfter(h string) time.Duration {
	if h == "" {
		return 0
	}
	if s, err := strconv.Atoi(strings.TrimSpace(h)); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(h); err == nil {
		if d := time.Until(t); d > 0 {
			return d
		}
	}
	return 0
}

// seg escapes one path segment.
func seg(s string) string { return url.PathEscape(s) }

// NewRequestID returns a fresh random request_id ("req_" + 32 hex digits). Save it before sending, so that
// a retry after a lost response reuses it.
func NewRequestID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("client: reading random bytes: %v", err)) // crypto/rand does not fail on supported OSes
	}
	return "req_" + hex.EncodeToString(b[:])
}

// Client calls the data plane with one bearer token. It is safe for concurrent use.
type Client struct {
	t transport
}

// New returns a data-plane client for the service at baseURL (e.g. "http://127.0.0.1:8787") that
// authenticates with token. An invalid baseURL is reported by every call.
func New(baseURL, token string, opts ...Option) *Client {
	return &Client{t: newTransport(baseURL, token, opts)}
}

// String describes the client without its token.
func (c *Client) String() string { return "waypost.Client(" + c.t.base + ", token redacted)" }

// GoString describes the client without its token.
func (c *Client) GoString() string { return c.String() }

// BaseURL returns the normalized base URL of the service.
func (c *Client) BaseURL() string { return c.t.base }

// Describe tells the principal who it is, where it may send, the actual limits and the capabilities
// (GET /v0/describe).
func (c *Client) Describe(ctx context.Context) (domain.DescribeResult, error) {
	return call[domain.DescribeResult](ctx, &c.t, http.MethodGet, "/v0/describe", nil, nil)
}

// Send publishes a message once (POST /v0/messages). req.RequestID must be set; a lost response is
// recovered with Status or by sending the same request again (see SendWithRetry).
func (c *Client) Send(ctx context.Context, req domain.SendRequest) (domain.SendResult, error) {
	if req.Body == nil {
		req.Body = &domain.MessageBody{}
	}
	return call[domain.SendResult](ctx, &c.t, http.MethodPost, "/v0/messages", nil, req)
}

// GetMessage returns a published message with its body (GET /v0/messages/{message_id}).
func (c *Client) GetMessage(ctx context.Context, messageID string) (domain.Message, error) {
	return call[domain.Message](ctx, &c.t, http.MethodGet, "/v0/messages/"+seg(messageID), nil, nil)
}

// ReadInbox returns the next page of a consumer's feed after req.Cursor (POST /v0/inbox/read). A nil
// cursor starts at the beginning of the retained history.
func (c *Client) ReadInbox(ctx context.Context, req domain.ReadRequest) (domain.Page, error) {
	return callList(ctx, &c.t, http.MethodPost, "/v0/inbox/read", nil, req, pageItems)
}

// Ack records receipts and optionally a checkpoint for a consumer (POST /v0/inbox/ack). req.RequestID must
// be set.
func (c *Client) Ack(ctx context.Context, req domain.AckRequest) (domain.AckResult, error) {
	if req.Items == nil {
		req.Items = []domain.AckEntry{}
	}
	return call[domain.AckResult](ctx, &c.t, http.MethodPost, "/v0/inbox/ack", nil, req)
}

// Status reports the state of one of the caller's own submissions (GET /v0/status). operation is the
// domain operation name, e.g. domain.OpMessageSend. NOT_FOUND means the service has no reservation for it,
// which is not proof that nothing happened elsewhere.
func (c *Client) Status(ctx context.Context, operation, requestID string) (domain.StatusResult, error) {
	q := url.Values{"operation": {operation}, "request_id": {requestID}}
	return call[domain.StatusResult](ctx, &c.t, http.MethodGet, "/v0/status", q, nil)
}
