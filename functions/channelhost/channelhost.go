// Package channelhost is the always-on channel container of the AWS deployment (command waypost-channel in
// cmd/waypost-channel, image deploy/channel/Dockerfile). One process serves, on one port
// (WAYPOST_CHANNEL_ADDR or --addr, default :8788):
//
//	GET  /v0/feed/wait?consumer_id=&cursor=&timeout_ms=&limit=   feed.wait (capability live_feed), public
//	POST /internal/v0/spaces/{space_id}/channels/{name}/publish  announcements from the Lambda functions
//	POST /internal/v0/spaces/{space_id}/channels/{name}/close    (channel/chanservice; Bearer
//	GET  /internal/v0/spaces/{space_id}/channels/{name}/count     WAYPOST_CHANNEL_SECRET)
//	GET  /healthz                                                liveness, no authentication
//
// It holds the channel hubs, one per space, and a domain service built like the Lambda functions' (the
// same DynamoDB table and S3 bucket, the same cursor key, secrets by ARN from Secrets Manager) whose
// FeedWatcher and Notifier are those hubs. The Lambda functions announce every commit to the internal API
// (WAYPOST_CHANNEL_URL), which wakes the feed.wait long polls pending here; feed.wait answers through the
// shared HTTP API (api/httpapi), with the AWS limits (feed_wait_max_ms 25000). Announcements are best
// effort (a function spends at most 50 ms on them and stops for a back-off while this service is slow or
// down), so waits also re-read the durable feed every livefeed.DefaultFallbackInterval (2 s). Every other
// path is NOT_FOUND: the data plane is the Lambda functions' business.
//
// Hubs live in memory, so the deployment runs exactly one task: a second task would miss the
// announcements sent to the first (its waiters would still answer within the fallback interval, never lose
// items).
// On SIGTERM the server stops accepting connections and every pending feed.wait answers at once: with
// what it has (an empty page and its cursor), or 503 STORAGE_UNAVAILABLE with Retry-After when shutdown
// cut its store read short; either way clients poll again and reach the next task.
package channelhost

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"

	"github.com/waypost/waypost/api/httpapi"
	"github.com/waypost/waypost/channel"
	"github.com/waypost/waypost/channel/chanservice"
	"github.com/waypost/waypost/channel/livefeed"
	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/functions/config"
	"github.com/waypost/waypost/functions/internal/app"
	"github.com/waypost/waypost/functions/internal/secrets"
	"github.com/waypost/waypost/internal/httpx"
)

// Host is the channel container's service: hubs, internal API, feed.wait and health on one handler.
type Host struct {
	channels *chanservice.Service
	svc      *domain.Service
	api      *httpapi.API
	ids      port.IDSource
	mux      *http.ServeMux
	log      *slog.Logger
}

// New builds the host from the channel container's configuration (config.LoadFor(config.Channel, …)),
// resolving the secrets it names by ARN through Secrets Manager. It connects to nothing yet.
func New(ctx context.Context, cfg config.Config, logger *slog.Logger) (*Host, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	// The task's credentials come from the ECS container endpoint: the SDK's full default chain.
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: loading AWS configuration: %w", config.Channel, err)
	}
	env, err := app.Resolve(ctx, config.Channel, cfg, awsCfg, secrets.Manager)
	if err != nil {
		return nil, err
	}
	channels, err := chanservice.New(env.Config.ChannelSecret, channel.Limits{}, logger)
	if err != nil {
		return nil, fmt.Errorf("channel: %w", err)
	}
	live := livefeed.New(channels, logger)
	// Announcements from the functions are best effort (their circuit breaker drops them while this
	// service is slow or down): waits re-read the durable feed at least every fallback interval.
	svc, ids, err := env.Service(logger, app.ServiceOptions{Notifier: live, Watcher: livefeed.Fallback{Watcher: live}})
	if err != nil {
		return nil, err
	}
	api, err := httpapi.New(svc, httpapi.Options{Logger: logger, IDs: ids})
	if err != nil {
		return nil, fmt.Errorf("channel: %w", err)
	}
	h := &Host{channels: channels, svc: svc, api: api, ids: ids, log: logger, mux: http.NewServeMux()}
	h.mux.HandleFunc("/v0/feed/wait", h.feedWait)
	h.mux.Handle("/internal/", channels)
	h.mux.Handle("/healthz", channels)
	h.mux.HandleFunc("/", h.notFound)
	return h, nil
}

// ServeHTTP serves feed.wait, the internal API and /healthz.
func (h *Host) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// Service returns the domain service (its FeedWatcher is the host's hubs).
func (h *Host) Service() *domain.Service { return h.svc }

// feedWait serves feed.wait through the shared API. A wait whose context ended before it could answer
// (shutdown cut a store read short) gets 503 STORAGE_UNAVAILABLE with Retry-After instead of an empty
// response, so the client polls again; when the client itself went away, nobody reads it.
func (h *Host) feedWait(w http.ResponseWriter, r *http.Request) {
	tw := httpx.NewRecorder(w)
	h.api.ServeHTTP(tw, r)
	if tw.Wrote {
		return
	}
	de := domain.Errorf(domain.CodeStorageUnavailable, "the channel service is stopping; wait again")
	h.log.LogAttrs(r.Context(), slog.LevelInfo, "feed.wait cut short", slog.String("code", string(de.Code)))
	w.Header().Set("Retry-After", "1")
	h.writeError(w, de)
}

// notFound answers every other path with the RFC §5.2 envelope of NOT_FOUND.
func (h *Host) notFound(w http.ResponseWriter, r *http.Request) {
	h.writeError(w, domain.Errorf(domain.CodeNotFound, "no such route: %s %s (the channel service serves GET /v0/feed/wait)", r.Method, r.URL.Path))
}

// writeError writes the RFC §5.2 error envelope of de with a new tracking request ID.
func (h *Host) writeError(w http.ResponseWriter, de *domain.Error) {
	wire := de.Wire()
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(de.Code.HTTPStatus())
	_ = writeJSON(w, httpapi.Envelope{OK: false, RequestID: h.ids.NewID("rq"), Error: &wire})
}

// Timeouts of the HTTP server. No write timeout: feed.wait holds a response up to feed_wait_max_ms. Idle
// connections outlive the load balancer's (60 s by default), so it never reuses one the server closed.
const (
	readHeaderTimeout = 10 * time.Second
	idleTimeout       = 120 * time.Second
	// ShutdownTimeout bounds the graceful shutdown after the pending long polls were told to answer.
	ShutdownTimeout = 10 * time.Second
)

// Serve serves HTTP on ln until ctx ends, then shuts down: it stops accepting connections, makes every
// pending feed.wait answer with what it has, and waits up to ShutdownTimeout for the responses.
func (h *Host) Serve(ctx context.Context, ln net.Listener) error {
	base, endRequests := context.WithCancel(context.WithoutCancel(ctx))
	defer endRequests()
	hs := &http.Server{Handler: h, ReadHeaderTimeout: readHeaderTimeout, IdleTimeout: idleTimeout,
		BaseContext: func(net.Listener) context.Context { return base },
		ErrorLog:    slog.NewLogLogger(h.log.Handler(), slog.LevelWarn)}
	hs.RegisterOnShutdown(endRequests) // after the listeners closed: no new request starts cancelled
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("channel: serving: %w", err)
	case <-ctx.Done():
	}
	h.log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		return fmt.Errorf("channel: shutdown: %w", err)
	}
	return nil
}

// usage is the --help text; the variables are listed from functions/config.
func usage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprint(w, `Usage: waypost-channel [--addr ADDR]

The Waypost channel container of the AWS deployment: the channel hubs (one per space), their internal API
through which the Lambda functions announce commits, and feed.wait over the deployment's DynamoDB table,
woken by those announcements, all on one port:

  GET  /v0/feed/wait?consumer_id=&cursor=&timeout_ms=&limit=   (Bearer <Waypost token>)
  POST /internal/v0/spaces/{space_id}/channels/{name}/publish  (Bearer $WAYPOST_CHANNEL_SECRET)
  POST /internal/v0/spaces/{space_id}/channels/{name}/close
  GET  /internal/v0/spaces/{space_id}/channels/{name}/count
  GET  /healthz

Run exactly one task: hubs live in memory. Logs are JSON lines on stdout. SIGTERM or SIGINT stops it
gracefully (pending long polls answer at once).

Flags:
`)
	fs.SetOutput(w)
	fs.PrintDefaults()
	fmt.Fprintln(w, "\nEnvironment (functions/config; secrets as values or as Secrets Manager ARNs):")
	names, _ := config.VarsFor(config.Channel)
	for _, v := range config.Vars() {
		for _, n := range names {
			if n == v.Name {
				req := ""
				if v.Required {
					req = " (required)"
				}
				fmt.Fprintf(w, "  %s%s\n      %s\n", v.Name, req, v.Doc)
			}
		}
	}
	fmt.Fprint(w, `
Example (emulators):
  WAYPOST_TABLE=waypost WAYPOST_BUCKET=waypost-blobs WAYPOST_CURSOR_KEY=$(head -c 32 /dev/urandom | base64) \
  WAYPOST_CHANNEL_SECRET=$(head -c 32 /dev/urandom | base64) WAYPOST_DYNAMODB_ENDPOINT=http://127.0.0.1:8000 \
  waypost-channel --addr 127.0.0.1:8788
`)
}

// Run is the waypost-channel command: it reads the channel container's variables through lookup (and no
// other), parses args (--addr overrides WAYPOST_CHANNEL_ADDR), logs JSON lines to stdout, and serves until
// ctx ends. --help prints the usage to stdout and returns flag.ErrHelp.
func Run(ctx context.Context, args []string, lookup func(string) (string, bool), stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("waypost-channel", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	addr := fs.String("addr", "", "listen address (default $"+config.EnvChannelAddr+", else "+config.DefaultChannelAddr+")")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage(stdout, fs)
			return err
		}
		usage(stderr, fs)
		return &UsageError{Err: err}
	}
	if fs.NArg() > 0 {
		usage(stderr, fs)
		return &UsageError{Err: fmt.Errorf("unexpected arguments %q", fs.Args())}
	}
	cfg, err := config.LoadFor(config.Channel, lookup)
	level := slog.LevelInfo
	if err == nil {
		level = cfg.LogLevel
	}
	logger := app.NewLogger(stdout, level, config.Channel)
	if err != nil {
		logger.Error("configuration", "error", err.Error())
		return err
	}
	if *addr != "" {
		cfg.ChannelAddr = *addr
	}
	h, err := New(ctx, cfg, logger)
	if err != nil {
		logger.Error("start-up", "error", err.Error())
		return err
	}
	ln, err := net.Listen("tcp", cfg.ChannelAddr)
	if err != nil {
		logger.Error("start-up", "error", err.Error())
		return fmt.Errorf("waypost-channel: listening on %s: %w", cfg.ChannelAddr, err)
	}
	logger.Info("ready", "addr", ln.Addr().String(), "table", cfg.Table, "bucket", cfg.Bucket, "version", cfg.Version)
	return h.Serve(ctx, ln)
}

// Main runs the waypost-channel command in a process: Run over os.Args and the environment until SIGTERM
// or SIGINT. It exits 0 after a graceful stop or --help, 2 on a usage error, 1 on any other error.
func Main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := Run(ctx, os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr)
	stop()
	var usageErr *UsageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case errors.As(err, &usageErr):
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "waypost-channel:", err)
		os.Exit(1)
	}
}

// UsageError reports wrong flags or arguments (exit status 2).
type UsageError struct{ Err error }

// Error describes the usage error.
func (e *UsageError) Error() string { return "waypost-channel: " + e.Err.Error() }

// Unwrap returns the flag package's error.
func (e *UsageError) Unwrap() error { return e.Err }

// writeJSON writes v as one JSON line, without HTML escaping.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("channel: writing response: %w", err)
	}
	return nil
}
