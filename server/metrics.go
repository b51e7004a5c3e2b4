package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// listenMetrics binds Config.MetricsAddr, when set.
func (s *Server) listenMetrics() error {
	if s.cfg.MetricsAddr == "" || s.metricsLn != nil {
		return nil
	}
	ln, err := net.Listen("tcp", s.cfg.MetricsAddr)
	if err != nil {
		return fmt.Errorf("server: listening for metrics on %s: %w", s.cfg.MetricsAddr, err)
	}
	s.metricsLn = ln
	return nil
}

// MetricsAddr is the bound metrics address ("" without Config.MetricsAddr).
func (s *Server) MetricsAddr() string {
	if s.metricsLn == nil {
		return ""
	}
	return s.metricsLn.Addr().String()
}

// serveMetrics serves GET /metrics on the metrics listener until ctx ends.
func (s *Server) serveMetrics(ctx context.Context) {
	if s.metricsLn == nil {
		return
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", s.metrics.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(s.cfg.Logger.Handler(), slog.LevelWarn)}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(s.metricsLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
		s.cfg.Logger.Error("metrics listener failed", "error", err.Error())
	}
}
