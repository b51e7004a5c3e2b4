// Package sweep is the upload sweeper function: invoked by an EventBridge schedule, it expires the
// unsealed uploads whose time passed (domain.Service.SweepUploads) in batches, then advances the deletion
// of every space being deleted (domain.Service.ContinueDeletions) until its deadline is near.
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
	// DeletionBatches counts the space deletion batches committed; DeletionsCompleted the spaces whose
	// deletion completed; DeletionsPending those still deleting (the next invocation continues them).
	DeletionBatches    int      `json:"deletion_batches"`
	DeletionsCompleted []string `json:"deletions_completed"`
	DeletionsPending   int      `json:"deletions_pending"`
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
	if err := s.deletions(ctx, &res); err != nil {
		return res, err
	}
	s.Logger.LogAttrs(ctx, slog.LevelInfo, "sweep", slog.Int("expired", res.Expired), slog.Int("batches", res.Batches),
		slog.Bool("more", res.More), slog.Int("deletion_batches", res.DeletionBatches),
		slog.Any("deletions_completed", res.DeletionsCompleted), slog.Int("deletions_pending", res.DeletionsPending),
		slog.Duration("duration", time.Since(start)))
	return res, nil
}

// deletions advances the space deletions until sweepMargin before the invocation's deadline.
func (s *Sweeper) deletions(ctx context.Context, res *Result) error {
	dctx := ctx
	if d, ok := ctx.Deadline(); ok {
		if time.Until(d) < sweepMargin {
			return nil
		}
		var cancel context.CancelFunc
		dctx, cancel = context.WithDeadline(ctx, d.Add(-sweepMargin))
		defer cancel()
	}
	run, err := s.Svc.ContinueDeletions(dctx, domain.DeletionOptions{})
	res.DeletionBatches, res.DeletionsCompleted, res.DeletionsPending = run.Batches, run.Completed, run.Pending
	if err != nil && dctx.Err() == nil {
		s.Logger.LogAttrs(ctx, slog.LevelError, "space deletion failed", slog.String("error", err.Error()))
		return fmt.Errorf("%s: deleting spaces: %w", config.Sweeper, err)
	}
	return nil
}
