package app

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// Sweep batches: one invocation expires at most SweepBatch×SweepMaxBatches uploads, and stops early when
// its deadline is near; the next scheduled invocation continues.
const (
	SweepBatch      = 100
	SweepMaxBatches = 100
	// sweepMargin is the time left before the invocation's deadline under which no batch starts.
	sweepMargin = 5 * time.Second
)

// SweepResult is what one sweeper invocation did (its Lambda result, also logged).
type SweepResult struct {
	// Expired counts the uploads expired: marked expired and their bytes deleted.
	Expired int `json:"expired"`
	// Batches counts the sweep batches run.
	Batches int `json:"batches"`
	// More says a batch was still expiring uploads when the invocation stopped (batch cap or deadline).
	More bool `json:"more"`
}

// Sweep runs the domain's sweep of expired uploads (domain.Service.SweepUploads) in batches until a batch
// expires nothing, and logs the counts. It is the sweeper role's invocation.
func (f *Function) Sweep(ctx context.Context) (SweepResult, error) {
	if f.svc == nil {
		return SweepResult{}, fmt.Errorf("%s: not the sweeper", f.Role)
	}
	start := time.Now()
	var res SweepResult
	for {
		if res.Batches == SweepMaxBatches {
			res.More = true
			break
		}
		if d, ok := ctx.Deadline(); ok && time.Until(d) < sweepMargin {
			res.More = true
			break
		}
		n, err := f.svc.SweepUploads(ctx, SweepBatch)
		res.Batches++
		res.Expired += n
		if err != nil {
			f.Logger.LogAttrs(ctx, slog.LevelError, "sweep failed", slog.Int("expired", res.Expired), slog.Int("batches", res.Batches),
				slog.Duration("duration", time.Since(start)), slog.String("error", err.Error()))
			return res, fmt.Errorf("%s: sweeping expired uploads: %w", f.Role, err)
		}
		if n == 0 {
			break
		}
	}
	f.Logger.LogAttrs(ctx, slog.LevelInfo, "sweep", slog.Int("expired", res.Expired), slog.Int("batches", res.Batches),
		slog.Bool("more", res.More), slog.Duration("duration", time.Since(start)))
	return res, nil
}
