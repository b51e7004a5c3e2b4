package dynamo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/store/kv"
)

// MaxItemBytes is DynamoDB's largest item (400 KB), names and values included.
const MaxItemBytes = 400 << 10

// Cancellation reason codes of TransactWriteItems.
const (
	reasonNone        = "None"
	reasonCondition   = "ConditionalCheckFailed"
	reasonConflict    = "TransactionConflict"
	reasonThrottling  = "ThrottlingError"
	reasonProvisioned = "ProvisionedThroughputExceeded"
)

// errCounterMoved reports that the counter's condition failed: another commit allocated first.
var errCounterMoved = errors.New("counter advanced concurrently")

// prepared is one TransactWriteItems request built for one counter value.
type prepared struct {
	first  uint64
	offset int          // index of op 0 in the request (1 with a counter, whose update is action 0)
	keys   []port.Key   // key of each op, in Build's order
	slots  map[int]bool // indexes of the ops that fill the slots of a sequence
	// slotItems holds the payload each slot is filled with, by sort key (to recognise one's own commit).
	slotItems map[string][]byte
	input     *dynamodb.TransactWriteItemsInput
	estUnit   float64 // estimated write units (lower bound)
}

// Commit applies tx in one TransactWriteItems call, as described in the package documentation.
func (s *Store) Commit(ctx context.Context, tx port.Tx) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("dynamo: commit: %w", err)
	}
	if _, err := kv.CheckTx(tx); err != nil {
		return 0, fmt.Errorf("dynamo: commit: %w", err)
	}
	if tx.Seq != nil {
		return s.commitSeq(ctx, tx)
	}
	if tx.Counter != nil {
		if err := validKey(*tx.Counter); err != nil {
			return 0, fmt.Errorf("dynamo: commit: counter: %w: %w", kv.ErrInvalidTx, err)
		}
	}
	for round := 0; ; round++ {
		p, err := s.prepare(ctx, tx, 0)
		if err != nil {
			return 0, err
		}
		if p.input == nil { // nothing to write
			return p.first, nil
		}
		err = s.send(ctx, p)
		if err == nil {
			return p.first, nil
		}
		if !errors.Is(err, errCounterMoved) {
			return 0, err
		}
		if round >= s.opts.CounterRetries {
			return 0, fmt.Errorf("dynamo: commit: counter %s advanced by other commits %d times in a row: %w",
				*tx.Counter, round+1, port.ErrUnavailable)
		}
		if err := s.sleep(ctx, min(round, 4)); err != nil {
			return 0, fmt.Errorf("dynamo: commit: %w", err)
		}
	}
}

// prepare reads the counter (if any), calls Build and turns the ops into a request. It returns a nil input
// when there is nothing to write. With a sequence, seqFirst is the first value reserved (see commitSeq) and
// the request carries no counter action.
func (s *Store) prepare(ctx context.Context, tx port.Tx, seqFirst uint64) (*prepared, error) {
	p := &prepared{}
	var counter types.TransactWriteItem
	counterSize := 0
	if tx.Seq != nil {
		p.first = seqFirst
	}
	if tx.Counter != nil {
		cur, found, err := s.get(ctx, *tx.Counter)
		if err != nil {
			return nil, fmt.Errorf("dynamo: commit: read counter %s: %w", *tx.Counter, err)
		}
		raw, hasN := cur.Attrs[port.CounterAttr]
		n, err := kv.CounterValue(cur, found)
		if err != nil {
			return nil, fmt.Errorf("dynamo: commit: %w", err)
		}
		var last uint64
		if p.first, last, err = kv.Allocate(*tx.Counter, n, tx); err != nil {
			return nil, fmt.Errorf("dynamo: commit: %w", err)
		}
		nName := expression.NameNoDotSplit(AttrPrefix + port.CounterAttr)
		var cond expression.ConditionBuilder
		switch {
		case !found:
			cond = expression.AttributeNotExists(expression.Name(AttrPK))
		case !hasN:
			cond = expression.AttributeExists(expression.Name(AttrPK)).And(expression.AttributeNotExists(nName))
		default:
			cond = nName.Equal(expression.Value(&types.AttributeValueMemberS{Value: raw}))
		}
		expr, err := expression.NewBuilder().WithCondition(cond).
			WithUpdate(expression.Set(nName, expression.Value(&types.AttributeValueMemberS{Value: strconv.FormatUint(last, 10)}))).
			Build()
		if err != nil {
			return nil, fmt.Errorf("dynamo: commit: counter expression: %w", err)
		}
		counter = types.TransactWriteItem{Update: &types.Update{
			TableName:                 aws.String(s.table),
			Key:                       keyAV(*tx.Counter),
			UpdateExpression:          expr.Update(),
			ConditionExpression:       expr.Condition(),
			ExpressionAttributeNames:  expr.Names(),
			ExpressionAttributeValues: expr.Values(),
		}}
		if found {
			counterSize = ItemSize(encodeItem(cur))
		}
		p.offset = 1
	}

	ops, err := tx.Build(p.first)
	if err != nil {
		return nil, fmt.Errorf("dynamo: commit: build: %w", err)
	}
	// kv's rules: the counter's update is an action of the request; a sequence's counter (reserved
	// before) is not, but no op may touch it either.
	reserved := tx.Counter
	if tx.Seq != nil {
		reserved = &tx.Seq.Counter
	}
	if err := kv.CheckOps(ops, reserved, tx.Counter != nil, MaxOps); err != nil {
		return nil, fmt.Errorf("dynamo: commit: %w", err)
	}
	items := make([]types.TransactWriteItem, 0, len(ops)+p.offset)
	if tx.Counter != nil {
		items = append(items, counter)
		p.estUnit += TxWriteUnits(counterSize + len(AttrPrefix+port.CounterAttr) + 20)
	}
	p.keys = make([]port.Key, len(ops))
	for i, op := range ops {
		if err := validUTF8(op); err != nil {
			return nil, fmt.Errorf("dynamo: commit: op %d: %w: %w", i, kv.ErrInvalidTx, err)
		}
		p.keys[i] = op.Item.Key
		twi, size, err := s.action(op)
		if err != nil {
			return nil, fmt.Errorf("dynamo: commit: op %d (%s): %w", i, op.Item.Key, err)
		}
		items = append(items, twi)
		p.estUnit += TxWriteUnits(size)
	}
	if tx.Seq != nil {
		idx, err := kv.SlotOps(*tx.Seq, p.first, tx.Count, ops)
		if err != nil {
			return nil, fmt.Errorf("dynamo: commit: %w", err)
		}
		p.slots = make(map[int]bool, len(idx))
		p.slotItems = make(map[string][]byte, len(idx))
		for _, i := range idx {
			p.slots[i] = true
			p.slotItems[ops[i].Item.SK] = ops[i].Item.Data
		}
	}
	if len(items) == 0 {
		return p, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("dynamo: commit: %w", err)
	}
	p.input = &dynamodb.TransactWriteItemsInput{
		TransactItems:          items,
		ClientRequestToken:     aws.String(newToken()),
		ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
	}
	return p, nil
}

// action turns one op into a TransactWriteItem and returns the size of the item it writes (0 when unknown).
func (s *Store) action(op port.Op) (types.TransactWriteItem, int, error) {
	var cond *expression.Expression
	var cb expression.ConditionBuilder
	has := true
	switch op.Cond.Kind {
	case port.CondNone:
		has = false
	case port.CondExists:
		cb = expression.AttributeExists(expression.Name(AttrPK))
	case port.CondNotExists:
		cb = expression.AttributeNotExists(expression.Name(AttrPK))
	case port.CondAttrEquals:
		cb = expression.NameNoDotSplit(AttrPrefix + op.Cond.Attr).Equal(expression.Value(&types.AttributeValueMemberS{Value: op.Cond.Value}))
	}
	if has {
		e, err := expression.NewBuilder().WithCondition(cb).Build()
		if err != nil {
			return types.TransactWriteItem{}, 0, fmt.Errorf("condition expression: %w", err)
		}
		cond = &e
	}
	condParts := func() (*string, map[string]string, map[string]types.AttributeValue) {
		if cond == nil {
			return nil, nil, nil
		}
		return cond.Condition(), cond.Names(), cond.Values()
	}
	ce, names, values := condParts()
	table := aws.String(s.table)
	switch op.Kind {
	case port.OpPut:
		av := encodeItem(op.Item)
		size := ItemSize(av)
		if size > MaxItemBytes {
			return types.TransactWriteItem{}, 0, fmt.Errorf("%w: item of %d bytes (DynamoDB's limit is %d)", kv.ErrInvalidTx, size, MaxItemBytes)
		}
		return types.TransactWriteItem{Put: &types.Put{TableName: table, Item: av,
			ConditionExpression: ce, ExpressionAttributeNames: names, ExpressionAttributeValues: values}}, size, nil
	case port.OpDelete:
		return types.TransactWriteItem{Delete: &types.Delete{TableName: table, Key: keyAV(op.Item.Key),
			ConditionExpression: ce, ExpressionAttributeNames: names, ExpressionAttributeValues: values}}, 0, nil
	default: // OpCheck
		return types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{TableName: table, Key: keyAV(op.Item.Key),
			ConditionExpression: ce, ExpressionAttributeNames: names, ExpressionAttributeValues: values}}, 0, nil
	}
}

// validUTF8 adds DynamoDB's requirement to kv's rules (kv.CheckOps): every string an op writes or compares,
// its key included, is UTF-8.
func validUTF8(op port.Op) error {
	if op.Cond.Kind == port.CondAttrEquals && (!utf8.ValidString(op.Cond.Attr) || !utf8.ValidString(op.Cond.Value)) {
		return errors.New("attribute condition is not UTF-8")
	}
	if op.Kind == port.OpPut {
		for name, v := range op.Item.Attrs {
			if !utf8.ValidString(name) || !utf8.ValidString(v) {
				return fmt.Errorf("attribute %q is not UTF-8", name)
			}
		}
	}
	return validKey(op.Item.Key)
}

// send sends p, retrying transient failures with the same client request token, and maps a cancelled
// transaction reason by reason.
func (s *Store) send(ctx context.Context, p *prepared) error {
	for attempt := 0; ; attempt++ {
		out, err := s.api.TransactWriteItems(ctx, p.input)
		if err == nil {
			s.report(Usage{Operation: "TransactWriteItems", Items: len(p.input.TransactItems), WriteUnits: p.estUnit},
				ptrs(out.ConsumedCapacity)...)
			return nil
		}
		if cerr := ctx.Err(); cerr != nil {
			return fmt.Errorf("dynamo: commit: %w (%w)", cerr, err)
		}
		retry := transient(err)
		var tce *types.TransactionCanceledException
		if errors.As(err, &tce) {
			var cerr error
			retry, cerr = s.cancelled(p, tce)
			if cerr != nil {
				return cerr
			}
		}
		if !retry {
			return fmt.Errorf("dynamo: commit: %w", err)
		}
		if attempt >= s.opts.Retries {
			return fmt.Errorf("dynamo: commit: gave up after %d attempts: %w: %w", attempt+1, port.ErrUnavailable, err)
		}
		if err := s.sleep(ctx, attempt); err != nil {
			return fmt.Errorf("dynamo: commit: %w", err)
		}
	}
}

// cancelled maps the reasons of a cancelled transaction: a failed counter condition → errCounterMoved; a
// failed op condition → *port.ConditionFailedError for the lowest such op other than a sequence slot; only
// slot conditions failed → errSlotTaken (the slot was voided); conflicts and throttling → retry; anything
// else → an error naming the reasons.
func (s *Store) cancelled(p *prepared, tce *types.TransactionCanceledException) (retry bool, err error) {
	reasons := tce.CancellationReasons
	if len(reasons) != len(p.input.TransactItems) {
		return false, fmt.Errorf("dynamo: commit: transaction cancelled with %d reasons for %d actions: %w",
			len(reasons), len(p.input.TransactItems), tce)
	}
	if p.offset == 1 && aws.ToString(reasons[0].Code) == reasonCondition {
		return false, errCounterMoved
	}
	slotTaken := false
	for i := p.offset; i < len(reasons); i++ {
		if aws.ToString(reasons[i].Code) == reasonCondition {
			if p.slots[i-p.offset] {
				slotTaken = true
				continue
			}
			return false, &port.ConditionFailedError{Index: i - p.offset, Key: p.keys[i-p.offset]}
		}
	}
	if slotTaken {
		return false, fmt.Errorf("dynamo: commit: %w", errSlotTaken)
	}
	var other []string
	for i, r := range reasons {
		switch code := aws.ToString(r.Code); code {
		case reasonNone, "":
		case reasonConflict, reasonThrottling, reasonProvisioned:
			retry = true
		default:
			other = append(other, fmt.Sprintf("action %d: %s %s", i, code, aws.ToString(r.Message)))
		}
	}
	if len(other) > 0 {
		return false, fmt.Errorf("dynamo: commit: transaction cancelled: %s: %w", strings.Join(other, "; "), tce)
	}
	if !retry {
		return false, fmt.Errorf("dynamo: commit: transaction cancelled without a reason: %w", tce)
	}
	return true, nil
}

func ptrs(cc []types.ConsumedCapacity) []*types.ConsumedCapacity {
	out := make([]*types.ConsumedCapacity, len(cc))
	for i := range cc {
		out[i] = &cc[i]
	}
	return out
}

// newToken is a ClientRequestToken: 32 random hex digits (DynamoDB allows 36 characters).
func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}
