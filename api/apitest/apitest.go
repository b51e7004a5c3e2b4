// Package apitest assembles the transports over a real domain service for tests of the API layers and of
// their clients: the in-memory item store and a file blob store, the HTTP API with the MCP endpoint at /mcp,
// served by httptest. Unlike server.Open it can switch webhook_events on with any port.WebhookSender, and it
// comes with a webhook receiver that follows the receiver guide of package webhook.
package apitest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/waypost/waypost/api/httpapi"
	"github.com/waypost/waypost/api/mcpapi"
	"github.com/waypost/waypost/api/openapi/openapitest"
	"github.com/waypost/waypost/api/ops"
	"github.com/waypost/waypost/api/transport"
	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/domain/retry"
	"github.com/waypost/waypost/internal/platform"
	"github.com/waypost/waypost/internal/syncbuf"
	"github.com/waypost/waypost/store/fsblob"
	"github.com/waypost/waypost/store/mem"
	"github.com/waypost/waypost/webhook/dial"
	"github.com/waypost/waypost/webhook/sender"
)

// AdminSecret is the control-plane secret of every stack.
const AdminSecret = "apitest-admin-secret-0123456789abcdefghijklmnopqrstuvwxyz"

// Options configure a stack.
type Options struct {
	// Webhooks enables webhook_events when set; nil leaves the capability off (UNSUPPORTED).
	Webhooks port.WebhookSender
	// WebhookRetry is the delivery attempt schedule; nil means the default one.
	WebhookRetry *retry.Policy
	// Log receives every log line of the domain and both transports when set.
	Log io.Writer
}

// Stack is one running service.
type Stack struct {
	// URL is the base URL of the HTTP API (MCP at URL+"/mcp").
	URL string
	// Svc is the domain service behind it (tests run the delivery worker with Svc.WorkDeliveries).
	Svc *domain.Service
}

// New starts a stack; it stops when the test ends.
func New(t testing.TB, o Options) *Stack {
	t.Helper()
	blobs, err := fsblob.New(t.TempDir())
	if err != nil {
		t.Fatalf("apitest: blob store: %v", err)
	}
	log := slog.New(slog.DiscardHandler)
	if o.Log != nil {
		log = slog.New(slog.NewTextHandler(o.Log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	stack, err := transport.New(domain.Config{Store: mem.New(), Blobs: blobs, Clock: platform.Clock{}, IDs: platform.IDs{},
		Logger: log, CursorKey: []byte("apitest-cursor-key-0123456789abcdef"), Webhooks: o.Webhooks, WebhookRetry: o.WebhookRetry},
		transport.Options{Ops: ops.List(), HTTP: httpapi.Over(httpapi.Options{}), MCP: mcpapi.Over, AdminSecret: AdminSecret, Logger: log})
	if err != nil {
		t.Fatalf("apitest: %v", err)
	}
	hs := httptest.NewServer(stack.Handler)
	t.Cleanup(hs.Close)
	return &Stack{URL: hs.URL, Svc: stack.Svc}
}

// Client returns an HTTP client that checks every answer of a route of the API against its OpenAPI
// document (package openapitest) and fails t on a drift.
func (s *Stack) Client(t testing.TB) *http.Client { t.Helper(); return Client(t) }

// Client returns an HTTP client for any Waypost server (a Stack, servertest, the real binary) that checks
// every answer of a route of the API against its OpenAPI document (package openapitest) and fails t on a
// drift.
func Client(t testing.TB) *http.Client { t.Helper(); return openapitest.Client(t, nil) }

// Sender returns the real webhook sender (package webhook/sender) admitting loopback targets, as
// `waypost serve --allow-loopback-webhooks` does, and plain http:// targets when allowHTTP is set. Private
// addresses stay refused.
func Sender(t testing.TB, allowHTTP bool) *sender.Sender {
	t.Helper()
	s, err := sender.New(sender.Options{Dial: dial.Options{AllowHTTP: allowHTTP, AllowLoopback: true}})
	if err != nil {
		t.Fatalf("apitest: webhook sender: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// NewSecret returns a fresh webhook secret: "whsec_" + the standard base64 of 32 random bytes.
func NewSecret(t testing.TB) string {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatalf("apitest: random: %v", err)
	}
	return domain.SecretPrefix + base64.StdEncoding.EncodeToString(b)
}

// World is a space with actor A (every scope) and actor B (every scope, consumer CB, a token bound to it).
type World struct {
	SpaceID    string
	A, B, CB   string
	TokA, TokB string
}

// World creates a space with two actors through the domain.
func (s *Stack) World(t testing.TB) World { t.Helper(); return NewWorld(t, s.Svc) }

// NewWorld creates a World through svc, for tests over any deployment (servertest, a Stack).
func NewWorld(t testing.TB, svc *domain.Service) World {
	t.Helper()
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("apitest: world: %v", err)
		}
	}
	var w World
	sp, err := svc.CreateSpace(ctx, domain.CreateSpaceRequest{RequestID: "sp"})
	must(err)
	w.SpaceID = sp.SpaceID
	a, err := svc.CreateActor(ctx, sp.SpaceID, domain.CreateActorRequest{RequestID: "a"})
	must(err)
	b, err := svc.CreateActor(ctx, sp.SpaceID, domain.CreateActorRequest{RequestID: "b"})
	must(err)
	w.A, w.B = a.ActorID, b.ActorID
	cb, err := svc.CreateConsumer(ctx, sp.SpaceID, domain.CreateConsumerRequest{RequestID: "cb", ActorID: w.B, View: domain.ViewInbox})
	must(err)
	w.CB = cb.ConsumerID
	ta, err := svc.CreateToken(ctx, sp.SpaceID, domain.CreateTokenRequest{RequestID: "ta", ActorID: w.A, Scopes: domain.AllScopes()})
	must(err)
	tb, err := svc.CreateToken(ctx, sp.SpaceID, domain.CreateTokenRequest{RequestID: "tb", ActorID: w.B, ConsumerID: w.CB, Scopes: domain.AllScopes()})
	must(err)
	w.TokA, w.TokB = ta.Token, tb.Token
	return w
}

// Receiver is a webhook receiver on loopback (httptest). It answers a verification challenge with its echo
// (unless told not to) and an event with the configured status (204 by default), and records both.
type Receiver struct {
	// URL is the receiver's base URL; any path is accepted.
	URL string

	mu         sync.Mutex
	echo       bool
	status     int
	challenges int
	events     []map[string]any
	raw        [][]byte
}

// NewReceiver starts a receiver; it stops when the test ends.
func NewReceiver(t testing.TB) *Receiver {
	r := &Receiver{echo: true, status: http.StatusNoContent}
	hs := httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(hs.Close)
	r.URL = hs.URL
	return r
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	raw, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	if err != nil {
		http.Error(w, "read", http.StatusBadRequest)
		return
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		http.Error(w, "not JSON", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if m["type"] == "verification" {
		r.challenges++
		w.Header().Set("Content-Type", "application/json")
		if !r.echo {
			_, _ = w.Write([]byte(`{"challenge":"not the one you sent"}`))
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"challenge": m["challenge"]})
		return
	}
	r.events = append(r.events, m)
	r.raw = append(r.raw, bytes.Clone(raw))
	w.WriteHeader(r.status)
}

// SetEcho makes the receiver echo challenges (true, the default) or answer with a wrong echo.
func (r *Receiver) SetEcho(echo bool) { r.mu.Lock(); r.echo = echo; r.mu.Unlock() }

// SetStatus sets the HTTP status answered to events (204 by default).
func (r *Receiver) SetStatus(status int) { r.mu.Lock(); r.status = status; r.mu.Unlock() }

// Challenges returns how many verification challenges arrived.
func (r *Receiver) Challenges() int { r.mu.Lock(); defer r.mu.Unlock(); return r.challenges }

// Events returns the events received so far, decoded.
func (r *Receiver) Events() []map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]map[string]any(nil), r.events...)
}

// RawEvents returns the bodies of the events received so far, as sent.
func (r *Receiver) RawEvents() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]byte(nil), r.raw...)
}

// LogBuffer is an io.Writer, safe for concurrent use, that keeps everything written to it (for
// Options.Log).
type LogBuffer = syncbuf.Buffer
