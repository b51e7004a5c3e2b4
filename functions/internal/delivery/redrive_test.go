package delivery_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	sttypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/functions/internal/delivery"
	"github.com/waypost/waypost/store/faulty"
)

// fakeShard is one open shard of a DynamoDB stream: records in order, served two per GetRecords page.
type fakeShard struct {
	mu      sync.Mutex
	records []sttypes.Record
	err     error // answers every call when set
	calls   int
}

func (s *fakeShard) GetShardIterator(_ context.Context, in *dynamodbstreams.GetShardIteratorInput, _ ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.err != nil {
		return nil, s.err
	}
	if in.ShardIteratorType != sttypes.ShardIteratorTypeAtSequenceNumber || aws.ToString(in.ShardId) != "shardId-1" {
		return nil, fmt.Errorf("unexpected iterator request %+v", in)
	}
	for i, r := range s.records {
		if *r.Dynamodb.SequenceNumber == aws.ToString(in.SequenceNumber) {
			return &dynamodbstreams.GetShardIteratorOutput{ShardIterator: aws.String(strconv.Itoa(i))}, nil
		}
	}
	return nil, errors.New("TrimmedDataAccessException: the sequence number is past the stream's retention")
}

func (s *fakeShard) GetRecords(_ context.Context, in *dynamodbstreams.GetRecordsInput, _ ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.err != nil {
		return nil, s.err
	}
	i, _ := strconv.Atoi(aws.ToString(in.ShardIterator))
	j := min(i+2, len(s.records))
	return &dynamodbstreams.GetRecordsOutput{Records: s.records[i:j], NextShardIterator: aws.String(strconv.Itoa(j))}, nil
}

// shardOf turns Lambda stream records into the records of a shard, numbered from 1000 on.
func shardOf(t *testing.T, recs []events.DynamoDBEventRecord) *fakeShard {
	t.Helper()
	s := &fakeShard{}
	for i, r := range recs {
		seq := strconv.Itoa(1000 + i)
		s.records = append(s.records, sttypes.Record{EventID: aws.String("e" + seq), EventName: sttypes.OperationType(r.EventName),
			Dynamodb: &sttypes.StreamRecord{SequenceNumber: aws.String(seq), Keys: streamImage(t, r.Change.Keys),
				NewImage: streamImage(t, r.Change.NewImage), StreamViewType: sttypes.StreamViewTypeNewImage}})
	}
	return s
}

func streamImage(t *testing.T, in map[string]events.DynamoDBAttributeValue) map[string]sttypes.AttributeValue {
	t.Helper()
	if in == nil {
		return nil
	}
	out := map[string]sttypes.AttributeValue{}
	for k, v := range in {
		switch v.DataType() {
		case events.DataTypeString:
			out[k] = &sttypes.AttributeValueMemberS{Value: v.String()}
		case events.DataTypeNumber:
			out[k] = &sttypes.AttributeValueMemberN{Value: v.Number()}
		case events.DataTypeBinary:
			out[k] = &sttypes.AttributeValueMemberB{Value: v.Binary()}
		case events.DataTypeBoolean:
			out[k] = &sttypes.AttributeValueMemberBOOL{Value: v.Boolean()}
		default:
			t.Fatalf("attribute %s of type %v", k, v.DataType())
		}
	}
	return out
}

// failureRecord is Lambda's on-failure record of a stream batch (the body of a stream-failure queue message).
func failureRecord(start, end string) string {
	b, _ := json.Marshal(map[string]any{"version": "1.0", "DDBStreamBatchInfo": map[string]any{
		"shardId": "shardId-1", "startSequenceNumber": start, "endSequenceNumber": end, "batchSize": 2,
		"streamArn": "arn:aws:dynamodb:us-east-1:123456789012:table/t/stream/2026-11-01T00:00:00.000"}})
	return string(b)
}

func invokeSQS(t *testing.T, h *delivery.DispatchHandler, bodies ...string) events.SQSEventResponse {
	t.Helper()
	raw, err := json.Marshal(sqsEvent(bodies...))
	if err != nil {
		t.Fatal(err)
	}
	out, err := h.Invoke(context.Background(), raw)
	if err != nil {
		t.Fatal(err)
	}
	resp, ok := out.(events.SQSEventResponse)
	if !ok {
		t.Fatalf("answer %T to an SQS batch", out)
	}
	return resp
}

// A stream batch Lambda gave up on lands in the stream-failure queue; the dispatcher, invoked with that
// queue's messages, reads the batch's records from the stream again and dispatches them: the delivery the
// batch owed is created (once, however often the message comes). Messages it cannot re-drive (malformed,
// records past the stream's retention, the stream unreadable, dispatch failing again) are batch item
// failures, so SQS retries them and finally moves them to the dead-letter queue.
func TestDispatchRedrivesStreamFailures(t *testing.T) {
	w := newDeliveryWorld(t)
	w.f.Send(w.a.P, "lost in a failed batch", w.b.ActorID)
	ev := w.next(t)
	shard := shardOf(t, ev.Records)
	w.dispatch.Streams = shard
	last := *shard.records[len(shard.records)-1].Dynamodb.SequenceNumber
	if resp := invokeSQS(t, w.dispatch, failureRecord("1000", last)); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("re-drive: %+v", resp)
	}
	wakes := w.queue.wakes.Take()
	list, err := w.f.Svc.ListDeliveries(context.Background(), w.space, domain.DeliveryPending)
	if err != nil || len(wakes) != 1 || len(list.Deliveries) != 1 {
		t.Fatalf("after the re-drive: %d wake-ups, deliveries %+v, %v", len(wakes), list, err)
	}
	if resp := invokeSQS(t, w.dispatch, failureRecord("1000", last)); len(resp.BatchItemFailures) != 0 || len(w.queue.wakes.Take()) != 0 {
		t.Fatalf("the same failure again: %+v (nothing new may be created)", resp)
	}
	// The range ends before the feed item: nothing of it is dispatched.
	w.f.Send(w.a.P, "second", w.b.ActorID)
	shard2 := shardOf(t, w.next(t).Records)
	w.dispatch.Streams = shard2
	feedAt := -1
	for i, r := range shard2.records {
		if strings.HasPrefix(r.Dynamodb.Keys["pk"].(*sttypes.AttributeValueMemberS).Value, "FD#") {
			feedAt = i
		}
	}
	if feedAt < 0 {
		t.Fatal("no feed record")
	}
	if feedAt > 0 {
		if resp := invokeSQS(t, w.dispatch, failureRecord("1000", strconv.Itoa(1000+feedAt-1))); len(resp.BatchItemFailures) != 0 || len(w.queue.wakes.Take()) != 0 {
			t.Fatalf("a range before the feed item: %+v", resp)
		}
	}

	// Failures: each message is reported, the others of the batch go through.
	bad := []string{`{"not":"a failure record"}`, failureRecord("1", "2"), "not json"}
	resp := invokeSQS(t, w.dispatch, append(bad, failureRecord("1000", strconv.Itoa(1000+len(shard2.records)-1)))...)
	if got := len(resp.BatchItemFailures); got != len(bad) {
		t.Fatalf("%d failures, want %d: %+v", got, len(bad), resp)
	}
	if wakes := w.queue.wakes.Take(); len(wakes) != 1 {
		t.Fatalf("the good message of the batch: %d wake-ups", len(wakes))
	}
	shard2.err = errors.New("stream unreadable")
	if resp := invokeSQS(t, w.dispatch, failureRecord("1000", "1001")); len(resp.BatchItemFailures) != 1 {
		t.Fatalf("stream unreadable: %+v", resp)
	}
	shard2.err = nil
	w.f.Send(w.a.P, "third", w.b.ActorID)
	shard3 := shardOf(t, w.next(t).Records)
	w.dispatch.Streams = shard3
	armed := w.items.FailQuery(faulty.QueryFault{Fault: faulty.Fault{Repeat: true}, Match: func(q port.Query) bool { return strings.HasPrefix(q.PK, "WS#") }})
	if resp := invokeSQS(t, w.dispatch, failureRecord("1000", strconv.Itoa(1000+len(shard3.records)-1))); len(resp.BatchItemFailures) != 1 {
		t.Fatalf("dispatch failing again: %+v", resp)
	}
	armed.Disarm()
	if resp := invokeSQS(t, w.dispatch, failureRecord("1000", strconv.Itoa(1000+len(shard3.records)-1))); len(resp.BatchItemFailures) != 0 || len(w.queue.wakes.Take()) != 1 {
		t.Fatalf("once dispatch works: %+v", resp)
	}
}

// Invoke still serves the stream itself.
func TestDispatchInvokeStream(t *testing.T) {
	w := newDeliveryWorld(t)
	w.f.Send(w.a.P, "hello", w.b.ActorID)
	raw, err := json.Marshal(w.next(t))
	if err != nil {
		t.Fatal(err)
	}
	out, err := w.dispatch.Invoke(context.Background(), raw)
	resp, ok := out.(events.DynamoDBEventResponse)
	if err != nil || !ok || len(resp.BatchItemFailures) != 0 || len(w.queue.wakes.Take()) != 1 {
		t.Fatalf("stream batch through Invoke: %#v, %v", out, err)
	}
}
