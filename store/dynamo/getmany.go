package dynamo

import (
	"context"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/store/kv"
)

// BatchGetMax is the most keys one BatchGetItem request may name.
const BatchGetMax = 100

// GetMany reads keys with strong consistency in BatchGetItem requests of at most BatchGetMax distinct keys
// (DynamoDB refuses a request that names a key twice), one round trip per hundred keys instead of one per
// key. Keys DynamoDB leaves unprocessed (throttling, or the 16 MB response limit) are asked for again after
// a backoff, at most Options.Retries times; after that the error wraps port.ErrUnavailable. A void slot
// reads as absent, as with Get.
func (s *Store) GetMany(ctx context.Context, keys []port.Key) ([]port.Item, []bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, fmt.Errorf("dynamo: get many: %w", err)
	}
	at := make(map[port.Key][]int, len(keys)) // the positions of each distinct key
	var distinct []port.Key
	for i, k := range keys {
		if err := validKey(k); err != nil {
			return nil, nil, fmt.Errorf("dynamo: get many: %w", err)
		}
		if _, seen := at[k]; !seen {
			distinct = append(distinct, k)
		}
		at[k] = append(at[k], i)
	}
	items, found := make([]port.Item, len(keys)), make([]bool, len(keys))
	for chunk := range slices.Chunk(distinct, BatchGetMax) {
		got, err := s.batchGet(ctx, chunk)
		if err != nil {
			return nil, nil, fmt.Errorf("dynamo: get many (%d keys): %w", len(keys), err)
		}
		for k, it := range got {
			for n, i := range at[k] {
				if n > 0 {
					it = kv.CloneItem(it) // each position is the caller's own, as from Get
				}
				items[i], found[i] = it, true
			}
		}
	}
	return items, found, nil
}

// batchGet reads at most BatchGetMax distinct keys and returns the items found by key. Keys DynamoDB leaves
// unprocessed are a transient failure of the request, retried (only those keys) as every request is
// (Store.retry), within the same budget as transient errors.
func (s *Store) batchGet(ctx context.Context, keys []port.Key) (map[port.Key]port.Item, error) {
	asked := make(map[port.Key]bool, len(keys))
	pending := make([]map[string]types.AttributeValue, len(keys))
	for i, k := range keys {
		asked[k] = true
		pending[i] = keyAV(k)
	}
	out := make(map[port.Key]port.Item, len(keys))
	err := s.retry(ctx, func() (bool, error) {
		res, err := s.api.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{
			RequestItems:           map[string]types.KeysAndAttributes{s.table: {Keys: pending, ConsistentRead: aws.Bool(true)}},
			ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
		})
		if err != nil {
			return transient(err), err
		}
		returned, unprocessed := res.Responses[s.table], res.UnprocessedKeys[s.table].Keys
		// The estimate charges each key read as its GetItem would be (at least one unit, then one per 4 KB):
		// the items returned by their size, the absent keys one unit each, the unprocessed ones nothing.
		units := float64(len(pending) - len(returned) - len(unprocessed))
		for _, av := range returned {
			units += ReadUnits(ItemSize(av))
			if isVoid(av) {
				continue
			}
			it, err := decodeItem(av)
			if err != nil {
				return false, err
			}
			if !asked[it.Key] {
				return false, fmt.Errorf("%w: BatchGetItem returned %s, which was not asked for", kv.ErrCorrupt, it.Key)
			}
			out[it.Key] = it
		}
		var cc []*types.ConsumedCapacity
		for i := range res.ConsumedCapacity {
			cc = append(cc, &res.ConsumedCapacity[i])
		}
		s.report(Usage{Operation: "BatchGetItem", Items: len(returned), ReadUnits: units}, cc...)
		if pending = unprocessed; len(pending) > 0 {
			return true, fmt.Errorf("%d keys left unprocessed", len(pending))
		}
		return false, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
