// Package server assembles the embedded Waypost deployment: the item store (store/pebble) and file blob store
// in one data directory (its layout is DataFormat), the domain service, the HTTP API, and the secrets it
// needs. `waypost serve` and the end-to-end tests both use it.
package server

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/waypost/waypost/api/adminauth"
	"github.com/waypost/waypost/api/httpapi"
	"github.com/waypost/waypost/api/mcpapi"
	"github.com/waypost/waypost/api/oauth"
	"github.com/waypost/waypost/api/openapi"
	"github.com/waypost/waypost/api/ops"
	"github.com/waypost/waypost/api/transport"
	"github.com/waypost/waypost/channel"
	"github.com/waypost/waypost/channel/chanservice"
	"github.com/waypost/waypost/channel/livefeed"
	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/internal/httpfront"
	"github.com/waypost/waypost/internal/metrics"
	"github.com/waypost/waypost/internal/metrics/prom"
	"github.com/waypost/waypost/internal/platform"
	"github.com/waypost/waypost/internal/shedlog"
	"github.com/waypost/waypost/store/fsblob"
	"github.com/waypost/waypost/store/pebble"
	"github.com/waypost/waypost/web"
	"github.com/waypost/waypost/webhook/dial"
	"github.com/waypost/waypost/webhook/sender"
)

// Config configures an embedded server.
type Config struct {
	// Addr is the listen address (default 127.0.0.1:8787).
	Addr string
	// DataDir holds the database, blobs and generated secrets (default ./waypost-data).
	DataDir string
	// AdminSecret overrides the generated admin secret (WAYPOST_ADMIN_SECRET).
	AdminSecret string
	// NoSync turns fsync off (tests and benchmarks that say so only).
	NoSync bool
	// NoSyncBlobs turns the blob store's fsync off too (tests that do not check durability only; NoSync
	// alone leaves blob uploads flushed, as `serve --unsafe-no-fsync` does).
	NoSyncBlobs bool
	// Logger receives structured logs.
	Logger *slog.Logger
	// Version is published by describe.
	Version string
	// Webhooks configures webhook subscriptions and the in-process delivery worker (on by default,
	// public HTTPS targets only).
	Webhooks WebhookConfig
	// SweepInterval is how often Serve expires unsealed uploads past their time and removes orphaned
	// temporary blob files; 0 means DefaultSweepInterval.
	SweepInterval time.Duration
	// Clock overrides the wall clock of the domain service (tests); nil means the system clock.
	Clock port.Clock

	// BodyTimeout bounds reading a JSON request body, and is the window of the upload rate; 0 means
	// httpapi.DefaultBodyTimeout (10 s).
	BodyTimeout time.Duration
	// MinUploadRate is the least rate of an upload body in bytes/s, over every BodyTimeout window; 0 means
	// httpapi.DefaultMinUploadRate (4 KiB/s).
	MinUploadRate int64
	// MaxConnections bounds the open client connections; 0 means DefaultMaxConnections. It is lowered to
	// fit the descriptor limit (ConnectionBudget); connections above it get 429 at once.
	MaxConnections int
	// MaxInflight bounds the requests in progress, feed.wait long polls excepted; 0 means
	// DefaultMaxInflight. Requests above it get 429 at once.
	MaxInflight int
	// MaxWaitersPerSpace bounds the concurrent feed.wait requests of one space (describe publishes it as
	// limits.feed_wait_waiters_max); 0 means domain.DefaultFeedWaitWaitersMax.
	MaxWaitersPerSpace int
	// MetricsAddr, when set, is a second listen address that serves GET /metrics in the Prometheus text
	// format, without authentication: bind it to loopback or a private network, where only the scraper
	// reaches it (the admin secret is not needed, and should not be handed to a scraper).
	MetricsAddr string
	// AllowUnreadable serves a restored backup even when its verification found unreadable resources
	// (they fail to read; every start logs them again). Without it such a restore refuses to start.
	AllowUnreadable bool
	// DeletionPause is waited between two batches of a space deletion, to leave the disk to live
	// traffic; 0 runs the batches back to back.
	DeletionPause time.Duration
	// PublicURL is the server's public base URL (scheme://host[:port]): the OAuth issuer and the base of
	// its endpoints and resource URIs. Empty means each request's own scheme and Host, right when clients
	// reach the server directly by one name; set it behind a proxy.
	PublicURL string
	// NoOAuth turns the OAuth authorization server off (describe then publishes oauth: false, and a host
	// that can only use OAuth cannot connect).
	NoOAuth bool
	// ItemFS is the file system of the item store (nil: the operating system's). Tests pass a
	// fault-injecting one (internal/volumefs: a volume that fills up).
	ItemFS vfs.FS
	// RecoverEvery is how often the item store, while it refuses writes for want of room, checks whether
	// it can take them again; 0 means pebble.DefaultRecoverEvery.
	RecoverEvery time.Duration
	// NetHTTPOnly serves every request through net/http. Otherwise the POSTs of message.send, inbox.read
	// and inbox.ack are served on a connection loop of the server's own (internal/httpfront), which spends
	// about half of net/http's CPU on a request, and every other connection is handed to net/http.
	NetHTTPOnly bool
}

// fastPaths are the paths of message.send, inbox.read and inbox.ack in the operation catalog (POST routes):
// the requests the server answers on its own connection loop (Config.NetHTTPOnly).
func fastPaths() []string {
	var paths []string
	for _, op := range ops.List() {
		switch op.Name {
		case domain.OpMessageSend, "inbox.read", domain.OpInboxAck:
			if op.Method == http.MethodPost {
				paths = append(paths, op.Path)
			}
		}
	}
	return paths
}

// DefaultMaxInflight bounds the requests in progress (feed.wait long polls excepted) unless
// Config.MaxInflight says otherwise.
const DefaultMaxInflight = 4096

// InlineBodyMax is the largest message body the embedded deployment commits inside the publish
// transaction (one durable commit per send); larger bodies are written to the blob store first.
const InlineBodyMax = 16 << 10

// Server is a running embedded deployment.
type Server struct {
	cfg             Config
	store           *pebble.Store
	blobs           *fsblob.Store
	svc             *domain.Service
	api             *httpapi.API
	http            *http.Server
	listener        net.Listener
	conns           *connLimiter
	maxConns        int // the connection bound in force
	sender          *sender.Sender
	worker          *webhookWorker
	deletions       *deletionWorker
	ids             port.IDSource
	metrics         *prom.Recorder // nil without Config.MetricsAddr
	metricsLn       net.Listener
	AdminSecretPath string // where the generated admin secret lives ("" when it came from the environment)
}

// Open opens (creating on first start) the data directory and builds the service, without listening.
func Open(cfg Config) (_ *Server, err error) {
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:8787"
	}
	if cfg.DataDir == "" {
		cfg.DataDir = "waypost-data"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxConnections < 0 || cfg.MaxInflight < 0 || cfg.MinUploadRate < 0 || cfg.BodyTimeout < 0 || cfg.MaxWaitersPerSpace < 0 {
		return nil, errors.New("server: negative connection, request or body limit")
	}
	if cfg.MaxConnections == 0 {
		cfg.MaxConnections = DefaultMaxConnections
	}
	if cfg.MaxInflight == 0 {
		cfg.MaxInflight = DefaultMaxInflight
	}
	if cfg.MaxWaitersPerSpace == 0 {
		cfg.MaxWaitersPerSpace = domain.DefaultFeedWaitWaitersMax
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("server: creating data dir: %w", err)
	}
	if err := checkDataFormat(cfg.DataDir); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, deletions: newDeletionWorker()}
	admin := cfg.AdminSecret
	if admin == "" {
		var err error
		s.AdminSecretPath = filepath.Join(cfg.DataDir, "admin-secret")
		if admin, err = loadOrCreateSecret(s.AdminSecretPath, "wpa_"); err != nil {
			return nil, err
		}
		if err := adminauth.Check(admin); err != nil {
			return nil, fmt.Errorf("server: the admin secret in %s is refused: %w (or delete the file and a new one is generated at start)", s.AdminSecretPath, err)
		}
	} else if err := adminauth.Check(admin); err != nil {
		return nil, fmt.Errorf("server: WAYPOST_ADMIN_SECRET is refused: %w (or unset it and a secret is generated into %s at start)",
			err, filepath.Join(cfg.DataDir, "admin-secret"))
	}
	cursorKey, err := loadOrCreateSecret(filepath.Join(cfg.DataDir, "cursor-key"), "")
	if err != nil {
		return nil, err
	}
	var rec metrics.Recorder = metrics.Nop{}
	if cfg.MetricsAddr != "" {
		s.metrics = prom.New()
		rec = s.metrics
	}
	st, err := openItems(cfg.DataDir, cfg, rec)
	if err != nil {
		return nil, fmt.Errorf("server: opening store: %w", err)
	}
	defer func() {
		if err != nil {
			st.Close()
		}
	}()
	items := metrics.Store(st, rec)
	if s.metrics != nil {
		if err := registerStorageGauges(s.metrics.Registry(), st); err != nil {
			return nil, fmt.Errorf("server: %w", err)
		}
	}
	blobs, err := fsblob.NewWithOptions(filepath.Join(cfg.DataDir, "blobs"), fsblob.Options{NoSync: cfg.NoSyncBlobs})
	if err != nil {
		return nil, fmt.Errorf("server: opening blob store: %w", err)
	}
	// The store's file lock makes this process the only user of the data directory: every temporary
	// blob file left now belongs to a put a crash (kill -9) interrupted.
	if n, err := blobs.RemoveTemporaries(context.Background(), 0); err != nil {
		return nil, fmt.Errorf("server: %w", err)
	} else if n > 0 {
		cfg.Logger.Info("removed temporary blob files left by an interrupted upload", "count", n)
	}
	s.blobs = blobs
	clock := cfg.Clock
	if clock == nil {
		clock = platform.Clock{}
	}
	ids := platform.IDs{}
	// The channel service runs in-process: one hub per space carries feed announcements to feed.wait.
	internalSecret, err := loadOrCreateSecret(filepath.Join(cfg.DataDir, "channel-secret"), "wpc_")
	if err != nil {
		return nil, err
	}
	channels, err := chanservice.New(internalSecret, channel.Limits{}, cfg.Logger)
	if err != nil {
		return nil, fmt.Errorf("server: channel service: %w", err)
	}
	// feed.wait waiters are multiplexed: one channel subscription per space, fanned out to every waiter.
	live := livefeed.NewWithOptions(channels, cfg.Logger, livefeed.Options{MaxWaitersPerSpace: cfg.MaxWaitersPerSpace})
	limits := domain.DefaultLimits()
	limits.FeedWaitWaitersMax = live.MaxWaitersPerSpace()
	dcfg := domain.Config{Store: items, Blobs: blobs, Clock: clock, IDs: ids,
		Notifier: live, Watcher: live,
		Logger: cfg.Logger, CursorKey: []byte(cursorKey), AppVersion: cfg.Version, InlineBodyMax: InlineBodyMax, Limits: &limits,
		DeletionStarted: s.deletions.wake, ReadAhead: true, Storage: func() domain.StorageStatus { return storageStatus(st.Room()) }}
	if !cfg.Webhooks.Disabled {
		// Webhooks: the sender enforces the address rules when it dials; the worker wakes on every
		// announced commit (the notifier) and on every delivery that becomes due (the delivery queue).
		snd, err := sender.New(sender.Options{Dial: dial.Options{AllowHTTP: cfg.Webhooks.AllowLoopback,
			AllowLoopback: cfg.Webhooks.AllowLoopback}})
		if err != nil {
			return nil, fmt.Errorf("server: webhook sender: %w", err)
		}
		s.sender, s.worker = snd, newWebhookWorker(cfg.Logger, cfg.Webhooks)
		dcfg.Webhooks, dcfg.DeliveryQueue = snd, s.worker
		dcfg.Notifier = pokingNotifier{next: live, w: s.worker}
		if cfg.Webhooks.AllowLoopback {
			cfg.Logger.Warn("webhooks: loopback and plain-http targets are allowed (--allow-loopback-webhooks); " +
				"never use this where untrusted users register webhook targets")
		}
	}
	var challenge func(*http.Request) string
	var oauthSecret string
	if !cfg.NoOAuth {
		dcfg.Capabilities.OAuth = true
		challenge = oauth.Challenge(cfg.PublicURL)
		if oauthSecret, err = loadOrCreateSecret(filepath.Join(cfg.DataDir, "oauth-secret"), ""); err != nil {
			return nil, err
		}
	}
	// The channel service's internal API is not mounted: the hubs live in this process and the committers
	// reach them directly, so nothing on the public listener may publish to them.
	stack, err := transport.New(dcfg, transport.Options{Ops: ops.List(), MCP: mcpapi.Over, AdminSecret: admin, Logger: cfg.Logger, Version: cfg.Version,
		Metrics: rec, Challenge: challenge,
		HTTP: httpapi.Over(httpapi.Options{BodyTimeout: cfg.BodyTimeout, MinUploadRate: cfg.MinUploadRate, MaxInflight: cfg.MaxInflight,
			OpenAPI: openAPIOptions(cfg)})})
	if err != nil {
		return nil, err
	}
	svc, api := stack.Svc, stack.Handler.(*httpapi.API)
	backupAdmin, err := adminauth.NewVerifier(admin)
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	s.ids = ids
	api.Mount("POST /admin/v0/backup", s.backupHandler(backupAdmin, api.Schemas()))
	if !cfg.NoOAuth {
		as, err := oauth.New(oauth.Options{Svc: svc, AdminSecret: admin, Secret: []byte(oauthSecret), Issuer: cfg.PublicURL, Logger: cfg.Logger})
		if err != nil {
			return nil, fmt.Errorf("server: %w", err)
		}
		for _, rt := range as.Routes() {
			api.Mount(rt.Pattern, rt.Handler)
		}
	}
	// The web app (issue 29): the person's inbox and the owner's console, static files over the public API.
	ui := web.Handler()
	for _, pattern := range []string{"GET " + web.Prefix, "GET /ui", "GET /favicon.ico"} {
		api.Mount(pattern, ui)
	}
	s.store, s.svc, s.api = st, svc, api
	if err := s.verifyRestore(context.Background()); err != nil {
		return nil, err
	}
	if s.worker != nil {
		s.worker.start(svc)
	}
	return s, nil
}

// openAPIOptions describes the OAuth scheme in the served OpenAPI document where OAuth is served: its
// endpoints under the public URL, or relative to the document's origin when there is none.
func openAPIOptions(cfg Config) openapi.Options {
	if cfg.NoOAuth {
		return openapi.Options{}
	}
	base := strings.TrimSuffix(cfg.PublicURL, "/")
	return openapi.Options{OAuth: &openapi.OAuth{AuthorizationURL: base + "/authorize", TokenURL: base + "/token"}}
}

// loadOrCreateSecret reads a secret file, or creates it with 32 random bytes (mode 0600).
func loadOrCreateSecret(path, prefix string) (string, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		return strings.TrimSpace(string(b)), nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("server: reading %s: %w", path, err)
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", fmt.Errorf("server: generating secret: %w", err)
	}
	secret := prefix + base64.RawURLEncoding.EncodeToString(raw)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("server: creating %s: %w", path, err)
	}
	if _, err := f.WriteString(secret + "\n"); err != nil {
		f.Close()
		return "", fmt.Errorf("server: writing %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return "", fmt.Errorf("server: syncing %s: %w", path, err)
	}
	return secret, f.Close()
}

// Service returns the domain service.
func (s *Server) Service() *domain.Service { return s.svc }

// Handler returns the HTTP handler.
func (s *Server) Handler() http.Handler { return s.api }

// Listen binds the configured address, under the connection bound: Config.MaxConnections lowered to
// fit the process's descriptor limit, which Listen first raises to its hard limit where allowed.
func (s *Server) Listen() error {
	nofile := raiseNoFile()
	s.maxConns = ConnectionBudget(s.cfg.MaxConnections, nofile)
	if s.maxConns < s.cfg.MaxConnections {
		s.cfg.Logger.Warn("the descriptor limit lowers the connection bound", "max_connections", s.maxConns,
			"wanted", s.cfg.MaxConnections, "nofile", nofile, "hint", "raise it with ulimit -n or LimitNOFILE=")
	}
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("server: listening on %s: %w", s.cfg.Addr, err)
	}
	if err := s.listenMetrics(); err != nil {
		ln.Close()
		return err
	}
	s.conns = newConnLimiter(ln, s.maxConns, platform.IDs{}, shedlog.New(s.cfg.Logger, "max_connections", int64(s.maxConns)))
	s.listener = s.conns
	return nil
}

// Load reports the bounds in force and the current figures: open connections, requests in progress
// (feed.wait excepted), and how many connections and requests were refused for load since the start.
type Load struct {
	Connections, MaxConnections int64
	Inflight, MaxInflight       int64
	RefusedConnections          int64
	RefusedRequests             int64
}

// Load returns the current load figures (after Listen).
func (s *Server) Load() Load {
	var l Load
	if s.conns != nil {
		l.Connections, l.MaxConnections = s.conns.Active()
		l.RefusedConnections = s.conns.shed.Total()
	}
	l.Inflight, l.MaxInflight = s.api.Inflight()
	l.RefusedRequests = s.api.RefusedRequests()
	return l
}

// Addr is the bound address (after Listen).
func (s *Server) Addr() string {
	if s.listener == nil {
		return s.cfg.Addr
	}
	return s.listener.Addr().String()
}

// Serve serves HTTP until ctx ends, then shuts down gracefully (in-flight requests get up to 10 s).
func (s *Server) Serve(ctx context.Context) error {
	if s.listener == nil {
		if err := s.Listen(); err != nil {
			return err
		}
	}
	s.cfg.Logger.Info("serving", "addr", s.Addr(), "max_connections", s.maxConns, "max_inflight", s.cfg.MaxInflight,
		"body_timeout", s.api.BodyTimeout().String(), "min_upload_bytes_per_second", s.api.MinUploadRate())
	s.http = &http.Server{Handler: s.api, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second,
		ErrorLog: slog.NewLogLogger(s.cfg.Logger.Handler(), slog.LevelWarn)}
	defer s.conns.wait()
	errc := make(chan error, 1)
	shutdown := s.http.Shutdown
	if s.cfg.NetHTTPOnly {
		go func() { errc <- s.http.Serve(s.listener) }()
	} else {
		front := &httpfront.Front{Handler: s.api, Paths: fastPaths(), Fallback: s.http, Log: s.cfg.Logger}
		go func() { errc <- front.Serve(s.listener) }()
		shutdown = front.Shutdown
	}
	sweepCtx, stopSweeper := context.WithCancel(ctx)
	sweeperDone := make(chan struct{})
	go func() {
		defer close(sweeperDone)
		interval := s.cfg.SweepInterval
		if interval <= 0 {
			interval = DefaultSweepInterval
		}
		s.runSweeper(sweepCtx, interval)
	}()
	defer func() { stopSweeper(); <-sweeperDone }()
	metricsDone := make(chan struct{})
	go func() { defer close(metricsDone); s.serveMetrics(sweepCtx) }()
	defer func() { stopSweeper(); <-metricsDone }()
	deletionsDone := make(chan struct{})
	go func() {
		defer close(deletionsDone)
		s.deletions.run(sweepCtx, s.svc, s.cfg.Logger, s.cfg.DeletionPause)
	}()
	defer func() { stopSweeper(); <-deletionsDone }()
	select {
	case err := <-errc:
		return fmt.Errorf("server: %w", err)
	case <-ctx.Done():
	}
	// The webhook worker stops alongside the HTTP server: no new attempts, those in flight get a grace.
	workerDone := make(chan struct{})
	go func() { s.stopWorker(); close(workerDone) }()
	defer func() { <-workerDone }()
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := shutdown(sctx); err != nil {
		return fmt.Errorf("server: shutdown: %w", err)
	}
	return nil
}

// stopWorker stops the webhook worker, if any (idempotent).
func (s *Server) stopWorker() {
	if s.worker != nil {
		s.worker.stop()
	}
}

// Close stops the webhook worker and the service's background reads, and releases the store.
func (s *Server) Close() error {
	s.stopWorker()
	if s.sender != nil {
		s.sender.Close()
	}
	s.svc.Close()
	return s.store.Close()
}
