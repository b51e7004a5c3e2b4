package pebble

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/store/kv"
)

// valueV1 is the first byte of every stored value: the value layout's version.
const valueV1 = 0x01

// metaFormat is the key of the store's layout record. Item keys start with uvarint(len(PK)) and PK is never
// empty, so their first byte is never 0x00: the 0x00 prefix is reserved for the store's own records.
var metaFormat = []byte("\x00format")

// partitionPrefix returns uvarint(len(pk)) ‖ pk, the prefix of every key of partition pk.
func partitionPrefix(pk string) []byte {
	b := make([]byte, 0, binary.MaxVarintLen64+len(pk))
	b = binary.AppendUvarint(b, uint64(len(pk)))
	return append(b, pk...)
}

// encodeKey returns uvarint(len(PK)) ‖ PK ‖ SK.
func encodeKey(k port.Key) []byte {
	return appendKey(make([]byte, 0, binary.MaxVarintLen64+len(k.PK)+len(k.SK)), k)
}

// keyString returns encodeKey(k) as a string, built on the stack for keys of usual length.
func keyString(k port.Key) string {
	var buf [192]byte
	return string(appendKey(buf[:0], k))
}

func appendKey(b []byte, k port.Key) []byte {
	b = binary.AppendUvarint(b, uint64(len(k.PK)))
	b = append(b, k.PK...)
	return append(b, k.SK...)
}

// prefixEnd returns the smallest key greater than every key starting with prefix, or nil when there is
// none (a prefix of 0xFF bytes only).
func prefixEnd(prefix []byte) []byte {
	end := slices.Clone(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// encodeValue encodes an item's attributes and data:
//
//	0x01 ‖ uvarint(#attrs) ‖ { uvarint(len(name)) ‖ name ‖ uvarint(len(value)) ‖ value }* ‖ Data
//
// with attributes sorted by name; Data is the rest of the value, so it is binary safe.
func encodeValue(it port.Item) []byte {
	size := 2 + len(it.Data)
	for name, val := range it.Attrs {
		size += 2*binary.MaxVarintLen16 + len(name) + len(val)
	}
	b := make([]byte, 0, size)
	b = append(b, valueV1)
	b = binary.AppendUvarint(b, uint64(len(it.Attrs)))
	switch len(it.Attrs) {
	case 0:
	case 1:
		for name, val := range it.Attrs {
			b = appendAttr(b, name, val)
		}
	default:
		names := make([]string, 0, len(it.Attrs))
		for name := range it.Attrs {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			b = appendAttr(b, name, it.Attrs[name])
		}
	}
	return append(b, it.Data...)
}

func appendAttr(b []byte, name, val string) []byte {
	b = binary.AppendUvarint(b, uint64(len(name)))
	b = append(b, name...)
	b = binary.AppendUvarint(b, uint64(len(val)))
	return append(b, val...)
}

// decodeValue decodes a stored value into a fresh item: nothing of the result aliases raw.
func decodeValue(k port.Key, raw []byte) (port.Item, error) {
	bad := func(what string) (port.Item, error) {
		return port.Item{}, fmt.Errorf("%w: %s: %s", kv.ErrCorrupt, k, what)
	}
	if len(raw) == 0 || raw[0] != valueV1 {
		return bad("unknown value version")
	}
	p := raw[1:]
	n, w := binary.Uvarint(p)
	if w <= 0 || n > uint64(len(p)) {
		return bad("attribute count")
	}
	p = p[w:]
	it := port.Item{Key: k}
	if n > 0 {
		it.Attrs = make(map[string]string, n)
	}
	str := func() (string, bool) {
		l, w := binary.Uvarint(p)
		if w <= 0 || l > uint64(len(p)-w) {
			return "", false
		}
		s := string(p[w : w+int(l)])
		p = p[w+int(l):]
		return s, true
	}
	for i := uint64(0); i < n; i++ {
		name, ok1 := str()
		val, ok2 := str()
		if !ok1 || !ok2 {
			return bad("attribute")
		}
		it.Attrs[name] = val
	}
	if len(p) > 0 {
		it.Data = append([]byte(nil), p...)
	}
	return it, nil
}
