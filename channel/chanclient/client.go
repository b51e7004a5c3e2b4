// Package chanclient lets committers publish to, close and count channels of
// the channel service, either over its internal HTTP API ([Client]) or
// in-process ([InProcess]); both implement [API], and both report errors
// that wrap the same sentinels (channel.ErrInvalidName, channel.ErrTextTooLarge,
// channel.ErrInvalidText, channel.ErrReasonTooLarge,
// chanservice.ErrInvalidSpaceID), so callers can use either.
//
// Publishing is best-effort notification: the client does not retry, since a
// lost notification is harmless (subscribers replay from the durable feed)
// and a retried one may be delivered twice.
package chanclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/waypost/waypost/channel"
	"github.com/waypost/waypost/channel/chanservice"
)

// API is the committer's view of the channel service.
type API interface {
	// Publish publishes text on a space's channel and returns the number
	// of subscriptions it was delivered to.
	Publish(ctx context.Context, spaceID, name, text string) (int, error)
	// Close closes a space's channel with reason and returns the number of
	// subscriptions closed.
	Close(ctx context.Context, spaceID, name, reason string) (int, error)
	// Count returns the number of subscriptions of a space's channel.
	Count(ctx context.Context, spaceID, name string) (int, error)
}

// DefaultTimeout bounds each call of a Client unless WithTimeout says
// otherwise.
const DefaultTimeout = 5 * time.Second

// maxResponseBytes bounds the response bodies the client reads.
const maxResponseBytes = 64 << 10

// ErrUnauthorized reports that the service rejected the internal secret.
var ErrUnauthorized = errors.New("chanclient: unauthorized")

// Error is an error response of the internal API. It unwraps to the
// matching sentinel (see chanservice.SentinelFor, plus ErrUnauthorized for
// 401), if any.
type Error struct {
	StatusCode int    // HTTP status
	Code       string // the envelope's details.reason (a chanservice Code constant), empty if the body was not an API error
	Message    string // the "message" member, or the status text
	sentinel   error
}

// Error returns a description including status, code and message.
func (e *Error) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("chanclient: HTTP %d: %s", e.StatusCode, e.Message)
	}
	return fmt.Sprintf("chanclient: HTTP %d %s: %s", e.StatusCode, e.Code, e.Message)
}

// Unwrap returns the sentinel error matching the code, or nil.
func (e *Error) Unwrap() error { return e.sentinel }

// Client calls the internal API of a remote channel service. It is safe for
// concurrent use.
type Client struct {
	base    *url.URL
	secret  string
	hc      *http.Client
	timeout time.Duration
}

var _ API = (*Client)(nil)

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient makes the client use hc instead of its own http.Client.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithTimeout bounds each call (including connecting and reading the
// response) by d; d <= 0 means no bound other than the context's.
func WithTimeout(d time.Duration) Option { return func(c *Client) { c.timeout = d } }

// New returns a client for the service at baseURL (scheme and host, with an
// optional path prefix), authenticating with the internal secret.
func New(baseURL, secret string, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("chanclient: base URL: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("chanclient: base URL %q: want http(s)://host[/prefix]", baseURL)
	}
	if secret == "" {
		return nil, errors.New("chanclient: empty secret")
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawPath = ""
	c := &Client{base: u, secret: secret, timeout: DefaultTimeout}
	for _, o := range opts {
		o(c)
	}
	if c.hc == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 64
		c.hc = &http.Client{
			Transport: t,
			// Never follow redirects: the secret is for this service only.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	return c, nil
}

// CloseIdleConnections closes the client's idle keep-alive connections.
func (c *Client) CloseIdleConnections() { c.hc.CloseIdleConnections() }

// Publish implements API over HTTP.
func (c *Client) Publish(ctx context.Context, spaceID, name, text string) (int, error) {
	return c.number(ctx, http.MethodPost, spaceID, name, "publish", map[string]string{"text": text}, "delivered", "publish to")
}

// Close implements API over HTTP.
func (c *Client) Close(ctx context.Context, spaceID, name, reason string) (int, error) {
	return c.number(ctx, http.MethodPost, spaceID, name, "close", map[string]string{"reason": reason}, "closed", "close")
}

// Count implements API over HTTP.
func (c *Client) Count(ctx context.Context, spaceID, name string) (int, error) {
	return c.number(ctx, http.MethodGet, spaceID, name, "count", nil, "count", "count")
}

// number performs a call (see do) whose answer is the integer member field; what names the call in errors.
func (c *Client) number(ctx context.Context, method, spaceID, name, op string, in any, field, what string) (int, error) {
	var out map[string]json.RawMessage
	err := c.do(ctx, method, spaceID, name, op, in, &out)
	var n *int
	if err == nil && out[field] != nil {
		if jerr := json.Unmarshal(out[field], &n); jerr != nil {
			err = fmt.Errorf("decoding response: %w", jerr)
		}
	}
	if err != nil {
		return 0, fmt.Errorf("chanclient: %s %q/%q: %w", what, spaceID, name, err)
	}
	if n == nil {
		return 0, fmt.Errorf("chanclient: %s %q/%q: response lacks %q", what, spaceID, name, field)
	}
	return *n, nil
}

// do performs one call and decodes a 200 response into out.
func (c *Client) do(ctx context.Context, method, spaceID, name, op string, in any, out any) error {
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	// Empty segments cannot be expressed in the path; report them as the
	// service would.
	if spaceID == "" {
		return fmt.Errorf("empty space id: %w", chanservice.ErrInvalidSpaceID)
	}
	if name == "" {
		return fmt.Errorf("empty channel name: %w", channel.ErrInvalidName)
	}
	u := *c.base
	u.Path = c.base.Path + "/internal/v0/spaces/" + spaceID + "/channels/" + name + "/" + op
	u.RawPath = c.base.EscapedPath() + "/internal/v0/spaces/" + escapeSegment(spaceID) + "/channels/" + escapeSegment(name) + "/" + op
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encoding request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return fmt.Errorf("building request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+c.secret)
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return fmt.Errorf("reading response: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return apiError(resp.StatusCode, data)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("decoding response: %w", err)
	}
	return nil
}

// escapeSegment escapes one path segment. The dot segments "." and ".." (valid
// channel names) are percent-encoded so that path cleaning does not remove
// them.
func escapeSegment(s string) string {
	if s == "." || s == ".." {
		return strings.Repeat("%2E", len(s))
	}
	return url.PathEscape(s)
}

// apiError builds the Error of a non-200 response.
func apiError(status int, data []byte) error {
	e := &Error{StatusCode: status, Message: http.StatusText(status)}
	var body struct {
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Details struct {
				Reason string `json:"reason"`
			} `json:"details"`
		} `json:"error"`
	}
	if json.Unmarshal(data, &body) == nil && body.Error != nil && body.Error.Details.Reason != "" {
		e.Code, e.Message = body.Error.Details.Reason, body.Error.Message
		e.sentinel = chanservice.SentinelFor(e.Code)
	}
	if status == http.StatusUnauthorized {
		e.sentinel = ErrUnauthorized
	}
	return e
}

// InProcess implements API directly on a chanservice.Service in the same
// process (embedded mode). It is safe for concurrent use.
type InProcess struct {
	svc *chanservice.Service
}

var _ API = (*InProcess)(nil)

// NewInProcess returns an API backed by svc's hubs.
func NewInProcess(svc *chanservice.Service) *InProcess { return &InProcess{svc: svc} }

// Publish implements API in-process. A done ctx is reported before anything
// is published.
func (p *InProcess) Publish(ctx context.Context, spaceID, name, text string) (int, error) {
	return inProcess(ctx, "publish to", spaceID, name, func() (int, error) { return p.svc.Publish(spaceID, name, text) })
}

// Close implements API in-process. A done ctx is reported before anything
// is closed.
func (p *InProcess) Close(ctx context.Context, spaceID, name, reason string) (int, error) {
	return inProcess(ctx, "close", spaceID, name, func() (int, error) { return p.svc.Close(spaceID, name, reason) })
}

// Count implements API in-process.
func (p *InProcess) Count(ctx context.Context, spaceID, name string) (int, error) {
	return inProcess(ctx, "count", spaceID, name, func() (int, error) { return p.svc.Count(spaceID, name) })
}

// inProcess runs op, one service call on the channel name of spaceID, unless ctx is already done; either
// error is wrapped with what the call does and the channel.
func inProcess(ctx context.Context, what, spaceID, name string, op func() (int, error)) (int, error) {
	err := ctx.Err()
	n := 0
	if err == nil {
		n, err = op()
	}
	if err != nil {
		return 0, fmt.Errorf("chanclient: %s %q/%q: %w", what, spaceID, name, err)
	}
	return n, nil
}
