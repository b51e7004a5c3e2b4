package dynamo_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/store/dynamo"
	"github.com/waypost/waypost/store/dynamo/dynamotest"
)

// stingyBatch serves at most serve keys of each BatchGetItem and hands the others back as UnprocessedKeys,
// as DynamoDB does when it throttles a batch or reaches its 16 MB response limit. It counts the requests
// and the keys each one named.
type stingyBatch struct {
	dynamo.API
	serve int
	mu    sync.Mutex
	asked []int
}

func (s *stingyBatch) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	out := &dynamodb.BatchGetItemOutput{Responses: map[string][]map[string]types.AttributeValue{}, UnprocessedKeys: map[string]types.KeysAndAttributes{}}
	for table, ka := range in.RequestItems {
		s.mu.Lock()
		s.asked = append(s.asked, len(ka.Keys))
		s.mu.Unlock()
		n := min(s.serve, len(ka.Keys))
		if n > 0 {
			part := ka
			part.Keys = ka.Keys[:n]
			res, err := s.API.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{table: part}}, o...)
			if err != nil {
				return nil, err
			}
			out.Responses[table] = res.Responses[table]
		}
		if rest := ka.Keys[n:]; len(rest) > 0 {
			left := ka
			left.Keys = rest
			out.UnprocessedKeys[table] = left
		}
	}
	return out, nil
}

// TestGetManyAsksAgainForUnprocessedKeys: keys DynamoDB leaves unprocessed are asked for again until every
// key is answered, each item once, with the capacity of every request reported; a table that never serves
// them ends in port.ErrUnavailable after Options.Retries requests more.
func TestGetManyAsksAgainForUnprocessedKeys(t *testing.T) {
	srv := dynamotest.New(t)
	sb := &stingyBatch{API: srv.Client, serve: 40}
	var mu sync.Mutex
	var usage []dynamo.Usage
	opts := fast
	opts.OnUsage = func(u dynamo.Usage) {
		mu.Lock()
		usage = append(usage, u)
		mu.Unlock()
	}
	st := srv.Store(t, sb, opts)
	ctx := context.Background()
	var keys []port.Key
	var ops []port.Op
	for i := range 150 {
		k := port.Key{PK: "um", SK: fmt.Sprintf("k%03d", i)}
		keys = append(keys, k)
		if i%2 == 0 {
			ops = append(ops, port.Put(port.Item{Key: k, Data: []byte(fmt.Sprint(i))}, port.Cond{}))
		}
	}
	for i := 0; i < len(ops); i += 25 {
		if _, err := st.Commit(ctx, port.Tx{Build: func(uint64) ([]port.Op, error) { return ops[i:min(i+25, len(ops))], nil }}); err != nil {
			t.Fatal(err)
		}
	}
	usage = nil
	items, found, err := st.GetMany(ctx, keys)
	if err != nil {
		t.Fatalf("GetMany: %v", err)
	}
	for i, k := range keys {
		if found[i] != (i%2 == 0) || (found[i] && (items[i].Key != k || string(items[i].Data) != fmt.Sprint(i))) {
			t.Fatalf("key %d: %+v, found %v", i, items[i], found[i])
		}
	}
	// 150 keys: a request of 100 (40 served, 60 left), of 60 (40, 20), of 20; then one of the last 50.
	if want := []int{100, 60, 20, 50, 10}; fmt.Sprint(sb.asked) != fmt.Sprint(want) {
		t.Fatalf("requests named %v keys, want %v", sb.asked, want)
	}
	items0, units := 0, 0.0
	for _, u := range usage {
		if u.Operation != "BatchGetItem" {
			t.Fatalf("usage %+v", u)
		}
		items0 += u.Items
		units += u.ReadUnits
	}
	if len(usage) != len(sb.asked) || items0 != 75 || units != 150 {
		t.Fatalf("usage reported: %d requests, %d items, %v read units; want %d, 75, 150 (one per key read)", len(usage), items0, units, len(sb.asked))
	}

	sb.serve = 0 // from now on nothing is served
	sb.asked = nil
	if _, _, err := st.GetMany(ctx, keys[:3]); !errors.Is(err, port.ErrUnavailable) {
		t.Fatalf("GetMany of a table that serves nothing: %v, want port.ErrUnavailable", err)
	}
	if len(sb.asked) != 1+dynamoRetries(opts) {
		t.Fatalf("%d requests before giving up, want %d", len(sb.asked), 1+dynamoRetries(opts))
	}
}

// dynamoRetries is Options.Retries as the store applies it (6 when unset).
func dynamoRetries(o dynamo.Options) int {
	if o.Retries <= 0 {
		return 6
	}
	return o.Retries
}
