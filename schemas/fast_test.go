package schemas

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/waypost/waypost/internal/codec/strictjson"
)

var quickSchemas = []string{"message.send.request", "inbox.read.request", "inbox.ack.request"}

// quickStrings are string values at and across every bound and pattern of the quick-checked schemas.
var quickStrings = []string{
	"", "a", "act_1", "A-z_9", strings.Repeat("a", 96), strings.Repeat("a", 97), strings.Repeat("r", 128), strings.Repeat("r", 129),
	"a b", "a.b", "a:b", "a/b", "é", "a\n", "\na", "x\x00", "req-1.2:3",
	"message", "m", "Message", "9a", "_a", "a.b-c_d", strings.Repeat("k", 64), strings.Repeat("k", 65),
	"received", "processed", "Received", "other",
	strings.Repeat("é", 256), strings.Repeat("é", 257), strings.Repeat("x", 256), strings.Repeat("x", 257),
	strings.Repeat("é", 2048), strings.Repeat("é", 2049), strings.Repeat("c", 2048), strings.Repeat("c", 2049),
	"😀", strings.Repeat("😀", 96),
}

// quickNumbers are integers and other numbers at and across the bounds (as strictjson.Parse leaves them).
var quickNumbers = []string{"0", "1", "50", "200", "201", "-1", "1.0", "1.5", "1e2", "2E2", "-0", "01", "9007199254740993", "100000000000000000000"}

// quickNames are the members of the quick-checked schemas, and some that none declares.
var quickNames = []string{
	"request_id", "recipient_ids", "thread_id", "in_reply_to", "kind", "subject", "body", "source", "attachment_ids", "metadata",
	"consumer_id", "cursor", "limit", "items", "checkpoint_cursor", "text", "native_thread_id", "native_message_id",
	"item_id", "stage", "extra", "Request_ID",
}

// anyValue draws a JSON value of any type, mostly the values the schemas care about.
func anyValue(t *rapid.T, depth int, label string) any {
	kinds := 6
	if depth > 2 {
		kinds = 4
	}
	switch rapid.IntRange(0, kinds-1).Draw(t, label+"-type") {
	case 0:
		return rapid.SampledFrom(quickStrings).Draw(t, label+"-s")
	case 1:
		return json.Number(rapid.SampledFrom(quickNumbers).Draw(t, label+"-n"))
	case 2:
		return rapid.Bool().Draw(t, label+"-b")
	case 3:
		return nil
	case 4:
		return anyObject(t, depth+1, label)
	default:
		return anyList(t, depth+1, label)
	}
}

func anyObject(t *rapid.T, depth int, label string) map[string]any {
	m := map[string]any{}
	for _, k := range rapid.SliceOfNDistinct(rapid.SampledFrom(quickNames), 0, 4, rapid.ID).Draw(t, label+"-keys") {
		m[k] = anyValue(t, depth, label+"-"+k)
	}
	return m
}

func anyList(t *rapid.T, depth int, label string) []any {
	n := rapid.SampledFrom([]int{0, 1, 2, 3, 32, 33, 64, 65, 100, 101}).Draw(t, label+"-len")
	l := make([]any, n)
	same := rapid.Bool().Draw(t, label+"-same")
	for i := range l {
		if i > 0 && same {
			l[i] = l[0]
			continue
		}
		l[i] = anyValue(t, depth, label+"-item")
	}
	return l
}

// member draws one member's value: a valid one (bounds included), or when bad, one just across a bound,
// of another type, or anything.
type member func(bad bool) any

// nearValid draws a document of schema name with every member valid but at most one (and now and then two)
// drawn across its bounds; members are present or absent at random (required ones mostly present), now and
// then with an undeclared member, or a document that is not an object at all.
func nearValid(t *rapid.T, name string) any {
	if rapid.IntRange(0, 20).Draw(t, "not-object") == 0 {
		return anyValue(t, 2, "doc")
	}
	pick := func(label string, vs ...any) any { return rapid.SampledFrom(vs).Draw(t, label) }
	either := func(label string, bad bool, good, wrong []any) any {
		if bad {
			return rapid.SampledFrom(wrong).Draw(t, label+"-bad")
		}
		return rapid.SampledFrom(good).Draw(t, label)
	}
	runes := func(c string, n int) string { return strings.Repeat(c, n) }
	a96, a97 := runes("a", 96), runes("a", 97)
	goodIDs := []any{"act_1", "a", a96, "A-z_9"}
	badIDs := []any{a97, "", "a b", "a.b", "a:b", "é", "a\n", json.Number("1"), nil}
	id := func(bad bool) any { return either("id", bad, goodIDs, badIDs) }
	// ids is a list of n IDs, n drawn from good (or, when bad, from wrong), with one bad entry when bad and
	// the length is a good one.
	ids := func(bad bool, good, wrong []int) any {
		lenBad := bad && rapid.Bool().Draw(t, "bad-len")
		lens := good
		if lenBad {
			lens = wrong
		}
		l := make([]any, rapid.SampledFrom(lens).Draw(t, "n"))
		for i := range l {
			l[i] = id(false)
		}
		if bad && !lenBad && len(l) > 0 {
			l[rapid.IntRange(0, len(l)-1).Draw(t, "at")] = id(true)
		}
		if bad && !lenBad && len(l) == 0 {
			return pick("not-list", "x", map[string]any{}, nil)
		}
		return l
	}
	rid := func(bad bool) any {
		return either("rid", bad, []any{"req-1", "r.1:2", runes("r", 128), "a"}, []any{runes("r", 129), "", "a b", "a/b", "é", json.Number("1")})
	}
	cursor := func(bad bool) any {
		return either("cursor", bad, []any{nil, "c", runes("é", 2048), runes("c", 2048)}, []any{runes("é", 2049), runes("c", 2049), json.Number("1"), false})
	}
	var members map[string]member
	var required []string
	switch name {
	case "message.send.request":
		required = []string{"request_id", "body"}
		members = map[string]member{
			"request_id":    rid,
			"recipient_ids": func(bad bool) any { return ids(bad, []int{1, 2, 64}, []int{0, 65}) },
			"thread_id": func(bad bool) any {
				return either("thread", bad, []any{nil, "th_1", a96}, []any{"a b", a97, json.Number("1"), ""})
			},
			"in_reply_to": func(bad bool) any { return either("reply", bad, []any{nil, "msg_1", a96}, []any{"", a97, true, "a.b"}) },
			"kind": func(bad bool) any {
				return either("kind", bad, []any{"message", "m", "a.b-c_d", runes("k", 64), "z9"}, []any{runes("k", 65), "Message", "9a", "_a", "", "a b", nil})
			},
			"subject": func(bad bool) any {
				return either("subject", bad, []any{"s", "", runes("é", 300)}, []any{json.Number("1"), nil})
			},
			"body": func(bad bool) any {
				return either("body", bad, []any{map[string]any{"text": "hi"}, map[string]any{"text": ""}},
					[]any{map[string]any{"text": "hi", "x": json.Number("1")}, map[string]any{}, map[string]any{"text": json.Number("1")}, "hi", nil})
			},
			"source": func(bad bool) any {
				src := map[string]any{}
				for _, k := range []string{"native_thread_id", "native_message_id"} {
					if rapid.Bool().Draw(t, "src-"+k) {
						src[k] = either("src", false, []any{"t", runes("é", 256), runes("x", 256)}, nil)
					}
				}
				if bad {
					switch rapid.IntRange(0, 2).Draw(t, "src-bad") {
					case 0:
						src[pick("src-key", "native_thread_id", "native_message_id").(string)] = pick("src-v", runes("é", 257), runes("x", 257), json.Number("1"))
					case 1:
						src["other"] = "x"
					default:
						return pick("src-type", "x", nil, []any{})
					}
				}
				return src
			},
			"attachment_ids": func(bad bool) any { return ids(bad, []int{0, 1, 32}, []int{33}) },
			"metadata": func(bad bool) any {
				if bad {
					return pick("metadata-bad", []any{}, "m", nil)
				}
				return anyObject(t, 1, "metadata")
			},
		}
	case "inbox.read.request":
		required = []string{"consumer_id"}
		members = map[string]member{
			"consumer_id": id,
			"cursor":      cursor,
			"limit": func(bad bool) any {
				return json.Number(either("limit", bad, []any{"1", "50", "200"}, []any{"0", "201", "-1", "1.0", "1e2", "1.5"}).(string))
			},
		}
	case "inbox.ack.request":
		required = []string{"request_id", "consumer_id", "items"}
		members = map[string]member{
			"request_id":  rid,
			"consumer_id": id,
			"items": func(bad bool) any {
				n := rapid.SampledFrom([]int{0, 1, 2, 100}).Draw(t, "items")
				if bad && rapid.IntRange(0, 3).Draw(t, "items-len") == 0 {
					n = 101
				}
				l := make([]any, n)
				for i := range l {
					l[i] = map[string]any{"item_id": id(false), "stage": pick("stage", "received", "processed")}
				}
				if !bad || n == 101 {
					return l
				}
				if n == 0 {
					return pick("items-type", "x", nil, map[string]any{})
				}
				e := map[string]any{"item_id": "it_1", "stage": "received"}
				switch rapid.IntRange(0, 4).Draw(t, "entry") {
				case 0:
					e["item_id"] = id(true)
				case 1:
					e["stage"] = pick("stage-bad", "other", "Received", "", json.Number("1"), nil)
				case 2:
					e["extra"] = json.Number("1")
				case 3:
					delete(e, pick("missing", "item_id", "stage").(string))
				default:
					l[rapid.IntRange(0, n-1).Draw(t, "at")] = anyValue(t, 1, "entry")
					return l
				}
				l[rapid.IntRange(0, n-1).Draw(t, "at")] = e
				return l
			},
			"checkpoint_cursor": cursor,
		}
	}
	names := make([]string, 0, len(members))
	for _, k := range quickNames {
		if _, ok := members[k]; ok {
			names = append(names, k)
		}
	}
	badOne := rapid.SampledFrom(append([]string{"", ""}, names...)).Draw(t, "bad")
	badTwo := ""
	if rapid.IntRange(0, 9).Draw(t, "two-bad") == 0 {
		badTwo = rapid.SampledFrom(names).Draw(t, "bad2")
	}
	doc := map[string]any{}
	for _, k := range names {
		isRequired := false
		for _, r := range required {
			isRequired = isRequired || r == k
		}
		present := rapid.IntRange(0, 2).Draw(t, "present-"+k) > 0
		if isRequired {
			present = rapid.IntRange(0, 19).Draw(t, "present-"+k) > 0
		}
		if present || k == badOne || k == badTwo {
			doc[k] = members[k](k == badOne || k == badTwo)
		}
	}
	if rapid.IntRange(0, 9).Draw(t, "undeclared") == 0 {
		doc[rapid.SampledFrom(quickNames).Draw(t, "extra-name")] = anyValue(t, 1, "extra")
	}
	return doc
}

// full is the compiled schema's verdict, without the quick check.
func full(r *Registry, name string, doc any) error {
	return r.validateDoc(name, r.compiled[name], doc, r.limits)
}

// TestQuickAcceptIsSound: the quick checks accept no document their schema refuses.
func TestQuickAcceptIsSound(t *testing.T) {
	r := MustNew()
	for _, name := range quickSchemas {
		t.Run(name, func(t *testing.T) {
			quick := quickAccept(name)
			accepted, refused := 0, 0
			// Ten runs of rapid's default 100 checks: a bound crossed in a long list needs a few hundred.
			for range 10 {
				rapid.Check(t, func(t *rapid.T) {
					doc := nearValid(t, name)
					ok := quick(doc)
					err := full(r, name, doc)
					if ok && err != nil {
						raw, _ := json.Marshal(doc)
						t.Fatalf("quick check accepted %s, the schema refuses it: %v", raw, err)
					}
					if ok {
						accepted++
					} else if err != nil {
						refused++
					}
				})
			}
			if accepted == 0 || refused == 0 {
				t.Fatalf("the generator drew %d accepted and %d refused documents; it must draw both", accepted, refused)
			}
		})
	}
}

// TestQuickAcceptAcceptsTypicalRequests: the requests clients send the most take the quick path.
func TestQuickAcceptAcceptsTypicalRequests(t *testing.T) {
	for name, raw := range map[string]string{
		"message.send.request": `{"request_id":"r-1","subject":"s","body":{"text":"hi"}}`,
		"inbox.read.request":   `{"consumer_id":"con_1","cursor":null,"limit":50}`,
		"inbox.ack.request":    `{"request_id":"r-2","consumer_id":"con_1","checkpoint_cursor":"c","items":[{"item_id":"it_1","stage":"received"}]}`,
	} {
		doc, err := strictjson.Parse([]byte(raw))
		if err != nil {
			t.Fatal(err)
		}
		if !quickAccept(name)(doc) {
			t.Errorf("%s: %s is not accepted quickly", name, raw)
		}
	}
	for _, raw := range []string{
		`{"request_id":"r-1","recipient_ids":["a","b"],"thread_id":null,"in_reply_to":"msg_1","kind":"result","subject":"s",` +
			`"body":{"text":"hi"},"source":{"native_thread_id":"t"},"attachment_ids":[],"metadata":{"a":[1,{"b":null}]}}`,
	} {
		doc, _ := strictjson.Parse([]byte(raw))
		if !quickSend(doc) {
			t.Errorf("message.send: %s is not accepted quickly", raw)
		}
	}
}

// FuzzQuickAccept: for any JSON text, a quick check accepts only what its schema accepts.
func FuzzQuickAccept(f *testing.F) {
	for _, s := range []string{
		`{"request_id":"r-1","body":{"text":"hi"}}`, `{"request_id":"r-1","body":{"text":"hi"},"in_reply_to":"m"}`,
		`{"consumer_id":"c","limit":200}`, `{"consumer_id":"c","limit":201}`, `{"consumer_id":"c","cursor":"x","limit":1e2}`,
		`{"request_id":"r","consumer_id":"c","items":[{"item_id":"i","stage":"processed"}],"checkpoint_cursor":null}`,
		`{"request_id":"r","consumer_id":"c","items":[{"item_id":"i","stage":"done"}]}`, `[]`, `"x"`, `null`,
	} {
		f.Add([]byte(s))
	}
	r := MustNew()
	f.Fuzz(func(t *testing.T, in []byte) {
		doc, err := strictjson.Parse(in)
		if err != nil {
			return
		}
		for _, name := range quickSchemas {
			if quickAccept(name)(doc) {
				if err := full(r, name, doc); err != nil {
					t.Fatalf("%s: quick check accepted %s, the schema refuses it: %v", name, in, err)
				}
			}
		}
	})
}

// quickSchemaDigest is the SHA-256 of the schema documents the quick checks were written against: the
// three request schemas and the common definitions they use, re-encoded canonically.
func quickSchemaDigest(t *testing.T) string {
	t.Helper()
	h := sha256.New()
	for _, name := range quickSchemas {
		raw, ok := Raw(name)
		if !ok {
			t.Fatalf("no schema %s", name)
		}
		var doc any
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(doc)
		h.Write(b)
	}
	raw, _ := Raw(CommonName)
	var common struct {
		Defs map[string]any `json:"$defs"`
	}
	if err := json.Unmarshal(raw, &common); err != nil {
		t.Fatal(err)
	}
	for _, def := range []string{"id", "nullable_id", "request_id", "kind", "body", "source", "metadata", "stage", "nullable_cursor"} {
		b, _ := json.Marshal(common.Defs[def])
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// TestQuickAcceptSchemasUnchanged: the quick checks restate their schemas; when one of those documents
// changes, this fails until fast.go is reviewed against it (a new bound the quick check does not know would
// let it accept what the schema refuses) and the digest below is updated.
func TestQuickAcceptSchemasUnchanged(t *testing.T) {
	const reviewed = "0b211e4600ff20fe1f8efc137e05be2d21efa9b8c41b3b041c17de117e330611"
	if got := quickSchemaDigest(t); got != reviewed {
		t.Fatalf("the schemas behind the quick checks changed (digest %s): review schemas/fast.go against them, then update the digest", got)
	}
}
