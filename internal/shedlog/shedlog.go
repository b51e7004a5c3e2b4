// Package shedlog reports load shedding in the logs without flooding them: the first refusal after a quiet
// period is logged at once, later ones are counted and summed up at most once per interval, each line with
// the figures of the limit that refused (current value, maximum, refusals since the last line and in all).
package shedlog

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// DefaultInterval is the least time between two lines of one Reporter.
const DefaultInterval = 10 * time.Second

// Reporter logs the refusals of one limit. It is safe for concurrent use.
type Reporter struct {
	log      *slog.Logger
	limit    string
	max      int64
	interval time.Duration

	mu      sync.Mutex
	last    time.Time
	pending int64
	total   int64
}

// New returns a reporter for the named limit (e.g. "max_connections") whose maximum is max.
func New(log *slog.Logger, limit string, max int64) *Reporter {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Reporter{log: log, limit: limit, max: max, interval: DefaultInterval}
}

// Shed records one refusal while current units were in use, logging a WARN line when the interval since the
// last one has passed.
func (r *Reporter) Shed(ctx context.Context, current int64) {
	r.mu.Lock()
	r.pending++
	r.total++
	now := time.Now()
	if now.Sub(r.last) < r.interval {
		r.mu.Unlock()
		return
	}
	pending, total := r.pending, r.total
	r.pending, r.last = 0, now
	r.mu.Unlock()
	r.log.LogAttrs(ctx, slog.LevelWarn, "shedding load: "+r.limit+" reached", slog.String("limit", r.limit),
		slog.Int64("current", current), slog.Int64("max", r.max), slog.Int64("refused", pending), slog.Int64("refused_total", total))
}

// Total returns how many refusals were recorded in all.
func (r *Reporter) Total() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.total
}
