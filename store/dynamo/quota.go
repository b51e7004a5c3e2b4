package dynamo

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/store/kv"
)

// Usage counters (port.Quota). A sequence's counter item keeps the usage of its space in the number
// attributes port.UsageBytesAttr and port.UsageItemsAttr, next to the reservation counter: the usage of a
// transaction is added by the very update that reserves its values (no extra item, no extra request), under
// a condition that keeps it within the limits. Its size is measured before the values are known, by a Build
// of the highest value the transaction could take (so a few digits too many at most), and taken back when
// the transaction fails. A writer that dies between the reservation and the give-back leaves its usage
// counted: the counters can run over the exact figure, never under it.

// usage is the usage one transaction adds.
type usage struct {
	bytes, items       int64
	maxBytes, maxItems int64
}

// usageOf sizes the usage of tx (nil without a quota).
func (s *Store) usageOf(tx port.Tx) (*usage, error) {
	q := tx.Quota
	if q == nil {
		return nil, nil
	}
	value := uint64(1)
	if tx.Count > 0 && tx.Max >= tx.Count {
		value = tx.Max - tx.Count + 1 // the most digits the transaction's values can have
	}
	ops, err := tx.Build(value)
	if err != nil {
		return nil, fmt.Errorf("dynamo: commit: build: %w", err)
	}
	return &usage{bytes: port.PutBytes(ops) + q.Extra, items: q.Items, maxBytes: q.MaxBytes, maxItems: q.MaxItems}, nil
}

// within fails when the transaction alone passes a limit.
func (u *usage) within() error {
	if (u.maxBytes > 0 && u.bytes > u.maxBytes) || (u.maxItems > 0 && u.items > u.maxItems) {
		return fmt.Errorf("dynamo: commit: %d bytes, %d items: %w", u.bytes, u.items, port.ErrQuotaExceeded)
	}
	return nil
}

// addTo makes an update of the counter item add the usage, under the limits.
func (u *usage) addTo(in *dynamodb.UpdateItemInput) {
	in.UpdateExpression = aws.String(aws.ToString(in.UpdateExpression) + ", #ub :ub, #ui :ui")
	in.ExpressionAttributeNames["#ub"], in.ExpressionAttributeNames["#ui"] = port.UsageBytesAttr, port.UsageItemsAttr
	in.ExpressionAttributeValues[":ub"] = signed(u.bytes)
	in.ExpressionAttributeValues[":ui"] = signed(u.items)
	var conds []string
	if u.maxBytes > 0 {
		conds = append(conds, "(attribute_not_exists(#ub) OR #ub <= :mb)")
		in.ExpressionAttributeValues[":mb"] = signed(u.maxBytes - u.bytes)
	}
	if u.maxItems > 0 {
		conds = append(conds, "(attribute_not_exists(#ui) OR #ui <= :mi)")
		in.ExpressionAttributeValues[":mi"] = signed(u.maxItems - u.items)
	}
	if len(conds) > 0 {
		cond := strings.Join(conds, " AND ")
		if c := aws.ToString(in.ConditionExpression); c != "" {
			cond = "(" + c + ") AND " + cond
		}
		in.ConditionExpression = aws.String(cond)
	}
}

// exceededBy reports whether the counter item's usage leaves no room for u.
func (u *usage) exceededBy(counter map[string]types.AttributeValue) bool {
	b, i := usageAttrs(counter)
	return (u.maxBytes > 0 && b+u.bytes > u.maxBytes) || (u.maxItems > 0 && i+u.items > u.maxItems)
}

func signed(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

// usageAttrs reads the usage number attributes of a counter item (0 when absent).
func usageAttrs(av map[string]types.AttributeValue) (bytes, items int64) {
	get := func(name string) int64 {
		n, ok := av[name].(*types.AttributeValueMemberN)
		if !ok {
			return 0
		}
		v, _ := strconv.ParseInt(n.Value, 10, 64)
		return v
	}
	return get(port.UsageBytesAttr), get(port.UsageItemsAttr)
}

// giveBack takes back the usage a failed transaction added with its reservation (best effort: a failure
// leaves it counted).
func (s *Store) giveBack(ctx context.Context, seq port.Sequence, use *usage) {
	if use == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	_, _ = s.update(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       keyAV(seq.Counter),
		UpdateExpression:          aws.String("ADD #ub :ub, #ui :ui"),
		ExpressionAttributeNames:  map[string]string{"#ub": port.UsageBytesAttr, "#ui": port.UsageItemsAttr},
		ExpressionAttributeValues: map[string]types.AttributeValue{":ub": signed(-use.bytes), ":ui": signed(-use.items)},
		ReturnConsumedCapacity:    types.ReturnConsumedCapacityTotal,
	})
}

// commitUsage commits a sequence transaction that takes no value but adds usage (Count 0): the usage is
// added under its limits, then the transaction is sent, and the usage is given back if it fails.
func (s *Store) commitUsage(ctx context.Context, tx port.Tx, use *usage) error {
	if use == nil {
		return fmt.Errorf("dynamo: commit: %w: a sequence transaction taking no value", kv.ErrInvalidTx)
	}
	if err := use.within(); err != nil {
		return err
	}
	in := &dynamodb.UpdateItemInput{
		TableName:                           aws.String(s.table),
		Key:                                 keyAV(tx.Seq.Counter),
		UpdateExpression:                    aws.String("ADD #r :zero"),
		ExpressionAttributeNames:            map[string]string{"#r": AttrReserved},
		ExpressionAttributeValues:           map[string]types.AttributeValue{":zero": number(0)},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		ReturnConsumedCapacity:              types.ReturnConsumedCapacityTotal,
	}
	use.addTo(in)
	if _, err := s.update(ctx, in); err != nil {
		var ccf *types.ConditionalCheckFailedException
		if errors.As(err, &ccf) {
			return fmt.Errorf("dynamo: commit: %s: %w", tx.Seq.Counter, port.ErrQuotaExceeded)
		}
		return fmt.Errorf("dynamo: commit: adding usage on %s: %w", tx.Seq.Counter, err)
	}
	p, err := s.prepare(ctx, tx, 0)
	if err == nil && p.input != nil {
		err = s.send(ctx, p)
	}
	if err != nil {
		s.giveBack(ctx, *tx.Seq, use)
	}
	return err
}
