package dial

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeResolver answers from a script: the n-th lookup of a host gets answers[host][n], the last one
// repeating. It records every lookup, so tests can tell a static refusal from a dial-time one.
type fakeResolver struct {
	mu      sync.Mutex
	answers map[string][][]netip.Addr
	calls   map[string]int
}

func newResolver() *fakeResolver {
	return &fakeResolver{answers: map[string][][]netip.Addr{}, calls: map[string]int{}}
}

func (r *fakeResolver) set(host string, answers ...[]netip.Addr) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.answers[host] = answers
}

func (r *fakeResolver) count(host string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[host]
}

func (r *fakeResolver) LookupNetIP(_ context.Context, _ string, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	seq, ok := r.answers[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	n := r.calls[host]
	r.calls[host]++
	return seq[min(n, len(seq)-1)], nil
}

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParseAddr(s)
	}
	return out
}

func newClient(t *testing.T, o Options) *Client {
	t.Helper()
	if o.ConnectTimeout == 0 {
		o.ConnectTimeout = 500 * time.Millisecond
	}
	if o.Timeout == 0 {
		o.Timeout = 2 * time.Second
	}
	c, err := NewClient(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// TestRefusedTargets covers every refused class, both as a URL literal (refused before any lookup) and as
// a DNS answer for a name (refused by the Control hook at dial time).
func TestRefusedTargets(t *testing.T) {
	type row struct {
		name   string
		url    string
		answer []netip.Addr // for host name rows: what the resolver says
		http   bool         // client allows http:// (so the scheme is not the reason)
	}
	literal := []row{
		{name: "rfc1918 10/8", url: "https://10.0.0.1/"},
		{name: "rfc1918 172.16/12", url: "https://172.16.5.4/"},
		{name: "rfc1918 192.168/16", url: "https://192.168.1.1/hook"},
		{name: "loopback v4", url: "https://127.0.0.1/"},
		{name: "loopback v4 other", url: "https://127.8.9.10/"},
		{name: "loopback v6", url: "https://[::1]/"},
		{name: "link-local metadata", url: "http://169.254.169.254/latest/meta-data/", http: true},
		{name: "link-local v6", url: "https://[fe80::1]/"},
		{name: "link-local v6 zone", url: "https://[fe80::1%25eth0]/"},
		{name: "cgnat low", url: "https://100.64.0.1/"},
		{name: "cgnat high", url: "https://100.127.255.254/"},
		{name: "ula fc00", url: "https://[fc00::1]/"},
		{name: "ula fd", url: "https://[fd12:3456::1]/"},
		{name: "mapped loopback", url: "http://[::ffff:127.0.0.1]/", http: true},
		{name: "mapped private", url: "https://[::ffff:10.0.0.1]/"},
		{name: "mapped hex form", url: "https://[::ffff:7f00:1]/"},
		{name: "nat64 loopback", url: "https://[64:ff9b::7f00:1]/"},
		{name: "6to4 loopback", url: "https://[2002:7f00:1::]/"},
		{name: "unspecified v4", url: "https://0.0.0.0/"},
		{name: "unspecified v6", url: "https://[::]/"},
		{name: "multicast v4", url: "https://224.0.0.1/"},
		{name: "multicast v6", url: "https://[ff02::1]/"},
		{name: "broadcast", url: "https://255.255.255.255/"},
		{name: "decimal integer", url: "http://2130706433/", http: true},
		{name: "decimal integer https", url: "https://2130706433/"},
		{name: "hex dotted", url: "http://0x7f.1/", http: true},
		{name: "hex integer", url: "https://0x7f000001/"},
		{name: "octal dotted", url: "https://0177.0.0.1/"},
		{name: "octal integer", url: "https://017700000001/"},
		{name: "short form", url: "https://127.1/"},
		{name: "leading zeros", url: "https://127.000.000.001/"},
		{name: "trailing dot", url: "https://127.0.0.1./"},
		{name: "public ip bad port", url: "https://8.8.8.8:22/"},
		{name: "http scheme", url: "http://example.com/"},
		{name: "ftp scheme", url: "ftp://example.com/"},
		{name: "no scheme", url: "example.com/hook"},
		{name: "user info", url: "https://user:pw@example.com/"},
		{name: "user info to private", url: "https://example.com@10.0.0.1/"},
		{name: "localhost", url: "https://localhost/"},
		{name: "localhost subdomain", url: "https://api.LOCALHOST./"},
		{name: "empty host", url: "https:///hook"},
		{name: "port zero", url: "https://example.com:0/"},
		// Rows added for issue 7's SSRF table: more members and boundaries of each class.
		{name: "rfc1918 10/8 top", url: "https://10.255.255.255/"},
		{name: "rfc1918 172.16/12 top", url: "https://172.31.255.255/"},
		{name: "rfc1918 192.168/16 top", url: "https://192.168.255.255/"},
		{name: "link-local v4", url: "https://169.254.0.1/"},
		{name: "link-local v4 top", url: "https://169.254.255.254/"},
		{name: "link-local v6 top of fe80::/10", url: "https://[febf:ffff::1]/"},
		{name: "cgnat 100.64/10 other", url: "https://100.100.100.200/"},
		{name: "ula fdff", url: "https://[fdff:ffff:ffff::1]/"},
		{name: "this network 0/8", url: "https://0.1.2.3/"},
		{name: "reserved 240/4", url: "https://240.0.0.1/"},
		{name: "benchmarking 198.18/15", url: "https://198.18.0.1/"},
		{name: "mapped metadata", url: "https://[::ffff:169.254.169.254]/"},
		{name: "mapped long form", url: "https://[0:0:0:0:0:ffff:7f00:1]/"},
		{name: "mapped cgnat", url: "https://[::ffff:100.64.0.1]/"},
		{name: "v4-compatible loopback", url: "https://[::127.0.0.1]/"},
		{name: "v4-compatible private", url: "https://[::a00:1]/"},
		{name: "teredo", url: "https://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/"},
		{name: "documentation v6", url: "https://[2001:db8::1]/"},
		{name: "multicast v4 ssdp", url: "https://239.255.255.250/"},
		{name: "decimal integer private", url: "https://167772161/"},
		{name: "decimal integer trailing dot", url: "https://2130706433./"},
		{name: "octal private", url: "https://012.0.0.1/"},
		{name: "octal short", url: "https://0177.1/"},
		{name: "hex private", url: "https://0xa.0.0.1/"},
		{name: "hex upper case", url: "https://0X7F.0.0.1/"},
		{name: "hex dotted full", url: "https://0x7f.0x0.0x0.0x1/"},
		{name: "short private", url: "https://10.1/"},
		{name: "three-part form", url: "https://192.168.1/"},
		{name: "decimal metadata", url: "https://2852039166/"},
		{name: "http to a public address by default", url: "http://8.8.8.8/"},
		{name: "http on 443 by default", url: "http://example.com:443/"},
	}
	viaDNS := []row{
		{name: "dns rfc1918 10/8", answer: addrs("10.1.2.3")},
		{name: "dns rfc1918 172.16/12", answer: addrs("172.31.255.255")},
		{name: "dns rfc1918 192.168/16", answer: addrs("192.168.0.10")},
		{name: "dns loopback v4", answer: addrs("127.0.0.1")},
		{name: "dns loopback v6", answer: addrs("::1")},
		{name: "dns link-local metadata", answer: addrs("169.254.169.254")},
		{name: "dns link-local v6", answer: addrs("fe80::abcd")},
		{name: "dns cgnat", answer: addrs("100.64.1.1")},
		{name: "dns ula", answer: addrs("fd00::1")},
		{name: "dns mapped private", answer: addrs("::ffff:10.0.0.1")},
		{name: "dns mapped loopback", answer: addrs("::ffff:127.0.0.1")},
		{name: "dns unspecified v4", answer: addrs("0.0.0.0")},
		{name: "dns unspecified v6", answer: addrs("::")},
		{name: "dns multicast v4", answer: addrs("224.0.0.251")},
		{name: "dns multicast v6", answer: addrs("ff02::fb")},
		{name: "dns every answer private", answer: addrs("10.0.0.1", "192.168.0.1", "fc00::1", "127.0.0.1")},
		{name: "dns public on a refused port", url: "https://hook.test:8443/", answer: addrs("8.8.8.8")},
		{name: "dns link-local v4", answer: addrs("169.254.1.1")},
		{name: "dns cgnat top", answer: addrs("100.127.255.255")},
		{name: "dns ula fc00", answer: addrs("fc00::1")},
		{name: "dns broadcast", answer: addrs("255.255.255.255")},
		{name: "dns this network", answer: addrs("0.1.2.3")},
		{name: "dns mapped metadata", answer: addrs("::ffff:169.254.169.254")},
		{name: "dns v4-compatible loopback", answer: addrs("::7f00:1")},
		{name: "dns nat64 private", answer: addrs("64:ff9b::a00:1")},
	}
	for _, tc := range literal {
		t.Run(tc.name, func(t *testing.T) {
			res := newResolver()
			c := newClient(t, Options{Resolver: res, AllowHTTP: tc.http})
			if _, err := c.CheckURL(tc.url); !isTarget(err) {
				t.Fatalf("CheckURL(%s) = %v, want *TargetError", tc.url, err)
			}
			_, err := c.Post(context.Background(), tc.url, nil, []byte("{}"))
			if !isTarget(err) {
				t.Fatalf("Post(%s) = %v, want *TargetError", tc.url, err)
			}
			if len(res.calls) != 0 {
				t.Fatalf("a refused literal caused lookups: %v", res.calls)
			}
		})
	}
	for _, tc := range viaDNS {
		t.Run(tc.name, func(t *testing.T) {
			res := newResolver()
			res.set("hook.test", tc.answer)
			c := newClient(t, Options{Resolver: res})
			target := tc.url
			if target == "" {
				target = "https://hook.test/events"
			}
			if _, err := c.CheckURL(target); err != nil {
				t.Fatalf("a host name is only checked at dial time, got %v", err)
			}
			_, err := c.Post(context.Background(), target, nil, []byte("{}"))
			if !isTarget(err) {
				t.Fatalf("Post = %v, want *TargetError", err)
			}
			if res.count("hook.test") != 1 {
				t.Fatalf("lookups = %d, want 1", res.count("hook.test"))
			}
		})
	}
}

func isTarget(err error) bool {
	var te *TargetError
	return errors.As(err, &te)
}

// TestPublicTargetsPass checks the rules admit public destinations, without connecting anywhere.
func TestPublicTargetsPass(t *testing.T) {
	c := newClient(t, Options{})
	for _, u := range []string{"https://8.8.8.8/", "https://[2606:4700:4700::1111]/hook", "https://example.com/",
		"https://hooks.example.com:443/x?y=1", "HTTPS://Example.COM/", "https://1.2.3.4.example.com/", "https://xn--bcher-kva.example/",
		// just outside the refused ranges: the table's boundaries are exact
		"https://9.255.255.255/", "https://11.0.0.1/", "https://172.15.255.255/", "https://172.32.0.1/", "https://192.167.255.255/",
		"https://192.169.0.1/", "https://169.253.255.255/", "https://169.255.0.1/", "https://100.63.255.255/", "https://100.128.0.1/",
		"https://126.255.255.255/", "https://128.0.0.1/", "https://223.255.255.254/",
		// an IPv4-mapped literal is classified as the IPv4 address it maps
		"https://[::ffff:8.8.8.8]/", "https://[0:0:0:0:0:ffff:808:808]/"} {
		if _, err := c.CheckURL(u); err != nil {
			t.Errorf("CheckURL(%s): %v", u, err)
		}
	}
	for _, a := range []string{"8.8.8.8:443", "[2606:4700:4700::1111]:443", "1.1.1.1:443"} {
		network := "tcp4"
		if strings.HasPrefix(a, "[") {
			network = "tcp6"
		}
		if err := c.control(network, a, nil); err != nil {
			t.Errorf("control(%s): %v", a, err)
		}
	}
	for _, tc := range []struct{ network, addr string }{
		{"udp4", "8.8.8.8:443"}, {"tcp4", "8.8.8.8:80"}, {"tcp4", "10.0.0.1:443"}, {"tcp6", "[::1]:443"},
		{"tcp4", "garbage"},
	} {
		if err := c.control(tc.network, tc.addr, nil); !isTarget(err) {
			t.Errorf("control(%s %s) = %v, want refusal", tc.network, tc.addr, err)
		}
	}
	wide := newClient(t, Options{Ports: []uint16{443, 8443}, AllowHTTP: true})
	if _, err := wide.CheckURL("https://8.8.8.8:8443/"); err != nil {
		t.Errorf("widened port: %v", err)
	}
	if _, err := wide.CheckURL("http://8.8.8.8/"); !isTarget(err) {
		t.Errorf("explicit Ports do not include 80: %v", err)
	}
	if err := newClient(t, Options{AllowHTTP: true}).control("tcp4", "8.8.8.8:80", nil); err != nil {
		t.Errorf("AllowHTTP admits port 80: %v", err)
	}
}

// listenOn starts an HTTP server on ip:port (port 0 picks one) counting accepted connections.
func listenOn(t *testing.T, ip string, port int, h http.Handler) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, fmt.Sprint(port)))
	if err != nil {
		t.Skipf("cannot listen on %s: %v", ip, err)
	}
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(h)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &conns
}

func okHandler(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }

// TestDNSRebinding: the resolver first answers a (stand-in) public address, then a private one. The
// request to the public answer succeeds; the next one is refused at dial time and the private server
// never sees a connection. 127.0.0.2 stands in for a public address (testAllowed); 127.0.0.1 is private.
func TestDNSRebinding(t *testing.T) {
	public, publicConns := listenOn(t, "127.0.0.2", 0, http.HandlerFunc(okHandler))
	port := public.Listener.Addr().(*net.TCPAddr).Port
	_, privateConns := listenOn(t, "127.0.0.1", port, http.HandlerFunc(okHandler))
	target := fmt.Sprintf("http://rebind.test:%d/hook", port)

	// The second answer of each row is private in its own way; each is refused at dial time.
	for _, second := range []string{"127.0.0.1", "::ffff:127.0.0.1", "::1", "10.0.0.1", "169.254.169.254", "100.64.0.1", "fd00::1", "0.0.0.0"} {
		t.Run("answer changes between requests to "+second, func(t *testing.T) {
			res := newResolver()
			res.set("rebind.test", addrs("127.0.0.2"), addrs(second))
			c := newClient(t, Options{Resolver: res, AllowHTTP: true, testAllowed: []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")}})
			resp, err := c.Post(context.Background(), target, nil, []byte("{}"))
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("first (public) answer: %v %v", resp, err)
			}
			c.CloseIdleConnections() // force a new dial and a new lookup
			_, err = c.Post(context.Background(), target, nil, []byte("{}"))
			if !isTarget(err) {
				t.Fatalf("rebound answer: %v, want *TargetError", err)
			}
			if res.count("rebind.test") != 2 {
				t.Fatalf("lookups = %d, want 2", res.count("rebind.test"))
			}
		})
	}
	t.Run("private and public in one answer", func(t *testing.T) {
		res := newResolver()
		res.set("rebind.test", addrs("127.0.0.1", "::ffff:127.0.0.1", "127.0.0.2"))
		c := newClient(t, Options{Resolver: res, AllowHTTP: true, testAllowed: []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")}})
		before := publicConns.Load()
		resp, err := c.Post(context.Background(), target, nil, []byte("{}"))
		if err != nil || resp.StatusCode != 200 || string(resp.Body) != "ok" {
			t.Fatalf("public answer after private ones: %v %v", resp, err)
		}
		if publicConns.Load() != before+1 {
			t.Fatalf("public server connections %d → %d", before, publicConns.Load())
		}
	})
	if n := privateConns.Load(); n != 0 {
		t.Fatalf("private server saw %d connections", n)
	}
	if publicConns.Load() == 0 {
		t.Fatal("public stand-in never reached: the test proves nothing")
	}
}

// TestLoopbackEndToEnd: an HTTPS receiver on loopback is refused by default (statically for a literal,
// at dial time for a name) and reached with AllowLoopback.
func TestLoopbackEndToEnd(t *testing.T) {
	var conns, hits atomic.Int64
	var gotBody atomic.Value
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		b, _ := io.ReadAll(r.Body)
		gotBody.Store(r.Method + " " + r.Header.Get("Content-Type") + " " + r.Header.Get("User-Agent") + " " + string(b))
		w.WriteHeader(http.StatusNoContent)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	defer srv.Close()
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	res := newResolver()
	res.set("example.com", addrs("127.0.0.1")) // the test certificate covers example.com
	byName := fmt.Sprintf("https://example.com:%d/hook?token=QUERY-SECRET", port)
	literal := fmt.Sprintf("https://127.0.0.1:%d/hook", port)
	header := http.Header{"Content-Type": {"application/cloudevents+json"}}

	strict := newClient(t, Options{Resolver: res, Ports: []uint16{uint16(port)}})
	for _, u := range []string{byName, literal} {
		_, err := strict.Post(context.Background(), u, header, []byte(`{"n":1}`))
		if !isTarget(err) {
			t.Fatalf("default client reached %s: %v", u, err)
		}
		if strings.Contains(err.Error(), "QUERY-SECRET") {
			t.Fatalf("error repeats the query string: %v", err)
		}
	}
	if res.count("example.com") != 1 {
		t.Fatalf("the name was not resolved and refused at dial time (lookups %d)", res.count("example.com"))
	}
	if conns.Load() != 0 || hits.Load() != 0 {
		t.Fatalf("refused target saw %d connections, %d requests", conns.Load(), hits.Load())
	}

	dev := newClient(t, Options{Resolver: res, AllowLoopback: true, TLSConfig: &tls.Config{RootCAs: pool}})
	for i, u := range []string{byName, literal} {
		resp, err := dev.Post(context.Background(), u, header, []byte(`{"n":1}`))
		if err != nil || resp.StatusCode != http.StatusNoContent {
			t.Fatalf("AllowLoopback %s: %v %v", u, resp, err)
		}
		if hits.Load() != int64(i+1) {
			t.Fatalf("hits = %d", hits.Load())
		}
		if got := gotBody.Load(); got != "POST application/cloudevents+json "+UserAgent+` {"n":1}` {
			t.Fatalf("server received %q", got)
		}
	}
	// AllowLoopback admits loopback only: private and link-local addresses stay refused, mapped or not.
	for _, u := range []string{"https://10.0.0.1/", "https://169.254.169.254/", "https://[::ffff:10.0.0.1]/", "https://[::ffff:169.254.169.254]/"} {
		if _, err := dev.CheckURL(u); !isTarget(err) {
			t.Fatalf("AllowLoopback admitted %s", u)
		}
	}
}

// TestIPv4MappedAnswers: Go's resolver answers names from the hosts file as IPv4-mapped IPv6
// (::ffff:a.b.c.d). Such an answer is classified and dialed as the IPv4 address it maps: a mapped
// stand-in public address is reached, a mapped loopback one is reached with AllowLoopback (the
// "localhost" of `waypost serve --allow-loopback-webhooks`) and refused without it, a mapped private one
// is always refused.
func TestIPv4MappedAnswers(t *testing.T) {
	public, publicConns := listenOn(t, "127.0.0.2", 0, http.HandlerFunc(okHandler))
	port := public.Listener.Addr().(*net.TCPAddr).Port
	_, loopConns := listenOn(t, "127.0.0.1", port, http.HandlerFunc(okHandler))
	standIn := []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")}
	post := func(c *Client, host string) error {
		resp, err := c.Post(context.Background(), fmt.Sprintf("http://%s:%d/hook", host, port), nil, []byte("{}"))
		if err == nil && (resp.StatusCode != 200 || string(resp.Body) != "ok") {
			return fmt.Errorf("answer %d %q", resp.StatusCode, resp.Body)
		}
		return err
	}

	res := newResolver()
	res.set("mapped-public.test", addrs("::ffff:127.0.0.2"))
	res.set("localhost", addrs("::ffff:127.0.0.1"))
	res.set("mapped-private.test", addrs("::ffff:10.0.0.1"))
	strict := newClient(t, Options{Resolver: res, AllowHTTP: true, Ports: []uint16{uint16(port)}, testAllowed: standIn})
	if err := post(strict, "mapped-public.test"); err != nil {
		t.Fatalf("mapped public answer: %v", err)
	}
	if publicConns.Load() != 1 {
		t.Fatalf("public stand-in saw %d connections, want 1", publicConns.Load())
	}
	if err := post(strict, "[::ffff:127.0.0.2]"); err != nil {
		t.Fatalf("mapped public literal: %v", err)
	}
	for _, host := range []string{"mapped-private.test", "[::ffff:10.0.0.1]", "[::ffff:127.0.0.1]"} {
		if err := post(strict, host); !isTarget(err) {
			t.Fatalf("%s: %v, want *TargetError", host, err)
		}
	}
	if _, err := strict.CheckURL(fmt.Sprintf("http://localhost:%d/", port)); !isTarget(err) {
		t.Fatalf("localhost without AllowLoopback: %v", err)
	}
	if loopConns.Load() != 0 {
		t.Fatalf("loopback server saw %d connections without AllowLoopback", loopConns.Load())
	}

	dev := newClient(t, Options{Resolver: res, AllowHTTP: true, AllowLoopback: true})
	for _, host := range []string{"localhost", "[::ffff:127.0.0.1]"} {
		if err := post(dev, host); err != nil {
			t.Fatalf("AllowLoopback %s: %v", host, err)
		}
	}
	if loopConns.Load() != 2 {
		t.Fatalf("loopback server saw %d connections, want 2", loopConns.Load())
	}
	if err := post(dev, "mapped-private.test"); !isTarget(err) {
		t.Fatalf("AllowLoopback admitted a mapped private answer: %v", err)
	}
}

func TestRedirectNotFollowed(t *testing.T) {
	other, otherConns := listenOn(t, "127.0.0.1", 0, http.HandlerFunc(okHandler))
	first, _ := listenOn(t, "127.0.0.1", 0, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/landing", http.StatusTemporaryRedirect)
	}))
	c := newClient(t, Options{AllowHTTP: true, AllowLoopback: true})
	resp, err := c.Post(context.Background(), first.URL+"/hook", nil, []byte("{}"))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusTemporaryRedirect || !strings.HasSuffix(resp.Header.Get("Location"), "/landing") {
		t.Fatalf("got %d %v", resp.StatusCode, resp.Header)
	}
	if otherConns.Load() != 0 {
		t.Fatal("redirect was followed")
	}
}

func TestTimeouts(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	slowHeaders, _ := listenOn(t, "127.0.0.1", 0, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	slowBody, _ := listenOn(t, "127.0.0.1", 0, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		_, _ = io.WriteString(w, "partial")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	c := newClient(t, Options{AllowHTTP: true, AllowLoopback: true, Timeout: 300 * time.Millisecond})
	for _, tc := range []struct {
		name     string
		url      string
		wantResp bool
	}{{"no response", slowHeaders.URL, false}, {"body never ends", slowBody.URL, true}} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			resp, err := c.Post(context.Background(), tc.url, nil, []byte("{}"))
			if err == nil || !IsTimeout(err) {
				t.Fatalf("got %v, want a timeout", err)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Fatalf("took %v with a 300ms timeout", d)
			}
			if (resp != nil) != tc.wantResp {
				t.Fatalf("response %v", resp)
			}
			if resp != nil && resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
		})
	}
	// The parent context also bounds the exchange.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := c.Post(ctx, slowHeaders.URL, nil, nil); !IsTimeout(err) {
		t.Fatalf("parent deadline: %v", err)
	}
	if IsTimeout(errors.New("connection refused")) {
		t.Fatal("IsTimeout on a plain error")
	}
}

func TestResponseBodyCapped(t *testing.T) {
	srv, _ := listenOn(t, "127.0.0.1", 0, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, strings.Repeat("x", 100_000))
	}))
	c := newClient(t, Options{AllowHTTP: true, AllowLoopback: true, MaxResponseBytes: 1000})
	resp, err := c.Post(context.Background(), srv.URL, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Body) != 1000 || !resp.Truncated {
		t.Fatalf("body %d bytes, truncated %v", len(resp.Body), resp.Truncated)
	}
	small := newClient(t, Options{AllowHTTP: true, AllowLoopback: true, MaxResponseBytes: 100_000})
	resp, err = small.Post(context.Background(), srv.URL, nil, nil)
	if err != nil || len(resp.Body) != 100_000 || resp.Truncated {
		t.Fatalf("exact size: %d %v %v", len(resp.Body), resp.Truncated, err)
	}
}

func TestNewClientOptions(t *testing.T) {
	c, err := NewClient(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if c.dialer.Timeout != DefaultConnectTimeout || c.http.Timeout != DefaultTimeout || c.maxBody != DefaultMaxResponseBytes {
		t.Fatalf("defaults: connect %v, timeout %v, body %d", c.dialer.Timeout, c.http.Timeout, c.maxBody)
	}
	// No proxy, ever: a proxy would connect on our behalf to an address the Control hook never sees.
	// (Checked structurally: http.ProxyFromEnvironment caches the environment once per process.)
	if c.http.Transport.(*http.Transport).Proxy != nil {
		t.Fatal("a proxy function is set")
	}
	if c.dialer.Control == nil {
		t.Fatal("no Control hook on the dialer")
	}
	c2, _ := NewClient(Options{ConnectTimeout: time.Second})
	if c2.dialer.Timeout != time.Second {
		t.Fatalf("connect timeout %v", c2.dialer.Timeout)
	}
	for _, bad := range []Options{{Timeout: -1}, {ConnectTimeout: -1}, {MaxResponseBytes: -1}, {Ports: []uint16{0}}} {
		if _, err := NewClient(bad); err == nil {
			t.Fatalf("accepted %+v", bad)
		}
	}
}
