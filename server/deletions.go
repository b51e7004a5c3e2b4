package server

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/waypost/waypost/domain"
)

// deletionWorker runs the deletions of spaces (domain.ContinueDeletions) in the background of `waypost
// serve`: at start (a deletion a restart interrupted), as soon as one is asked for, and every
// deletionRetry while one waits (for upload URLs to expire) or failed.
type deletionWorker struct {
	kick chan struct{}
	// mu is held while a run removes anything; Backup holds it to keep referenced objects in place.
	mu sync.Mutex
}

// deletionChunk is how many batches one run makes before it lets a backup in.
const deletionChunk = 20

// deletionRetry is how long the worker waits before it tries a failed or waiting deletion again.
const deletionRetry = 30 * time.Second

func newDeletionWorker() *deletionWorker { return &deletionWorker{kick: make(chan struct{}, 1)} }

// wake asks the worker to look for deletions now (never blocks).
func (w *deletionWorker) wake() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// run works until ctx ends.
func (w *deletionWorker) run(ctx context.Context, svc *domain.Service, log *slog.Logger, pause time.Duration) {
	w.wake() // resume what a restart interrupted
	var retry <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.kick:
		case <-retry:
		}
		retry = nil
		start := time.Now()
		run, err := w.runChunks(ctx, svc, pause)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			log.LogAttrs(ctx, slog.LevelError, "space deletion failed; retrying", slog.String("error", err.Error()),
				slog.Duration("retry_in", deletionRetry))
			retry = time.After(deletionRetry)
		case run.Pending > 0: // waiting for upload URLs to expire, or another process works on it
			wait := deletionRetry
			if !run.NextAt.IsZero() {
				wait = min(wait, max(time.Until(run.NextAt), time.Second))
			}
			retry = time.After(wait)
		}
		if run.Batches > 0 {
			log.LogAttrs(ctx, slog.LevelInfo, "space deletion", slog.Int("batches", run.Batches),
				slog.Any("completed", run.Completed), slog.Int("pending", run.Pending), slog.Duration("duration", time.Since(start)))
		}
	}
}

// runChunks runs deletion batches, deletionChunk at a time under mu, until nothing is left to do now.
func (w *deletionWorker) runChunks(ctx context.Context, svc *domain.Service, pause time.Duration) (domain.DeletionRun, error) {
	var total domain.DeletionRun
	for {
		w.mu.Lock()
		run, err := svc.ContinueDeletions(ctx, domain.DeletionOptions{MaxBatches: deletionChunk, Pause: pause})
		w.mu.Unlock()
		total.Batches += run.Batches
		total.Completed = append(total.Completed, run.Completed...)
		total.Pending, total.NextAt = run.Pending, run.NextAt
		if err != nil || run.Pending == 0 || run.Batches < deletionChunk || ctx.Err() != nil {
			return total, err
		}
	}
}
