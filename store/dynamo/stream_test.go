package dynamo_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/store/dynamo"
	"github.com/waypost/waypost/store/dynamo/dynamotest"
	"github.com/waypost/waypost/store/kv"
)

// Items written by the store come back from their stream images, after the JSON trip Lambda makes them
// take, exactly as the store reads them: keys, every attribute (an empty one too) and the binary payload.
func TestItemFromStreamImage(t *testing.T) {
	srv := dynamotest.New(t)
	st := srv.Store(t, nil, dynamo.Options{})
	stream := srv.Stream(t, st.Table())
	ctx := context.Background()
	written := []port.Item{
		{Key: port.Key{PK: "FD#spc_1", SK: "00000000000000000001"}, Attrs: map[string]string{"v": "1", "empty": "", "名": "值"},
			Data: []byte(`{"item_id":"it_1"}`)},
		{Key: port.Key{PK: "B#x", SK: "s"}, Data: []byte{0, 0xff, 0xfe, '\n'}},
		{Key: port.Key{PK: "K", SK: "only-key"}},
	}
	ops := make([]port.Op, len(written))
	for i, it := range written {
		ops[i] = port.Put(it, port.NotExists())
	}
	if _, err := st.Commit(ctx, port.Tx{Build: func(uint64) ([]port.Op, error) { return ops, nil }}); err != nil {
		t.Fatal(err)
	}
	ev := lambdaTrip(t, stream.Next(t))
	if len(ev.Records) != len(written) {
		t.Fatalf("%d stream records, want %d", len(ev.Records), len(written))
	}
	for _, rec := range ev.Records {
		if rec.EventName != "INSERT" {
			t.Fatalf("record %s: %s", rec.Change.SequenceNumber, rec.EventName)
		}
		got, err := dynamo.ItemFromStreamImage(rec.Change.NewImage)
		if err != nil {
			t.Fatal(err)
		}
		want, found, err := st.Get(ctx, got.Key)
		if err != nil || !found {
			t.Fatalf("Get(%s): %v %v", got.Key, found, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("from the stream image: %#v\nfrom Get: %#v", got, want)
		}
	}

	// A changed item is a MODIFY with the new image; a deleted one a REMOVE without image.
	changed := port.Item{Key: written[0].Key, Attrs: map[string]string{"v": "2"}}
	if _, err := st.Commit(ctx, port.Tx{Build: func(uint64) ([]port.Op, error) {
		return []port.Op{port.Put(changed, port.AttrEquals("v", "1")), port.Delete(written[1].Key, port.Exists())}, nil
	}}); err != nil {
		t.Fatal(err)
	}
	ev = lambdaTrip(t, stream.Next(t))
	if len(ev.Records) != 2 || ev.Records[0].EventName != "REMOVE" || ev.Records[1].EventName != "MODIFY" || ev.Records[0].Change.NewImage != nil {
		t.Fatalf("records after a change and a delete: %+v", ev.Records)
	}
	if got, err := dynamo.ItemFromStreamImage(ev.Records[1].Change.NewImage); err != nil || !reflect.DeepEqual(got, changed) {
		t.Fatalf("modified image: %#v, %v", got, err)
	}
	if again := stream.Next(t); len(again.Records) != 0 {
		t.Fatalf("records without a change: %+v", again.Records)
	}
}

// lambdaTrip sends ev through JSON as Lambda delivers it to a handler.
func lambdaTrip(t *testing.T, ev events.DynamoDBEvent) events.DynamoDBEvent {
	t.Helper()
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	var out events.DynamoDBEvent
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("decoding %s: %v", b, err)
	}
	return out
}

// Images the store cannot have written are corrupt items, never a panic.
func TestItemFromStreamImageRejects(t *testing.T) {
	s := events.NewStringAttribute
	for name, img := range map[string]map[string]events.DynamoDBAttributeValue{
		"empty":            {},
		"no sort key":      {"pk": s("P")},
		"numeric key":      {"pk": s("P"), "sk": events.NewNumberAttribute("1")},
		"numeric attr":     {"pk": s("P"), "sk": s("S"), "a_v": events.NewNumberAttribute("1")},
		"string payload":   {"pk": s("P"), "sk": s("S"), "d": s("x")},
		"zero value":       {"pk": s("P"), "sk": s("S"), "a_v": {}},
		"zero in a list":   {"pk": s("P"), "sk": s("S"), "other": events.NewListAttribute([]events.DynamoDBAttributeValue{{}})},
		"binary attribute": {"pk": s("P"), "sk": s("S"), "a_v": events.NewBinaryAttribute([]byte("1"))},
	} {
		if it, err := dynamo.ItemFromStreamImage(img); err == nil || !errors.Is(err, kv.ErrCorrupt) {
			t.Errorf("%s: %#v, %v", name, it, err)
		}
	}
	// Attributes of other writers are ignored, whatever their type.
	img := map[string]events.DynamoDBAttributeValue{"pk": s("P"), "sk": s("S"), "ttl": events.NewNumberAttribute("17"),
		"m":  events.NewMapAttribute(map[string]events.DynamoDBAttributeValue{"x": events.NewBooleanAttribute(true)}),
		"ss": events.NewStringSetAttribute([]string{"a"}), "n": events.NewNullAttribute()}
	if it, err := dynamo.ItemFromStreamImage(img); err != nil || !reflect.DeepEqual(it, port.Item{Key: port.Key{PK: "P", SK: "S"}}) {
		t.Fatalf("foreign attributes: %#v, %v", it, err)
	}
}
