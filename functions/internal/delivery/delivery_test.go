package delivery_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/domain/domaintest"
	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/functions/internal/delivery"
	"github.com/waypost/waypost/internal/platform"
	"github.com/waypost/waypost/internal/syncbuf"
	"github.com/waypost/waypost/store/dynamo"
	"github.com/waypost/waypost/store/dynamo/dynamotest"
	"github.com/waypost/waypost/store/faulty"
	"github.com/waypost/waypost/store/sqsqueue"
)

// fakeSender is a port.WebhookSender that passes every challenge and answers deliveries with status.
type fakeSender struct {
	status int
	sent   syncbuf.List[string] // event feed items' item_id, in order
}

func (s *fakeSender) CheckTarget(string) error { return nil }
func (s *fakeSender) Verify(context.Context, string, port.WebhookKeys) error {
	return nil
}
func (s *fakeSender) Deliver(_ context.Context, _ string, _ port.WebhookKeys, ev port.WebhookEvent) (port.WebhookResult, error) {
	var fi struct {
		ItemID string `json:"item_id"`
	}
	if err := json.Unmarshal(ev.FeedItem, &fi); err != nil {
		return port.WebhookResult{}, err
	}
	s.sent.Add(fi.ItemID)
	return port.WebhookResult{Delivered: s.status/100 == 2, StatusCode: s.status, Reason: fmt.Sprintf("status %d", s.status)}, nil
}

// wake is one Enqueue call.
type wake struct {
	ref       port.DeliveryRef
	notBefore time.Time
}

// fakeQueue records wake-ups; err makes Enqueue fail.
type fakeQueue struct {
	err   error
	wakes syncbuf.List[wake]
}

func (q *fakeQueue) Enqueue(_ context.Context, ref port.DeliveryRef, notBefore time.Time) error {
	if q.err != nil {
		return q.err
	}
	q.wakes.Add(wake{ref, notBefore})
	return nil
}

// deliveryWorld is a domain on DynamoDB (minidyn) with a simulated stream of its table, a fake sender and
// a fake queue: the dispatcher's and the deliverer's handlers run on it in process.
type deliveryWorld struct {
	f        *domaintest.Fixture
	items    *faulty.ItemStore
	stream   *dynamotest.Stream
	sender   *fakeSender
	queue    *fakeQueue
	dispatch *delivery.DispatchHandler
	deliver  *delivery.DeliverHandler
	a, b     domaintest.Party
	space    string
}

func newDeliveryWorld(t *testing.T) *deliveryWorld {
	srv := dynamotest.New(t)
	st := srv.Store(t, nil, dynamo.Options{})
	w := &deliveryWorld{items: faulty.NewItemStore(st), stream: srv.Stream(t, st.Table()), sender: &fakeSender{status: 200}, queue: &fakeQueue{}}
	backend := func(t testing.TB) domaintest.Backend {
		return domaintest.Backend{Store: w.items, Blobs: domaintest.TempBlobs(t)}
	}
	// One domain service as the dispatcher has it (with the queue), one as the deliverer has it (without:
	// its handler queues the wake-ups), on the same table and clock.
	w.f = domaintest.New(t, backend, func(c *domain.Config) { c.Webhooks, c.DeliveryQueue = w.sender, w.queue })
	deliverer, err := domain.New(domain.Config{Store: w.items, Blobs: w.f.Backend.Blobs, Clock: w.f.Clock, IDs: platform.IDs{},
		CursorKey: []byte("0123456789abcdef0123456789abcdef-test-key"), Webhooks: w.sender})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	w.dispatch = &delivery.DispatchHandler{Svc: w.f.Svc, Logger: log}
	w.deliver = &delivery.DeliverHandler{Svc: deliverer, Queue: w.queue, Logger: log}
	w.space = w.f.Space().SpaceID
	w.a, w.b = w.f.Party(w.space), w.f.Party(w.space)
	_, err = w.f.Svc.UpsertSubscription(context.Background(), w.b.P, domain.UpsertSubscriptionRequest{RequestID: "sub-1",
		ConsumerID: w.b.ConsumerID, EventTypes: []string{domain.EventMessageCommitted},
		Delivery: domain.SubscriptionDelivery{Mode: domain.DeliveryModeWebhook, URL: "https://receiver.example/hook",
			Secret: "whsec_rBdQJc8BCm4AiFLnM5qNWu1YmLzo+n2Drg7CWj+s408="}})
	if err != nil {
		t.Fatal(err)
	}
	w.stream.Next(t) // the set-up is not under test
	return w
}

// sendTwo sends two messages from A to B and returns the stream batch of both, with their two feed records.
func (w *deliveryWorld) sendTwo(t *testing.T) (events.DynamoDBEvent, []events.DynamoDBEventRecord) {
	t.Helper()
	w.f.Send(w.a.P, "one", w.b.ActorID)
	w.f.Send(w.a.P, "two", w.b.ActorID)
	ev := w.next(t)
	feed := feedRecords(ev)
	if len(feed) != 2 {
		t.Fatalf("%d feed records", len(feed))
	}
	return ev, feed
}

// dispatchAll runs the dispatcher on ev, which must go through whole and queue exactly wakes wake-ups.
func (w *deliveryWorld) dispatchAll(t *testing.T, ev events.DynamoDBEvent, wakes int, what string) {
	t.Helper()
	if resp, err := w.dispatch.Handle(context.Background(), ev); err != nil || len(resp.BatchItemFailures) != 0 || len(w.queue.wakes.Take()) != wakes {
		t.Fatalf("%s: %+v, %v", what, resp, err)
	}
}

// next returns the stream records since the last call, after the JSON trip Lambda makes them take.
func (w *deliveryWorld) next(t *testing.T) events.DynamoDBEvent {
	t.Helper()
	b, err := json.Marshal(w.stream.Next(t))
	if err != nil {
		t.Fatal(err)
	}
	var ev events.DynamoDBEvent
	if err := json.Unmarshal(b, &ev); err != nil {
		t.Fatal(err)
	}
	return ev
}

func feedRecords(ev events.DynamoDBEvent) []events.DynamoDBEventRecord {
	var out []events.DynamoDBEventRecord
	for _, r := range ev.Records {
		if strings.HasPrefix(r.Change.Keys["pk"].String(), "FD#") {
			out = append(out, r)
		}
	}
	return out
}

func failures(r events.DynamoDBEventResponse) []string {
	var out []string
	for _, f := range r.BatchItemFailures {
		out = append(out, f.ItemIdentifier)
	}
	return out
}

func sqsEvent(bodies ...string) events.SQSEvent {
	var ev events.SQSEvent
	for i, b := range bodies {
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: fmt.Sprintf("m-%d", i), Body: b, EventSource: "aws:sqs"})
	}
	return ev
}

func body(t *testing.T, ref port.DeliveryRef) string {
	t.Helper()
	b, err := sqsqueue.EncodeMessage(ref)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The dispatcher turns a batch of stream records into one delivery (and one wake-up) per announced feed
// item, once however often the batch comes back; other records are ignored.
func TestDispatchHandler(t *testing.T) {
	w := newDeliveryWorld(t)
	ctx := context.Background()
	sent := w.f.Send(w.a.P, "hello", w.b.ActorID)
	ev := w.next(t)
	feed := feedRecords(ev)
	if len(feed) != 1 || len(ev.Records) < 3 {
		t.Fatalf("stream of one send: %d records, %d feed items", len(ev.Records), len(feed))
	}
	resp, err := w.dispatch.Handle(ctx, ev)
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("dispatch: %+v, %v", resp, err)
	}
	wakes := w.queue.wakes.Take()
	if len(wakes) != 1 || wakes[0].ref.SpaceID != w.space || !wakes[0].notBefore.Equal(w.f.Clock.Now()) {
		t.Fatalf("wake-ups: %+v", wakes)
	}
	list, err := w.f.Svc.ListDeliveries(ctx, w.space, domain.DeliveryPending)
	if err != nil || len(list.Deliveries) != 1 || list.Deliveries[0].DeliveryID != wakes[0].ref.DeliveryID ||
		list.Deliveries[0].VisibleSeq != sent.VisibleSeq || list.Deliveries[0].EventType != domain.EventMessageCommitted {
		t.Fatalf("pending deliveries: %+v, %v", list, err)
	}
	// The same batch again (a retried stream batch): nothing new.
	w.dispatchAll(t, ev, 0, "repeated batch")
	// A void visible_seq slot (a reservation whose transaction never committed) announces nothing.
	void := events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{{EventName: "INSERT", Change: events.DynamoDBStreamRecord{
		SequenceNumber: "void-1", NewImage: map[string]events.DynamoDBAttributeValue{
			"pk": events.NewStringAttribute("FD#" + w.space), "sk": events.NewStringAttribute("00000000000000000099"),
			dynamo.AttrVoid: events.NewBooleanAttribute(true)}}}}}
	w.dispatchAll(t, void, 0, "void slot")
	// REMOVE records and records of other items change nothing.
	rm := events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{{EventName: "REMOVE", Change: events.DynamoDBStreamRecord{
		Keys: feed[0].Change.Keys, SequenceNumber: "1"}}}}
	w.dispatchAll(t, rm, 0, "REMOVE")
}

// A record whose image cannot be read is the batch item failure; the records before it are dispatched.
func TestDispatchHandlerBadImage(t *testing.T) {
	w := newDeliveryWorld(t)
	ctx := context.Background()
	ev, feed := w.sendTwo(t)
	bad := events.DynamoDBEventRecord{EventName: "INSERT", Change: events.DynamoDBStreamRecord{SequenceNumber: "bad-1",
		Keys: map[string]events.DynamoDBAttributeValue{"pk": events.NewStringAttribute("FD#x"), "sk": events.NewStringAttribute("1")}}}
	ev.Records = []events.DynamoDBEventRecord{feed[0], bad, feed[1]} // KEYS_ONLY-like: no new image
	resp, err := w.dispatch.Handle(ctx, ev)
	if err != nil || strings.Join(failures(resp), ",") != "bad-1" {
		t.Fatalf("dispatch: %+v, %v", resp, err)
	}
	if wakes := w.queue.wakes.Take(); len(wakes) != 1 {
		t.Fatalf("wake-ups before the bad record: %+v", wakes)
	}
	// Lambda retries from the failed record on; once it is fixed, the rest goes through.
	ev.Records = []events.DynamoDBEventRecord{feed[1]}
	w.dispatchAll(t, ev, 1, "retry")
}

// A storage failure names the first record that could not be dispatched: the batch fails, then record by
// record the first feed item goes through and the second does not.
func TestDispatchHandlerStorageFailure(t *testing.T) {
	w := newDeliveryWorld(t)
	ctx := context.Background()
	ev, feed := w.sendTwo(t)
	reads := 0 // subscription reads: the batch's (fails), the first record's (works), then every later one fails
	armed := w.items.FailQuery(faulty.QueryFault{Fault: faulty.Fault{Repeat: true}, Match: func(q port.Query) bool {
		if !strings.HasPrefix(q.PK, "WS#") {
			return false
		}
		reads++
		return reads != 2
	}})
	resp, err := w.dispatch.Handle(ctx, ev)
	if err != nil || strings.Join(failures(resp), ",") != feed[1].Change.SequenceNumber {
		t.Fatalf("dispatch with the subscriptions unreadable: %+v, %v (feed records %s, %s)", resp, err,
			feed[0].Change.SequenceNumber, feed[1].Change.SequenceNumber)
	}
	if wakes := w.queue.wakes.Take(); len(wakes) != 1 {
		t.Fatalf("wake-ups: %+v, want the first item's", wakes)
	}
	armed.Disarm()
	w.dispatchAll(t, ev, 1, "retry")
}

// The deliverer attempts what a message wakes, queues the next wake-up of what is not finished (at the
// retry time, or again when woken early), and reports failures per message.
func TestDeliverHandler(t *testing.T) {
	w := newDeliveryWorld(t)
	ctx := context.Background()
	w.f.Send(w.a.P, "hello", w.b.ActorID)
	if _, err := w.dispatch.Handle(ctx, w.next(t)); err != nil {
		t.Fatal(err)
	}
	ref := w.queue.wakes.Take()[0].ref
	msg := body(t, ref)

	// The receiver fails: one attempt, and a wake-up about 1 s later (±10%).
	w.sender.status = 500
	resp, err := w.deliver.HandleSQS(ctx, sqsEvent(msg))
	if err != nil || len(resp.BatchItemFailures) != 0 || len(w.sender.sent.Take()) != 1 {
		t.Fatalf("first attempt: %+v, %v", resp, err)
	}
	wakes := w.queue.wakes.Take()
	now := w.f.Clock.Now()
	if len(wakes) != 1 || wakes[0].ref != ref || wakes[0].notBefore.Sub(now) < 900*time.Millisecond || wakes[0].notBefore.Sub(now) > 1100*time.Millisecond {
		t.Fatalf("wake-ups after a failed first attempt: %+v (now %v)", wakes, now)
	}
	next := wakes[0].notBefore
	// Woken early (a duplicate, or a delay SQS rounded): no attempt, the same wake-up again.
	if resp, err := w.deliver.HandleSQS(ctx, sqsEvent(msg)); err != nil || len(resp.BatchItemFailures) != 0 || len(w.sender.sent.Take()) != 0 {
		t.Fatalf("early wake-up: %+v, %v", resp, err)
	}
	if wakes := w.queue.wakes.Take(); len(wakes) != 1 || !wakes[0].notBefore.Equal(next) {
		t.Fatalf("wake-ups after an early wake-up: %+v, want one at %v", wakes, next)
	}

	// The scheduled sweep finds it once it is due, and queues it for now.
	w.f.Clock.Advance(2 * time.Second)
	sched, err := json.Marshal(map[string]any{"version": "0", "id": "x", "detail-type": "Scheduled Event", "source": "aws.events",
		"time": "2026-10-11T10:00:02Z", "resources": []string{"arn:aws:events:us-east-1:123456789012:rule/sweep"}, "detail": map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := w.deliver.Handle(ctx, sched)
	if res, ok := out.(delivery.DueSweepResult); err != nil || !ok || res.Due != 1 || res.Requeued != 1 || res.More {
		t.Fatalf("scheduled sweep: %#v, %v", out, err)
	}
	if wakes := w.queue.wakes.Take(); len(wakes) != 1 || wakes[0].ref != ref {
		t.Fatalf("wake-ups of the sweep: %+v", wakes)
	}

	// Due and the receiver answers: delivered, finished, nothing queued, nothing pending. The raw Lambda
	// event goes through Handle.
	w.sender.status = 204
	raw, err := json.Marshal(sqsEvent(msg))
	if err != nil {
		t.Fatal(err)
	}
	out, err = w.deliver.Handle(ctx, raw)
	if r, ok := out.(events.SQSEventResponse); err != nil || !ok || len(r.BatchItemFailures) != 0 || len(w.sender.sent.Take()) != 1 || len(w.queue.wakes.Take()) != 0 {
		t.Fatalf("second attempt: %#v, %v", out, err)
	}
	if l, err := w.f.Svc.ListDeliveries(ctx, w.space, domain.DeliveryPending); err != nil || len(l.Deliveries) != 0 {
		t.Fatalf("pending after delivery: %+v, %v", l, err)
	}
	// A wake-up of a finished delivery is just consumed.
	if resp, err := w.deliver.HandleSQS(ctx, sqsEvent(msg)); err != nil || len(resp.BatchItemFailures) != 0 || len(w.sender.sent.Take())+len(w.queue.wakes.Take()) != 0 {
		t.Fatalf("wake-up after delivery: %+v, %v", resp, err)
	}
	if out, err := w.deliver.Handle(ctx, json.RawMessage(`{"hello":"world"}`)); err == nil {
		t.Fatalf("an unknown event: %#v", out)
	}
}

// Messages that cannot be handled are batch item failures, each on its own: the others go through.
func TestDeliverHandlerFailures(t *testing.T) {
	w := newDeliveryWorld(t)
	ctx := context.Background()
	ev, _ := w.sendTwo(t)
	if _, err := w.dispatch.Handle(ctx, ev); err != nil {
		t.Fatal(err)
	}
	wakes := w.queue.wakes.Take()
	if len(wakes) != 2 {
		t.Fatalf("%d wake-ups", len(wakes))
	}
	// m-0 malformed, m-1 unreadable in storage, m-2 fine.
	armed := w.items.FailGet(faulty.GetFault{Fault: faulty.Fault{Repeat: true}, Match: func(k port.Key) bool {
		return strings.HasSuffix(k.SK, wakes[0].ref.DeliveryID) || k.SK == wakes[0].ref.DeliveryID
	}})
	resp, err := w.deliver.HandleSQS(ctx, sqsEvent(`{"space_id":"x"}`, body(t, wakes[0].ref), body(t, wakes[1].ref)))
	var ids []string
	for _, f := range resp.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	if err != nil || strings.Join(slices.Sorted(slices.Values(ids)), ",") != "m-0,m-1" || armed.Fired() == 0 || len(w.sender.sent.Take()) != 1 {
		t.Fatalf("mixed batch: failures %q, %v (fault fired %d)", ids, err, armed.Fired())
	}
	armed.Disarm()
	// The next wake-up cannot be queued: the message fails, so SQS brings it back.
	w.sender.status = 503
	w.queue.err = errors.New("queue down")
	resp, err = w.deliver.HandleSQS(ctx, sqsEvent(body(t, wakes[0].ref)))
	if err != nil || len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != "m-0" {
		t.Fatalf("wake-up not queued: %+v, %v", resp, err)
	}
	// The sweep reports a queue it cannot reach.
	w.f.Clock.Advance(10 * time.Second)
	if res, err := w.deliver.SweepDue(ctx); err == nil || res.Due == 0 || res.Requeued != 0 {
		t.Fatalf("sweep with the queue down: %+v, %v", res, err)
	}
}
