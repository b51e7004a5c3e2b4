package domain

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// jsonString draws strings json.Marshal escapes in every way: quotes, backslashes, control characters,
// HTML characters, U+2028/U+2029, other runes, and invalid UTF-8.
func jsonString(t *rapid.T, label string) string {
	return rapid.OneOf(
		rapid.String(),
		rapid.StringMatching(`[a-z0-9_-]{0,30}`),
		rapid.Map(rapid.SliceOf(rapid.SampledFrom([]string{"a", `"`, `\`, "\n", "\r", "\t", "\b", "\f", "\x00", "\x1f", "<", ">", "&",
			"\u2028", "\u2029", "é", "😀", "\xff", "\xe2\x80", "\xed\xa0\x80", " "})), func(parts []string) string {
			var b bytes.Buffer
			for _, p := range parts {
				b.WriteString(p)
			}
			return b.String()
		}),
	).Draw(t, label)
}

func jsonStringPtr(t *rapid.T, label string) *string {
	if rapid.Bool().Draw(t, label+"-nil") {
		return nil
	}
	s := jsonString(t, label)
	return &s
}

func jsonStrings(t *rapid.T, label string) []string {
	if rapid.Bool().Draw(t, label+"-nil") {
		return nil
	}
	return rapid.SliceOfN(rapid.Custom(func(t *rapid.T) string { return jsonString(t, "s") }), 0, 4).Draw(t, label)
}

func jsonTime(t *rapid.T, label string) time.Time {
	tm := time.Unix(rapid.Int64Range(-62135596800, 253402300799).Draw(t, label), rapid.Int64Range(0, 999999999).Draw(t, label+"-ns")).UTC()
	switch rapid.IntRange(0, 9).Draw(t, label+"-zone") {
	case 0:
		return tm.In(time.FixedZone("X", 3600*rapid.IntRange(-12, 12).Draw(t, label+"-off")))
	case 1:
		return tm.AddDate(rapid.IntRange(-3000, 3000).Draw(t, label+"-years"), 0, 0)
	}
	return tm
}

// jsonRaw draws raw JSON values as the service embeds them (encoded by json.Marshal), now and then with
// white space or HTML characters json.Marshal would still compact or escape.
func jsonRaw(t *rapid.T, label string) json.RawMessage {
	switch rapid.IntRange(0, 5).Draw(t, label+"-kind") {
	case 0:
		return nil
	case 1:
		return json.RawMessage(rapid.SampledFrom([]string{`{ "a": 1 }`, `{"a":"<b>"}`, "[1,\n2]", `"\u2028"`, `{"x":"` + "\u2028" + `"}`,
			`{"s":"a b\\" <c> & d","t":[1,"\\\\"," "]}`, `{"a":"\t"}`}).Draw(t, label))
	}
	v := map[string]any{"s": jsonString(t, label+"-s"), "n": rapid.Int64().Draw(t, label+"-n"), "l": jsonStrings(t, label+"-l")}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRecordJSONMatchesEncodingJSON: encode writes the hot record types byte for byte as json.Marshal does,
// and takes its fast path for every value the service writes (UTC times, raw values json.Marshal left as
// they are).
func TestRecordJSONMatchesEncodingJSON(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		thread := jsonStringPtr(t, "thread")
		values := []any{
			FeedItem{ItemID: jsonString(t, "item"), SpaceID: jsonString(t, "space"), VisibleSeq: jsonString(t, "vs"),
				ItemType: ItemType(jsonString(t, "type")), ResourceID: jsonString(t, "res"), ResourceVersion: rapid.Int64().Draw(t, "ver"),
				ProducerID: jsonString(t, "producer"), RecipientIDs: jsonStrings(t, "recipients"), ThreadID: thread,
				CommittedAt: jsonTime(t, "at"), Data: jsonRaw(t, "data")},
			storedMessage{Message: Message{MessageID: jsonString(t, "msg"), SpaceID: jsonString(t, "space"), ProducerID: jsonString(t, "producer"),
				ThreadID: jsonString(t, "thread"), InReplyTo: jsonStringPtr(t, "reply"), Kind: jsonString(t, "kind"), Subject: jsonString(t, "subject"),
				Body: MessageBody{Text: jsonString(t, "text")}, Source: MessageSource{NativeThreadID: jsonString(t, "nt"), NativeMessageID: jsonString(t, "nm")},
				RecipientIDs: jsonStrings(t, "recipients"), AttachmentIDs: jsonStrings(t, "attachments"), Metadata: jsonRaw(t, "metadata"),
				CommittedAt: jsonTime(t, "at"), EnvelopeVersion: rapid.Int().Draw(t, "env"), VisibleSeq: jsonString(t, "vs")}, Inline: rapid.Bool().Draw(t, "inline"),
				BodySHA256: rapid.SampledFrom([]string{"", "ab12", "<&>"}).Draw(t, "sha"), BodySize: rapid.SampledFrom([]int64{0, 1, -1, 49152}).Draw(t, "size")},
			Submission{Operation: jsonString(t, "op"), RequestID: jsonString(t, "rid"), Fingerprint: jsonString(t, "fp"), ResourceID: jsonString(t, "res"),
				State: SubmissionState(jsonString(t, "state")), ReservedAt: jsonTime(t, "at"), Fixed: jsonRaw(t, "fixed"), Result: jsonRaw(t, "result")},
			Submission{Operation: "x", State: StateFailed, ReservedAt: time.Unix(1, 0).UTC(), Error: &WireError{Code: CodeNotFound, Message: jsonString(t, "msg")}},
			SendResult{SubmissionState: SubmissionState(jsonString(t, "state")), ResourceID: jsonString(t, "res"), MessageID: jsonString(t, "msg"),
				ThreadID: jsonString(t, "thread"), CommittedAt: jsonTime(t, "at"), VisibleSeq: jsonString(t, "vs")},
			sendFixed{ThreadID: jsonString(t, "thread"), RecipientIDs: jsonStrings(t, "recipients")},
			MessageItemData{MessageID: jsonString(t, "msg"), Kind: jsonString(t, "kind"), Subject: jsonString(t, "subject"),
				InReplyTo: jsonStringPtr(t, "reply"), AttachmentCount: rapid.Int().Draw(t, "n")},
			ReceiptItemData{ConsumerID: jsonString(t, "con"), AckedItemID: jsonString(t, "item"), ResourceID: jsonString(t, "res"),
				Stage: Stage(jsonString(t, "stage")), ReceiptVersion: rapid.Int64().Draw(t, "ver")},
			receiptRecord{ReceiptID: jsonString(t, "rcpt"), Stage: Stage(jsonString(t, "stage")), Version: rapid.Int64().Draw(t, "ver")},
			MessageBody{Text: jsonString(t, "text")},
		}
		for _, v := range values {
			want, err := json.Marshal(v)
			if err != nil { // a time json.Marshal refuses: encode panics on it, as it did before
				if b, ok := encodeFast(v); ok {
					t.Fatalf("encodeFast(%#v) = %s, json.Marshal: %v", v, b, err)
				}
				continue
			}
			if got := encode(v); !bytes.Equal(got, want) {
				t.Fatalf("encode(%T):\n got %s\nwant %s", v, got, want)
			}
			sameDecoding(t, want, reflect.TypeOf(v))
		}
	})
}

// sameDecoding fails t unless decodeStored decodes data into a value of type typ as json.Unmarshal does.
func sameDecoding(t interface{ Fatalf(string, ...any) }, data []byte, typ reflect.Type) {
	want, got := reflect.New(typ), reflect.New(typ)
	werr, gerr := json.Unmarshal(data, want.Interface()), decodeStored(data, got.Interface())
	if (werr == nil) != (gerr == nil) || !reflect.DeepEqual(want.Elem().Interface(), got.Elem().Interface()) {
		t.Fatalf("decodeStored(%s) into %v:\n got %#v (%v)\nwant %#v (%v)", data, typ, got.Elem().Interface(), gerr, want.Elem().Interface(), werr)
	}
}

// TestDecodeStoredAsLenientAsEncodingJSON: what encoding/json accepted in a stored record — a repeated name
// (the last wins), invalid UTF-8 (replaced), unknown members, null — decodeStored accepts alike.
func TestDecodeStoredAsLenientAsEncodingJSON(t *testing.T) {
	for _, data := range []string{
		`{"item_id":"a","item_id":"b","data":{"x":1,"x":2}}`,
		"{\"item_id\":\"\xff\xfe\",\"recipient_ids\":[\"\xc3\"]}",
		`{"item_id":"a","unknown":{"deep":[1,2,3]},"thread_id":null,"recipient_ids":null}`,
		`{"resource_version":12,"committed_at":"2026-12-01T10:00:00.5+01:00"}`,
	} {
		sameDecoding(t, []byte(data), reflect.TypeFor[FeedItem]())
	}
	sameDecoding(t, []byte(`{"message_id":"m","body":{"text":"a\u2028b"},"body_inline":true,"metadata":{"k":"v","k":"w"}}`), reflect.TypeFor[storedMessage]())
}

// TestRecordJSONFastPath: the records of a send and an acknowledgement as the service writes them take the
// direct encoders (a test that they match json.Marshal cannot tell whether they ran).
func TestRecordJSONFastPath(t *testing.T) {
	now := time.Now().UTC()
	thread := "th_1"
	data := encode(MessageItemData{MessageID: "msg_1", Subject: "hello there"}) // a space in a string is not white space to compact
	for _, v := range []any{
		FeedItem{ItemID: "it_1", ThreadID: &thread, RecipientIDs: []string{"act_1"}, CommittedAt: now, Data: data},
		storedMessage{Message: Message{MessageID: "msg_1", Body: MessageBody{Text: "<hi> & bye"}, Metadata: json.RawMessage(`{}`), CommittedAt: now}, Inline: true},
		Submission{Operation: OpMessageSend, ReservedAt: now, Fixed: encode(sendFixed{ThreadID: thread}), Result: encode(SendResult{CommittedAt: now})},
		SendResult{CommittedAt: now}, sendFixed{}, MessageItemData{}, ReceiptItemData{}, receiptRecord{}, MessageBody{},
	} {
		if _, ok := encodeFast(v); !ok {
			t.Errorf("%T took json.Marshal's path", v)
		}
	}
}

// TestRecordJSONOneBuffer: the feed item of a receipt and the message of a send with a body stored apart
// (digest and size included), with IDs as the service makes them, are each written into one buffer, sized
// before writing (sizeHint): growing it at its end would copy the whole record again.
func TestRecordJSONOneBuffer(t *testing.T) {
	now := time.Now().UTC()
	id := func(prefix string) string { return prefix + "_01jz8k3m4n5p6q7r8s9t0v1w2x" }
	thread := id("thr")
	receipt := FeedItem{ItemID: "it_2n9c_0ffee161d980ea93", SpaceID: id("sp"), VisibleSeq: "123456", ItemType: ItemReceipt,
		ResourceID: id("rcpt"), ResourceVersion: 1, ProducerID: id("act"), RecipientIDs: []string{id("act")}, ThreadID: &thread,
		CommittedAt: now, Data: encode(ReceiptItemData{ConsumerID: id("con"), AckedItemID: "it_2n9b_0ffee161d980ea93",
			ResourceID: id("msg"), Stage: StageProcessed, ReceiptVersion: 2})}
	message := storedMessage{Message: Message{MessageID: id("msg"), SpaceID: id("sp"), ProducerID: id("act"), ThreadID: thread,
		InReplyTo: &thread, Kind: "message", Subject: "a subject of some length", Body: MessageBody{Text: string(bytes.Repeat([]byte("x"), 600))},
		RecipientIDs: []string{id("act"), id("act")}, AttachmentIDs: []string{id("blob")}, Metadata: json.RawMessage(`{"k":"v"}`),
		CommittedAt: now, EnvelopeVersion: 1, VisibleSeq: "123456"},
		BodySHA256: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", BodySize: 612}
	for _, c := range []struct {
		name string
		enc  func() []byte
		want float64
	}{
		{"receipt feed item", func() []byte { return encodeFeedItem(receipt) }, 1},
		{"message", func() []byte { return encode(message) }, 2}, // the buffer and encode's interface value
	} {
		var kept []byte // kept, as the service keeps a record: a buffer that did not escape could be on the stack
		if allocs := testing.AllocsPerRun(20, func() { kept = c.enc() }); allocs != c.want || len(kept) == 0 {
			t.Errorf("%s: %.0f allocations, want %.0f", c.name, allocs, c.want)
		}
	}
}

// BenchmarkEncodeSendRecords encodes the records one 600-byte send writes (submission, message, feed item
// and its data), with encode and with json.Marshal.
func BenchmarkEncodeSendRecords(b *testing.B) {
	now := time.Now().UTC()
	thread, msg := "th_01jz8k3m4n5p6q7r8s9t0v1w2x", "msg_01jz8k3m4n5p6q7r8s9t0v1w2x"
	recipients := []string{"act_01jz8k3m4n5p6q7r8s9t0v1w2x"}
	res := SendResult{SubmissionState: StateCommitted, ResourceID: msg, MessageID: msg, ThreadID: thread, CommittedAt: now, VisibleSeq: "123456"}
	records := func(enc func(any) []byte) {
		sub := Submission{Operation: OpMessageSend, RequestID: "bench-0123456789ab-c12-123456", Fingerprint: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
			ResourceID: msg, State: StateCommitted, ReservedAt: now, Fixed: enc(sendFixed{ThreadID: thread, RecipientIDs: recipients}), Result: enc(res)}
		enc(sub)
		enc(storedMessage{Message: Message{MessageID: msg, SpaceID: "sp_01jz8k3m4n5p6q7r8s9t0v1w2x", ProducerID: "act_01jz8k3m4n5p6q7r8s9t0v1w2y", ThreadID: thread,
			Subject: "bench", Body: MessageBody{Text: string(bytes.Repeat([]byte("x"), 600))}, RecipientIDs: recipients, Metadata: json.RawMessage(`{}`),
			CommittedAt: now, EnvelopeVersion: 1, VisibleSeq: "123456"}, Inline: true})
		enc(FeedItem{ItemID: "it_2n9c_0ffee161d980ea93", SpaceID: "sp_01jz8k3m4n5p6q7r8s9t0v1w2x", VisibleSeq: "123456", ItemType: ItemMessage, ResourceID: msg,
			ResourceVersion: 1, ProducerID: "act_01jz8k3m4n5p6q7r8s9t0v1w2y", RecipientIDs: recipients, ThreadID: &thread, CommittedAt: now,
			Data: enc(MessageItemData{MessageID: msg, Subject: "bench"})})
	}
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			records(encode)
		}
	})
	b.Run("json.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			records(func(v any) []byte { out, _ := json.Marshal(v); return out })
		}
	})
}

// fillAll sets every field of v (a pointer to a struct), at any depth, to a value that is not its zero
// value, so that json.Marshal writes every member the type has.
func fillAll(v reflect.Value, depth int) {
	switch v.Kind() {
	case reflect.Pointer:
		if depth > 3 {
			return
		}
		v.Set(reflect.New(v.Type().Elem()))
		fillAll(v.Elem(), depth+1)
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Date(2026, 12, 1, 16, 0, 0, 123, time.UTC)))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fillAll(v.Field(i), depth+1)
			}
		}
	case reflect.String:
		v.SetString("x-" + v.Type().Name())
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(7)
	case reflect.Slice:
		if v.Type() == reflect.TypeFor[json.RawMessage]() {
			v.SetBytes([]byte(`{"a":1}`))
			return
		}
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fillAll(v.Index(0), depth+1)
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
	}
}

// TestRecordJSONCoversEveryField: with every field of each directly encoded type set, encode still writes
// what json.Marshal writes — a field added to one of these types fails here until its encoder writes it.
func TestRecordJSONCoversEveryField(t *testing.T) {
	for _, v := range []any{FeedItem{}, storedMessage{}, Submission{}, SendResult{}, sendFixed{}, MessageItemData{}, ReceiptItemData{},
		receiptRecord{}, MessageBody{}} {
		p := reflect.New(reflect.TypeOf(v))
		fillAll(p.Elem(), 0)
		full := p.Elem().Interface()
		if s, ok := full.(Submission); ok {
			s.Error = nil // the direct encoder leaves a failed submission to json.Marshal
			full = s
		}
		want, err := json.Marshal(full)
		if err != nil {
			t.Fatalf("%T: %v", full, err)
		}
		got, ok := encodeFast(full)
		if !ok || !bytes.Equal(got, want) {
			t.Errorf("%T with every field set:\n got %s (direct %v)\nwant %s", full, got, ok, want)
		}
	}
}
