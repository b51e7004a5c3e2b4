package dynamo

import (
	"fmt"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/store/kv"
)

// ItemFromStreamImage returns the port.Item of an item image of the table's stream (the NewImage or
// OldImage of a DynamoDB Streams record, as Lambda delivers it): the inverse of how the store writes items
// (see the package documentation), with the same checks as a read. Attributes the store does not write are
// ignored.
func ItemFromStreamImage(image map[string]events.DynamoDBAttributeValue) (port.Item, error) {
	if len(image) == 0 {
		return port.Item{}, fmt.Errorf("%w: empty stream image", kv.ErrCorrupt)
	}
	av := make(map[string]types.AttributeValue, len(image))
	for name, v := range image {
		conv, err := streamValue(v)
		if err != nil {
			return port.Item{}, fmt.Errorf("%w: stream image attribute %s: %w", kv.ErrCorrupt, name, err)
		}
		av[name] = conv
	}
	return decodeItem(av)
}

// streamValue converts one stream attribute value to the SDK's form.
func streamValue(v events.DynamoDBAttributeValue) (out types.AttributeValue, err error) {
	// The accessors panic on a value that does not hold its type (only a zero DynamoDBAttributeValue,
	// which no decoded event contains); report that as an error instead.
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("malformed value: %v", r)
		}
	}()
	switch v.DataType() {
	case events.DataTypeString:
		return &types.AttributeValueMemberS{Value: v.String()}, nil
	case events.DataTypeBinary:
		return &types.AttributeValueMemberB{Value: append([]byte(nil), v.Binary()...)}, nil
	case events.DataTypeNumber:
		return &types.AttributeValueMemberN{Value: v.Number()}, nil
	case events.DataTypeBoolean:
		return &types.AttributeValueMemberBOOL{Value: v.Boolean()}, nil
	case events.DataTypeNull:
		return &types.AttributeValueMemberNULL{Value: true}, nil
	case events.DataTypeStringSet:
		return &types.AttributeValueMemberSS{Value: append([]string(nil), v.StringSet()...)}, nil
	case events.DataTypeNumberSet:
		return &types.AttributeValueMemberNS{Value: append([]string(nil), v.NumberSet()...)}, nil
	case events.DataTypeBinarySet:
		return &types.AttributeValueMemberBS{Value: append([][]byte(nil), v.BinarySet()...)}, nil
	case events.DataTypeList:
		list := v.List()
		l := make([]types.AttributeValue, len(list))
		for i, e := range list {
			if l[i], err = streamValue(e); err != nil {
				return nil, err
			}
		}
		return &types.AttributeValueMemberL{Value: l}, nil
	case events.DataTypeMap:
		m := make(map[string]types.AttributeValue, len(v.Map()))
		for k, e := range v.Map() {
			if m[k], err = streamValue(e); err != nil {
				return nil, err
			}
		}
		return &types.AttributeValueMemberM{Value: m}, nil
	}
	return nil, fmt.Errorf("unknown data type %d", v.DataType())
}

// VoidImage reports whether a stream image is a void sequence slot (see the package documentation,
// "Sequences"): a marker, not an item the domain wrote, which readers of the stream must skip.
func VoidImage(image map[string]events.DynamoDBAttributeValue) bool {
	v, ok := image[AttrVoid]
	return ok && v.DataType() == events.DataTypeBoolean && v.Boolean()
}
