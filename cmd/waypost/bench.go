package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http/httputil"
	"net/url"
	"os"
	"runtime/pprof"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/spf13/cobra"

	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/internal/cputime"
)

// benchOptions are the flags of `waypost bench`.
type benchOptions struct {
	url          string
	adminSecret  string
	clients      int
	ackClients   int
	duration     time.Duration
	readDuration time.Duration
	ackDuration  time.Duration
	readPage     int
	maxSends     int64
	bodyBytes    int
	allowRemote  bool
	cpuProfile   string // a CPU profile of the load generator itself
}

// Upper bounds of the flags: the load generator is bounded in time and count.
const (
	benchMaxClients  = 1024
	benchMaxDuration = 10 * time.Minute
	benchMaxSends    = 10_000_000
)

func newBenchCmd() *cobra.Command {
	var o benchOptions
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure a running server over HTTP: committed message.send/s, latency, inbox.read and read+ack rates",
		Long: `Measure a running Waypost server over its HTTP API, as clients see it.

bench creates its own space through the control plane (one sender actor and token per client, and inbox
consumers of the space's default recipient; the space's per-credential rate limits lifted to their maximum),
then runs three timed phases:

  1. message.send from --clients concurrent clients for --duration (each with unique request IDs),
  2. inbox.read of --read-page items per page from --clients concurrent readers for --read-duration,
  3. inbox read+ack for --ack-duration: each of --ack-clients consumers (one per client) reads a page of
     --read-page items from its checkpoint and acknowledges it with inbox.ack (stage received for every item,
     and the page's next_cursor as checkpoint_cursor) before reading the next page, as a durable consumer
     does. It ends early when every consumer has acknowledged the whole inbox.

It prints progress every second, then committed sends/s with p50/p90/p99/max latency, error counts by code,
its own CPU time per committed send (the share of a shared machine the server did not get),
read pages/s with p50/p99, and acknowledged items/s with the latency of one read+ack cycle and of its read and its ack round trips. Only the server at --url is contacted; it must be on a loopback address
unless --allow-remote is given. Every run is bounded by its durations and by --max-sends.`,
		Example: `  waypost serve --data /tmp/wp &
  WAYPOST_ADMIN_SECRET=$(cat /tmp/wp/admin-secret) waypost bench --clients 32 --duration 10s
  waypost bench --clients 32 --body-bytes 600 --read-duration 0 --ack-clients 1 --ack-duration 10s`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f := cmd.Flags()
			if !f.Changed("url") {
				if v := os.Getenv("WAYPOST_URL"); v != "" {
					o.url = v
				}
			}
			if !f.Changed("admin-secret") {
				o.adminSecret = os.Getenv("WAYPOST_ADMIN_SECRET")
			}
			if err := o.validate(); err != nil {
				return err
			}
			if o.cpuProfile != "" {
				stop, err := startRecording("--cpuprofile", o.cpuProfile, pprof.StartCPUProfile, pprof.StopCPUProfile)
				if err != nil {
					return err
				}
				defer stop()
			}
			return runBench(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.url, "url", "http://127.0.0.1:8787", "base URL of the server (env WAYPOST_URL)")
	f.StringVar(&o.adminSecret, "admin-secret", "", "control-plane secret (env WAYPOST_ADMIN_SECRET)")
	f.IntVar(&o.clients, "clients", 32, "concurrent clients in each phase")
	f.DurationVar(&o.duration, "duration", 10*time.Second, "length of the message.send phase")
	f.DurationVar(&o.readDuration, "read-duration", 5*time.Second, "length of the inbox.read phase (0 skips it)")
	f.DurationVar(&o.ackDuration, "ack-duration", 5*time.Second, "length of the inbox read+ack phase (0 skips it)")
	f.IntVar(&o.ackClients, "ack-clients", 0, "concurrent consumers in the read+ack phase (0: --clients)")
	f.IntVar(&o.readPage, "read-page", 50, "items per inbox.read page")
	f.Int64Var(&o.maxSends, "max-sends", 1_000_000, "stop the send phase after this many sends")
	f.IntVar(&o.bodyBytes, "body-bytes", 256, "size of each message's body.text")
	f.BoolVar(&o.allowRemote, "allow-remote", false, "allow a --url that is not a loopback address")
	f.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the load generator itself to this file (go tool pprof)")
	return cmd
}

func (o *benchOptions) validate() error {
	switch {
	case o.adminSecret == "":
		return errors.New("bench: the admin secret is required (--admin-secret or WAYPOST_ADMIN_SECRET)")
	case o.clients < 1 || o.clients > benchMaxClients:
		return fmt.Errorf("bench: --clients must be 1 to %d", benchMaxClients)
	case o.ackClients < 0 || o.ackClients > benchMaxClients:
		return fmt.Errorf("bench: --ack-clients must be 0 to %d", benchMaxClients)
	case o.duration <= 0 || o.duration > benchMaxDuration:
		return fmt.Errorf("bench: --duration must be more than 0 and at most %v", benchMaxDuration)
	case o.readDuration < 0 || o.readDuration > benchMaxDuration:
		return fmt.Errorf("bench: --read-duration must be 0 to %v", benchMaxDuration)
	case o.ackDuration < 0 || o.ackDuration > benchMaxDuration:
		return fmt.Errorf("bench: --ack-duration must be 0 to %v", benchMaxDuration)
	case o.readPage < 1 || o.readPage > 200:
		return errors.New("bench: --read-page must be 1 to 200 (inbox_page_max)")
	case o.maxSends < 1 || o.maxSends > benchMaxSends:
		return fmt.Errorf("bench: --max-sends must be 1 to %d", benchMaxSends)
	case o.bodyBytes < 0 || o.bodyBytes > 49152:
		return errors.New("bench: --body-bytes must be 0 to 49152 (max_body_text_bytes)")
	}
	if o.ackClients == 0 {
		o.ackClients = o.clients
	}
	u, err := url.Parse(o.url)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
		return fmt.Errorf("bench: --url must be http(s)://host[:port], got %q", o.url)
	}
	o.url = strings.TrimSuffix(o.url, "/")
	if !o.allowRemote && !isLoopbackHost(u.Hostname()) {
		return fmt.Errorf("bench: %s is not a loopback address; pass --allow-remote to load it anyway", u.Hostname())
	}
	return nil
}

func isLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// benchClient is a minimal HTTP/1.1 client of the Waypost envelope for the load generator, which shares the
// machine's cores with the server it measures: each client goroutine owns one keep-alive connection
// (benchConn), writes each request in one system call and reads the answer in its own goroutine
// (readBenchResponse, without net/http's header map), decoding it with github.com/go-json-experiment/json.
// net/http's Transport, by contrast, hands every request to a writer goroutine and every answer back from a
// reader goroutine, two extra wake-ups per request that cost about as much CPU as a small request's
// handling in the server.
type benchClient struct {
	tls    bool
	addr   string // host:port to dial
	host   string // the Host header
	dialer net.Dialer
}

func newBenchClient(base string) (*benchClient, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, err
	}
	c := &benchClient{tls: u.Scheme == "https", host: u.Host, addr: u.Host, dialer: net.Dialer{Timeout: 10 * time.Second}}
	if u.Port() == "" {
		port := "80"
		if c.tls {
			port = "443"
		}
		c.addr = net.JoinHostPort(u.Hostname(), port)
	}
	return c, nil
}

// benchTimeout bounds one request (the phases' own deadlines end them sooner).
const benchTimeout = 30 * time.Second

// benchConn is one client's keep-alive connection, redialled after a failure or a Connection: close.
type benchConn struct {
	c    *benchClient
	conn net.Conn
	br   *bufio.Reader
	req  []byte       // the request being written, reused
	resp bytes.Buffer // the answer's body, reused
}

func (c *benchClient) conn() *benchConn { return &benchConn{c: c} }

func (bc *benchConn) close() {
	if bc.conn != nil {
		_ = bc.conn.Close()
		bc.conn = nil
	}
}

func (bc *benchConn) dial(ctx context.Context) error {
	conn, err := bc.c.dialer.DialContext(ctx, "tcp", bc.c.addr)
	if err != nil {
		return err
	}
	if bc.c.tls {
		host, _, _ := net.SplitHostPort(bc.c.addr)
		tc := tls.Client(conn, &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12})
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = conn.Close()
			return err
		}
		conn = tc
	}
	bc.conn = conn
	if bc.br == nil {
		bc.br = bufio.NewReaderSize(conn, 64<<10)
	} else {
		bc.br.Reset(conn)
	}
	return nil
}

type benchEnvelope struct {
	OK    bool `json:"ok"`
	Data  any  `json:"data"` // the caller's result pointer: the envelope and its data decode in one pass
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// do sends one request and decodes the envelope's data into out (when not nil), or returns an error whose
// text starts with the error code (or "transport"/"http_<status>" when there is no envelope). body is sent
// as is when it is a []byte, marshalled otherwise: the load generator encodes its hot requests itself so as
// to take little of the CPU it shares with the server.
func (bc *benchConn) do(ctx context.Context, method, path, token string, body, out any) error {
	var raw []byte
	switch b := body.(type) {
	case nil:
	case []byte:
		raw = b
	default:
		var err error
		if raw, err = json.Marshal(body); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	status, data, err := bc.roundTrip(ctx, method, path, token, body != nil, raw)
	if err != nil {
		bc.close()
		if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
			<-ctx.Done() // the connection's deadline was the context's: it ends a moment later
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &benchError{code: "transport", err: err}
	}
	env := benchEnvelope{Data: out}
	if out == nil {
		env.Data = new(jsontext.Value)
	}
	// The server's answers repeat no member name: the decoder need not track the names it saw (a fifth of
	// the decoding of a 50-item page).
	if err := jsonv2.Unmarshal(data, &env, jsontext.AllowDuplicateNames(true)); err != nil {
		return &benchError{code: fmt.Sprintf("http_%d", status), err: errors.New("response is not a JSON envelope of the expected shape")}
	}
	if !env.OK {
		if env.Error == nil {
			return &benchError{code: fmt.Sprintf("http_%d", status), err: errors.New("failure without an error object")}
		}
		return &benchError{code: env.Error.Code, err: errors.New(env.Error.Message)}
	}
	return nil
}

// roundTrip writes one request on the connection (dialling it first when needed) and reads the answer; the
// returned body is valid until the next call.
func (bc *benchConn) roundTrip(ctx context.Context, method, path, token string, hasBody bool, body []byte) (int, []byte, error) {
	if bc.conn == nil {
		if err := bc.dial(ctx); err != nil {
			return 0, nil, err
		}
	}
	deadline := time.Now().Add(benchTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := bc.conn.SetDeadline(deadline); err != nil {
		return 0, nil, err
	}
	conn := bc.conn
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	r := append(bc.req[:0], method...)
	r = append(r, ' ')
	r = append(r, path...)
	r = append(r, " HTTP/1.1\r\nHost: "...)
	r = append(r, bc.c.host...)
	r = append(r, "\r\nUser-Agent: waypost-bench\r\nAuthorization: Bearer "...)
	r = append(r, token...)
	if hasBody {
		r = append(r, "\r\nContent-Type: application/json"...)
	}
	r = append(r, "\r\nContent-Length: "...)
	r = strconv.AppendInt(r, int64(len(body)), 10)
	r = append(r, "\r\n\r\n"...)
	r = append(r, body...)
	bc.req = r
	if _, err := bc.conn.Write(r); err != nil {
		return 0, nil, err
	}
	status, closing, err := readBenchResponse(bc.br, &bc.resp)
	if err != nil {
		return 0, nil, err
	}
	if closing {
		bc.close()
	}
	return status, bc.resp.Bytes(), nil
}

// benchMaxBody bounds an answer's body.
const benchMaxBody = 8 << 20

// readBenchResponse reads one HTTP/1.1 answer from br, its body into body (reset first): the status, and
// whether the server closes the connection after it. The body is framed by Content-Length, by chunks, or
// (HTTP/1.0 style) by the end of the connection; at most benchMaxBody bytes. The load generator reads only
// the headers it needs, where http.ReadResponse builds a header map for every answer.
func readBenchResponse(br *bufio.Reader, body *bytes.Buffer) (status int, closing bool, err error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		return 0, false, err
	}
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' {
		return 0, false, errors.New("malformed HTTP status line")
	}
	for _, c := range line[9:12] {
		if c < '0' || c > '9' {
			return 0, false, errors.New("malformed HTTP status code")
		}
		status = status*10 + int(c-'0')
	}
	closing = line[7] == '0' // HTTP/1.0
	length, chunked := int64(-1), false
	for {
		if line, err = br.ReadSlice('\n'); err != nil {
			return 0, false, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			break
		}
		name, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.ParseInt(string(value), 10, 64); err != nil || length < 0 || length > benchMaxBody {
				return 0, false, errors.New("bad or too large Content-Length")
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			chunked = bytes.EqualFold(value, []byte("chunked"))
		case bytes.EqualFold(name, []byte("Connection")):
			closing = closing || bytes.EqualFold(value, []byte("close"))
		}
	}
	body.Reset()
	switch {
	case chunked:
		if _, err = body.ReadFrom(io.LimitReader(httputil.NewChunkedReader(br), benchMaxBody)); err != nil {
			return 0, false, err
		}
		for { // the trailer section, ended by an empty line
			if line, err = br.ReadSlice('\n'); err != nil {
				return 0, false, err
			}
			if len(bytes.TrimRight(line, "\r\n")) == 0 {
				break
			}
		}
	case length >= 0:
		_, err = io.CopyN(body, br, length)
	default:
		closing = true
		_, err = body.ReadFrom(io.LimitReader(br, benchMaxBody))
	}
	return status, closing, err
}

type benchError struct {
	code string
	err  error
}

func (e *benchError) Error() string { return e.code + ": " + e.err.Error() }

func errorCode(err error) string {
	var be *benchError
	if errors.As(err, &be) {
		return be.code
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return "canceled"
	}
	return "client"
}

// call performs a request and decodes its data into out.
func (bc *benchConn) call(ctx context.Context, method, path, token string, body, out any) error {
	if err := bc.do(ctx, method, path, token, body, out); err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	return nil
}

// benchSetup is what bench creates in the server before measuring.
type benchSetup struct {
	run            string
	senderTokens   []string
	readerToken    string
	readerConsumer string
	ackers         []benchConsumer // one per client when the read+ack phase runs
}

// benchConsumer is an inbox consumer with a token that may read and acknowledge.
type benchConsumer struct {
	id, token string
}

func setupBench(ctx context.Context, c *benchConn, o benchOptions) (benchSetup, error) {
	var s benchSetup
	rb := make([]byte, 6)
	if _, err := rand.Read(rb); err != nil {
		return s, err
	}
	s.run = hex.EncodeToString(rb)
	adm := o.adminSecret
	var space struct {
		SpaceID            string `json:"space_id"`
		DefaultRecipientID string `json:"default_recipient_id"`
	}
	if err := c.call(ctx, "POST", "/admin/v0/spaces", adm, map[string]any{"request_id": "bench-" + s.run, "display_name": "bench " + s.run}, &space); err != nil {
		return s, err
	}
	sp := "/admin/v0/spaces/" + space.SpaceID
	// A throughput measurement, not a test of throttling: lift the space's per-credential rate limits.
	if err := c.call(ctx, "PATCH", sp, adm, map[string]any{"rate_limits": map[string]any{
		"requests_per_second": domain.MaxRequestsPerSecond, "burst": domain.MaxBurst}}, nil); err != nil {
		return s, fmt.Errorf("lifting the bench space's rate limits: %w", err)
	}
	n := 0
	rid := func() string { n++; return fmt.Sprintf("bench-%s-%d", s.run, n) }
	var tok struct {
		Token string `json:"token"`
	}
	for i := 0; i < o.clients; i++ {
		var actor struct {
			ActorID string `json:"actor_id"`
		}
		if err := c.call(ctx, "POST", sp+"/actors", adm, map[string]any{"request_id": rid(), "display_name": fmt.Sprintf("bench sender %d", i)}, &actor); err != nil {
			return s, err
		}
		if err := c.call(ctx, "POST", sp+"/tokens", adm, map[string]any{"request_id": rid(), "actor_id": actor.ActorID, "scopes": []string{"message.send"}}, &tok); err != nil {
			return s, err
		}
		s.senderTokens = append(s.senderTokens, tok.Token)
	}
	var con struct {
		ConsumerID string `json:"consumer_id"`
	}
	if err := c.call(ctx, "POST", sp+"/consumers", adm, map[string]any{"request_id": rid(), "actor_id": space.DefaultRecipientID, "view": "inbox"}, &con); err != nil {
		return s, err
	}
	if err := c.call(ctx, "POST", sp+"/tokens", adm, map[string]any{"request_id": rid(), "actor_id": space.DefaultRecipientID, "consumer_id": con.ConsumerID, "scopes": []string{"message.read"}}, &tok); err != nil {
		return s, err
	}
	s.readerToken, s.readerConsumer = tok.Token, con.ConsumerID
	for i := 0; o.ackDuration > 0 && i < o.ackClients; i++ {
		if err := c.call(ctx, "POST", sp+"/consumers", adm, map[string]any{"request_id": rid(), "actor_id": space.DefaultRecipientID, "view": "inbox"}, &con); err != nil {
			return s, err
		}
		if err := c.call(ctx, "POST", sp+"/tokens", adm, map[string]any{"request_id": rid(), "actor_id": space.DefaultRecipientID, "consumer_id": con.ConsumerID, "scopes": []string{"message.read", "receipt.write"}}, &tok); err != nil {
			return s, err
		}
		s.ackers = append(s.ackers, benchConsumer{id: con.ConsumerID, token: tok.Token})
	}
	return s, nil
}

// phaseStats collects the outcome of one phase across its clients.
type phaseStats struct {
	mu        sync.Mutex
	latencies []time.Duration
	errors    map[string]int64
	done      atomic.Int64 // successful operations
	items     atomic.Int64 // items read (read phase)
	// reads and acks are the round trips of the read and of the ack of each read+ack cycle (read+ack phase).
	reads, acks []time.Duration
}

func newPhaseStats() *phaseStats { return &phaseStats{errors: map[string]int64{}} }

func (p *phaseStats) add(local []time.Duration, errs map[string]int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.latencies = append(p.latencies, local...)
	for k, v := range errs {
		p.errors[k] += v
	}
}

func (p *phaseStats) errorCount() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var n int64
	for _, v := range p.errors {
		n += v
	}
	return n
}

func (p *phaseStats) errorSummary() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.errors) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(p.errors))
	for k := range p.errors {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, p.errors[k])
	}
	return strings.Join(parts, " ")
}

// percentile returns the nearest-rank q-quantile of sorted durations.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.999999) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond)) }

// progress prints the phase's count every second until stop is closed.
func progress(w io.Writer, name string, st *phaseStats, start time.Time, stop <-chan struct{}) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var last int64
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			n := st.done.Load()
			fmt.Fprintf(w, "[%5.1fs] %s: %d ok (%d/s in the last second), %d errors\n",
				time.Since(start).Seconds(), name, n, n-last, st.errorCount())
			last = n
		}
	}
}

func runBench(ctx context.Context, out, progressOut io.Writer, o benchOptions) error {
	c, err := newBenchClient(o.url)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	fmt.Fprintf(out, "waypost bench against %s: %d clients; message.send for %v (at most %d), then inbox.read of %d-item pages for %v, then inbox read+ack by %d consumers for %v\n",
		o.url, o.clients, o.duration, o.maxSends, o.readPage, o.readDuration, o.ackClients, o.ackDuration)
	admin := c.conn()
	setup, err := setupBench(ctx, admin, o)
	admin.close()
	if err != nil {
		return fmt.Errorf("bench: setting up a space: %w", err)
	}

	cpu0 := cputime.Self()
	sends, sendElapsed := benchSends(ctx, c, progressOut, o, setup)
	cpu := cputime.Self() - cpu0
	sorted := slices.Clone(sends.latencies)
	slices.Sort(sorted)
	fmt.Fprintf(out, "message.send: %d committed in %.2fs = %.1f sends/s; latency p50 %s p90 %s p99 %s max %s; errors: %s\n",
		sends.done.Load(), sendElapsed.Seconds(), float64(sends.done.Load())/sendElapsed.Seconds(),
		ms(percentile(sorted, 0.50)), ms(percentile(sorted, 0.90)), ms(percentile(sorted, 0.99)), ms(percentile(sorted, 1)),
		sends.errorSummary())
	// The load generator shares the machine with a server on loopback: its own CPU is what the server did
	// not get (docs/benchmarks.md).
	if n := sends.done.Load(); n > 0 && cpu > 0 {
		fmt.Fprintf(out, "load generator: %.1f µs of CPU a committed send (this process, user+system, send phase)\n",
			float64(cpu.Microseconds())/float64(n))
	}

	if o.readDuration > 0 && ctx.Err() == nil {
		reads, readElapsed := benchReads(ctx, c, progressOut, o, setup)
		sorted := slices.Clone(reads.latencies)
		slices.Sort(sorted)
		pages := reads.done.Load()
		perPage := 0.0
		if pages > 0 {
			perPage = float64(reads.items.Load()) / float64(pages)
		}
		fmt.Fprintf(out, "inbox.read(limit %d): %d pages (%.1f items/page) in %.2fs = %.1f pages/s (%.1f items/s); latency p50 %s p99 %s max %s; errors: %s\n",
			o.readPage, pages, perPage, readElapsed.Seconds(), float64(pages)/readElapsed.Seconds(),
			float64(reads.items.Load())/readElapsed.Seconds(),
			ms(percentile(sorted, 0.50)), ms(percentile(sorted, 0.99)), ms(percentile(sorted, 1)), reads.errorSummary())
	}

	if o.ackDuration > 0 && ctx.Err() == nil {
		acks, ackElapsed := benchAcks(ctx, c, progressOut, o, setup)
		sorted := slices.Clone(acks.latencies)
		slices.Sort(sorted)
		fmt.Fprintf(out, "inbox read+ack(limit %d): %d items acknowledged in %d pages in %.2fs = %.1f items/s; read+ack latency p50 %s p99 %s max %s; errors: %s\n",
			o.readPage, acks.items.Load(), acks.done.Load(), ackElapsed.Seconds(), float64(acks.items.Load())/ackElapsed.Seconds(),
			ms(percentile(sorted, 0.50)), ms(percentile(sorted, 0.99)), ms(percentile(sorted, 1)), acks.errorSummary())
		slices.Sort(acks.reads)
		slices.Sort(acks.acks)
		fmt.Fprintf(out, "read+ack round trips: inbox.read p50 %s p90 %s, inbox.ack p50 %s p90 %s (the rest of a cycle is the load generator's own work)\n",
			ms(percentile(acks.reads, 0.50)), ms(percentile(acks.reads, 0.90)), ms(percentile(acks.acks, 0.50)), ms(percentile(acks.acks, 0.90)))
	}
	return ctx.Err()
}

// runPhase runs one timed phase of d: clients goroutines, each on its own connection, run client until it
// returns, while the phase's count is printed every second. client records its successes in st.done (and
// st.items), and hands back its latencies and error counts, which runPhase adds to st. It returns st and
// the phase's length.
func runPhase(ctx context.Context, c *benchClient, progressOut io.Writer, name string, d time.Duration, clients int,
	client func(pctx context.Context, i int, bc *benchConn, st *phaseStats) ([]time.Duration, map[string]int64)) (*phaseStats, time.Duration) {
	st := newPhaseStats()
	pctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	start := time.Now()
	stop := make(chan struct{})
	go progress(progressOut, name, st, start, stop)
	var wg sync.WaitGroup
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bc := c.conn()
			defer bc.close()
			st.add(client(pctx, i, bc, st))
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(stop)
	return st, elapsed
}

func benchSends(ctx context.Context, c *benchClient, progressOut io.Writer, o benchOptions, setup benchSetup) (*phaseStats, time.Duration) {
	text, _ := json.Marshal(strings.Repeat("x", o.bodyBytes))
	var issued atomic.Int64
	return runPhase(ctx, c, progressOut, "message.send", o.duration, o.clients,
		func(pctx context.Context, i int, bc *benchConn, st *phaseStats) ([]time.Duration, map[string]int64) {
			var lat []time.Duration
			errs := map[string]int64{}
			prefix, buf := fmt.Sprintf(`{"request_id":"bench-%s-c%d-`, setup.run, i), []byte(nil)
			for k := 0; pctx.Err() == nil && issued.Add(1) <= o.maxSends; k++ {
				body := append(append(buf[:0], prefix...), strconv.Itoa(k)...)
				body = append(append(append(body, `","subject":"bench","body":{"text":`...), text...), "}}"...)
				buf = body
				t0 := time.Now()
				var res struct {
					SubmissionState string `json:"submission_state"`
				}
				err := bc.call(pctx, "POST", "/v0/messages", setup.senderTokens[i], body, &res)
				d := time.Since(t0)
				switch {
				case err != nil && pctx.Err() != nil:
					// cut off by the end of the phase: neither a success nor an error
				case err != nil:
					errs[errorCode(err)]++
				case res.SubmissionState != "committed":
					errs["state_"+res.SubmissionState]++
				default:
					lat = append(lat, d)
					st.done.Add(1)
				}
			}
			return lat, errs
		})
}

func benchReads(ctx context.Context, c *benchClient, progressOut io.Writer, o benchOptions, setup benchSetup) (*phaseStats, time.Duration) {
	return runPhase(ctx, c, progressOut, "inbox.read", o.readDuration, o.clients,
		func(pctx context.Context, _ int, bc *benchConn, st *phaseStats) ([]time.Duration, map[string]int64) {
			var lat []time.Duration
			errs := map[string]int64{}
			var cursor *string
			for n := int64(0); pctx.Err() == nil && n < benchMaxSends; n++ {
				var page struct {
					Items      []json.RawMessage `json:"items"`
					NextCursor string            `json:"next_cursor"`
					HasMore    bool              `json:"has_more"`
				}
				t0 := time.Now()
				err := bc.call(pctx, "POST", "/v0/inbox/read", setup.readerToken,
					map[string]any{"consumer_id": setup.readerConsumer, "cursor": cursor, "limit": o.readPage}, &page)
				d := time.Since(t0)
				switch {
				case err != nil && pctx.Err() != nil:
				case err != nil:
					errs[errorCode(err)]++
				default:
					lat = append(lat, d)
					st.done.Add(1)
					st.items.Add(int64(len(page.Items)))
					cursor = &page.NextCursor
					if !page.HasMore {
						cursor = nil // start over from the beginning of the feed
					}
				}
			}
			return lat, errs
		})
}

// benchAcks runs the read+ack phase: each client's consumer reads a page from its checkpoint and acknowledges
// every item of it (stage received) with the page's next_cursor as its checkpoint, until its inbox is
// drained or the phase ends. done counts acknowledged pages, items acknowledged items; a latency is one
// read+ack cycle.
func benchAcks(ctx context.Context, c *benchClient, progressOut io.Writer, o benchOptions, setup benchSetup) (*phaseStats, time.Duration) {
	return runPhase(ctx, c, progressOut, "inbox read+ack", o.ackDuration, len(setup.ackers),
		func(pctx context.Context, i int, bc *benchConn, st *phaseStats) ([]time.Duration, map[string]int64) {
			con := setup.ackers[i]
			var lat []time.Duration
			errs := map[string]int64{}
			var cursor *string
			var reads, acks []time.Duration
			defer func() {
				st.mu.Lock()
				st.reads, st.acks = append(st.reads, reads...), append(st.acks, acks...)
				st.mu.Unlock()
			}()
			for n := 0; pctx.Err() == nil && n < benchMaxSends; n++ {
				t0 := time.Now()
				var t1 time.Time
				var page struct {
					Items []struct {
						ItemID string `json:"item_id"`
					} `json:"items"`
					NextCursor string `json:"next_cursor"`
					HasMore    bool   `json:"has_more"`
				}
				err := bc.call(pctx, "POST", "/v0/inbox/read", con.token,
					map[string]any{"consumer_id": con.id, "cursor": cursor, "limit": o.readPage}, &page)
				if err == nil && len(page.Items) > 0 {
					t1 = time.Now()
					body := fmt.Appendf(nil, `{"request_id":"bench-%s-ack%d-%d","consumer_id":%q,"checkpoint_cursor":%q,"items":[`,
						setup.run, i, n, con.id, page.NextCursor)
					for k, it := range page.Items {
						if k > 0 {
							body = append(body, ',')
						}
						body = append(append(append(body, `{"item_id":`...), strconv.Quote(it.ItemID)...), `,"stage":"received"}`...)
					}
					t2 := time.Now()
					err = bc.call(pctx, "POST", "/v0/inbox/ack", con.token, append(body, "]}"...), nil)
					if err == nil {
						reads, acks = append(reads, t1.Sub(t0)), append(acks, time.Since(t2))
					}
				}
				d := time.Since(t0)
				switch {
				case err != nil && pctx.Err() != nil:
				case err != nil:
					errs[errorCode(err)]++
				case len(page.Items) == 0:
				default:
					lat = append(lat, d)
					st.done.Add(1)
					st.items.Add(int64(len(page.Items)))
					cursor = &page.NextCursor
				}
				if err == nil && !page.HasMore {
					break // the whole inbox is acknowledged
				}
			}
			return lat, errs
		})
}
