package dynamo

import (
	"math"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Usage is the capacity one successful DynamoDB request consumed, handed to Options.OnUsage.
type Usage struct {
	// Operation is "GetItem", "BatchGetItem", "Query" or "TransactWriteItems".
	Operation string
	// Items is the number of items returned (GetItem, BatchGetItem, Query) or actions written
	// (TransactWriteItems).
	Items int
	// ReadUnits and WriteUnits are DynamoDB's own figures when it reported them (Reported is true).
	// Otherwise they are the client's estimate from the sizes of the items it received or sent (ItemSize):
	// exact for reads, a lower bound for writes, since a replaced, deleted or checked item is charged by the
	// size it had in the table, which the client does not see.
	ReadUnits  float64
	WriteUnits float64
	// Reported says that DynamoDB returned ConsumedCapacity for the request.
	Reported bool
}

// report hands u to the OnUsage hook, replacing the estimate by what DynamoDB reported when it did.
func (s *Store) report(u Usage, reported ...*types.ConsumedCapacity) {
	if s.opts.OnUsage == nil {
		return
	}
	var r, w, total float64
	got := false
	for _, cc := range reported {
		if cc == nil || cc.CapacityUnits == nil {
			continue
		}
		got = true
		total += *cc.CapacityUnits
		if cc.ReadCapacityUnits != nil {
			r += *cc.ReadCapacityUnits
		}
		if cc.WriteCapacityUnits != nil {
			w += *cc.WriteCapacityUnits
		}
	}
	if got {
		u.Reported = true
		if r == 0 && w == 0 { // TOTAL may give only CapacityUnits
			if u.Operation == "TransactWriteItems" {
				w = total
			} else {
				r = total
			}
		}
		u.ReadUnits, u.WriteUnits = r, w
	}
	s.opts.OnUsage(u)
}

// ItemSize is the size DynamoDB bills for an item: the UTF-8 length of every attribute name plus the size of
// its value (strings by UTF-8 length, binaries by length, numbers by their significant digits, containers by
// their elements plus 3 bytes, booleans and nulls 1 byte). Items in the base table carry no further overhead.
func ItemSize(item map[string]types.AttributeValue) int {
	n := 0
	for name, v := range item {
		n += len(name) + valueSize(v)
	}
	return n
}

func valueSize(v types.AttributeValue) int {
	switch t := v.(type) {
	case *types.AttributeValueMemberS:
		return len(t.Value)
	case *types.AttributeValueMemberB:
		return len(t.Value)
	case *types.AttributeValueMemberN:
		return numberSize(t.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberSS:
		return sizeOfAll(t.Value, func(s string) int { return len(s) })
	case *types.AttributeValueMemberBS:
		return sizeOfAll(t.Value, func(b []byte) int { return len(b) })
	case *types.AttributeValueMemberNS:
		return sizeOfAll(t.Value, numberSize)
	case *types.AttributeValueMemberL:
		return 3 + sizeOfAll(t.Value, func(e types.AttributeValue) int { return 1 + valueSize(e) })
	case *types.AttributeValueMemberM:
		n := 3
		for k, e := range t.Value {
			n += 1 + len(k) + valueSize(e)
		}
		return n
	}
	return 0
}

// sizeOfAll is the sum of size over the elements of a set or list.
func sizeOfAll[E any](list []E, size func(E) int) int {
	n := 0
	for _, e := range list {
		n += size(e)
	}
	return n
}

// numberSize approximates DynamoDB's number size: one byte per two significant digits, plus one.
func numberSize(s string) int {
	digits := strings.Trim(strings.TrimLeft(strings.TrimLeft(s, "+-"), "0"), ".")
	digits = strings.ReplaceAll(digits, ".", "")
	if i := strings.IndexAny(digits, "eE"); i >= 0 {
		digits = digits[:i]
	}
	digits = strings.TrimRight(digits, "0")
	return (len(digits)+1)/2 + 1
}

// ReadUnits is the read capacity a strongly consistent read of size bytes consumes: one unit per 4 KB,
// rounded up, at least one (reading an absent item costs one too).
func ReadUnits(size int) float64 {
	return math.Max(1, math.Ceil(float64(size)/4096))
}

// TxWriteUnits is the write capacity one action of TransactWriteItems on an item of size bytes consumes: two
// units per 1 KB, rounded up per item, at least two.
func TxWriteUnits(size int) float64 {
	return 2 * math.Max(1, math.Ceil(float64(size)/1024))
}

// WriteUnits is the write capacity a standard (non-transactional) write of an item of size bytes consumes:
// one unit per 1 KB, rounded up, at least one.
func WriteUnits(size int) float64 {
	return math.Max(1, math.Ceil(float64(size)/1024))
}
