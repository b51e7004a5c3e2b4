package dynamo_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/store/dynamo"
	"github.com/waypost/waypost/store/dynamo/dynamotest"
	"github.com/waypost/waypost/store/s3blob/s3test"
	"github.com/waypost/waypost/store/storetest"
)

// TestContract runs the port.ItemStore contract suite against the store on minidyn, one fresh table per
// subtest.
func TestContract(t *testing.T) {
	srv := dynamotest.New(t)
	storetest.RunItemStore(t, func(t *testing.T) port.ItemStore { return srv.Store(t, nil, dynamo.Options{}) })
}

// TestMain stops the S3 emulator the property tests may have started.
func TestMain(m *testing.M) { s3test.Main(m) }

// An item with a decimal port.AttrExpires is stored with the table's time-to-live attribute (a number)
// besides its condition attribute, and reads back unchanged; ExpiresItems follows Options.TTL.
func TestTimeToLiveAttribute(t *testing.T) {
	srv := dynamotest.New(t)
	st := srv.Store(t, nil, dynamo.Options{TTL: true})
	if !st.ExpiresItems() {
		t.Fatal("ExpiresItems false with Options.TTL")
	}
	if plain := srv.Store(t, nil, dynamo.Options{}); plain.ExpiresItems() {
		t.Fatal("ExpiresItems true without Options.TTL")
	}
	items := []port.Item{
		{Key: port.Key{PK: "DL#s", SK: "d1"}, Attrs: map[string]string{port.AttrExpires: "1767225600", "v": "2"}, Data: []byte("{}")},
		{Key: port.Key{PK: "DL#s", SK: "d2"}, Attrs: map[string]string{port.AttrExpires: "soon"}},
		{Key: port.Key{PK: "DL#s", SK: "d3"}, Attrs: map[string]string{"v": "1"}},
	}
	ctx := context.Background()
	if _, err := st.Commit(ctx, port.Tx{Build: func(uint64) ([]port.Op, error) {
		return []port.Op{port.Put(items[0], port.NotExists()), port.Put(items[1], port.NotExists()), port.Put(items[2], port.NotExists())}, nil
	}}); err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"1767225600", "", ""} {
		out, err := srv.Client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(st.Table()), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{dynamo.AttrPK: &types.AttributeValueMemberS{Value: "DL#s"}, dynamo.AttrSK: &types.AttributeValueMemberS{Value: items[i].SK}}})
		if err != nil {
			t.Fatal(err)
		}
		ttl := ""
		if n, ok := out.Item[dynamo.AttrTTL].(*types.AttributeValueMemberN); ok {
			ttl = n.Value
		}
		if ttl != want {
			t.Fatalf("item %d: ttl attribute %q, want %q", i, ttl, want)
		}
		got, found, err := st.Get(ctx, items[i].Key)
		if err != nil || !found || !reflect.DeepEqual(got, items[i]) {
			t.Fatalf("item %d reads back as %+v (%v, %v), want %+v", i, got, found, err, items[i])
		}
	}
}
