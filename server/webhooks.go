package server

import (
	"context"
	"errors"
	"log/slog"
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

// webhookWorker is the embedded deliverer: one loop that dispatches newly committed feed items into
// delivery records (Service.DispatchPending) and starts the attempts that are due (Service.DueDeliveries,
// Service.AttemptDelivery), at most Concurrency at a time. It wakes when a commit is announced, when a
// delivery becomes due through the domain's delivery queue (a retry, an admin redelivery), when an attempt
// ends, and otherwise when the earliest due attempt is due, but at least every webhookPoll.
//
// Everything it needs to resume lives in the store (the dispatch position per space, the due index and the
// attempt leases), so a crash at any point loses nothing: deliveries are at least once.
type webhookWorker struct {
	svc         *domain.Service
	log         *slog.Logger
	concurrency int
	poll, grace time.Duration

	wake chan struct{} // capacity 1: pending wake-ups coalesce

	stopLoop    context.CancelFunc // ends the loop: no new attempts start
	stopAttempt context.CancelFunc // cuts the attempts in flight short
	loopDone    chan struct{}
	attempts    sync.WaitGroup
	stopOnce    sync.Once

	mu       sync.Mutex
	inflight map[port.DeliveryRef]bool
	stats    workerStats
}

// workerStats are the counters the worker logs (never URLs, secrets or content).
type workerStats struct {
	Passes, Dispatched, Attempts, Done, Retry, Errors int
}

func newWebhookWorker(log *slog.Logger, cfg WebhookConfig) *webhookWorker {
	w := &webhookWorker{log: log, concurrency: cfg.Concurrency, poll: cfg.poll, grace: cfg.stopGrace,
		wake: make(chan struct{}, 1), inflight: map[port.DeliveryRef]bool{}}
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

// poke wakes the loop without blocking.
func (w *webhookWorker) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Enqueue implements port.DeliveryQueue: the domain calls it when a delivery becomes due (created, retried,
// redelivered). The due index is the durable record; this only wakes the loop early.
func (w *webhookWorker) Enqueue(_ context.Context, _ port.DeliveryRef, _ time.Time) error {
	w.poke()
	return nil
}

// pokingNotifier announces commits to the live feed and wakes the webhook worker.
type pokingNotifier struct {
	next port.Notifier
	w    *webhookWorker
}

// Notify implements port.Notifier.
func (n pokingNotifier) Notify(ctx context.Context, items []port.Published) {
	n.next.Notify(ctx, items)
	n.w.poke()
}

// start runs the loop until stop.
func (w *webhookWorker) start(svc *domain.Service) {
	w.svc = svc
	loopCtx, stopLoop := context.WithCancel(context.Background())
	attemptCtx, stopAttempt := context.WithCancel(context.Background())
	w.stopLoop, w.stopAttempt, w.loopDone = stopLoop, stopAttempt, make(chan struct{})
	go func() {
		defer close(w.loopDone)
		w.run(loopCtx, attemptCtx)
	}()
}

// stop ends the loop, lets attempts in flight finish for up to the grace period, then cuts the rest short
// and waits for them. It is idempotent and safe to call concurrently.
func (w *webhookWorker) stop() {
	w.stopOnce.Do(func() {
		if w.stopLoop == nil {
			return
		}
		w.stopLoop()
		<-w.loopDone
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
		w.mu.Lock()
		st := w.stats
		w.mu.Unlock()
		w.log.Info("webhook worker stopped", "passes", st.Passes, "dispatched", st.Dispatched,
			"attempts", st.Attempts, "finished", st.Done, "retries_planned", st.Retry, "errors", st.Errors)
	})
}

func (w *webhookWorker) inFlight() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.inflight)
}

func (w *webhookWorker) run(ctx, attemptCtx context.Context) {
	w.log.Info("webhook worker started", "concurrency", w.concurrency, "poll", w.poll.String())
	report := time.NewTicker(webhookReportEvery)
	defer report.Stop()
	var reported workerStats
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		started := w.pass(ctx, attemptCtx)
		wait := w.nextWait(ctx, started)
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
		case <-timer.C:
		case <-report.C:
			w.mu.Lock()
			st := w.stats
			w.mu.Unlock()
			if st != reported {
				reported = st
				w.log.Info("webhook worker", "passes", st.Passes, "dispatched", st.Dispatched, "attempts", st.Attempts,
					"finished", st.Done, "retries_planned", st.Retry, "errors", st.Errors, "in_flight", w.inFlight())
			}
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// pass dispatches newly committed items and starts the due attempts that fit in the concurrency bound. It
// returns how many attempts it started.
func (w *webhookWorker) pass(ctx, attemptCtx context.Context) int {
	if ctx.Err() != nil {
		return 0
	}
	d, err := w.svc.DispatchPending(ctx)
	w.count(func(s *workerStats) { s.Passes++; s.Dispatched += d.Deliveries })
	if err != nil && ctx.Err() == nil {
		w.failed("webhook dispatch failed; retried on the next pass", err)
	}
	free := w.concurrency - w.inFlight()
	if free <= 0 {
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

// attempt makes one delivery attempt and wakes the loop when it ends (a slot is free again).
func (w *webhookWorker) attempt(ctx context.Context, ref port.DeliveryRef) {
	defer w.attempts.Done()
	defer w.poke()
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
