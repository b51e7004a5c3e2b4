// Package sweep is the upload sweeper function: invoked by an EventBridge schedule, it expires the
// unsealed uploads whose time passed (domain.Service.SweepUploads) in batches.
package sweep

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/functions/config"
	"github.com/waypost/waypost/functions/internal/app"
)

// Sweep batches: one invocation expires at most SweepBatch×SweepMaxBatches uploads, and stops early when
// its deadline is near; the next scheduled invocation continues.
const (
	SweepBatch      = 100
	SweepMaxBatches = 100
	// sweepMargin is the time left before the invocation's deadline under which no batch starts.
	sweepMargin = 5 * time.Second
)

// Spec is the sweeper's role. Its configuration names no secret.
func Spec() app.Spec {
	return app.Spec{Name: config.Sweeper, Start: func(_ context.Context, env app.Env, logger *slog.Logger) (app.Served, error) {
		svc, _, err := env.Service(logger, app.ServiceOptions{})
		if err != nil {
			return app.Served{}, err
		}
		s := &Sweeper{Svc: svc, Logger: logger}
		// The EventBridge scheduled event carries nothing the sweep needs.
		return app.Served{Lambda: app.JSONHandler(s.Sweep), Svc: svc}, nil
	}}
}

// Result is what one sweeper invocation did (its Lambda result, also logged).
type Result struct {
	// Expired counts the uploads expired: marked expired and their bytes deleted.
	Expired int `json:"expired"`
	// Batches counts the sweep batches run.
	Batches int `json:"batches"`
	// More says a batch was still expiring uploads when the invocation stopped (batch cap or deadline).
	More bool `json:"more"`
}

// Sweeper serves the sweeper function.
type Sweeper struct {
	Svc    *domain.Service
	Logger *slog.Logger
}

// Sweep runs the domain's sweep of expired uploads in batches until a batch expires nothing, and logs the
// counts. It is one invocation.
func (s *Sweeper) Sweep(ctx context.Context) (Result, error) {
	start := time.Now()
	var res Result
	for {
		if res.Batches == SweepMaxBatches {
			res.More = true
			break
		}
		if d, ok := ctx.Deadline(); ok && time.Until(d) < sweepMargin {
			res.More = true
			break
		}
		n, err := s.Svc.SweepUploads(ctx, SweepBatch)
		res.Batches++
		res.Expired += n
		if err != nil {
			s.Logger.LogAttrs(ctx, slog.LevelError, "sweep failed", slog.Int("expired", res.Expired), slog.Int("batches", res.Batches),
				slog.Duration("duration", time.Since(start)), slog.String("error", err.Error()))
			return res, fmt.Errorf("%s: sweeping expired uploads: %w", config.Sweeper, err)
		}
		if n == 0 {
			break
		}
	}
	s.Logger.LogAttrs(ctx, slog.LevelInfo, "sweep", slog.Int("expired", res.Expired), slog.Int("batches", res.Batches),
		slog.Bool("more", res.More), slog.Duration("duration", time.Since(start)))
	return res, nil
}
