// Package kv holds the one implementation of item-store transaction semantics that the in-memory adapter
// (store/mem) and the embedded adapter (store/pebble) share, so that both behave exactly alike and as the
// port (domain/port) describes.
//
// An adapter gives Commit a View of its current state inside whatever isolation it has (a mutex, the single
// committer goroutine of store/pebble and its indexed view of pending writes). Commit then
//
//  1. validates the transaction shape (counter key, Count, Build);
//  2. reads the counter (attribute port.CounterAttr, decimal, absent means 0) and allocates Count values,
//     failing with port.ErrCounterExhausted when the last one would pass Max (no wrap-around); a sequence
//     (Tx.Seq) is allocated the same way from its Counter item, inside the transaction, so it has no holes;
//  3. calls Build with the first allocated value (0 without a counter);
//  4. validates the ops: at most maxOps including the counter (port.ErrTooManyOps), known kinds, valid keys
//     (see ValidateKey) and no two actions on one key, the counter included (ErrDuplicateKey, as DynamoDB
//     forbids it); with a sequence, a NotExists put of every allocated slot and no op on its Head key
//     (ErrInvalidTx);
//  5. evaluates every condition against the state before any write; the first failing op, in Build's
//     order, is reported as a *port.ConditionFailedError and nothing is written;
//  6. with a Quota, adds the transaction's usage (port.PutBytes of the ops, plus Extra) to the counter item,
//     failing with port.ErrQuotaExceeded when it would pass a limit (exact: in the same transaction);
//  7. applies puts and deletes, then the counter update.
//
// Items are deep-copied on the way in; Query hands out items the caller owns. If a View write fails in
// step 7, Commit returns the error and the adapter must discard the writes already made (roll back).
package kv

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/waypost/waypost/domain/port"
)

// View is an adapter's state as one transaction sees it. Get may return an item shared with the store: Commit
// never modifies it. Put receives the transaction's item as Build returned it, shared with the caller: a
// View that keeps it copies what it keeps (CloneItem), once, in the form it stores. Errors are storage
// failures.
type View interface {
	// Get returns the item at k and whether it exists.
	Get(k port.Key) (port.Item, bool, error)
	// Put stores it, replacing any item at its key.
	Put(it port.Item) error
	// Delete removes the item at k; deleting an absent item is not an error.
	Delete(k port.Key) error
}

// AbsentView is a View that can also tell at once that none of several keys of one partition exists: a
// sequence's allocated slots, whose NotExists conditions Commit then takes as holding without reading each
// slot (an embedded store answers it with one seek over the slots' range instead of one per slot).
type AbsentView interface {
	View
	// NoneExists reports whether no item exists at any of keys, which are of one partition and in
	// ascending sort-key order. false means at least one may exist: Commit then reads each.
	NoneExists(keys []port.Key) (bool, error)
}

// slotsAbsent returns, for the n ops of a transaction allocating a sequence's slots from first (idx: the op
// putting each, SlotOps), which ops' NotExists conditions are known to hold: every slot op when v is an
// AbsentView that says none of the slots exists, else none (nil). A single slot is read as any key.
func slotsAbsent(v View, seq port.Sequence, first uint64, idx []int, n int) ([]bool, error) {
	av, ok := v.(AbsentView)
	if !ok || len(idx) < 2 {
		return nil, nil
	}
	keys := make([]port.Key, len(idx))
	for j := range idx {
		keys[j] = seq.Slot(first + uint64(j))
	}
	none, err := av.NoneExists(keys)
	if err != nil || !none {
		return nil, err
	}
	held := make([]bool, n)
	for _, i := range idx {
		held[i] = true
	}
	return held, nil
}

// Getter reads single items, as View.Get.
type Getter interface {
	Get(k port.Key) (port.Item, bool, error)
}

// Ranger iterates one partition in ascending sort-key order (byte-wise).
type Ranger interface {
	// Scan calls fn with each item of partition pk whose sort key is greater than after (every item when
	// after is ""), in ascending sort-key order, until fn returns false or the partition ends. The items
	// passed to fn are owned by fn: the Ranger must not keep or modify them afterwards.
	Scan(pk, after string, fn func(port.Item) bool) error
}

// Limits shared by the adapters. The key limits are DynamoDB's, so that a key that works on the embedded
// store also works on DynamoDB.
const (
	// MaxPKBytes is the longest partition key, in bytes.
	MaxPKBytes = 2048
	// MaxSKBytes is the longest sort key, in bytes.
	MaxSKBytes = 1024
	// DefaultPageSize is the number of items a Query with Limit 0 returns at most.
	DefaultPageSize = 100
)

// ErrInvalidTx reports a malformed transaction: unknown op or condition kind, invalid key, a counter with
// Count 0, a nil Build, or two actions on one key. Nothing is written.
var ErrInvalidTx = errors.New("invalid transaction")

// ErrDuplicateKey reports two actions on one key in a transaction (the counter counts as an action). Errors
// wrapping it also wrap ErrInvalidTx.
var ErrDuplicateKey = errors.New("two actions on one key")

// ErrInvalidKey reports an empty or over-long key. Errors wrapping it from Commit also wrap ErrInvalidTx.
var ErrInvalidKey = errors.New("invalid key")

// ErrInvalidQuery reports a malformed query (invalid partition key or negative limit).
var ErrInvalidQuery = errors.New("invalid query")

// ErrCorrupt reports a stored value that cannot be decoded, such as a counter that is not decimal.
var ErrCorrupt = errors.New("corrupt stored item")

// ErrSlotMissing reports a sequence transaction whose ops do not put one of its allocated slots with a
// NotExists condition (see port.Sequence). Errors wrapping it also wrap ErrInvalidTx.
var ErrSlotMissing = errors.New("sequence slot not put")

// ValidateKey checks that k has a non-empty partition key of at most MaxPKBytes and a non-empty sort key of
// at most MaxSKBytes. DynamoDB rejects empty key attributes, so the embedded adapters do too.
func ValidateKey(k port.Key) error {
	switch {
	case k.PK == "":
		return fmt.Errorf("%w: empty partition key", ErrInvalidKey)
	case len(k.PK) > MaxPKBytes:
		return fmt.Errorf("%w: partition key of %d bytes (max %d)", ErrInvalidKey, len(k.PK), MaxPKBytes)
	case k.SK == "":
		return fmt.Errorf("%w: empty sort key (partition %q)", ErrInvalidKey, k.PK)
	case len(k.SK) > MaxSKBytes:
		return fmt.Errorf("%w: sort key of %d bytes (max %d)", ErrInvalidKey, len(k.SK), MaxSKBytes)
	}
	return nil
}

// CloneItem returns a deep copy of it. A nil Attrs map or Data slice stays nil.
func CloneItem(it port.Item) port.Item {
	out := port.Item{Key: it.Key}
	if it.Attrs != nil {
		out.Attrs = make(map[string]string, len(it.Attrs))
		for k, v := range it.Attrs {
			out.Attrs[k] = v
		}
	}
	if it.Data != nil {
		out.Data = append(make([]byte, 0, len(it.Data)), it.Data...)
	}
	return out
}

// CounterValue returns the last allocated value held by a counter item: its port.CounterAttr attribute in
// decimal, 0 when the item or the attribute is absent.
func CounterValue(it port.Item, found bool) (uint64, error) {
	if !found {
		return 0, nil
	}
	s, ok := it.Attrs[port.CounterAttr]
	if !ok {
		return 0, nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: counter %s holds %q", ErrCorrupt, it.Key, s)
	}
	return n, nil
}

// Commit runs tx against v as described in the package documentation and returns the first allocated
// counter value (0 without a counter). maxOps is the adapter's port.ItemStore.MaxOps. A failed condition
// returns a *port.ConditionFailedError (not wrapped). Any error other than one from a View write means
// nothing was written; after a View write error the caller must roll back.
func Commit(ctx context.Context, v View, tx port.Tx, maxOps int) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("kv: commit: %w", err)
	}
	ctrKey, err := CheckTx(tx)
	if err != nil {
		return 0, fmt.Errorf("kv: commit: %w", err)
	}

	// Counter allocation.
	var (
		first, last uint64
		counter     port.Item
	)
	if ctrKey != nil {
		cur, found, err := v.Get(*ctrKey)
		if err != nil {
			return 0, fmt.Errorf("kv: commit: read counter %s: %w", *ctrKey, err)
		}
		n, err := CounterValue(cur, found)
		if err != nil {
			return 0, fmt.Errorf("kv: commit: %w", err)
		}
		if first, last, err = Allocate(*ctrKey, n, tx); err != nil {
			return 0, fmt.Errorf("kv: commit: %w", err)
		}
		if found {
			counter = CloneItem(cur)
		}
		counter.Key = *ctrKey
		if counter.Attrs == nil {
			counter.Attrs = make(map[string]string, 1)
		}
		counter.Attrs[port.CounterAttr] = strconv.FormatUint(last, 10)
	}

	ops, err := tx.Build(first)
	if err != nil {
		return 0, fmt.Errorf("kv: commit: build: %w", err)
	}
	// Shape validation: the counter's write is one more action.
	if err := CheckOps(ops, ctrKey, ctrKey != nil, maxOps); err != nil {
		return 0, fmt.Errorf("kv: commit: %w", err)
	}
	var held []bool // ops whose NotExists condition is known to hold (slotsAbsent)
	if tx.Seq != nil {
		idx, err := SlotOps(*tx.Seq, first, tx.Count, ops)
		if err != nil {
			return 0, fmt.Errorf("kv: commit: %w", err)
		}
		if held, err = slotsAbsent(v, *tx.Seq, first, idx, len(ops)); err != nil {
			return 0, fmt.Errorf("kv: commit: %w", err)
		}
	}

	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("kv: commit: %w", err)
	}

	// Every condition against the state before any write.
	for i, op := range ops {
		if op.Cond.Kind == port.CondNone || (held != nil && held[i]) {
			continue
		}
		cur, found, err := v.Get(op.Item.Key)
		if err != nil {
			return 0, fmt.Errorf("kv: commit: read %s: %w", op.Item.Key, err)
		}
		if !op.Cond.Holds(cur, found) {
			return 0, &port.ConditionFailedError{Index: i, Key: op.Item.Key}
		}
	}

	if tx.Quota != nil {
		if err := addUsage(&counter, *tx.Quota, ops); err != nil {
			return 0, fmt.Errorf("kv: commit: %w", err)
		}
	}

	// Writes. From here on an error leaves partial writes the caller must roll back.
	for i, op := range ops {
		switch op.Kind {
		case port.OpPut:
			err = v.Put(op.Item)
		case port.OpDelete:
			err = v.Delete(op.Item.Key)
		}
		if err != nil {
			return 0, fmt.Errorf("kv: commit: apply op %d (%s): %w", i, op.Item.Key, err)
		}
	}
	if ctrKey != nil {
		if err := v.Put(counter); err != nil {
			return 0, fmt.Errorf("kv: commit: write counter %s: %w", counter.Key, err)
		}
	}
	return first, nil
}

// addUsage adds the usage of a transaction to its counter item, or fails with port.ErrQuotaExceeded.
func addUsage(counter *port.Item, q port.Quota, ops []port.Op) error {
	bytes, items := port.UsageOf(*counter)
	bytes += port.PutBytes(ops) + q.Extra
	items += q.Items
	if (q.MaxBytes > 0 && bytes > q.MaxBytes) || (q.MaxItems > 0 && items > q.MaxItems) {
		return fmt.Errorf("%s would hold %d bytes and %d items (at most %d and %d): %w",
			counter.Key, bytes, items, q.MaxBytes, q.MaxItems, port.ErrQuotaExceeded)
	}
	counter.Attrs[port.UsageBytesAttr] = strconv.FormatInt(bytes, 10)
	counter.Attrs[port.UsageItemsAttr] = strconv.FormatInt(items, 10)
	return nil
}

// CheckTx checks what a transaction declares before anything is read — a Build, and a well-formed counter
// or sequence (CounterKey) — and returns the key it allocates from (nil when it allocates nothing). Every
// adapter applies it first; errors wrap ErrInvalidTx.
func CheckTx(tx port.Tx) (*port.Key, error) {
	if tx.Build == nil {
		return nil, fmt.Errorf("%w: nil Build", ErrInvalidTx)
	}
	return CounterKey(tx)
}

// Allocate is the counter rule: a counter at n (its last allocated value) gives tx the values first..last
// (tx.Count of them; none when it is 0, as for a transaction that only adds a quota's usage), unless that
// would pass tx.Max: then the error wraps port.ErrCounterExhausted.
func Allocate(key port.Key, n uint64, tx port.Tx) (first, last uint64, err error) {
	if tx.Count > 0 && (tx.Count > tx.Max || n > tx.Max-tx.Count) { // taking no value (a quota only) never fails
		return 0, 0, fmt.Errorf("counter %s at %d, %d more would pass %d: %w", key, n, tx.Count, tx.Max, port.ErrCounterExhausted)
	}
	return n + 1, n + tx.Count, nil
}

// CheckOps checks the ops Build returned: at most maxOps actions in all (counting the counter's write when
// counterAction is set: port.ErrTooManyOps), each op well-formed (ValidateOp), and no two actions on one key
// — reserved, the key values are allocated from, counts as taken (ErrDuplicateKey). Errors but the first
// wrap ErrInvalidTx.
func CheckOps(ops []port.Op, reserved *port.Key, counterAction bool, maxOps int) error {
	n := len(ops)
	if counterAction {
		n++
	}
	if n > maxOps {
		return fmt.Errorf("%d actions (max %d): %w", n, maxOps, port.ErrTooManyOps)
	}
	seen := make(map[port.Key]int, len(ops)+1)
	if reserved != nil {
		seen[*reserved] = -1
	}
	for i, op := range ops {
		if err := ValidateOp(op); err != nil {
			return fmt.Errorf("op %d: %w: %w", i, ErrInvalidTx, err)
		}
		if j, dup := seen[op.Item.Key]; dup {
			what := fmt.Sprintf("op %d", j)
			if j < 0 {
				what = "the counter"
			}
			return fmt.Errorf("op %d (%s) and %s: %w: %w", i, op.Item.Key, what, ErrInvalidTx, ErrDuplicateKey)
		}
		seen[op.Item.Key] = i
	}
	return nil
}

// CounterKey validates the counter part of tx and returns the key of the item it allocates from: Counter,
// the Counter of Seq, or nil when tx allocates nothing. Errors wrap ErrInvalidTx.
func CounterKey(tx port.Tx) (*port.Key, error) {
	var k *port.Key
	switch {
	case tx.Counter != nil && tx.Seq != nil:
		return nil, fmt.Errorf("%w: both a counter and a sequence", ErrInvalidTx)
	case tx.Counter != nil:
		k = tx.Counter
	case tx.Seq != nil:
		k = &tx.Seq.Counter
		if err := ValidateKey(tx.Seq.Head); err != nil {
			return nil, fmt.Errorf("sequence head: %w: %w", ErrInvalidTx, err)
		}
		if err := ValidateKey(tx.Seq.Slot(0)); err != nil {
			return nil, fmt.Errorf("sequence slots: %w: %w", ErrInvalidTx, err)
		}
		if tx.Seq.Head == tx.Seq.Counter || tx.Seq.Head.PK == tx.Seq.Slots || tx.Seq.Counter.PK == tx.Seq.Slots {
			return nil, fmt.Errorf("%w: the counter, head and slots of a sequence must be apart", ErrInvalidTx)
		}
	default:
		return nil, nil
	}
	if tx.Quota != nil && tx.Seq == nil {
		return nil, fmt.Errorf("%w: a quota without a sequence", ErrInvalidTx)
	}
	if err := ValidateKey(*k); err != nil {
		return nil, fmt.Errorf("counter: %w: %w", ErrInvalidTx, err)
	}
	if tx.Count == 0 && tx.Quota == nil {
		return nil, fmt.Errorf("%w: counter with Count 0", ErrInvalidTx)
	}
	return k, nil
}

// SlotOps checks the ops of a sequence transaction that took count values from first: each slot must be
// put exactly by one op guarded by NotExists, and no op may touch the sequence's Head. It returns the index
// of each slot's op, in value order. Errors wrap ErrInvalidTx (and ErrSlotMissing for a missing slot).
func SlotOps(seq port.Sequence, first, count uint64, ops []port.Op) ([]int, error) {
	idx := make([]int, count)
	for i := range idx {
		idx[i] = -1
	}
	for i, op := range ops {
		if op.Item.Key == seq.Head {
			return nil, fmt.Errorf("op %d (%s) on the sequence head: %w: %w", i, op.Item.Key, ErrInvalidTx, ErrDuplicateKey)
		}
		if op.Item.PK != seq.Slots || op.Kind != port.OpPut || op.Cond.Kind != port.CondNotExists {
			continue
		}
		if v, ok := port.ParseSlotSK(op.Item.SK); ok && v >= first && v-first < count {
			idx[v-first] = i
		}
	}
	for j, i := range idx {
		if i < 0 {
			return nil, fmt.Errorf("slot %s of value %d: %w: %w", seq.Slot(first+uint64(j)), first+uint64(j), ErrInvalidTx, ErrSlotMissing)
		}
	}
	return idx, nil
}

// Head returns the visible head of seq on a store that allocates inside its transactions: the counter's
// value, since every allocated value's slot is written in the transaction that allocated it.
func Head(v Getter, seq port.Sequence) (uint64, error) {
	if err := ValidateKey(seq.Counter); err != nil {
		return 0, fmt.Errorf("kv: head: %w", err)
	}
	it, found, err := v.Get(seq.Counter)
	if err != nil {
		return 0, fmt.Errorf("kv: head: read counter %s: %w", seq.Counter, err)
	}
	n, err := CounterValue(it, found)
	if err != nil {
		return 0, fmt.Errorf("kv: head: %w", err)
	}
	return n, nil
}

// ValidateOp checks one op: a known kind and condition kind, an attribute condition naming its attribute, a
// check with a condition, no empty attribute name in a put, a valid key (ValidateKey).
func ValidateOp(op port.Op) error {
	switch op.Kind {
	case port.OpPut, port.OpDelete, port.OpCheck:
	default:
		return fmt.Errorf("unknown op kind %d", op.Kind)
	}
	switch op.Cond.Kind {
	case port.CondNone, port.CondExists, port.CondNotExists:
	case port.CondAttrEquals:
		if op.Cond.Attr == "" {
			return errors.New("attribute condition without an attribute name")
		}
	default:
		return fmt.Errorf("unknown condition kind %d", op.Cond.Kind)
	}
	if op.Kind == port.OpCheck && op.Cond.Kind == port.CondNone {
		return errors.New("check without a condition")
	}
	if op.Kind == port.OpPut {
		if _, ok := op.Item.Attrs[""]; ok {
			return errors.New("empty attribute name")
		}
	}
	return ValidateKey(op.Item.Key)
}

// Query reads one partition through r within q's bounds: sort keys greater than After (when set) and at most
// UpTo (when set), at most Limit items (DefaultPageSize when 0), in ascending sort-key order.
func Query(ctx context.Context, r Ranger, q port.Query) ([]port.Item, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("kv: query: %w", err)
	}
	if q.PK == "" || len(q.PK) > MaxPKBytes {
		return nil, fmt.Errorf("kv: query: %w: partition key of %d bytes", ErrInvalidQuery, len(q.PK))
	}
	if q.Limit < 0 {
		return nil, fmt.Errorf("kv: query: %w: negative limit %d", ErrInvalidQuery, q.Limit)
	}
	limit := q.Limit
	if limit == 0 {
		limit = DefaultPageSize
	}
	out := []port.Item{}
	if q.UpTo != "" && q.After >= q.UpTo {
		return out, nil
	}
	err := r.Scan(q.PK, q.After, func(it port.Item) bool {
		if q.UpTo != "" && it.SK > q.UpTo {
			return false
		}
		out = append(out, it)
		return len(out) < limit
	})
	if err != nil {
		return nil, fmt.Errorf("kv: query %q: %w", q.PK, err)
	}
	return out, nil
}

// GetEach is port.ItemStore.GetMany for a store whose Get is local: get reads each key in turn. The first
// error ends it.
func GetEach(ctx context.Context, keys []port.Key, get func(context.Context, port.Key) (port.Item, bool, error)) ([]port.Item, []bool, error) {
	items, found := make([]port.Item, len(keys)), make([]bool, len(keys))
	for i, k := range keys {
		var err error
		if items[i], found[i], err = get(ctx, k); err != nil {
			return nil, nil, err
		}
	}
	return items, found, nil
}
