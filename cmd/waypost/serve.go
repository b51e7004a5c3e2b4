package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"runtime/trace"

	"github.com/spf13/cobra"

	"github.com/waypost/waypost/api/httpapi"
	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/server"
)

// serveGCPercent is the garbage collector's target of `waypost serve` when GOGC is not set.
const serveGCPercent = 400

// tuneRuntime sets the runtime's settings for `waypost serve` that its environment (getenv) leaves unset:
//   - GOGC: the heap is mostly short-lived request garbage; collecting at 5× the live heap instead of 2×
//     costs some 25 MB of memory and saves about a fifth of the CPU per send (docs/benchmarks.md).
//   - GOMAXPROCS: one P more than the runtime's default (the CPUs it may use). A thread blocked in a
//     system call keeps its P until the runtime's monitor takes it back, and the server's threads block
//     often and long: the journal's fdatasync of every group commit, pebble's table writes and syncs.
//     With as many Ps as CPUs, a CPU then idles while goroutines wait to run; with one more, at 32
//     clients on 2 CPUs, sends were 3–24 % faster with a lower p99, a lone client the same within the
//     spread (docs/decisions.md, "One P more than the CPUs").
func tuneRuntime(getenv func(string) string) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(serveGCPercent)
	}
	if getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + 1)
	}
}

func newServeCmd() *cobra.Command {
	var cfg server.Config
	var logLevel, cpuProfile, traceFile string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the embedded Waypost server (one process, data on local disk)",
		Long: `Run the embedded Waypost server: the HTTP data plane under /v0 and the control plane under
/admin/v0, with all data (database, message bodies, secrets) in one directory. The directory records
its format in a FORMAT file; a directory of another format is refused at start (there is no migration).
The garbage collector runs at GOGC=400 unless the GOGC environment variable says otherwise. The
scheduler runs one P more than the CPUs the process may use, so that a thread blocked in fdatasync does
not leave a CPU idle, unless the GOMAXPROCS environment variable says otherwise.

The admin secret is read from WAYPOST_ADMIN_SECRET; when it is unset, a secret is generated into
<data>/admin-secret (mode 0600) on first start and its path is printed. It must carry at least 32
random bytes (e.g. $(openssl rand -base64 32)); the server refuses to start with a weaker one. Stop with
Ctrl-C: in-flight requests finish before the process exits.

Hostile and careless clients are held off by bounds, each answered in the standard envelope (never a
hang), with a WARN log line carrying the figures at most every 10 s while it sheds load:
  --body-timeout     a JSON request body must arrive whole within it (default 10s: 6.4 KiB/s for the
                     largest, max_request_bytes); an upload body must bring --min-upload-rate bytes/s over
                     every such window. Too slow: 400 INVALID_REQUEST, connection closed. A request that
                     needs a credential is refused (401) from its headers, before any body byte is read.
  --max-connections  open client connections, idle and long polls included (default 16384, lowered to
                     fit the descriptor limit, raised to its hard limit at start; ulimit -n); above it a
                     connection gets 429 RATE_LIMITED with Retry-After at once and is closed.
  --max-inflight     requests in progress, feed.wait long polls excepted (default 4096); above it, 429
                     RATE_LIMITED with Retry-After.
  --max-waiters-per-space
                     concurrent feed.wait requests of one space (default 16384; describe publishes it as
                     limits.feed_wait_waiters_max). All of a space's waiters share one channel
                     subscription: one commit wakes each of them once.

Uploads prepared but never committed expire after upload_ttl_seconds: every --sweep-interval the server
marks them expired and deletes their bytes (the AWS deployment's sweeper function does the same), and it
removes temporary blob files orphaned by a crash, at start and on the same schedule.

--metrics-addr serves GET /metrics in the Prometheus text format on a second address: request latency
histograms per operation and outcome (waypost_request_duration_seconds), store commit latency and size
(waypost_store_commit_duration_seconds, waypost_store_commit_ops), and the Go runtime. It needs no
credential, so bind it where only your scraper reaches it (default: off).

'waypost backup DIR' asks the running server for a consistent online copy of its data; starting 'waypost
serve --data DIR' on such a copy first verifies every reference against its blob files and refuses to
serve a restore with unreadable resources (--allow-unreadable serves it anyway, naming them in the log).

A space deleted with 'waypost admin space delete' stops answering at once; its records and bytes are
then removed in the background in bounded batches (--deletion-pause between two), resumed after a
restart where it stopped.

Webhook subscriptions (capability webhook_events) are on: an in-process worker signs and delivers an
event for each committed feed item to every subscription that may see it, retrying a failed attempt at
1 s, 5 s, 30 s and 5 min. Targets must be HTTPS on a public address; private, loopback and link-local
addresses are refused when the connection is made (see docs/webhooks.md).

--allow-loopback-webhooks also admits loopback targets (127.0.0.1, ::1, any port) and plain http://, so
that a receiver on your own machine can be tested. It is for local development only: NEVER use it where
untrusted users can register webhook targets, because they could then make the server send requests to
services on its own host. The server warns loudly at start when it is set.

OAuth (capability oauth) is on: MCP hosts that connect only through OAuth (claude.ai and ChatGPT
connectors, agent platforms) discover the server from /mcp's 401 (RFC 9728 metadata), register
themselves (RFC 7591), and send you to /authorize, where you sign in with the admin secret once per
browser session and choose the space, the actor, the consumer and the scopes the host gets. The host
then holds ordinary tokens, listed by 'waypost admin token list' and revoked like any other ('waypost
admin oauth revoke CLIENT_ID' revokes every token of a host). --public-url sets the public base URL
(the OAuth issuer) when the server is reached through a proxy or under another name than its Host
header says; --no-oauth turns OAuth off (see docs/oauth.md).`,
		Example: `  waypost serve
  waypost serve --addr 127.0.0.1:9000 --data /var/lib/waypost
  waypost serve --allow-loopback-webhooks    # local development: deliver webhooks to http://127.0.0.1:…`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var level slog.Level
			if err := level.UnmarshalText([]byte(logLevel)); err != nil {
				return fmt.Errorf("--log-level: %w", err)
			}
			cfg.Logger = slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
			cfg.AdminSecret = os.Getenv("WAYPOST_ADMIN_SECRET")
			cfg.Version = version
			if cfg.Webhooks.AllowLoopback {
				fmt.Fprintln(cmd.ErrOrStderr(), "WARNING: --allow-loopback-webhooks is set: webhook targets on loopback "+
					"addresses and plain http:// are allowed. This is for local development only and must never be "+
					"used where untrusted users register webhook targets.")
			}
			tuneRuntime(os.Getenv)
			for _, rec := range []struct {
				flag, path    string
				start         func(io.Writer) error
				stopRecording func()
			}{
				{"--cpuprofile", cpuProfile, pprof.StartCPUProfile, pprof.StopCPUProfile},
				{"--trace", traceFile, trace.Start, trace.Stop},
			} {
				if rec.path == "" {
					continue
				}
				stop, err := startRecording(rec.flag, rec.path, rec.start, rec.stopRecording)
				if err != nil {
					return err
				}
				defer stop()
			}
			srv, err := server.Open(cfg)
			if err != nil {
				return err
			}
			defer srv.Close()
			if err := srv.Listen(); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "waypost %s listening on http://%s (data in %s)\n", version, srv.Addr(), absPath(cfg.DataDir))
			if m := srv.MetricsAddr(); m != "" {
				fmt.Fprintf(out, "metrics: http://%s/metrics\n", m)
			}
			if !cfg.NoOAuth {
				base := cfg.PublicURL
				if base == "" {
					base = "http://" + srv.Addr()
				}
				fmt.Fprintf(out, "MCP: %s/mcp (bearer tokens, or OAuth: approve hosts at %s/authorize)\n", base, base)
			}
			if srv.AdminSecretPath != "" {
				// An absolute path, so that the hint works from any directory (another terminal, a script).
				secret := absPath(srv.AdminSecretPath)
				fmt.Fprintf(out, "admin secret: %s (export WAYPOST_ADMIN_SECRET=$(cat %s))\n", secret, secret)
			} else {
				fmt.Fprintln(out, "admin secret: from WAYPOST_ADMIN_SECRET")
			}
			return srv.Serve(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Addr, "addr", "127.0.0.1:8787", "listen address")
	f.StringVar(&cfg.DataDir, "data", "./waypost-data", "data directory (created on first start)")
	f.BoolVar(&cfg.NoSync, "unsafe-no-fsync", false, "do not fsync commits (benchmarks only: a crash can lose acknowledged writes)")
	f.StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn, error")
	f.DurationVar(&cfg.BodyTimeout, "body-timeout", httpapi.DefaultBodyTimeout,
		"time a JSON request body may take to arrive, and the window of the upload rate (at least 1s)")
	f.Int64Var(&cfg.MinUploadRate, "min-upload-rate", httpapi.DefaultMinUploadRate,
		"least rate of an upload body in bytes/s, over every --body-timeout window")
	f.IntVar(&cfg.MaxConnections, "max-connections", server.DefaultMaxConnections,
		"open client connections (lowered to fit the descriptor limit); more get 429 at once")
	f.IntVar(&cfg.MaxInflight, "max-inflight", server.DefaultMaxInflight,
		"requests in progress, feed.wait long polls excepted; more get 429 at once")
	f.IntVar(&cfg.MaxWaitersPerSpace, "max-waiters-per-space", domain.DefaultFeedWaitWaitersMax,
		"concurrent feed.wait requests one space may hold (published as limits.feed_wait_waiters_max); more get 429")
	f.DurationVar(&cfg.SweepInterval, "sweep-interval", server.DefaultSweepInterval,
		"how often unsealed uploads past their expiry are expired (bytes deleted) and orphaned temporary blob files removed")
	f.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file (read it with go tool pprof)")
	f.StringVar(&traceFile, "trace", "", "write a Go execution trace of the whole run to this file (read it with go tool trace; "+
		"-pprof=sched or -pprof=syscall for where goroutines waited); costs some CPU while on")
	f.StringVar(&cfg.MetricsAddr, "metrics-addr", "",
		"also listen here for GET /metrics (Prometheus text format, no authentication: use loopback or a private address)")
	f.BoolVar(&cfg.AllowUnreadable, "allow-unreadable", false,
		"serve a restored backup although its verification found unreadable resources (they fail to read)")
	f.DurationVar(&cfg.DeletionPause, "deletion-pause", 0,
		"pause between two batches of a space deletion, to leave the disk to live traffic (0: back to back)")
	f.StringVar(&cfg.PublicURL, "public-url", "",
		"public base URL of the server (https://host[:port]), the OAuth issuer; default: each request's own scheme and Host")
	f.BoolVar(&cfg.NoOAuth, "no-oauth", false, "turn the OAuth authorization server off (describe publishes oauth: false)")
	f.BoolVar(&cfg.NetHTTPOnly, "net-http-only", false,
		"serve every request through Go's net/http (by default POSTs of message.send, inbox.read and inbox.ack are answered "+
			"on the server's own HTTP/1.1 loop, at about half the CPU, and every other connection goes to net/http)")
	f.BoolVar(&cfg.Webhooks.AllowLoopback, "allow-loopback-webhooks", false,
		"DEVELOPMENT ONLY: also deliver webhooks to loopback addresses and plain http:// (never where untrusted users register targets)")
	return cmd
}

// absPath returns p as an absolute path (p itself if the working directory cannot be read).
func absPath(p string) string {
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return p
}

// startRecording starts a recording of the process (a CPU profile, an execution trace) into path with
// start, and returns the function that ends it with stop and closes the file; flag names the option in
// errors.
func startRecording(flag, path string, start func(io.Writer) error, stop func()) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	if err := start(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	return func() {
		stop()
		_ = f.Close()
	}, nil
}
