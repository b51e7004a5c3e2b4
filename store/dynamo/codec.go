package dynamo

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/store/kv"
)

// keyAV is the DynamoDB key of k.
func keyAV(k port.Key) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		AttrPK: &types.AttributeValueMemberS{Value: k.PK},
		AttrSK: &types.AttributeValueMemberS{Value: k.SK},
	}
}

// encodeItem is the DynamoDB item of it: key, one a_X string per attribute, and the payload when not empty;
// an item with a decimal port.AttrExpires also gets it as the number attribute AttrTTL.
// The values are copied, so the caller may change it afterwards.
func encodeItem(it port.Item) map[string]types.AttributeValue {
	av := keyAV(it.Key)
	for name, v := range it.Attrs {
		av[AttrPrefix+name] = &types.AttributeValueMemberS{Value: v}
	}
	if exp, ok := it.Attrs[port.AttrExpires]; ok {
		if n, err := strconv.ParseUint(exp, 10, 64); err == nil {
			av[AttrTTL] = number(n) // the table's time-to-live attribute (see Options.TTL)
		}
	}
	if len(it.Data) > 0 {
		av[AttrData] = &types.AttributeValueMemberB{Value: append([]byte(nil), it.Data...)}
	}
	return av
}

// decodeItem is the inverse of encodeItem. Attributes the store does not write are ignored, but for the
// usage number attributes of a counter item (port.UsageBytesAttr, port.UsageItemsAttr).
func decodeItem(av map[string]types.AttributeValue) (port.Item, error) {
	var it port.Item
	pk, ok1 := av[AttrPK].(*types.AttributeValueMemberS)
	sk, ok2 := av[AttrSK].(*types.AttributeValueMemberS)
	if !ok1 || !ok2 {
		return it, fmt.Errorf("%w: item without string keys", kv.ErrCorrupt)
	}
	it.Key = port.Key{PK: pk.Value, SK: sk.Value}
	for name, v := range av {
		switch {
		case name == AttrData:
			b, ok := v.(*types.AttributeValueMemberB)
			if !ok {
				return it, fmt.Errorf("%w: %s: payload is %T, not binary", kv.ErrCorrupt, it.Key, v)
			}
			it.Data = append([]byte(nil), b.Value...)
		case name == port.UsageBytesAttr || name == port.UsageItemsAttr:
			// The usage a sequence's counter keeps (number attributes, see quota.go), read as port attributes.
			if n, ok := v.(*types.AttributeValueMemberN); ok {
				if it.Attrs == nil {
					it.Attrs = make(map[string]string, len(av))
				}
				it.Attrs[name] = n.Value
			}
		case strings.HasPrefix(name, AttrPrefix):
			s, ok := v.(*types.AttributeValueMemberS)
			if !ok {
				return it, fmt.Errorf("%w: %s: attribute %s is %T, not a string", kv.ErrCorrupt, it.Key, name, v)
			}
			if it.Attrs == nil {
				it.Attrs = make(map[string]string, len(av))
			}
			it.Attrs[strings.TrimPrefix(name, AttrPrefix)] = s.Value
		}
	}
	return it, nil
}
