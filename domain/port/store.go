// Package port defines the narrow interfaces the Waypost domain uses to reach storage, blobs, time,
// identifiers and notifications (RFC-0001 §14.2, SUPPLEMENT §14.2). Adapters live in store/ and channel/;
// the domain never imports them.
//
// The item store is modelled on DynamoDB: strongly consistent single-item reads, ordered range reads of one
// partition, and all-or-nothing transactions of condition-guarded puts, deletes and checks. A transaction may
// also take consecutive values of one counter: either a plain counter (Tx.Counter), allocated inside the
// transaction, or a sequence (Tx.Seq), whose values number the slots of a feed and whose visible head
// (ItemStore.Head) never passes a slot that may still be filled. See Sequence.
package port

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
)

// Key addresses one item: a partition key and a sort key. Items of one partition are ordered by SK
// (byte-wise ascending).
type Key struct {
	PK string
	SK string
}

// String renders the key for logs and error messages.
func (k Key) String() string { return k.PK + "|" + k.SK }

// Item is one stored record. Attrs hold small string attributes that conditions can test; Data is an opaque
// payload owned by the domain (usually JSON).
type Item struct {
	Key
	Attrs map[string]string
	Data  []byte
}

// Attr returns the named attribute, or "" when absent.
func (it Item) Attr(name string) string { return it.Attrs[name] }

// CondKind says what a condition requires of the current state of an item.
type CondKind int

const (
	// CondNone imposes nothing.
	CondNone CondKind = iota
	// CondExists requires the item to exist.
	CondExists
	// CondNotExists requires the item to be absent.
	CondNotExists
	// CondAttrEquals requires the item to exist with attribute Attr present and equal to Value.
	CondAttrEquals
)

// Cond is a typed condition on the current state of one item.
type Cond struct {
	Kind  CondKind
	Attr  string
	Value string
}

// Exists requires the item to exist.
func Exists() Cond { return Cond{Kind: CondExists} }

// NotExists requires the item to be absent.
func NotExists() Cond { return Cond{Kind: CondNotExists} }

// AttrEquals requires the item to exist with attribute name equal to value.
func AttrEquals(name, value string) Cond { return Cond{Kind: CondAttrEquals, Attr: name, Value: value} }

// Holds reports whether the condition holds for the current item (present says whether it exists).
func (c Cond) Holds(cur Item, present bool) bool {
	switch c.Kind {
	case CondNone:
		return true
	case CondExists:
		return present
	case CondNotExists:
		return !present
	case CondAttrEquals:
		v, ok := cur.Attrs[c.Attr]
		return present && ok && v == c.Value // an absent attribute never equals, as in DynamoDB
	default:
		return false
	}
}

// OpKind is the kind of one action in a transaction.
type OpKind int

const (
	// OpPut writes the whole item (replacing any existing one) if Cond holds.
	OpPut OpKind = iota
	// OpDelete removes the item at Item.Key if Cond holds; deleting an absent item is not an error.
	OpDelete
	// OpCheck writes nothing; it only requires Cond to hold for Item.Key.
	OpCheck
)

// Op is one action of a transaction. For OpDelete and OpCheck only Item.Key is used.
type Op struct {
	Kind OpKind
	Item Item
	Cond Cond
}

// Put returns an OpPut of item guarded by cond.
func Put(item Item, cond Cond) Op { return Op{Kind: OpPut, Item: item, Cond: cond} }

// Delete returns an OpDelete of key guarded by cond.
func Delete(key Key, cond Cond) Op { return Op{Kind: OpDelete, Item: Item{Key: key}, Cond: cond} }

// Check returns an OpCheck of key with cond.
func Check(key Key, cond Cond) Op { return Op{Kind: OpCheck, Item: Item{Key: key}, Cond: cond} }

// Tx is one all-or-nothing transaction.
//
// When Counter is set, the transaction allocates Count consecutive values of the counter stored at Counter
// (attribute CounterAttr, absent means 0): Build receives the first allocated value, and the counter ends at
// first+Count-1. Allocation never wraps: a value above Max fails with ErrCounterExhausted. Build may be called
// more than once (adapters that use optimistic concurrency retry it), so it must be a pure function of its
// argument. When Counter is nil, Build is called once with 0.
//
// When Seq is set instead (Counter and Seq are exclusive), the transaction takes Count consecutive values of
// the sequence, with the same Max and Build rules, and Build must put each taken value's slot (see Sequence).
//
// Quota, with a Seq, adds the transaction's size to the usage kept in the sequence's counter item (see
// Quota); Count may then be 0 (a transaction that takes no value but stores something).
type Tx struct {
	Counter *Key
	Seq     *Sequence
	Count   uint64
	Max     uint64
	Build   func(first uint64) ([]Op, error)
	Quota   *Quota
}

// Quota is the usage a transaction adds to its sequence's counter item (Tx.Seq.Counter), in the same
// atomic step that takes its values: Bytes, the size of its puts (PutBytes of the ops Build returns) plus
// Extra, and Items. When the usage would pass MaxBytes or MaxItems (a limit ≤ 0 is none), the transaction
// fails with ErrQuotaExceeded, writes nothing and takes no value. The counter item keeps the usage in the
// attributes UsageBytesAttr and UsageItemsAttr (decimal; absent means 0), which Get returns.
//
// How exact the usage is differs by adapter: inside the transaction (store/kv) it is exact; an adapter that
// takes values before the transaction (store/dynamo) adds it with the reservation, sized by a Build of the
// highest value the transaction could take, and takes it back when the transaction fails — so it may count a
// few bytes more per transaction, and more only when a writer dies between the two.
type Quota struct {
	// Extra is what the operation stores outside the item store (a body or state object), in bytes.
	Extra int64
	// Items is how many items the transaction adds to the count (messages and revisions it publishes).
	Items int64
	// MaxBytes and MaxItems are the limits the usage must stay within; ≤ 0 means no limit.
	MaxBytes int64
	MaxItems int64
}

// Attributes of the usage a counter item keeps (Tx.Quota), decimal.
const (
	UsageBytesAttr = "ub"
	UsageItemsAttr = "ui"
)

// ErrQuotaExceeded reports a transaction whose usage would pass its Quota's limits; nothing was written.
var ErrQuotaExceeded = errors.New("quota exceeded")

// PutBytes is the size of what ops store: the key, attribute names and values, and payload of every put.
func PutBytes(ops []Op) int64 {
	var n int64
	for _, op := range ops {
		if op.Kind != OpPut {
			continue
		}
		n += int64(len(op.Item.PK) + len(op.Item.SK) + len(op.Item.Data))
		for k, v := range op.Item.Attrs {
			n += int64(len(k) + len(v))
		}
	}
	return n
}

// UsageOf returns the usage a counter item keeps (0, 0 for an absent item or attributes).
func UsageOf(it Item) (bytes, items int64) {
	bytes, _ = strconv.ParseInt(it.Attrs[UsageBytesAttr], 10, 64)
	items, _ = strconv.ParseInt(it.Attrs[UsageItemsAttr], 10, 64)
	return bytes, items
}

// Sequence is a counter whose values number slots: the items {Slots, SlotSK(v)} of one partition (a space's
// feed). A transaction with Tx.Seq takes Count consecutive values first…first+Count-1, and the ops Build
// returns must include, for each of them, an OpPut of Slot(v) guarded by NotExists; a transaction without
// them, or with an op on Counter or Head, is rejected (an invalid transaction). The values a space sees are
// strictly increasing in commit order, but not necessarily consecutive, and readers bound their reads by
// Head, never by the counter.
//
// How an adapter takes the values is its own choice, and they differ:
//
//   - inside the transaction (store/kv: mem, pebble): the counter item at Counter (attribute CounterAttr) is
//     read and written in the transaction, so values are gapless and Head is the counter;
//   - before the transaction (store/dynamo): values are reserved with one atomic update of the counter, then
//     the transaction commits with every slot guarded. A slot whose transaction does not commit is voided
//     (by its writer at once, or by a reader after a grace period), so values may be skipped. A void slot
//     reads as absent (Get, Query) but is present to conditions: a put guarded by NotExists fails on it, so
//     a late transaction can never fill it; Commit then takes new values and calls Build again. Head is
//     a watermark kept in the item at Head (the adapter's own attributes; never read or written by ops).
type Sequence struct {
	// Counter holds the last value taken.
	Counter Key
	// Slots is the partition of the slots.
	Slots string
	// Head is where an adapter that takes values before the transaction keeps its watermark; other adapters
	// ignore it.
	Head Key
}

// SlotSK is the sort key of slot v: v in 20 decimal digits, so slots range-read in value order.
func SlotSK(v uint64) string {
	var b [20]byte // every uint64 has at most 20 digits
	for i := len(b) - 1; i >= 0; i-- {
		b[i] = byte('0' + v%10)
		v /= 10
	}
	return string(b[:])
}

// ParseSlotSK returns the value whose slot has sort key sk, and whether sk is the sort key of a slot
// (SlotSK(v) == sk).
func ParseSlotSK(sk string) (uint64, bool) {
	if len(sk) != 20 {
		return 0, false
	}
	var v uint64
	for i := 0; i < len(sk); i++ {
		c := sk[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if v > (math.MaxUint64-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	return v, true
}

// Slot returns the key of slot v.
func (q Sequence) Slot(v uint64) Key { return Key{PK: q.Slots, SK: SlotSK(v)} }

// CounterAttr is the attribute of a counter item that holds its last allocated value in decimal.
const CounterAttr = "n"

// AttrExpires marks a time-limited item: its value is the Unix time (seconds, decimal) after which the item
// may be deleted. A store that expires items by itself (see Expirer) deletes it some time after that; the
// others keep it until it is deleted. Either way the item stays readable until it is gone.
const AttrExpires = "expires"

// Expirer is implemented by item stores that may delete items past their AttrExpires time by themselves
// (DynamoDB's time to live, which deletes within days, not at once). A store without it, or whose
// ExpiresItems is false, never deletes an item on its own.
type Expirer interface {
	ExpiresItems() bool
}

// PointReadCoster is implemented by item stores whose point reads cost about as much each as a whole page
// of a Query (DynamoDB: half a read unit or more for every item of a GetMany, against one for 4 KB of a
// Query). When PointReadsCostly is true the domain keeps a copy of a feed item in each of its inbox entries,
// so that a page of an inbox is one Query; otherwise (the embedded store, where a point read is one seek
// and every stored byte is written again by compactions) an inbox entry holds nothing and a read takes the
// item from the space feed's slot, so that the item is stored once.
type PointReadCoster interface {
	PointReadsCostly() bool
}

// Query is an ordered range read of one partition.
type Query struct {
	PK string
	// After, when not empty, excludes sort keys ≤ After.
	After string
	// UpTo, when not empty, excludes sort keys > UpTo.
	UpTo string
	// Limit caps the number of items returned; 0 means the adapter's page size.
	Limit int
}

// ItemStore is the transactional item store port (SUPPLEMENT §14.2).
type ItemStore interface {
	// Get reads one item with strong consistency. found is false when it is absent.
	Get(ctx context.Context, key Key) (item Item, found bool, err error)
	// GetMany reads several items as Get reads each of them: found[i] reports whether keys[i] exists and
	// items[i] is it. Keys may repeat. A store whose reads cross the network reads them in fewer round trips
	// than one per key (DynamoDB: BatchGetItem); the keys are not read as of one instant.
	GetMany(ctx context.Context, keys []Key) (items []Item, found []bool, err error)
	// Query returns items of one partition in ascending sort-key order within the query's bounds.
	Query(ctx context.Context, q Query) ([]Item, error)
	// Commit applies a transaction all or nothing. A failed condition returns a *ConditionFailedError naming
	// the op and writes nothing. Transient failures wrap ErrUnavailable.
	Commit(ctx context.Context, tx Tx) (first uint64, err error)
	// MaxOps is the largest number of ops (counter included) one transaction may hold.
	MaxOps() int
	// ReservesSequences reports whether Commit takes a transaction's sequence values before the transaction
	// runs (DynamoDB), so that a transaction refused by a condition still uses its values up (their slots
	// are voided), rather than inside it (the embedded stores), where a refused transaction takes none. The
	// domain lets a condition rather than a read decide only where a refusal takes nothing.
	ReservesSequences() bool
	// Head returns the visible head of a sequence: the highest value h such that every value up to h was
	// taken and its slot is filled or void, so no slot at or below h can still be filled by a commit (0 when
	// none). Readers that bound their reads by it never pass an item that commits later with a lower value.
	// It never decreases, and once a Commit with Seq returns, Head soon covers its values (at once unless a
	// lower value is still being committed). Adapters that reserve values may resolve slots while reading
	// it: a slot left unfilled below a filled one for longer than a grace period is voided (see Sequence).
	Head(ctx context.Context, seq Sequence) (uint64, error)
	// DropSequence removes items an adapter keeps for a sequence besides those transactions write and
	// reads return (DynamoDB: void slots and the watermark), at most limit per call, and reports how many it
	// removed; 0 means none is left. It is called when the sequence's space is deleted, after its visible
	// items were removed. Adapters that keep no such items return 0.
	DropSequence(ctx context.Context, seq Sequence, limit int) (int, error)
}

// ErrUnavailable marks a transient storage failure; the operation may be retried.
var ErrUnavailable = errors.New("storage unavailable")

// ErrWritesRefused marks a store that refuses every write for a while (its volume is full) and says so in
// its own logs and gauges; it wraps ErrUnavailable. Transports need not log each refused write.
var ErrWritesRefused = fmt.Errorf("%w: writes refused", ErrUnavailable)

// ErrCounterExhausted reports that a counter allocation would pass Tx.Max.
var ErrCounterExhausted = errors.New("counter exhausted")

// ErrTooManyOps reports a transaction larger than MaxOps.
var ErrTooManyOps = errors.New("transaction has too many operations")

// ConditionFailedError reports which op of a transaction failed its condition. Index is the op's position in
// the slice returned by Build.
type ConditionFailedError struct {
	Index int
	Key   Key
}

func (e *ConditionFailedError) Error() string {
	return fmt.Sprintf("condition failed on op %d (%s)", e.Index, e.Key)
}

// FailedOp returns the index of the failed op if err is a condition failure.
func FailedOp(err error) (int, bool) {
	var cf *ConditionFailedError
	if errors.As(err, &cf) {
		return cf.Index, true
	}
	return -1, false
}
