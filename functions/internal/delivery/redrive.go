package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	sttypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// StreamsAPI is the part of the DynamoDB Streams client the re-drive uses; *dynamodbstreams.Client
// implements it.
type StreamsAPI interface {
	GetShardIterator(ctx context.Context, in *dynamodbstreams.GetShardIteratorInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *dynamodbstreams.GetRecordsInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error)
}

// maxEmptyPages bounds the empty GetRecords pages read while looking for the end of a failed batch (an open
// shard answers empty pages until new records arrive).
const maxEmptyPages = 5

// streamFailure is the part of Lambda's on-failure record for a DynamoDB stream batch the re-drive needs.
type streamFailure struct {
	Batch *struct {
		ShardID             string `json:"shardId"`
		StartSequenceNumber string `json:"startSequenceNumber"`
		EndSequenceNumber   string `json:"endSequenceNumber"`
		StreamArn           string `json:"streamArn"`
		BatchSize           int    `json:"batchSize"`
	} `json:"DDBStreamBatchInfo"`
}

// Invoke serves one dispatcher invocation: a batch of the table's stream (Handle), or a batch of the
// stream-failure queue (HandleFailures), which Lambda fills with the batches it gave up on.
func (h *DispatchHandler) Invoke(ctx context.Context, raw json.RawMessage) (any, error) {
	_, batch, err := decodeInvocation(Dispatcher, raw)
	if err != nil {
		return nil, err
	}
	if batch != nil {
		return h.HandleFailures(ctx, *batch)
	}
	var ev events.DynamoDBEvent
	if err := json.Unmarshal(raw, &ev); err != nil {
		return nil, fmt.Errorf("%s: malformed stream event: %w", Dispatcher, err)
	}
	return h.Handle(ctx, ev)
}

// HandleFailures re-drives the stream batches Lambda gave up on (the on-failure destination of the
// dispatcher's stream mapping, an SQS queue): each message names a shard and a range of sequence numbers;
// the records of that range are read again from the stream (it keeps them 24 hours) and dispatched as a
// stream batch would be. Dispatching twice is harmless (deliveries are created once). A message whose
// records cannot be read or dispatched is a batch item failure: SQS delivers it again later and, after the
// queue's maxReceiveCount, to its dead-letter queue (alarmed).
func (h *DispatchHandler) HandleFailures(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	resp := events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}}
	for _, msg := range ev.Records {
		n, err := h.redrive(ctx, msg.Body)
		if err != nil {
			h.Logger.LogAttrs(ctx, slog.LevelError, "stream batch not re-driven", slog.String("message_id", msg.MessageId), slog.String("error", err.Error()))
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: msg.MessageId})
			continue
		}
		h.Logger.LogAttrs(ctx, slog.LevelInfo, "stream batch re-driven", slog.String("message_id", msg.MessageId), slog.Int("records", n))
	}
	return resp, nil
}

// redrive re-reads and dispatches the records of one failed batch; it returns how many it dispatched.
func (h *DispatchHandler) redrive(ctx context.Context, body string) (int, error) {
	var f streamFailure
	if err := json.Unmarshal([]byte(body), &f); err != nil || f.Batch == nil || f.Batch.ShardID == "" ||
		f.Batch.StreamArn == "" || f.Batch.StartSequenceNumber == "" || f.Batch.EndSequenceNumber == "" {
		return 0, fmt.Errorf("not a DynamoDB stream failure record (%v)", err)
	}
	if h.Streams == nil {
		return 0, errors.New("no DynamoDB Streams client")
	}
	b := f.Batch
	it, err := h.Streams.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{
		StreamArn: aws.String(b.StreamArn), ShardId: aws.String(b.ShardID),
		ShardIteratorType: sttypes.ShardIteratorTypeAtSequenceNumber, SequenceNumber: aws.String(b.StartSequenceNumber),
	})
	if err != nil {
		return 0, fmt.Errorf("shard %s from %s: %w", b.ShardID, b.StartSequenceNumber, err)
	}
	var batch events.DynamoDBEvent
	iter, empty := it.ShardIterator, 0
	for iter != nil && empty < maxEmptyPages {
		page, err := h.Streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter})
		if err != nil {
			return 0, fmt.Errorf("records of shard %s: %w", b.ShardID, err)
		}
		if len(page.Records) == 0 {
			empty++
		}
		done := false
		for _, r := range page.Records {
			if r.Dynamodb == nil || r.Dynamodb.SequenceNumber == nil {
				continue
			}
			seq := *r.Dynamodb.SequenceNumber
			if seqLess(b.EndSequenceNumber, seq) {
				done = true
				break
			}
			rec, err := eventRecord(r)
			if err != nil {
				return 0, fmt.Errorf("record %s: %w", seq, err)
			}
			batch.Records = append(batch.Records, rec)
			if seq == b.EndSequenceNumber {
				done = true
				break
			}
		}
		if done {
			break
		}
		iter = page.NextShardIterator
	}
	if len(batch.Records) == 0 {
		return 0, fmt.Errorf("no record of %s…%s left in shard %s", b.StartSequenceNumber, b.EndSequenceNumber, b.ShardID)
	}
	resp, err := h.Handle(ctx, batch)
	if err != nil {
		return 0, err
	}
	if len(resp.BatchItemFailures) > 0 {
		return 0, fmt.Errorf("dispatch failed again at record %s", resp.BatchItemFailures[0].ItemIdentifier)
	}
	return len(batch.Records), nil
}

// seqLess compares stream sequence numbers (decimal digit strings of varying length).
func seqLess(a, b string) bool {
	a, b = strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}

// eventRecord turns a record read from DynamoDB Streams into the form Lambda delivers it in.
func eventRecord(r sttypes.Record) (events.DynamoDBEventRecord, error) {
	keys, err := eventImage(r.Dynamodb.Keys)
	if err != nil {
		return events.DynamoDBEventRecord{}, err
	}
	img, err := eventImage(r.Dynamodb.NewImage)
	if err != nil {
		return events.DynamoDBEventRecord{}, err
	}
	return events.DynamoDBEventRecord{
		EventID: aws.ToString(r.EventID), EventName: string(r.EventName), EventSource: "aws:dynamodb",
		Change: events.DynamoDBStreamRecord{Keys: keys, NewImage: img, SequenceNumber: aws.ToString(r.Dynamodb.SequenceNumber),
			StreamViewType: string(r.Dynamodb.StreamViewType)},
	}, nil
}

func eventImage(in map[string]sttypes.AttributeValue) (map[string]events.DynamoDBAttributeValue, error) {
	if in == nil {
		return nil, nil
	}
	out := make(map[string]events.DynamoDBAttributeValue, len(in))
	for k, v := range in {
		ev, err := eventValue(v)
		if err != nil {
			return nil, fmt.Errorf("attribute %s: %w", k, err)
		}
		out[k] = ev
	}
	return out, nil
}

func eventValue(v sttypes.AttributeValue) (events.DynamoDBAttributeValue, error) {
	switch t := v.(type) {
	case *sttypes.AttributeValueMemberS:
		return events.NewStringAttribute(t.Value), nil
	case *sttypes.AttributeValueMemberN:
		return events.NewNumberAttribute(t.Value), nil
	case *sttypes.AttributeValueMemberB:
		return events.NewBinaryAttribute(t.Value), nil
	case *sttypes.AttributeValueMemberBOOL:
		return events.NewBooleanAttribute(t.Value), nil
	case *sttypes.AttributeValueMemberNULL:
		return events.NewNullAttribute(), nil
	case *sttypes.AttributeValueMemberSS:
		return events.NewStringSetAttribute(t.Value), nil
	case *sttypes.AttributeValueMemberNS:
		return events.NewNumberSetAttribute(t.Value), nil
	case *sttypes.AttributeValueMemberBS:
		return events.NewBinarySetAttribute(t.Value), nil
	case *sttypes.AttributeValueMemberL:
		l := make([]events.DynamoDBAttributeValue, len(t.Value))
		for i, e := range t.Value {
			ev, err := eventValue(e)
			if err != nil {
				return events.DynamoDBAttributeValue{}, err
			}
			l[i] = ev
		}
		return events.NewListAttribute(l), nil
	case *sttypes.AttributeValueMemberM:
		m, err := eventImage(t.Value)
		if err != nil {
			return events.DynamoDBAttributeValue{}, err
		}
		return events.NewMapAttribute(m), nil
	}
	return events.DynamoDBAttributeValue{}, fmt.Errorf("unknown attribute value %T", v)
}
