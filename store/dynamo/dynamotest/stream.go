package dynamotest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/waypost/waypost/store/dynamo"
)

// Stream stands in for the DynamoDB stream of a table, which minidyn does not have. It is NOT a stream: it
// compares scans of the table. Next scans the table and returns, as one Lambda DynamoDB Streams event
// (view type NEW_IMAGE), an INSERT record for every item that appeared since the previous scan, a MODIFY
// record for every item whose attributes changed and a REMOVE record for every item that vanished, in key
// order. A real stream would also show every intermediate version of an item and the order of the writes;
// tests that need those cannot use it.
type Stream struct {
	client *dynamodb.Client
	table  string
	last   map[string]map[string]types.AttributeValue
	seq    int64
}

// Stream starts a simulated stream of table: the items the table holds now are taken as already seen.
func (s *Server) Stream(t testing.TB, table string) *Stream {
	t.Helper()
	st := &Stream{client: s.Client, table: table}
	items, err := st.scan()
	if err != nil {
		t.Fatalf("dynamotest: %v", err)
	}
	st.last = items
	return st
}

func streamKey(av map[string]types.AttributeValue) string {
	pk, _ := av[dynamo.AttrPK].(*types.AttributeValueMemberS)
	sk, _ := av[dynamo.AttrSK].(*types.AttributeValueMemberS)
	if pk == nil || sk == nil {
		return ""
	}
	return pk.Value + "\x00" + sk.Value
}

func (st *Stream) scan() (map[string]map[string]types.AttributeValue, error) {
	out := map[string]map[string]types.AttributeValue{}
	in := &dynamodb.ScanInput{TableName: aws.String(st.table), ConsistentRead: aws.Bool(true)}
	for {
		page, err := st.client.Scan(context.Background(), in)
		if err != nil {
			return nil, fmt.Errorf("scanning %s: %w", st.table, err)
		}
		for _, it := range page.Items {
			k := streamKey(it)
			if k == "" {
				return nil, fmt.Errorf("scanning %s: an item without string keys", st.table)
			}
			out[k] = it
		}
		if len(page.LastEvaluatedKey) == 0 {
			return out, nil
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
}

// Next returns the records of what changed since the previous call (or since Stream), possibly none.
func (st *Stream) Next(t testing.TB) events.DynamoDBEvent {
	t.Helper()
	now, err := st.scan()
	if err != nil {
		t.Fatalf("dynamotest: %v", err)
	}
	keys := make([]string, 0, len(now)+len(st.last))
	for k := range now {
		keys = append(keys, k)
	}
	for k := range st.last {
		if _, ok := now[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var ev events.DynamoDBEvent
	for _, k := range keys {
		cur, isNow := now[k]
		old, wasThen := st.last[k]
		var name string
		switch {
		case isNow && !wasThen:
			name = "INSERT"
		case !isNow && wasThen:
			name = "REMOVE"
		case !equalImages(old, cur):
			name = "MODIFY"
		default:
			continue
		}
		img := cur
		if !isNow {
			img = old
		}
		st.seq++
		rec := events.DynamoDBEventRecord{
			AWSRegion: Region, EventID: fmt.Sprintf("sim-%d", st.seq), EventName: name, EventSource: "aws:dynamodb",
			EventVersion: "1.1", EventSourceArn: "arn:aws:dynamodb:" + Region + ":000000000000:table/" + st.table + "/stream/simulated",
			Change: events.DynamoDBStreamRecord{
				ApproximateCreationDateTime: events.SecondsEpochTime{Time: time.Now().Truncate(time.Second)},
				Keys:                        StreamImage(map[string]types.AttributeValue{dynamo.AttrPK: img[dynamo.AttrPK], dynamo.AttrSK: img[dynamo.AttrSK]}),
				SequenceNumber:              fmt.Sprintf("%021d", st.seq),
				SizeBytes:                   int64(dynamo.ItemSize(img)),
				StreamViewType:              "NEW_IMAGE",
			},
		}
		if isNow {
			rec.Change.NewImage = StreamImage(cur)
		}
		ev.Records = append(ev.Records, rec)
	}
	st.last = now
	return ev
}

// equalImages compares two items through their stream JSON (map members in key order).
func equalImages(a, b map[string]types.AttributeValue) bool {
	ja, errA := json.Marshal(StreamImage(a))
	jb, errB := json.Marshal(StreamImage(b))
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}

// StreamImage returns item (as the SDK reads it) as a stream image, as Lambda delivers one.
func StreamImage(item map[string]types.AttributeValue) map[string]events.DynamoDBAttributeValue {
	out := make(map[string]events.DynamoDBAttributeValue, len(item))
	for name, v := range item {
		out[name] = streamValue(v)
	}
	return out
}

func streamValue(v types.AttributeValue) events.DynamoDBAttributeValue {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return events.NewStringAttribute(v.Value)
	case *types.AttributeValueMemberB:
		return events.NewBinaryAttribute(v.Value)
	case *types.AttributeValueMemberN:
		return events.NewNumberAttribute(v.Value)
	case *types.AttributeValueMemberBOOL:
		return events.NewBooleanAttribute(v.Value)
	case *types.AttributeValueMemberNULL:
		return events.NewNullAttribute()
	case *types.AttributeValueMemberSS:
		return events.NewStringSetAttribute(v.Value)
	case *types.AttributeValueMemberNS:
		return events.NewNumberSetAttribute(v.Value)
	case *types.AttributeValueMemberBS:
		return events.NewBinarySetAttribute(v.Value)
	case *types.AttributeValueMemberL:
		l := make([]events.DynamoDBAttributeValue, len(v.Value))
		for i, e := range v.Value {
			l[i] = streamValue(e)
		}
		return events.NewListAttribute(l)
	case *types.AttributeValueMemberM:
		m := make(map[string]events.DynamoDBAttributeValue, len(v.Value))
		for k, e := range v.Value {
			m[k] = streamValue(e)
		}
		return events.NewMapAttribute(m)
	}
	panic(fmt.Sprintf("dynamotest: unsupported attribute value %T", v))
}
