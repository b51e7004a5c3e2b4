// Package dial is the HTTP client for webhook deliveries: it only connects to public addresses (RFC §12.4).
//
// The address check runs at dial time, in the net.Dialer Control hook, on the address the socket is about
// to connect to, after DNS resolution (code.dny.dev/ssrf). A name that resolves to a public address when a
// subscription is verified and to a private one later (DNS rebinding) is therefore refused at the moment
// it matters. URLs are also checked before any lookup, so literal private addresses and numeric-form tricks
// (http://2130706433/, http://0x7f.1/, http://[::ffff:127.0.0.1]/) are refused without touching the network.
//
// Refused: RFC 1918 private ranges, loopback, link-local (including cloud metadata at 169.254.169.254),
// CGNAT 100.64.0.0/10, unspecified, multicast, broadcast and other reserved IPv4 ranges, IPv6 outside
// 2000::/3 (so ::1, ::, fe80::/10, fc00::/7, ff00::/8, NAT64 64:ff9b::/96) and the reserved 2000::/3
// blocks the ssrf package lists (6to4, Teredo, documentation).
//
// An IPv4-mapped IPv6 address (::ffff:a.b.c.d), as a URL literal or as a resolver's answer (Go's resolver
// answers names from the hosts file that way), is normalised to its IPv4 address before it is classified
// and dialed: ::ffff:10.0.0.1 is refused as private, ::ffff:127.0.0.1 as loopback (admitted only with
// Options.AllowLoopback, so "localhost" works there), and a mapped public address is admitted.
//
// Further rules: HTTPS only unless Options.AllowHTTP; the port must be 443 (80 for http) unless
// Options.Ports widens it; redirects are never followed (a 3xx is returned as the response); no HTTP proxy is
// used (a proxy would hide the real destination); the connection and the whole exchange are time-limited;
// the response body read is capped.
//
// Options.AllowLoopback admits loopback targets (127.0.0.0/8, ::1) on any port. It exists for local
// development (waypost serve --allow-loopback-webhooks) and must never be enabled on a shared deployment.
package dial

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"code.dny.dev/ssrf"
)

// Defaults of Options.
const (
	DefaultConnectTimeout   = 5 * time.Second
	DefaultTimeout          = 10 * time.Second
	DefaultMaxResponseBytes = 64 << 10
	// UserAgent is sent on every request that does not set its own.
	UserAgent = "Waypost-Webhooks/0.1"
	// maxAddrs bounds how many resolved addresses one dial tries.
	maxAddrs = 8
)

// Resolver resolves host names; *net.Resolver implements it. Tests inject a fake one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Options configure a Client. The zero value is the production configuration.
type Options struct {
	// AllowHTTP admits http:// targets (port 80 by default). Off by default: deliveries use HTTPS.
	AllowHTTP bool
	// AllowLoopback admits loopback addresses (127.0.0.0/8, ::1) on any port. DEVELOPMENT ONLY: it backs
	// `waypost serve --allow-loopback-webhooks` and must not be set where untrusted users register targets.
	AllowLoopback bool
	// Ports are the permitted destination ports of public addresses. Empty means 443, plus 80 when
	// AllowHTTP is set.
	Ports []uint16
	// Resolver resolves host names; nil means net.DefaultResolver.
	Resolver Resolver
	// ConnectTimeout bounds each TCP connect and the TLS handshake; 0 means DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// Timeout bounds a whole exchange, from dialing to the end of reading the response; 0 means
	// DefaultTimeout.
	Timeout time.Duration
	// MaxResponseBytes caps how much of a response body is read; 0 means DefaultMaxResponseBytes.
	MaxResponseBytes int64
	// TLSConfig is cloned for HTTPS connections; nil means the system roots.
	TLSConfig *tls.Config

	// testAllowed lists prefixes internal tests treat as public (stand-ins on 127.0.0.0/8).
	testAllowed []netip.Prefix
}

// TargetError reports a target refused by the address rules; the domain maps it to FORBIDDEN_TARGET.
type TargetError struct {
	// Target is the URL reduced to scheme://host[:port], or empty when the check ran on an address only.
	Target string
	// Addr is the refused address, when the refusal concerns one.
	Addr string
	// Reason says which rule refused it.
	Reason string
	// Err is the underlying error, if any.
	Err error
}

func (e *TargetError) Error() string {
	var b strings.Builder
	b.WriteString("forbidden webhook target")
	if e.Target != "" {
		b.WriteString(" " + e.Target)
	}
	if e.Addr != "" {
		b.WriteString(" (address " + e.Addr + ")")
	}
	b.WriteString(": " + e.Reason)
	if e.Err != nil {
		b.WriteString(": " + e.Err.Error())
	}
	return b.String()
}

func (e *TargetError) Unwrap() error { return e.Err }

// Response is a received response.
type Response struct {
	StatusCode int
	Header     http.Header
	// Body holds at most MaxResponseBytes of the body.
	Body []byte
	// Truncated reports that the body was longer than MaxResponseBytes.
	Truncated bool
}

// Client posts webhook requests to public targets only. It is safe for concurrent use.
type Client struct {
	allowHTTP     bool
	allowLoopback bool
	ports         []uint16
	resolver      Resolver
	timeout       time.Duration
	maxBody       int64
	guard         *ssrf.Guardian
	permitted     []netip.Prefix // addresses admitted on any port (loopback when allowed, test stand-ins)
	dialer        *net.Dialer
	http          *http.Client
}

// NewClient returns a client configured by o.
func NewClient(o Options) (*Client, error) {
	c := &Client{allowHTTP: o.AllowHTTP, allowLoopback: o.AllowLoopback, resolver: o.Resolver,
		timeout: o.Timeout, maxBody: o.MaxResponseBytes}
	if c.resolver == nil {
		c.resolver = net.DefaultResolver
	}
	if c.timeout == 0 {
		c.timeout = DefaultTimeout
	}
	if c.maxBody == 0 {
		c.maxBody = DefaultMaxResponseBytes
	}
	connect := o.ConnectTimeout
	if connect == 0 {
		connect = DefaultConnectTimeout
	}
	if c.timeout < 0 || connect < 0 || c.maxBody < 0 {
		return nil, errors.New("dial: negative timeout or body limit")
	}
	c.ports = slices.Clone(o.Ports)
	if len(c.ports) == 0 {
		c.ports = []uint16{443}
		if o.AllowHTTP {
			c.ports = append(c.ports, 80)
		}
	}
	if slices.Contains(c.ports, 0) {
		return nil, errors.New("dial: port 0 is not a destination")
	}
	c.permitted = slices.Clone(o.testAllowed)
	if o.AllowLoopback {
		c.permitted = append(c.permitted, netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128"))
	}
	var v4, v6 []netip.Prefix
	for _, p := range c.permitted {
		if p.Addr().Is4() {
			v4 = append(v4, p)
		} else {
			v6 = append(v6, p)
		}
	}
	// Ports are checked by c.control, which admits permitted prefixes on any port.
	c.guard = ssrf.New(ssrf.WithAnyPort(), ssrf.WithNetworks("tcp4", "tcp6"),
		ssrf.WithAllowedV4Prefixes(v4...), ssrf.WithAllowedV6Prefixes(v6...))
	c.dialer = &net.Dialer{Timeout: connect, Control: c.control}
	var tlsCfg *tls.Config
	if o.TLSConfig != nil {
		tlsCfg = o.TLSConfig.Clone()
	} else {
		tlsCfg = &tls.Config{}
	}
	if tlsCfg.MinVersion < tls.VersionTLS12 {
		tlsCfg.MinVersion = tls.VersionTLS12
	}
	tr := &http.Transport{
		Proxy:                  nil, // never: a proxy would connect on our behalf to an unchecked address
		DialContext:            c.dialContext,
		TLSClientConfig:        tlsCfg,
		TLSHandshakeTimeout:    connect,
		ResponseHeaderTimeout:  c.timeout,
		MaxResponseHeaderBytes: 16 << 10,
		MaxIdleConns:           64,
		MaxIdleConnsPerHost:    4,
		IdleConnTimeout:        30 * time.Second,
		ForceAttemptHTTP2:      true,
	}
	c.http = &http.Client{
		Transport:     tr,
		Timeout:       c.timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return c, nil
}

// CloseIdleConnections closes kept-alive connections.
func (c *Client) CloseIdleConnections() { c.http.CloseIdleConnections() }

// CheckURL checks a target URL without any network access: scheme, form, and, for an address literal, the
// address rules. A host name passes here and is checked again, on each resolved address, at dial time.
func (c *Client) CheckURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, &TargetError{Reason: "not a valid URL"}
	}
	target := u.Scheme + "://" + u.Host
	refuse := func(reason string) (*url.URL, error) { return nil, &TargetError{Target: target, Reason: reason} }
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && c.allowHTTP:
	default:
		return refuse("scheme must be https")
	}
	if u.Opaque != "" || u.Host == "" {
		return refuse("URL has no host")
	}
	if u.User != nil {
		return refuse("URL must not carry user information")
	}
	host := u.Hostname()
	if host == "" {
		return refuse("URL has no host")
	}
	port := uint16(443)
	if u.Scheme == "http" {
		port = 80
	}
	if p := u.Port(); p != "" {
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil || n == 0 {
			return refuse("invalid port")
		}
		port = uint16(n)
	}
	if strings.ContainsAny(host, "%[]") {
		return refuse("scoped or malformed address")
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if err := c.checkAddr(netip.AddrPortFrom(ip, port)); err != nil {
			var te *TargetError
			if errors.As(err, &te) {
				te.Target = target
			}
			return nil, err
		}
		return u, nil
	}
	if numericHost(host) {
		return refuse("numeric host is not a canonical IP address")
	}
	if !c.allowLoopback {
		if h := strings.TrimSuffix(strings.ToLower(host), "."); h == "localhost" || strings.HasSuffix(h, ".localhost") {
			return refuse("localhost names are loopback")
		}
	}
	return u, nil
}

// numericHost reports whether a host that is not a canonical IP literal would still be read as an IPv4
// address by some parser (WHATWG "ends in a number", inet_aton): its last label is decimal, octal or hex.
func numericHost(host string) bool {
	host = strings.TrimSuffix(host, ".")
	last := host[strings.LastIndexByte(host, '.')+1:]
	if last == "" {
		return false
	}
	if rest, ok := strings.CutPrefix(strings.ToLower(last), "0x"); ok {
		return strings.Trim(rest, "0123456789abcdef") == ""
	}
	return strings.Trim(last, "0123456789") == ""
}

// checkAddr applies the address rules to one destination.
func (c *Client) checkAddr(ap netip.AddrPort) error {
	if ap.Addr().Zone() != "" {
		return &TargetError{Addr: ap.String(), Reason: "scoped IPv6 address"}
	}
	a := ap.Addr().Unmap() // ::ffff:a.b.c.d is a.b.c.d: classify (and dial) the IPv4 address
	ap = netip.AddrPortFrom(a, ap.Port())
	if err := c.guard.SafeAddr(a); err != nil {
		return &TargetError{Addr: ap.String(), Reason: "address is not public", Err: err}
	}
	for _, p := range c.permitted {
		if p.Contains(a) {
			return nil
		}
	}
	if !slices.Contains(c.ports, ap.Port()) {
		return &TargetError{Addr: ap.String(), Reason: fmt.Sprintf("port %d is not permitted", ap.Port())}
	}
	return nil
}

// control is the net.Dialer Control hook: it runs on the socket's actual destination, just before connect.
func (c *Client) control(network, address string, rc syscall.RawConn) error {
	if err := c.guard.Safe(network, address, rc); err != nil {
		return &TargetError{Addr: address, Reason: "address is not public", Err: err}
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &TargetError{Addr: address, Reason: "unparsable destination", Err: err}
	}
	return c.checkAddr(ap)
}

// dialContext resolves with the injected resolver and dials each answer in turn; every dial passes the
// Control hook, so each answer is checked where it is used.
func (c *Client) dialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("dial: %w", err)
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("dial: port %q: %w", portText, err)
	}
	var ips []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		ips = []netip.Addr{ip}
	} else {
		ips, err = c.resolver.LookupNetIP(ctx, "ip", host)
		if err != nil {
			return nil, fmt.Errorf("dial: resolving %s: %w", host, err)
		}
		if len(ips) == 0 {
			return nil, fmt.Errorf("dial: resolving %s: no addresses", host)
		}
	}
	var errs []error
	for i, ip := range ips {
		if i == maxAddrs || ctx.Err() != nil {
			break
		}
		if ip.Zone() != "" {
			errs = append(errs, c.checkAddr(netip.AddrPortFrom(ip, uint16(port))))
			continue
		}
		// An IPv4-mapped answer is dialed as the IPv4 address it maps, which the Control hook then
		// classifies as such (a mapped private or loopback address stays refused).
		ap := netip.AddrPortFrom(ip.Unmap(), uint16(port))
		conn, err := c.dialer.DialContext(ctx, network, ap.String())
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return nil, fmt.Errorf("dial: %s: %w", host, ctx.Err())
	}
	return nil, fmt.Errorf("dial: %s: %w", host, errors.Join(errs...))
}

// Post sends body to target with the given headers, and reads the response up to MaxResponseBytes, all
// within the client's Timeout. A refused target yields a *TargetError (possibly wrapped). When the
// status line was received but the body could not be read, Post returns both the response and an error.
func (c *Client) Post(ctx context.Context, target string, header http.Header, body []byte) (*Response, error) {
	u, err := c.CheckURL(target)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("dial: building request to %s://%s: %w", u.Scheme, u.Host, err)
	}
	for k, v := range header {
		req.Header[k] = slices.Clone(v)
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", UserAgent)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		// *url.Error repeats the full URL, query included; report scheme and host only.
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err
		}
		return nil, fmt.Errorf("dial: POST %s://%s: %w", u.Scheme, u.Host, err)
	}
	defer resp.Body.Close()
	out := &Response{StatusCode: resp.StatusCode, Header: resp.Header}
	out.Body, err = io.ReadAll(io.LimitReader(resp.Body, c.maxBody+1))
	if int64(len(out.Body)) > c.maxBody {
		out.Body, out.Truncated = out.Body[:c.maxBody], true
	}
	if err != nil {
		return out, fmt.Errorf("dial: reading response from %s://%s: %w", u.Scheme, u.Host, err)
	}
	return out, nil
}

// IsTimeout reports whether err is a timeout: the client's own Timeout, a connect or TLS timeout, or a
// context deadline.
func IsTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	ne, ok := errors.AsType[net.Error](err)
	return ok && ne.Timeout()
}
