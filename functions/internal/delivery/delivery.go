// Package delivery is the webhook delivery path on AWS (issue 7): the table's stream feeds the dispatcher,
// which creates one delivery record per (feed item, announcing subscription) and queues its wake-up on SQS;
// the deliverer receives the wake-ups and makes the attempts. The domain holds every rule; these roles only
// translate Lambda events into domain calls. Their configuration names no secret.
package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"

	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/functions/config"
	"github.com/waypost/waypost/functions/internal/app"
	"github.com/waypost/waypost/functions/internal/queuerole"
	"github.com/waypost/waypost/store/dynamo"
	"github.com/waypost/waypost/store/sqsqueue"
)

// The function names of the roles (errors and logs).
const (
	// Dispatcher consumes the table's DynamoDB stream (view type NEW_IMAGE or NEW_AND_OLD_IMAGES, with
	// ReportBatchItemFailures): domain.Service.DispatchFeedItems on the new images.
	Dispatcher = config.Dispatcher
	// Deliverer consumes the delivery queue (SQS, with ReportBatchItemFailures): one
	// domain.Service.AttemptDelivery per message, re-queueing what is not finished. Invoked by an
	// EventBridge schedule, it re-queues the deliveries that are due (a lost wake-up).
	Deliverer = config.Deliverer
)

// Deliverer tuning.
const (
	// DeliverConcurrency bounds the attempts one deliverer invocation makes at once: each may wait up to
	// 10 s for a slow receiver, so the messages of a batch are attempted side by side.
	DeliverConcurrency = 10
	// DueSweepLimit bounds the due deliveries one scheduled deliverer invocation re-queues.
	DueSweepLimit = 1000
)

// DispatcherSpec is the dispatcher's role.
func DispatcherSpec() app.Spec { return app.Spec{Name: Dispatcher, Start: start} }

// DelivererSpec is the deliverer's role.
func DelivererSpec() app.Spec { return app.Spec{Name: Deliverer, Start: start} }

// start is the cold start of the dispatcher and the deliverer. The deliverer's domain service has no
// delivery queue: its handler queues every wake-up itself (after an attempt, and for a delivery woken
// before it is due), so that a failed send is a batch item failure SQS retries rather than a lost wake-up.
func start(_ context.Context, env app.Env, logger *slog.Logger) (app.Served, error) {
	var opts app.ServiceOptions
	if err := queuerole.Ports(env, logger, &opts); err != nil {
		return app.Served{}, err
	}
	queue := opts.DeliveryQueue
	if queue == nil {
		return app.Served{}, fmt.Errorf("%s: %s is required", env.Name, config.EnvDeliveryQueueURL)
	}
	if env.Name == Deliverer {
		opts.DeliveryQueue = nil
	}
	svc, _, err := env.Service(logger, opts)
	if err != nil {
		return app.Served{}, err
	}
	if env.Name == Dispatcher {
		streams := dynamodbstreams.NewFromConfig(env.AWS, func(o *dynamodbstreams.Options) {
			if env.Config.DynamoDBEndpoint != "" {
				o.BaseEndpoint = aws.String(env.Config.DynamoDBEndpoint)
			}
		})
		return app.Served{Lambda: (&DispatchHandler{Svc: svc, Logger: logger, Streams: streams}).Invoke, Svc: svc}, nil
	}
	return app.Served{Lambda: (&DeliverHandler{Svc: svc, Queue: queue, Logger: logger}).Handle, Svc: svc}, nil
}

// DispatchHandler serves the dispatcher function.
type DispatchHandler struct {
	Svc    *domain.Service
	Logger *slog.Logger
	// Streams reads the table's stream again for the batches of the stream-failure queue (HandleFailures).
	Streams StreamsAPI
}

// DispatchResult is what one dispatcher invocation did (logged).
type DispatchResult struct {
	Records    int // stream records received
	Items      int // new images passed to the domain (INSERT and MODIFY records)
	FeedItems  int // of those, feed items
	Deliveries int // delivery records created (and their wake-ups queued)
}

// Handle dispatches the new images of one batch of stream records. Records are handled in order; when
// one cannot be (a malformed image, a storage failure), the response names its sequence number as the
// batch item failure, so Lambda retries the batch from that record on (with bisect-on-error and a failure
// destination set on the event source mapping). Repeating a record is harmless: delivery IDs are derived
// from (subscription, item) and created only once. REMOVE records and items other than feed items are
// ignored (the domain picks the feed items), and so are void sequence slots (dynamo.VoidImage).
func (h *DispatchHandler) Handle(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	start := time.Now()
	res := DispatchResult{Records: len(ev.Records)}
	var items []port.Item
	var seqs []string
	failAt := -1 // index in ev.Records of a record whose image cannot be read
	var failErr error
	for i, rec := range ev.Records {
		if rec.EventName != string(events.DynamoDBOperationTypeInsert) && rec.EventName != string(events.DynamoDBOperationTypeModify) {
			continue
		}
		if dynamo.VoidImage(rec.Change.NewImage) {
			continue // a void visible_seq slot: no item was committed there
		}
		it, err := dynamo.ItemFromStreamImage(rec.Change.NewImage)
		if err != nil {
			failAt, failErr = i, fmt.Errorf("stream record %s: %w (is the stream's view type NEW_IMAGE?)", rec.Change.SequenceNumber, err)
			break
		}
		items = append(items, it)
		seqs = append(seqs, rec.Change.SequenceNumber)
	}
	res.Items = len(items)
	// The whole batch in one call (subscriptions are read once per space); only if that fails, item by
	// item to find the first that fails (what went through before is not repeated by the retry).
	failSeq := ""
	if len(items) > 0 {
		r, err := h.Svc.DispatchFeedItems(ctx, items)
		if err != nil {
			h.Logger.LogAttrs(ctx, slog.LevelWarn, "dispatch of the batch failed; retrying record by record", slog.String("error", err.Error()))
			r = domain.DispatchResult{}
			for i := range items {
				one, err := h.Svc.DispatchFeedItems(ctx, items[i:i+1])
				r.Items += one.Items
				r.Deliveries += one.Deliveries
				if err != nil {
					failSeq, failErr = seqs[i], fmt.Errorf("stream record %s: %w", seqs[i], err)
					break
				}
			}
		}
		res.FeedItems, res.Deliveries = r.Items, r.Deliveries
	}
	if failSeq == "" && failAt >= 0 {
		failSeq = ev.Records[failAt].Change.SequenceNumber
	}
	attrs := []slog.Attr{slog.Int("records", res.Records), slog.Int("items", res.Items), slog.Int("feed_items", res.FeedItems),
		slog.Int("deliveries", res.Deliveries), slog.Duration("duration", time.Since(start))}
	if failSeq == "" {
		h.Logger.LogAttrs(ctx, slog.LevelInfo, "dispatch", attrs...)
		return events.DynamoDBEventResponse{BatchItemFailures: []events.DynamoDBBatchItemFailure{}}, nil
	}
	h.Logger.LogAttrs(ctx, slog.LevelError, "dispatch failed", append(attrs, slog.String("failed_sequence_number", failSeq),
		slog.String("error", failErr.Error()))...)
	return events.DynamoDBEventResponse{BatchItemFailures: []events.DynamoDBBatchItemFailure{{ItemIdentifier: failSeq}}}, nil
}

// DeliverHandler serves the deliverer function.
type DeliverHandler struct {
	Svc *domain.Service
	// Queue receives the wake-ups of deliveries that are not finished (the queue the messages came from).
	Queue  port.DeliveryQueue
	Logger *slog.Logger
	// Concurrency bounds the attempts made at once; 0 means DeliverConcurrency.
	Concurrency int
}

// DeliverResult is what one deliverer invocation on SQS messages did (logged).
type DeliverResult struct {
	Messages int // messages received
	Finished int // deliveries with nothing more due (delivered, failed for good, cancelled, gone)
	Requeued int // deliveries whose next wake-up was queued (an attempt to retry, or not yet due)
	Failed   int // messages reported as batch item failures (SQS delivers them again)
}

// HandleSQS makes the attempts the messages of one SQS batch wake, side by side (at most Concurrency at
// once). For a delivery that is not finished afterwards it queues a wake-up at its next attempt (delayed up
// to 900 s; one woken early is found not due and queued again), then reports its message as done. A
// message that cannot be handled (malformed, storage unavailable, the invocation's deadline, the wake-up
// not queued) is a batch item failure: SQS delivers it again after its visibility timeout, and to the
// dead-letter queue after maxReceiveCount.
func (h *DeliverHandler) HandleSQS(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	start := time.Now()
	n := h.Concurrency
	if n <= 0 {
		n = DeliverConcurrency
	}
	var mu sync.Mutex
	res := DeliverResult{Messages: len(ev.Records)}
	resp := events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}}
	sem := make(chan struct{}, n)
	var wg sync.WaitGroup
	for _, msg := range ev.Records {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			done, err := h.deliverOne(ctx, msg)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				res.Failed++
				resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: msg.MessageId})
				h.Logger.LogAttrs(ctx, slog.LevelError, "delivery message failed", slog.String("message_id", msg.MessageId), slog.String("error", err.Error()))
			case done:
				res.Finished++
			default:
				res.Requeued++
			}
		}()
	}
	wg.Wait()
	h.Logger.LogAttrs(ctx, slog.LevelInfo, "deliver", slog.Int("messages", res.Messages), slog.Int("finished", res.Finished),
		slog.Int("requeued", res.Requeued), slog.Int("failed", res.Failed), slog.Duration("duration", time.Since(start)))
	return resp, nil
}

// deliverOne handles one message: it reports whether the delivery is finished.
func (h *DeliverHandler) deliverOne(ctx context.Context, msg events.SQSMessage) (bool, error) {
	ref, err := sqsqueue.DecodeMessage(msg.Body)
	if err != nil {
		return false, err
	}
	out, err := h.Svc.AttemptDelivery(ctx, ref)
	if err != nil {
		return false, fmt.Errorf("delivery %s: %w", ref.DeliveryID, err)
	}
	if out.Done {
		return true, nil
	}
	if err := h.Queue.Enqueue(ctx, ref, out.NextAt); err != nil {
		return false, fmt.Errorf("delivery %s: queueing the next wake-up: %w", ref.DeliveryID, err)
	}
	return false, nil
}

// DueSweepResult is what one scheduled deliverer invocation did (its Lambda result, also logged).
type DueSweepResult struct {
	// Due counts the deliveries found due; Requeued those whose wake-up was queued.
	Due      int `json:"due"`
	Requeued int `json:"requeued"`
	// More says DueSweepLimit deliveries were due: the next invocation continues.
	More bool `json:"more"`
}

// SweepDue queues a wake-up, due now, for every delivery the store's due index says is due (at most
// DueSweepLimit, oldest first). It catches what a lost wake-up would leave behind (a failed SendMessage, a
// message dropped after maxReceiveCount); a wake-up that also arrives the normal way makes no second
// attempt, because attempts are claimed. Schedule it every few minutes.
func (h *DeliverHandler) SweepDue(ctx context.Context) (DueSweepResult, error) {
	start := time.Now()
	refs, err := h.Svc.DueDeliveries(ctx, DueSweepLimit)
	if err != nil {
		return DueSweepResult{}, fmt.Errorf("%s: reading due deliveries: %w", Deliverer, err)
	}
	res := DueSweepResult{Due: len(refs), More: len(refs) == DueSweepLimit}
	n := h.Concurrency
	if n <= 0 {
		n = DeliverConcurrency
	}
	var mu sync.Mutex
	var errs []error
	sem := make(chan struct{}, n)
	var wg sync.WaitGroup
	now := time.Now()
	for _, ref := range refs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			err := h.Queue.Enqueue(ctx, ref, now)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			res.Requeued++
		}()
	}
	wg.Wait()
	attrs := []slog.Attr{slog.Int("due", res.Due), slog.Int("requeued", res.Requeued), slog.Bool("more", res.More),
		slog.Duration("duration", time.Since(start))}
	if err := errors.Join(errs...); err != nil {
		h.Logger.LogAttrs(ctx, slog.LevelError, "due sweep failed", append(attrs, slog.String("error", err.Error()))...)
		return res, fmt.Errorf("%s: re-queueing due deliveries: %w", Deliverer, err)
	}
	h.Logger.LogAttrs(ctx, slog.LevelInfo, "due sweep", attrs...)
	return res, nil
}

// invocation is what tells the kinds of invocation of the dispatcher and the deliverer apart.
type invocation struct {
	Records []struct {
		EventSource string `json:"eventSource"`
	} `json:"Records"`
	DetailType string `json:"detail-type"`
}

// decodeInvocation reads raw, an invocation of function fn: what tells its kinds apart, and the SQS batch it
// is when its records come from SQS (nil otherwise).
func decodeInvocation(fn string, raw json.RawMessage) (invocation, *events.SQSEvent, error) {
	var inv invocation
	if err := json.Unmarshal(raw, &inv); err != nil {
		return inv, nil, fmt.Errorf("%s: not an event: %w", fn, err)
	}
	if len(inv.Records) == 0 || inv.Records[0].EventSource != "aws:sqs" {
		return inv, nil, nil
	}
	var ev events.SQSEvent
	if err := json.Unmarshal(raw, &ev); err != nil {
		return inv, nil, fmt.Errorf("%s: malformed SQS event: %w", fn, err)
	}
	return inv, &ev, nil
}

// Handle serves one deliverer invocation: an SQS batch (HandleSQS) or an EventBridge scheduled event
// (SweepDue).
func (h *DeliverHandler) Handle(ctx context.Context, raw json.RawMessage) (any, error) {
	inv, batch, err := decodeInvocation(Deliverer, raw)
	if err != nil {
		return nil, err
	}
	switch {
	case batch != nil:
		return h.HandleSQS(ctx, *batch)
	case inv.DetailType == "Scheduled Event":
		return h.SweepDue(ctx)
	}
	return nil, fmt.Errorf("%s: neither an SQS batch nor a scheduled event", Deliverer)
}
