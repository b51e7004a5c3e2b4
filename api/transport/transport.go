// Package transport is the one composition root of the Waypost transports: from a domain configuration it
// builds the domain service, loads the JSON Schemas and compiles the operations (api/ops) once, then the
// transports asked for — the MCP endpoint, and the HTTP API with it mounted at /mcp. `waypost serve`
// (package server), the Lambda functions (functions/internal/httprole, mcprole) and the test API
// (api/apitest) all build their handlers with New.
//
// The transports are given as function values (httpapi.Over, mcpapi.Over), and this package imports
// neither: a binary links only the transports it serves (the Lambda functions have a size budget, issue 17).
package transport

import (
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/waypost/waypost/api/boundary"
	"github.com/waypost/waypost/api/ops"
	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/internal/echo"
	"github.com/waypost/waypost/internal/httpx"
	"github.com/waypost/waypost/internal/metrics"
	"github.com/waypost/waypost/schemas"
)

// Parts are what every transport shares: the domain service, the schemas, the compiled operations, and the
// settings of Options.
type Parts struct {
	Svc     *domain.Service
	Schemas *schemas.Registry
	Ops     *ops.Set
	// IDs makes tracking request IDs (the domain's ID source).
	IDs port.IDSource
	// AdminSecret authenticates the control plane; "" disables it.
	AdminSecret string
	// Logger receives the transports' logs (never tokens or bodies).
	Logger *slog.Logger
	// Version is published as the MCP server implementation version.
	Version string
	// Metrics receives every operation's latency and outcome (metrics.Nop when none).
	Metrics metrics.Recorder
	// Challenge is the WWW-Authenticate value of a 401 (Options.Challenge).
	Challenge func(r *http.Request) string
}

// Options say which transports to serve and how.
type Options struct {
	// HTTP builds the HTTP API with the other transports' handlers mounted at their paths
	// (httpapi.Over); nil serves MCP alone, NOT_FOUND elsewhere.
	HTTP func(p Parts, mounts map[string]http.Handler) (http.Handler, error)
	// MCP builds the MCP endpoint, served at /mcp (mcpapi.Over); nil serves none.
	MCP func(p Parts) (http.Handler, error)
	// Ops are the operations served: ops.List, or ops.DataPlane where the control plane is not (the MCP
	// function: it keeps the control plane's descriptors out of its binary).
	Ops []*ops.Op
	// AdminSecret authenticates the control plane (Parts.AdminSecret); "" disables it.
	AdminSecret string
	// Logger receives the transports' logs; nil discards them.
	Logger *slog.Logger
	// Version is published as the MCP server implementation version (Parts.Version).
	Version string
	// Metrics receives every operation's latency and outcome; nil records nothing.
	Metrics metrics.Recorder
	// Challenge returns the WWW-Authenticate value of a 401 for a request (with OAuth: where the
	// protected-resource metadata is, oauth.Challenge); nil means Bearer realm="waypost".
	Challenge func(r *http.Request) string
}

// Stack is a domain service and the transports serving it.
type Stack struct {
	Svc *domain.Service
	// Handler serves every request of the stack: the HTTP API (an *httpapi.API) when Options.HTTP is set.
	Handler http.Handler
}

// New builds the domain service over cfg, loads the schemas and compiles the operations once, then the
// transports o asks for: the MCP endpoint first, then the HTTP API with it mounted at /mcp.
func New(cfg domain.Config, o Options) (*Stack, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.HTTP == nil && o.MCP == nil || len(o.Ops) == 0 {
		return nil, fmt.Errorf("transport: no transport or no operation to serve")
	}
	svc, err := domain.New(cfg)
	if err != nil {
		return nil, err
	}
	reg, err := schemas.New()
	if err != nil {
		return nil, fmt.Errorf("transport: loading schemas: %w", err)
	}
	set, err := ops.NewSet(reg, o.Ops)
	if err != nil {
		return nil, fmt.Errorf("transport: %w", err)
	}
	if o.Metrics == nil {
		o.Metrics = metrics.Nop{}
	}
	if o.Challenge == nil {
		o.Challenge = func(*http.Request) string { return `Bearer realm="waypost"` }
	}
	p := Parts{Svc: svc, Schemas: reg, Ops: set, IDs: cfg.IDs, AdminSecret: o.AdminSecret, Logger: o.Logger, Version: o.Version, Metrics: o.Metrics,
		Challenge: o.Challenge}
	mounts := map[string]http.Handler{}
	if o.MCP != nil {
		if mounts["/mcp"], err = o.MCP(p); err != nil {
			return nil, fmt.Errorf("transport: mcp endpoint: %w", err)
		}
	}
	st := &Stack{Svc: svc}
	if o.HTTP == nil {
		st.Handler = mcpOnly(mounts["/mcp"], boundary.Answerer{Log: o.Logger, IDs: cfg.IDs})
		return st, nil
	}
	if st.Handler, err = o.HTTP(p, mounts); err != nil {
		return nil, err
	}
	return st, nil
}

// mcpOnly serves mcp at /mcp and NOT_FOUND (RFC §5.2 envelope) elsewhere, logging one line per request as
// the HTTP API does.
func mcpOnly(mcp http.Handler, answer boundary.Answerer) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		env, _ := answer.Answer(r.Context(), "", "", nil,
			domain.Errorf(domain.CodeNotFound, "no such route: %s %s (this function serves /mcp)", echo.Clip(r.Method), echo.Clip(r.URL.Path)))
		_ = httpx.WriteJSON(w, http.StatusNotFound, env)
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := httpx.NewRecorder(w)
		w.Header().Set("Cache-Control", "no-store")
		mux.ServeHTTP(rec, r)
		answer.Log.LogAttrs(r.Context(), slog.LevelInfo, "request", slog.String("method", r.Method), slog.String("path", r.URL.Path),
			slog.Int("status", rec.Status), slog.Duration("duration", time.Since(start)))
	})
}
