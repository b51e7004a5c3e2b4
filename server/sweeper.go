package server

import (
	"context"
	"log/slog"
	"time"
)

// DefaultSweepInterval is how often `waypost serve` sweeps expired uploads when Config.SweepInterval is 0.
const DefaultSweepInterval = time.Minute

// Sweep batches: one sweep expires at most sweepBatch×sweepMaxBatches uploads; the next one continues.
const (
	sweepBatch      = 100
	sweepMaxBatches = 100
	// tempMaxAge is the age after which a put's temporary file counts as orphaned. A put in progress
	// writes to its file at least every body timeout (the minimum upload rate), so it is never this old.
	tempMaxAge = time.Hour
)

// SweepResult is what one sweep did.
type SweepResult struct {
	// Expired counts the unsealed uploads expired (marked expired, bytes deleted).
	Expired int
	// Temporaries counts the orphaned temporary blob files removed.
	Temporaries int
}

// Sweep runs one sweep: the domain's sweep of expired uploads (the same operation the AWS sweeper
// function runs on its schedule), in batches until a batch expires nothing, then removes temporary blob
// files orphaned for more than an hour.
func (s *Server) Sweep(ctx context.Context) (SweepResult, error) {
	var res SweepResult
	for range sweepMaxBatches {
		n, err := s.svc.SweepUploads(ctx, sweepBatch)
		res.Expired += n
		if err != nil {
			return res, err
		}
		if n == 0 {
			break
		}
	}
	n, err := s.blobs.RemoveTemporaries(ctx, tempMaxAge)
	res.Temporaries = n
	return res, err
}

// runSweeper sweeps every interval until ctx ends, logging what each sweep did when it did something.
func (s *Server) runSweeper(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		start := time.Now()
		res, err := s.Sweep(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			s.cfg.Logger.LogAttrs(ctx, slog.LevelError, "upload sweep failed", slog.Int("expired", res.Expired),
				slog.Int("temporaries_removed", res.Temporaries), slog.String("error", err.Error()))
		case res.Expired > 0 || res.Temporaries > 0:
			s.cfg.Logger.LogAttrs(ctx, slog.LevelInfo, "upload sweep", slog.Int("expired", res.Expired),
				slog.Int("temporaries_removed", res.Temporaries), slog.Duration("duration", time.Since(start)))
		}
	}
}
