package server

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/domain/port"
)

// WebhookConfig configures the capability webhook_events of the embedded server (RFC-0001 §12): webhook
// subscriptions, and the in-process worker that derives deliveries from the committed feed and makes the
// delivery attempts.
type WebhookConfig struct {
	// Disabled turns the capability off: describe says webhook_events=false and the subscription
	// operations answer UNSUPPORTED. Nothing already stored is lost; deliveries resume when it is on again.
	Disabled bool
	// AllowLoopback also admits loopback targets (127.0.0.0/8, ::1, any port) and plain http:// targets.
	// DEVELOPMENT ONLY (`waypost serve --allow-loopback-webhooks`): it must never be set where untrusted
	// users register targets, because it lets them make the server call services on its own host.
	AllowLoopback bool
	// Concurrency bounds the delivery attempts in flight, so that slow receivers (up to 10 s each) do not
	// hold up the others; 0 means DefaultWebhookConcurrency.
	Concurrency int

	// poll and stopGrace override webhookPoll and webhookStopGrace (tests in this package only).
	poll, stopGrace time.Duration
}

// Webhook worker tuning.
const (
	// DefaultWebhookConcurrency is the default bound on delivery attempts in flight.
	DefaultWebhookConcurrency = 8
	// webhookPoll is the longest the worker sleeps without looking at the due index: a safety net for a
	// lost wake-up (the commit notifier and the delivery queue are best effort).
	webhookPoll = time.Second
	// webhookStopGrace is how long shutdown waits for attempts in flight before cutting them short. A
	// cut-short attempt keeps its lease and is made again after the lease ends (or after a restart).
	webhookStopGrace = 5 * time.Second
	// webhookReportEvery is how often the worker logs its counters when it did something.
	webhookReportEvery = time.Minute
)

// webhookWorker is the embedded deliverer. One loop dispatches newly committed feed items into delivery
// records (Service.DispatchPending); it wakes when a commit is announced. Another loop starts the attempts
// that are due (Service.DueDeliveries, Service.AttemptDelivery), at most Concurrency at a time; it wakes
// when a delivery becomes due through the domain's delivery queue (created, retried, redelivered), when an
// attempt ends, and otherwise when the earliest due attempt is due. Both look at the store at least every
// poll interval, a safety net for a lost wake-up. The loops are separate so that dispatching a burst of
// commits does not hold up the attempts, and slow attempts do not hold up dispatching.
//
// Everything needed to resume lives in the store (the dispatch position per space, the due index and the
// attempt leases), so a crash at any point loses nothing: deliveries are at least once.
type webhookWorker struct {
	svc         *domain.Service
	log         *slog.Logger
	concurrency int
	poll, grace time.Duration

	// Wake-ups, each of capacity 1 so that pending ones coalesce.
	committed chan struct{} // a commit was announced: dispatch
	due       chan struct{} // a delivery became due or an attempt ended: start attempts

	annMu     sync.Mutex
	announced []string // spaces with commits announced since the dispatch loop last took them

	stopLoops   context.CancelFunc // ends the loops: no new dispatch or attempt starts
	stopAttempt context.CancelFunc // cuts the attempts in flight short
	loops       sync.WaitGroup
	attempts    sync.WaitGroup
	stopOnce    sync.Once

	mu       sync.Mutex
	inflight map[port.DeliveryRef]bool
	stats    workerStats
}

// workerStats are the counters the worker logs (never URLs, secrets or content).
type workerStats struct {
	DispatchPasses, Dispatched, Attempts, Done, Retry, Errors int
}

func newWebhookWorker(log *slog.Logger, cfg WebhookConfig) *webhookWorker {
	w := &webhookWorker{log: log, concurrency: cfg.Concurrency, poll: cfg.poll, grace: cfg.stopGrace,
		committed: make(chan struct{}, 1), due: make(chan struct{}, 1), inflight: map[port.DeliveryRef]bool{}}
	if w.concurrency <= 0 {
		w.concurrency = DefaultWebhookConcurrency
	}
	if w.poll <= 0 {
		w.poll = webhookPoll
	}
	if w.grace <= 0 {
		w.grace = webhookStopGrace
	}
	return w
}

// wake signals c without blocking.
func wake(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// Enqueue implements port.DeliveryQueue: the domain calls it when a delivery becomes due (created, retried,
// redelivered). The due index is the durable record; this only wakes the attempt loop early.
func (w *webhookWorker) Enqueue(_ context.Context, _ port.DeliveryRef, _ time.Time) error {
	wake(w.due)
	return nil
}

// pokingNotifier announces commits to the live feed and wakes the webhook dispatcher.
type pokingNotifier struct {
	next port.Notifier
	w    *webhookWorker
}

// Notify implements port.Notifier.
func (n pokingNotifier) Notify(ctx context.Context, items []port.Published) {
	n.next.Notify(ctx, items)
	n.w.announce(items)
}

// announce remembers the spaces of announced commits for the dispatch loop and wakes it.
func (w *webhookWorker) announce(items []port.Published) {
	w.annMu.Lock()
	for _, it := range items {
		if !slices.Contains(w.announced, it.SpaceID) {
			w.announced = append(w.announced, it.SpaceID)
		}
	}
	w.annMu.Unlock()
	wake(w.committed)
}

// takeAnnounced returns the spaces announced since the last call and forgets them.
func (w *webhookWorker) takeAnnounced() []string {
	w.annMu.Lock()
	defer w.annMu.Unlock()
	spaces := w.announced
	w.announced = nil
	return spaces
}

// start runs the loops until stop.
func (w *webhookWorker) start(svc *domain.Service) {
	w.svc = svc
	loopCtx, stopLoops := context.WithCancel(context.Background())
	attemptCtx, stopAttempt := context.WithCancel(context.Background())
	w.stopLoops, w.stopAttempt = stopLoops, stopAttempt
	w.log.Info("webhook worker started", "concurrency", w.concurrency, "poll", w.poll.String())
	w.loops.Add(2)
	go func() { defer w.loops.Done(); w.dispatchLoop(loopCtx) }()
	go func() { defer w.loops.Done(); w.attemptLoop(loopCtx, attemptCtx) }()
}

// stop ends the loops, lets attempts in flight finish for up to the grace period, then cuts the rest short
// and waits for them. It is idempotent and safe to call concurrently.
func (w *webhookWorker) stop() {
	w.stopOnce.Do(func() {
		if w.stopLoops == nil {
			return
		}
		w.stopLoops()
		w.loops.Wait()
		finished := make(chan struct{})
		go func() { w.attempts.Wait(); close(finished) }()
		select {
		case <-finished:
		case <-time.After(w.grace):
			w.log.Warn("webhook worker: cutting attempts in flight short; they are retried after their lease",
				"in_flight", w.inFlight())
			w.stopAttempt()
			<-finished
		}
		w.stopAttempt()
		w.logStats("webhook worker stopped")
	})
}

func (w *webhookWorker) logStats(msg string) {
	w.mu.Lock()
	st, inflight := w.stats, len(w.inflight)
	w.mu.Unlock()
	w.log.Info(msg, "dispatch_passes", st.DispatchPasses, "dispatched", st.Dispatched, "attempts", st.Attempts,
		"finished", st.Done, "retries_planned", st.Retry, "errors", st.Errors, "in_flight", inflight)
}

func (w *webhookWorker) inFlight() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.inflight)
}

// sleep waits for d, a wake-up on c, or the end of ctx; it reports whether ctx is still live.
func sleep(ctx context.Context, timer *time.Timer, d time.Duration, c <-chan struct{}) bool {
	timer.Reset(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-c:
	case <-timer.C:
	}
	return true
}

// dispatchLoop derives delivery records from what was committed since the last pass. Each created record
// wakes the attempt loop through Enqueue. A wake-up by an announced commit dispatches the announced spaces
// only (Service.DispatchSpaces: a point read for a space without subscriptions, so that a busy mailbox
// without webhooks pays next to nothing per send); a full pass over every space with subscriptions
// (Service.DispatchPending) runs at the start, after a failure, and at least every poll interval, the
// safety net for a lost announcement.
func (w *webhookWorker) dispatchLoop(ctx context.Context) {
	timer := time.NewTimer(w.poll)
	full, lastFull := true, time.Time{}
	for {
		var d domain.DispatchResult
		var err error
		if full || time.Since(lastFull) >= w.poll {
			w.takeAnnounced() // a full pass covers them
			lastFull = time.Now()
			d, err = w.svc.DispatchPending(ctx)
		} else {
			d, err = w.svc.DispatchSpaces(ctx, w.takeAnnounced())
		}
		w.count(func(s *workerStats) { s.DispatchPasses++; s.Dispatched += d.Deliveries })
		wait := w.poll
		full = false
		if err != nil && ctx.Err() == nil {
			w.failed("webhook dispatch failed; retried on the next pass", err)
			full = true
		} else if d.Items > 0 {
			wait = 0 // more may have been committed meanwhile (announced: the next pass takes them)
		}
		// Commits announced during the pause are dispatched together by the next pass: under a stream of
		// sends, a pass (two point reads per space without subscriptions) runs at most every dispatchGap
		// instead of once per commit.
		if !sleep(ctx, timer, dispatchGap, nil) || !sleep(ctx, timer, wait, w.committed) {
			return
		}
	}
}

// dispatchGap is the least time between two dispatch passes started by announcements: it bounds their cost
// under load and delays a webhook delivery by at most that much.
const dispatchGap = 10 * time.Millisecond

// attemptLoop starts the due attempts that fit in the concurrency bound, then sleeps until the next one
// is due (at most the poll interval) or a wake-up; it logs its counters every webhookReportEvery when they
// changed.
func (w *webhookWorker) attemptLoop(ctx, attemptCtx context.Context) {
	timer := time.NewTimer(w.poll)
	lastReport, reported := time.Now(), workerStats{}
	for {
		started := w.startDue(ctx, attemptCtx)
		if !sleep(ctx, timer, w.nextWait(ctx, started), w.due) {
			return
		}
		if time.Since(lastReport) >= webhookReportEvery {
			w.mu.Lock()
			st := w.stats
			w.mu.Unlock()
			if st != reported {
				w.logStats("webhook worker")
			}
			lastReport, reported = time.Now(), st
		}
	}
}

// startDue starts the due attempts that fit in the concurrency bound and returns how many it started.
func (w *webhookWorker) startDue(ctx, attemptCtx context.Context) int {
	free := w.concurrency - w.inFlight()
	if free <= 0 || ctx.Err() != nil {
		return 0 // an ending attempt wakes the loop
	}
	// Ask for a few more than fit: some may already be in flight (read before their claim was stored).
	refs, err := w.svc.DueDeliveries(ctx, free+w.concurrency)
	if err != nil {
		if ctx.Err() == nil {
			w.failed("reading due webhook deliveries failed; retried on the next pass", err)
		}
		return 0
	}
	started := 0
	for _, ref := range refs {
		if started == free || ctx.Err() != nil {
			break
		}
		w.mu.Lock()
		busy := w.inflight[ref]
		if !busy {
			w.inflight[ref] = true
		}
		w.mu.Unlock()
		if busy {
			continue
		}
		started++
		w.attempts.Add(1)
		go w.attempt(attemptCtx, ref)
	}
	return started
}

// attempt makes one delivery attempt and wakes the attempt loop when it ends (a slot is free again).
func (w *webhookWorker) attempt(ctx context.Context, ref port.DeliveryRef) {
	defer w.attempts.Done()
	defer wake(w.due)
	defer func() {
		w.mu.Lock()
		delete(w.inflight, ref)
		w.mu.Unlock()
	}()
	out, err := w.svc.AttemptDelivery(ctx, ref)
	w.count(func(s *workerStats) {
		s.Attempts++
		switch {
		case err != nil:
		case out.Done:
			s.Done++
		default:
			s.Retry++
		}
	})
	if err != nil {
		if ctx.Err() != nil {
			w.log.Info("webhook delivery attempt cut short by shutdown; retried after its lease",
				"space_id", ref.SpaceID, "delivery_id", ref.DeliveryID)
			return
		}
		w.failed("webhook delivery attempt failed; retried after its lease", err,
			"space_id", ref.SpaceID, "delivery_id", ref.DeliveryID)
	}
}

// nextWait is how long to sleep after a pass: until the earliest due attempt, at most webhookPoll. When
// something is due already but nothing could start (all slots busy, or an entry another worker holds),
// the loop waits for a wake-up or the poll instead of spinning.
func (w *webhookWorker) nextWait(ctx context.Context, started int) time.Duration {
	if ctx.Err() != nil {
		return 0
	}
	next, ok, err := w.svc.NextDue(ctx)
	if err != nil {
		if ctx.Err() == nil {
			w.failed("reading the next due webhook delivery failed", err)
		}
		return w.poll
	}
	if !ok {
		return w.poll
	}
	d := time.Until(next)
	switch {
	case d > w.poll:
		return w.poll
	case d > 0:
		return d
	case started > 0 && w.inFlight() < w.concurrency:
		return 0 // more may be due than one pass started
	default:
		return w.poll
	}
}

func (w *webhookWorker) count(f func(*workerStats)) {
	w.mu.Lock()
	f(&w.stats)
	w.mu.Unlock()
}

func (w *webhookWorker) failed(msg string, err error, attrs ...any) {
	w.count(func(s *workerStats) { s.Errors++ })
	if errors.Is(err, context.Canceled) {
		return
	}
	w.log.Warn(msg, append(attrs, "err", err)...)
}
