// Package dynamo is the port.ItemStore on Amazon DynamoDB: one table, every domain item one DynamoDB item,
// every Commit one TransactWriteItems call.
//
// # Table
//
// The table has a string partition key "pk" and a string sort key "sk" (CreateTable makes one, on demand).
// A port.Item is stored as
//
//	pk   S  Item.PK
//	sk   S  Item.SK
//	a_X  S  Item.Attrs["X"], one attribute per condition attribute (an empty value is kept)
//	d    B  Item.Data, omitted when empty
//
// so conditions test top-level attributes and the payload stays opaque. docs/dynamodb.md lists which items
// each domain operation reads and writes and what it costs.
//
// # Reads
//
// Get is a GetItem with ConsistentRead. Query is a Query on the partition with ConsistentRead and a key
// condition on sk (sk > After, sk <= UpTo, or sk BETWEEN After AND UpTo, the After item itself dropped),
// following LastEvaluatedKey until Limit items are gathered or the range ends. DynamoDB strings are UTF-8
// and compare bytewise, as the embedded store's keys do; a bound that is not UTF-8 (a sentinel such as
// "ACT#\xff") is widened to a UTF-8 one on the wire and applied exactly to the results.
//
// # Commit
//
// Commit sends exactly one TransactWriteItems. With a counter (port.Tx.Counter; the domain uses sequences,
// below), the counter item is read first (strongly),
// Build gets the first allocated value, and the counter's update travels in the same transaction as action 0,
// guarded by a condition on the value read (a_n = :expected, or its absence for 0): the allocation is visible
// exactly when the rest of the transaction is, and nothing is ever read and then written outside a
// condition. Each op becomes a Put, Delete or ConditionCheck guarded by attribute_exists(pk),
// attribute_not_exists(pk) or a_X = :v. A cancelled transaction is mapped reason by reason
// (CancellationReasons): a failed counter condition means another commit allocated first, so the counter is
// re-read and Build called again (bounded by Options.CounterRetries); a failed op condition becomes a
// *port.ConditionFailedError naming the lowest failing op in Build's order; TransactionConflict, throttling
// and server errors are retried with jittered exponential backoff (bounded by Options.Retries, each retry
// with the same ClientRequestToken so a request that did commit is not applied twice) and then reported
// wrapping port.ErrUnavailable. Malformed transactions (two actions on one key, more than MaxOps actions,
// invalid keys) are rejected before anything is sent, with the errors of store/kv.
//
// # Sequences
//
// A transaction with a sequence (port.Tx.Seq: a space's visible_seq) is not committed that way, because
// reading the counter and conditioning the transaction on it makes concurrent writers cancel each other.
// The values are reserved first with one UpdateItem (ADD seq :count on the counter item, a number
// attribute "seq"); the transaction then carries no counter action and guards each reserved slot (the item
// {Slots, SlotSK(v)}) with attribute_not_exists(pk). A writer whose transaction fails voids its own slots
// (a conditional put of {pk, sk, void: true}); a slot voided by a reader fails the writer's transaction on
// its condition, and Commit reserves again and calls Build again. Void slots read as absent.
//
// The visible head is a watermark, the number attribute "head" of the item at Sequence.Head, moved only
// over slots that are filled or void, by conditional updates: the writer moves it over its own slots,
// whoever moves it probes the slots above and carries it on, and Head does the same for readers. Head
// never passes a missing slot until it has stayed missing for Options.VoidGrace (10 s) since this Store
// first saw it missing below a present one; then it voids it. docs/dynamodb.md describes the protocol and
// its capacity.
//
// # Time to live
//
// An item with a decimal port.AttrExpires attribute also gets it as the number attribute "ttl", the
// table's time-to-live attribute; Options.TTL says the table has time to live enabled on it
// (port.Expirer).
//
// Every request asks for ReturnConsumedCapacity TOTAL and hands what it consumed to Options.OnUsage.
package dynamo

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/store/kv"
)

// MaxOps is the largest number of actions in one transaction, the counter included: DynamoDB's limit for
// TransactWriteItems.
const MaxOps = 100

// Attribute names of the table.
const (
	AttrPK     = "pk" // partition key (S)
	AttrSK     = "sk" // sort key (S)
	AttrData   = "d"  // payload (B)
	AttrPrefix = "a_" // prefix of condition attributes (S)
	// AttrTTL is the table's time-to-live attribute (N, Unix seconds): a copy of port.AttrExpires.
	AttrTTL = "ttl"
)

// API is the part of the DynamoDB client the store uses; *dynamodb.Client implements it. Tests wrap it to
// inject faults or account capacity.
type API interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	// UpdateItem and PutItem serve sequences: reservations, the watermark and void slots.
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	// BatchGetItem serves GetMany.
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
}

// Options tune a Store. The zero value is usable.
type Options struct {
	// OnUsage, when set, receives the capacity every successful request consumed. It is called
	// synchronously from the request's goroutine and must be safe for concurrent use.
	OnUsage func(Usage)
	// Retries bounds the retries of one request after a transient failure (TransactionConflict, throttling,
	// server errors, transport errors); default 6. After the last one the error wraps port.ErrUnavailable.
	Retries int
	// CounterRetries bounds how often one Commit re-reads a counter another commit advanced first and calls
	// Build again; default 100. Past it Commit reports port.ErrUnavailable (sustained contention).
	CounterRetries int
	// BaseBackoff and MaxBackoff shape the full-jitter exponential backoff between retries: attempt k sleeps
	// a random duration in [0, min(MaxBackoff, BaseBackoff·2^k)). Defaults 10 ms and 1 s.
	BaseBackoff time.Duration
	MaxBackoff  time.Duration
	// VoidGrace is how long a reserved slot may stay unfilled below a filled one, counted from when this
	// Store first observed it missing, before Head voids it; default DefaultVoidGrace (10 s).
	VoidGrace time.Duration
	// Now tells the time the grace period is measured with; default time.Now.
	Now func() time.Time
	// TTL says that the table has DynamoDB time to live enabled on AttrTTL (the CDK app enables it), so
	// items with port.AttrExpires are deleted after that time: ExpiresItems reports it.
	TTL bool
}

// Store is a port.ItemStore on one DynamoDB table. It is safe for concurrent use.
type Store struct {
	api   API
	table string
	opts  Options
	gaps  *gapLog
}

var _ port.ItemStore = (*Store)(nil)

// New returns a store on table, which must exist with the key schema described in the package
// documentation (see CreateTable).
func New(api API, table string, opts Options) (*Store, error) {
	if api == nil {
		return nil, errors.New("dynamo: nil client")
	}
	if table == "" {
		return nil, errors.New("dynamo: empty table name")
	}
	if opts.Retries <= 0 {
		opts.Retries = 6
	}
	if opts.CounterRetries <= 0 {
		opts.CounterRetries = 100
	}
	if opts.BaseBackoff <= 0 {
		opts.BaseBackoff = 10 * time.Millisecond
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = time.Second
	}
	if opts.VoidGrace <= 0 {
		opts.VoidGrace = DefaultVoidGrace
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Store{api: api, table: table, opts: opts, gaps: &gapLog{}}, nil
}

// Table returns the table name.
func (s *Store) Table() string { return s.table }

// MaxOps returns MaxOps.
func (s *Store) MaxOps() int { return MaxOps }

// ReservesSequences is true: Commit reserves a transaction's values with an atomic update of the counter
// before its TransactWriteItems, and voids their slots when the transaction is refused.
func (s *Store) ReservesSequences() bool { return true }

var (
	_ port.Expirer         = (*Store)(nil)
	_ port.PointReadCoster = (*Store)(nil)
)

// PointReadsCostly is true: every item of a BatchGetItem costs at least half a read unit, where a Query reads
// 4 KB for one, so the domain keeps a copy of a feed item in each of its inbox entries (an inbox page is one
// Query).
func (s *Store) PointReadsCostly() bool { return true }

// ExpiresItems reports Options.TTL: whether DynamoDB deletes items past their port.AttrExpires time.
func (s *Store) ExpiresItems() bool { return s.opts.TTL }

// Get reads one item with strong consistency.
func (s *Store) Get(ctx context.Context, key port.Key) (port.Item, bool, error) {
	if err := ctx.Err(); err != nil {
		return port.Item{}, false, fmt.Errorf("dynamo: get: %w", err)
	}
	if err := validKey(key); err != nil {
		return port.Item{}, false, fmt.Errorf("dynamo: get: %w", err)
	}
	it, found, err := s.get(ctx, key)
	if err != nil {
		return port.Item{}, false, fmt.Errorf("dynamo: get %s: %w", key, err)
	}
	return it, found, nil
}

// get reads one item, retrying transient failures (a void slot reads as absent).
func (s *Store) get(ctx context.Context, key port.Key) (port.Item, bool, error) {
	av, found, err := s.rawGet(ctx, key)
	if err != nil {
		return port.Item{}, false, err
	}
	if !found || isVoid(av) {
		return port.Item{}, false, nil
	}
	it, err := decodeItem(av)
	if err != nil {
		return port.Item{}, false, err
	}
	if it.Key != key {
		return port.Item{}, false, fmt.Errorf("%w: asked for %s, got %s", kv.ErrCorrupt, key, it.Key)
	}
	return it, true, nil
}

// Query returns the items of one partition within q's bounds in ascending sort-key order: at most q.Limit
// (kv.DefaultPageSize when 0).
//
// DynamoDB strings are UTF-8, but a bound need not be: the domain uses sentinels such as "ACT#\xff" (every
// sort key with the prefix "ACT#"). Such a bound is widened to a UTF-8 one on the wire (queryBounds) and the
// exact bytewise bounds are applied to what comes back, so the result is the same as on a byte-keyed store.
func (s *Store) Query(ctx context.Context, q port.Query) ([]port.Item, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("dynamo: query: %w", err)
	}
	if err := validKey(port.Key{PK: q.PK, SK: "-"}); err != nil {
		return nil, fmt.Errorf("dynamo: query: %w: %w", kv.ErrInvalidQuery, err)
	}
	if q.Limit < 0 {
		return nil, fmt.Errorf("dynamo: query: %w: negative limit %d", kv.ErrInvalidQuery, q.Limit)
	}
	limit := q.Limit
	if limit == 0 {
		limit = kv.DefaultPageSize
	}
	out := []port.Item{}
	if q.UpTo != "" && q.After >= q.UpTo {
		return out, nil
	}
	kc, err := keyCondition(q)
	if err != nil {
		return nil, fmt.Errorf("dynamo: query %q: %w", q.PK, err)
	}
	expr, err := expression.NewBuilder().WithKeyCondition(kc).Build()
	if err != nil {
		return nil, fmt.Errorf("dynamo: query %q: building key condition: %w", q.PK, err)
	}
	var start map[string]types.AttributeValue
	for {
		in := &dynamodb.QueryInput{
			TableName:                 aws.String(s.table),
			KeyConditionExpression:    expr.KeyCondition(),
			ExpressionAttributeNames:  expr.Names(),
			ExpressionAttributeValues: expr.Values(),
			ConsistentRead:            aws.Bool(true),
			// One more than needed: a BETWEEN (or a widened bound) may return the After item itself first.
			Limit:                  aws.Int32(int32(min(limit-len(out)+1, 1<<30))),
			ExclusiveStartKey:      start,
			ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
		}
		page, err := call(ctx, s, in, s.api.Query)
		if err != nil {
			return nil, fmt.Errorf("dynamo: query %q: %w", q.PK, err)
		}
		size := 0
		for _, av := range page.Items {
			size += ItemSize(av)
		}
		s.report(Usage{Operation: "Query", Items: len(page.Items), ReadUnits: ReadUnits(size)}, page.ConsumedCapacity)
		for _, av := range page.Items {
			if isVoid(av) {
				continue
			}
			it, err := decodeItem(av)
			if err != nil {
				return nil, fmt.Errorf("dynamo: query %q: %w", q.PK, err)
			}
			if it.PK != q.PK {
				return nil, fmt.Errorf("dynamo: query %q: %w: item of partition %q returned", q.PK, kv.ErrCorrupt, it.PK)
			}
			if q.After != "" && it.SK <= q.After {
				continue
			}
			if q.UpTo != "" && it.SK > q.UpTo {
				return out, nil
			}
			out = append(out, it)
			if len(out) == limit {
				return out, nil
			}
		}
		if len(page.LastEvaluatedKey) == 0 {
			return out, nil
		}
		start = page.LastEvaluatedKey
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("dynamo: query %q: %w", q.PK, err)
		}
	}
}

// keyCondition is the key condition of q: pk = q.PK and the tightest UTF-8 sort-key bounds that contain
// every UTF-8 sort key within q's bounds (sk > After, sk <= UpTo, or sk BETWEEN the two). Query applies
// the exact bounds to the results.
func keyCondition(q port.Query) (expression.KeyConditionBuilder, error) {
	kc := expression.Key(AttrPK).Equal(expression.Value(q.PK))
	lo, hasLo := lowerBound(q.After)
	hi, hiInclusive, hasHi := upperBound(q.UpTo)
	switch {
	case hasLo && hasHi:
		return kc.And(expression.Key(AttrSK).Between(expression.Value(lo), expression.Value(hi))), nil
	case hasLo:
		return kc.And(expression.Key(AttrSK).GreaterThan(expression.Value(lo))), nil
	case hasHi && hiInclusive:
		return kc.And(expression.Key(AttrSK).LessThanEqual(expression.Value(hi))), nil
	case hasHi:
		return kc.And(expression.Key(AttrSK).LessThan(expression.Value(hi))), nil
	}
	return kc, nil
}

// lowerBound returns a UTF-8 string lo such that every UTF-8 string greater than after is greater than lo:
// after itself when it is UTF-8, otherwise its longest UTF-8 prefix (none when that is empty).
func lowerBound(after string) (string, bool) {
	lo := validPrefix(after)
	return lo, lo != ""
}

// upperBound returns a UTF-8 bound containing every UTF-8 string at most upTo: upTo itself (inclusive) when
// it is UTF-8, otherwise the smallest UTF-8 string above every extension of upTo's longest UTF-8 prefix
// (exclusive), or none.
func upperBound(upTo string) (hi string, inclusive, ok bool) {
	if upTo == "" {
		return "", false, false
	}
	if utf8.ValidString(upTo) {
		return upTo, true, true
	}
	// Strip characters from the end of the valid prefix until incrementing its last byte stays UTF-8.
	p := validPrefix(upTo)
	for p != "" {
		next := p[:len(p)-1] + string([]byte{p[len(p)-1] + 1})
		if p[len(p)-1] != 0xff && utf8.ValidString(next) {
			return next, false, true
		}
		_, size := utf8.DecodeLastRuneInString(p)
		p = p[:len(p)-size]
	}
	return "", false, false
}

// validPrefix returns the longest prefix of s that is UTF-8.
func validPrefix(s string) string {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size <= 1 {
			return s[:i]
		}
		i += size
	}
	return s
}

// validKey applies kv.ValidateKey (DynamoDB's key limits) and requires UTF-8, as DynamoDB strings must be.
func validKey(k port.Key) error {
	if err := kv.ValidateKey(k); err != nil {
		return err
	}
	if !utf8.ValidString(k.PK) || !utf8.ValidString(k.SK) {
		return fmt.Errorf("%w: key %q is not UTF-8", kv.ErrInvalidKey, k.String())
	}
	return nil
}
