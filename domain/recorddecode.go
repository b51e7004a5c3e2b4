package domain

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// decodeFast decodes data into v when v is a record type whose stored form appendJSON writes and data is in
// exactly that form: every member in appendJSON's order, strings of printable ASCII without escapes, the
// time in UTC, the data member a compact JSON value. It reports false otherwise, leaving v as it was, and
// decodeStored's general decoder decodes data instead. What it decodes is what that decoder, and
// encoding/json, would (TestRecordJSONMatchesEncodingJSON, FuzzDecodeFeedItem).
//
// Feed items are the records every read decodes, 50 to a page: this decodes one in under half the general
// decoder's time (BenchmarkDecodeFeedItem, docs/benchmarks.md).
func decodeFast(data []byte, v any) bool {
	switch r := v.(type) {
	case *FeedItem:
		fi, ok := parseFeedItem(data)
		if ok {
			*r = fi
		}
		return ok
	}
	return false
}

// recordScanner reads a stored record in the exact form appendJSON writes. Its strings share one copy of
// the record (s), so a record costs one allocation for all of them.
type recordScanner struct {
	b  []byte // the record as stored
	s  string // a copy of b, which the decoded strings share
	i  int    // the next byte to read
	ok bool   // false once anything differed from the expected form
}

// lit reads the literal text lit.
func (r *recordScanner) lit(lit string) {
	if !r.ok || len(r.b)-r.i < len(lit) || string(r.b[r.i:r.i+len(lit)]) != lit {
		r.ok = false
		return
	}
	r.i += len(lit)
}

// str reads a string of ASCII that JSON holds as it is (wireSafe: no escape, no control character).
func (r *recordScanner) str() string {
	start, end := r.strSpan()
	return r.s[start:end]
}

// member reads the literal lit (a member's name and its punctuation), then a string as str does.
func (r *recordScanner) member(lit string) string {
	r.lit(lit)
	return r.str()
}

// skipStr reads a string as str does, without returning it.
func (r *recordScanner) skipStr() { r.strSpan() }

// strSpan reads a string as str does and returns where its text starts and ends in b (0, 0 when not ok).
func (r *recordScanner) strSpan() (int, int) {
	if !r.ok || r.i >= len(r.b) || r.b[r.i] != '"' {
		r.ok = false
		return 0, 0
	}
	start := r.i + 1
	n := 0
	for _, c := range r.b[start:] {
		if c >= utf8.RuneSelf || !wireSafe[c] {
			break
		}
		n++
	}
	if start+n == len(r.b) || r.b[start+n] != '"' { // an escape, a control character or a byte past ASCII
		r.ok = false
		return 0, 0
	}
	r.i = start + n + 1
	return start, start + n
}

// null reads null if it is next, and reports whether it was.
func (r *recordScanner) null() bool {
	if r.ok && len(r.b)-r.i >= 4 && string(r.b[r.i:r.i+4]) == "null" {
		r.i += 4
		return true
	}
	return false
}

// int64 reads an integer as strconv.AppendInt writes it.
func (r *recordScanner) int64() int64 {
	start, end := r.intSpan()
	if !r.ok {
		return 0
	}
	n, err := strconv.ParseInt(string(r.b[start:end]), 10, 64)
	if err != nil {
		r.ok = false
		return 0
	}
	return n
}

// skipInt reads an integer as int64 does, of any size, without returning it.
func (r *recordScanner) skipInt() { r.intSpan() }

// intSpan reads an optional '-' and digits without a leading zero, and returns where they start and end.
func (r *recordScanner) intSpan() (int, int) {
	if !r.ok {
		return 0, 0
	}
	start, j := r.i, r.i
	if j < len(r.b) && r.b[j] == '-' {
		j++
	}
	digits := j
	for j < len(r.b) && r.b[j] >= '0' && r.b[j] <= '9' {
		j++
	}
	if j == digits || (r.b[digits] == '0' && j > digits+1) { // no digit, or a leading zero
		r.ok = false
		return 0, 0
	}
	r.i = j
	return start, j
}

// strings reads null or an array of str strings.
func (r *recordScanner) strings() []string {
	if r.null() {
		return nil
	}
	r.lit("[")
	out := []string{}
	if r.ok && r.i < len(r.b) && r.b[r.i] == ']' {
		r.i++
		return out
	}
	for r.ok {
		out = append(out, r.str())
		if r.ok && r.i < len(r.b) && r.b[r.i] == ',' {
			r.i++
			continue
		}
		r.lit("]")
		break
	}
	return out
}

// utcTimeShape reports whether at has the shape appendJSONTime gives a UTC time, 2006-01-02T15:04:05Z with
// 1 to 9 digits of fraction or none, which every decoder parses alike (the general decoder refuses some
// forms encoding/json takes, such as a one-digit hour or a comma before the fraction).
func utcTimeShape(at string) bool {
	const layout = "dddd-dd-ddTdd:dd:dd"
	if len(at) < len(layout)+1 || len(at) > len(layout)+11 || at[len(at)-1] != 'Z' {
		return false
	}
	for i := range len(layout) {
		if c := at[i]; layout[i] == 'd' && (c < '0' || c > '9') || layout[i] != 'd' && c != layout[i] {
			return false
		}
	}
	frac := at[len(layout) : len(at)-1]
	if frac == "" {
		return true
	}
	if len(frac) < 2 || frac[0] != '.' {
		return false
	}
	for _, c := range []byte(frac[1:]) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// rawTail reads the rest of the record as a compact JSON value followed by the closing '}'.
func (r *recordScanner) rawTail() json.RawMessage {
	if !r.ok || len(r.b)-r.i < 2 || r.b[len(r.b)-1] != '}' {
		r.ok = false
		return nil
	}
	raw := r.b[r.i : len(r.b)-1]
	// No white space before or after the value (json.Marshal compacts what it embeds, and IsValid would let
	// it through); IsValid also wants valid UTF-8 and no repeated names, which the general decoder decides.
	if jsonSpace(raw[0]) || jsonSpace(raw[len(raw)-1]) || !validItemData(raw) && !jsontext.Value(raw).IsValid() {
		r.ok = false
		return nil
	}
	r.i = len(r.b)
	return append(json.RawMessage(nil), raw...)
}

// jsonSpace reports whether c is JSON white space.
func jsonSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// dataMember is one member of a feed item's data as appendJSON writes it.
type dataMember struct {
	lit  string // its name, with the punctuation before it and the colon after
	kind byte   // its value: 's' a string, 'S' a string or null, 'i' an integer
}

// itemDataShapes are the members of MessageItemData and ReceiptItemData, in the order appendJSON writes them.
var itemDataShapes = [...][]dataMember{
	{{`{"message_id":`, 's'}, {`,"kind":`, 's'}, {`,"subject":`, 's'}, {`,"in_reply_to":`, 'S'}, {`,"attachment_count":`, 'i'}},
	{{`{"consumer_id":`, 's'}, {`,"acked_item_id":`, 's'}, {`,"resource_id":`, 's'}, {`,"stage":`, 's'}, {`,"receipt_version":`, 'i'}},
}

// validItemData reports whether raw is the data of a message or a receipt feed item as appendJSON writes it
// (itemDataShapes): valid JSON, checked without the general validator's cost. False says only that it is not
// in that form.
func validItemData(raw []byte) bool {
	for _, shape := range itemDataShapes {
		if first := shape[0].lit; len(raw) < len(first) || string(raw[:len(first)]) != first {
			continue
		}
		r := recordScanner{b: raw, ok: true} // only skipStr reads its strings: s is not needed
		for _, m := range shape {
			r.lit(m.lit)
			switch m.kind {
			case 'i':
				r.skipInt()
			case 'S':
				if !r.null() {
					r.skipStr()
				}
			default:
				r.skipStr()
			}
		}
		r.lit("}")
		return r.ok && r.i == len(raw)
	}
	return false
}

// parseFeedItem decodes a feed item in the exact form FeedItem.appendJSON writes.
func parseFeedItem(data []byte) (FeedItem, bool) {
	r := recordScanner{b: data, s: string(data), ok: true}
	var f FeedItem
	f.ItemID = r.member(`{"item_id":`)
	f.SpaceID = r.member(`,"space_id":`)
	f.VisibleSeq = r.member(`,"visible_seq":`)
	f.ItemType = ItemType(r.member(`,"item_type":`))
	f.ResourceID = r.member(`,"resource_id":`)
	r.lit(`,"resource_version":`)
	f.ResourceVersion = r.int64()
	f.ProducerID = r.member(`,"producer_id":`)
	r.lit(`,"recipient_ids":`)
	f.RecipientIDs = r.strings()
	r.lit(`,"thread_id":`)
	if !r.null() {
		thread := r.str()
		f.ThreadID = &thread
	}
	r.lit(`,"committed_at":`)
	start := r.i
	at := r.str()
	if !r.ok || !utcTimeShape(at) {
		return FeedItem{}, false
	}
	// UnmarshalJSON parses as encoding/json does (RFC 3339, strictly), from the quoted text in place.
	if err := f.CommittedAt.UnmarshalJSON(data[start:r.i]); err != nil {
		return FeedItem{}, false
	}
	r.lit(`,"data":`)
	f.Data = r.rawTail()
	if !r.ok || r.i != len(data) {
		return FeedItem{}, false
	}
	return f, true
}
