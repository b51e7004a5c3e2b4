// Package port defines the narrow interfaces the Waypost domain uses to reach storage, blobs, time,
// identifiers and notifications (RFC-0001 §14.2, SUPPLEMENT §14.2). Adapters live in store/ and channel/;
// the domain never imports them.
//
// The item store is modelled on DynamoDB: strongly consistent single-item reads, ordered range reads of one
// partition, and all-or-nothing transactions of condition-guarded puts, deletes and checks. A transaction may
// also allocate consecutive values of one counter; the allocation happens inside the transaction, so the
// allocated numbers are visible exactly when the rest of the transaction is.
package port

import (
	"context"
	"errors"
	"fmt"
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
type Tx struct {
	Counter *Key
	Count   uint64
	Max     uint64
	Build   func(first uint64) ([]Op, error)
}

// CounterAttr is the attribute of a counter item that holds its last allocated value in decimal.
const CounterAttr = "n"

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
	// Query returns items of one partition in ascending sort-key order within the query's bounds.
	Query(ctx context.Context, q Query) ([]Item, error)
	// Commit applies a transaction all or nothing. A failed condition returns a *ConditionFailedError naming
	// the op and writes nothing. Transient failures wrap ErrUnavailable.
	Commit(ctx context.Context, tx Tx) (first uint64, err error)
	// MaxOps is the largest number of ops (counter included) one transaction may hold.
	MaxOps() int
}

// ErrUnavailable marks a transient storage failure; the operation may be retried.
var ErrUnavailable = errors.New("storage unavailable")

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
