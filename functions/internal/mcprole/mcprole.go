// Package mcprole builds the MCP function: /mcp (api/mcpapi, stateless Streamable HTTP with JSON
// responses) behind the API Gateway adapter, with the webhook sender (the subscription tools) and the
// per-space cap on concurrent waypost_wait calls (config.EnvMCPWaitsPerSpace). API Gateway routes only /mcp
// here, so the function does not link the shared HTTP API: every other path answers NOT_FOUND.
package mcprole

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/waypost/waypost/api/mcpapi"
	"github.com/waypost/waypost/channel/livefeed"
	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/functions/config"
	"github.com/waypost/waypost/functions/internal/app"
	"github.com/waypost/waypost/functions/internal/secrets"
	"github.com/waypost/waypost/functions/internal/webhookrole"
	"github.com/waypost/waypost/schemas"
)

// Spec is the MCP function's role.
func Spec() app.Spec { return app.Spec{Name: config.MCP, Secrets: secrets.Manager, Start: start} }

func start(_ context.Context, env app.Env, logger *slog.Logger) (app.Served, error) {
	// waypost_wait re-reads the durable feed (livefeed.Poller), holding one of the space's wait slots.
	opts := app.ServiceOptions{Watcher: livefeed.Poller{}, WaitsPerSpace: env.Config.MCPWaitsPerSpace}
	if err := webhookrole.SenderPorts(env, logger, &opts); err != nil {
		return app.Served{}, err
	}
	svc, ids, err := env.Service(logger, opts)
	if err != nil {
		return app.Served{}, err
	}
	reg, err := schemas.New()
	if err != nil {
		return app.Served{}, fmt.Errorf("%s: loading schemas: %w", env.Name, err)
	}
	mcpHandler, err := mcpapi.New(svc, mcpapi.Options{Schemas: reg, IDs: ids, Logger: logger, Version: env.Config.Version})
	if err != nil {
		return app.Served{}, fmt.Errorf("%s: mcp endpoint: %w", env.Name, err)
	}
	h := Handler(mcpHandler, ids, logger)
	return app.Served{Lambda: httpadapter.NewV2(h).ProxyWithContext, HTTP: h, Svc: svc}, nil
}

// Handler serves mcp at /mcp and NOT_FOUND (RFC §5.2 envelope) elsewhere, logging one JSON line per
// request as the shared HTTP API does.
func Handler(mcp http.Handler, ids port.IDSource, logger *slog.Logger) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		wire := domain.Errorf(domain.CodeNotFound, "no such route: %s %s (this function serves /mcp)", r.Method, r.URL.Path).Wire()
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(struct {
			OK        bool              `json:"ok"`
			RequestID string            `json:"request_id"`
			Error     *domain.WireError `json:"error"`
		}{false, ids.NewID("rq"), &wire})
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		w.Header().Set("Cache-Control", "no-store")
		mux.ServeHTTP(rec, r)
		logger.LogAttrs(r.Context(), slog.LevelInfo, "request", slog.String("method", r.Method), slog.String("path", r.URL.Path),
			slog.Int("status", rec.status), slog.Duration("duration", time.Since(start)))
	})
}

// statusRecorder records the status of a response.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

// WriteHeader records the status.
func (r *statusRecorder) WriteHeader(code int) { r.status = code; r.ResponseWriter.WriteHeader(code) }

// Flush lets streamed responses through.
func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap gives http.ResponseController the underlying writer.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
