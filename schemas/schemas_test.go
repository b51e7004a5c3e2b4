package schemas

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/waypost/waypost/internal/codec/strictjson"
)

var testRegistry = sync.OnceValues(New)

func registry(t *testing.T) *Registry {
	t.Helper()
	r, err := testRegistry()
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return r
}

func TestNewCompilesEverySchema(t *testing.T) {
	t.Parallel()
	r := registry(t)
	names := r.Names()
	if !slices.Equal(names, Names()) {
		t.Fatalf("Registry.Names() = %v, Names() = %v", names, Names())
	}
	if !slices.IsSorted(names) || !slices.Contains(names, CommonName) {
		t.Fatalf("Names() not sorted or lacks %q: %v", CommonName, names)
	}
	for _, n := range names {
		raw, ok := r.Raw(n)
		if !ok {
			t.Errorf("Raw(%q) missing", n)
			continue
		}
		var doc map[string]any
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Errorf("%s: %v", n, err)
			continue
		}
		if doc["$id"] != ID(n) {
			t.Errorf("%s: $id = %v", n, doc["$id"])
		}
		if n != CommonName {
			if title, _ := doc["title"].(string); title == "" {
				t.Errorf("%s: no title", n)
			}
		}
	}
}

func TestWantedSchemaSet(t *testing.T) {
	t.Parallel()
	want := []string{
		"admin.actor.create.request", "admin.actor.create.response", "admin.actor.list.item", "admin.actor.list.response", "admin.actor.revoke.response",
		"admin.backup.request", "admin.backup.response",
		"admin.collection.create.request", "admin.collection.create.response",
		"admin.consumer.create.request", "admin.consumer.list.response", "admin.consumer.response", "admin.consumer.update.request",
		"admin.deliveries.response", "admin.delivery.response", "admin.empty.request",
		"admin.grant.create.request", "admin.grant.create.response", "admin.grant.revoke.response",
		"admin.oauth.client.list.response", "admin.oauth.client.response",
		"admin.space.create.request", "admin.space.create.response", "admin.space.get.response", "admin.space.list.response", "admin.space.stats.response", "admin.space.update.request",
		"admin.token.create.request", "admin.token.list.item", "admin.token.list.response", "admin.token.response", "admin.token.revoke.response",
		"blob.commit.request", "blob.info", "blob.prepare.request", "blob.prepare.response",
		"common", "describe.response", "envelope.error", "envelope.success", "feed.item",
		"inbox.ack.request", "inbox.ack.response", "inbox.read.request", "inbox.read.response",
		"memory.export.response", "memory.publish.request", "memory.publish.response", "memory.read.response",
		"message.get.response", "message.send.request", "message.send.response", "status.response",
		"subscription.list.response", "subscription.stop.request", "subscription.stop.response",
		"subscription.upsert.request", "subscription.upsert.response", "upload.response",
	}
	if got := Names(); !slices.Equal(got, want) {
		t.Errorf("Names() =\n%v\nwant\n%v", got, want)
	}
}

func TestRawAndUnknownNames(t *testing.T) {
	t.Parallel()
	r := registry(t)
	for _, bad := range []string{"", "nope", "../schemas", "common.json", "testdata/feed.item/valid/message", "."} {
		if _, ok := Raw(bad); ok {
			t.Errorf("Raw(%q) found something", bad)
		}
		if _, ok := r.Raw(bad); ok {
			t.Errorf("Registry.Raw(%q) found something", bad)
		}
		if err := r.Validate(bad, []byte(`{}`)); !errors.Is(err, ErrUnknownSchema) {
			t.Errorf("Validate(%q) = %v, want ErrUnknownSchema", bad, err)
		}
	}
	a, _ := Raw("feed.item")
	a[0] = 'X'
	b, _ := Raw("feed.item")
	if b[0] == 'X' {
		t.Error("Raw returns shared bytes")
	}
}

// TestExamples validates testdata/<name>/valid/*.json (must pass) and
// testdata/<name>/invalid/*.json (must fail) for every schema but common.
func TestExamples(t *testing.T) {
	t.Parallel()
	r := registry(t)
	dirs, err := os.ReadDir("testdata")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if d.IsDir() && !slices.Contains(Names(), d.Name()) {
			t.Errorf("testdata/%s matches no schema", d.Name())
		}
	}
	for _, name := range Names() {
		if name == CommonName {
			continue
		}
		t.Run(name, func(t *testing.T) {
			valid, _ := filepath.Glob(filepath.Join("testdata", name, "valid", "*.json"))
			invalid, _ := filepath.Glob(filepath.Join("testdata", name, "invalid", "*.json"))
			if len(valid) < 1 {
				t.Errorf("no valid examples")
			}
			if len(invalid) < 2 {
				t.Errorf("only %d invalid examples, want several", len(invalid))
			}
			for _, f := range valid {
				b, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				if err := r.Validate(name, b); err != nil {
					t.Errorf("%s: %v", filepath.Base(f), err)
				}
			}
			for _, f := range invalid {
				b, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				err = r.Validate(name, b)
				if err == nil {
					t.Errorf("%s: accepted", filepath.Base(f))
					continue
				}
				if !errors.Is(err, strictjson.ErrInvalid) {
					t.Errorf("%s: error %v does not wrap strictjson.ErrInvalid", filepath.Base(f), err)
				}
				if verr, ok := errors.AsType[*ValidationError](err); ok {
					if len(verr.Failures) == 0 || verr.Schema != name {
						t.Errorf("%s: malformed ValidationError %+v", filepath.Base(f), verr)
					}
				}
			}
		})
	}
}

// TestRequestSchemasAreClosed checks that every request schema sets
// "additionalProperties": false on every object schema it can reach
// (following $ref into common.json), except metadata objects.
func TestRequestSchemasAreClosed(t *testing.T) {
	t.Parallel()
	docs := map[string]any{}
	for _, n := range Names() {
		raw, _ := Raw(n)
		var doc any
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Fatal(err)
		}
		docs[ID(n)] = doc
	}
	resolve := func(ref string) (any, bool) {
		uri, frag, _ := strings.Cut(ref, "#")
		node, ok := docs[uri]
		if !ok {
			return nil, false
		}
		for tok := range strings.SplitSeq(strings.TrimPrefix(frag, "/"), "/") {
			if tok == "" {
				continue
			}
			tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
			m, ok := node.(map[string]any)
			if !ok {
				return nil, false
			}
			if node, ok = m[tok]; !ok {
				return nil, false
			}
		}
		return node, true
	}
	isObjectType := func(m map[string]any) bool {
		switch ty := m["type"].(type) {
		case string:
			return ty == "object"
		case []any:
			return slices.Contains(ty, any("object"))
		}
		_, hasProps := m["properties"]
		_, hasAP := m["additionalProperties"]
		return hasProps && hasAP
	}

	for _, name := range Names() {
		if !strings.HasSuffix(name, ".request") {
			continue
		}
		t.Run(name, func(t *testing.T) {
			visited := map[string]bool{}
			objects := 0
			var walk func(node any, path string, metadata bool)
			walk = func(node any, path string, metadata bool) {
				m, ok := node.(map[string]any)
				if !ok {
					return
				}
				if ref, ok := m["$ref"].(string); ok {
					key := ref + "|" + map[bool]string{true: "m", false: ""}[metadata]
					if !visited[key] {
						visited[key] = true
						target, ok := resolve(ref)
						if !ok {
							t.Errorf("%s: unresolvable $ref %s", path, ref)
						} else {
							walk(target, path+"->"+ref, metadata)
						}
					}
				}
				if isObjectType(m) && !metadata {
					objects++
					if ap, ok := m["additionalProperties"]; !ok || ap != false {
						t.Errorf("%s: object schema without \"additionalProperties\": false", path)
					}
				}
				for kw, v := range m {
					switch kw {
					case "properties", "patternProperties", "$defs":
						props, _ := v.(map[string]any)
						for p, sub := range props {
							walk(sub, path+"/"+kw+"/"+p, metadata || (kw == "properties" && p == "metadata"))
						}
					case "items", "additionalProperties", "not", "if", "then", "else", "contains",
						"propertyNames", "unevaluatedProperties", "unevaluatedItems":
						walk(v, path+"/"+kw, metadata)
					case "allOf", "anyOf", "oneOf", "prefixItems":
						list, _ := v.([]any)
						for i, sub := range list {
							walk(sub, path+"/"+kw+"/"+string(rune('0'+i)), metadata)
						}
					}
				}
			}
			walk(docs[ID(name)], name, false)
			if objects == 0 {
				t.Errorf("no object schema found")
			}
		})
	}
}

func TestValidationErrorPointers(t *testing.T) {
	t.Parallel()
	r := registry(t)
	err := r.Validate("message.send.request",
		[]byte(`{"request_id":"bad id","body":{"text":1},"x":true,"recipient_ids":["ok","no/slash"]}`))
	verr, ok := errors.AsType[*ValidationError](err)
	if !ok {
		t.Fatalf("err = %v", err)
	}
	ptrs := verr.Pointers()
	for _, want := range []string{"/request_id", "/body/text", "", "/recipient_ids/1"} {
		if !slices.Contains(ptrs, want) {
			t.Errorf("pointers %q lack %q (%v)", ptrs, want, err)
		}
	}
	keywords := map[string]string{}
	for _, f := range verr.Failures {
		keywords[f.Pointer] = f.Keyword
	}
	if keywords["/request_id"] != "pattern" || keywords[""] != "additionalProperties" || keywords["/body/text"] != "type" {
		t.Errorf("keywords = %v", keywords)
	}
	if !strings.Contains(err.Error(), `at "/body/text"`) {
		t.Errorf("Error() = %s", err)
	}
}

func TestFeedItemDiscriminatedErrors(t *testing.T) {
	t.Parallel()
	r := registry(t)
	in := `{"item_id":"f","space_id":"s","visible_seq":"1","item_type":"message","resource_id":"m",
		"resource_version":1,"producer_id":"p","recipient_ids":[],"thread_id":null,
		"committed_at":"2026-10-11T10:00:00Z","data":{"message_id":"m","kind":"result","in_reply_to":null}}`
	verr, ok := errors.AsType[*ValidationError](r.Validate("feed.item", []byte(in)))
	if !ok {
		t.Fatal("accepted")
	}
	if len(verr.Failures) != 1 || verr.Failures[0].Pointer != "/data" ||
		!strings.Contains(verr.Failures[0].Message, "attachment_count") {
		t.Errorf("failures = %+v, want only the missing attachment_count", verr.Failures)
	}
}

func TestErrorsDoNotEchoStringValues(t *testing.T) {
	t.Parallel()
	r := registry(t)
	const secret = "whsec-c2VjcmV0"
	cases := map[string]string{
		"message.send.request":        `{"request_id":"` + secret + ` x","body":{"text":"a"}}`,
		"admin.token.create.request":  `{"request_id":"r","actor_id":"a","scopes":["message.read"],"expires_at":"` + secret + `"}`,
		"admin.space.create.response": `{"space_id":"s","default_recipient_id":"a","source_uri":"` + secret + `"}`,
		"subscription.upsert.request": `{"request_id":"r","consumer_id":"c","event_types":["waypost.receipt.updated.v1"],` +
			`"delivery":{"mode":"webhook","url":"https://h.example/","secret":"` + secret + `"}}`,
	}
	for name, in := range cases {
		err := r.Validate(name, []byte(in))
		if err == nil {
			t.Fatalf("%s accepted", name)
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("%s: error echoes the value: %v", name, err)
		}
	}
}

func TestValidateRejectsSyntaxProblems(t *testing.T) {
	t.Parallel()
	r := registry(t)
	for _, in := range []string{
		`{"request_id":"r","request_id":"r","body":{"text":""}}`,
		`{"request_id":"r","body":{"text":""}} {}`,
		`{"request_id":"r","body":{"text":""},"metadata":{"n":1e999}}`,
		``,
	} {
		err := r.Validate("message.send.request", []byte(in))
		if !errors.Is(err, strictjson.ErrInvalid) {
			t.Errorf("Validate(%q) = %v, want ErrInvalid", in, err)
		}
	}
}

func TestValidateValue(t *testing.T) {
	t.Parallel()
	r := registry(t)
	type body struct {
		Text string `json:"text"`
	}
	type req struct {
		RequestID string `json:"request_id"`
		Body      body   `json:"body"`
	}
	if err := r.ValidateValue("message.send.request", req{RequestID: "r", Body: body{Text: "x"}}); err != nil {
		t.Error(err)
	}
	if err := r.ValidateValue("message.send.request", req{RequestID: "", Body: body{Text: "x"}}); err == nil {
		t.Error("empty request_id accepted")
	}
}

// publishedLimits returns the names of the limits describe publishes (the required members of limits).
func publishedLimits(t *testing.T) []string {
	return schemaStrings(t, "describe.response", "properties", "limits", "required")
}

// schemaStrings returns the list of strings found in schema name by following the object members of path.
func schemaStrings(t *testing.T, name string, path ...string) []string {
	t.Helper()
	raw, _ := Raw(name)
	var node any
	if err := json.Unmarshal(raw, &node); err != nil {
		t.Fatal(err)
	}
	for _, member := range path {
		obj, _ := node.(map[string]any)
		node = obj[member]
	}
	list, _ := node.([]any)
	out := make([]string, len(list))
	for i, v := range list {
		out[i], _ = v.(string)
	}
	return out
}

// TestDescribeLimitsAndCodes pins the enumerations to SUPPLEMENT §5.3 and
// §11.4 so that a change there is a deliberate change here.
func TestDescribeLimitsAndCodes(t *testing.T) {
	t.Parallel()
	limits := []string{"max_request_bytes", "max_id_bytes", "max_request_id_bytes", "max_subject_bytes",
		"max_body_text_bytes", "max_metadata_bytes", "max_recipients", "max_attachments", "max_blob_bytes",
		"upload_ttl_seconds", "inbox_page_default", "inbox_page_max", "ack_items_max", "memory_inline_changes_max",
		"memory_manifest_changes_max", "collection_entries_max", "memory_item_metadata_bytes", "memory_path_bytes",
		"memory_read_page_default", "memory_read_page_max", "subscriptions_per_consumer", "event_max_bytes",
		"subscription_ttl_default", "subscription_ttl_max", "revision_max", "visible_seq_max", "feed_wait_max_ms",
		"space_max_stored_bytes", "space_max_items"}
	if got := publishedLimits(t); !slices.Equal(got, limits) {
		t.Errorf("limits = %v", got)
	}

	codes := []string{"INVALID_REQUEST", "UNAUTHENTICATED", "FORBIDDEN", "NOT_FOUND", "IDEMPOTENCY_CONFLICT",
		"SUBMISSION_PENDING", "REVISION_CONFLICT", "BLOB_NOT_SEALED", "CHECKSUM_MISMATCH", "INVALID_BLOB",
		"INVALID_MANIFEST", "UPLOAD_EXPIRED", "UPLOAD_CONTENT_CONFLICT", "UPLOAD_SEALED", "INVALID_CURSOR",
		"CURSOR_SCOPE_CHANGED", "CURSOR_EXPIRED", "RESOURCE_LIMIT", "PAYLOAD_TOO_LARGE", "UNSUPPORTED",
		"RATE_LIMITED", "STORAGE_UNAVAILABLE", "INTERNAL", "WEBHOOK_VERIFICATION_FAILED", "FORBIDDEN_TARGET"}
	if got := schemaStrings(t, CommonName, "$defs", "error_code", "enum"); !slices.Equal(got, codes) {
		t.Errorf("error codes = %v", got)
	}
}

func TestConcurrentValidate(t *testing.T) {
	t.Parallel()
	r := registry(t)
	valid, _ := os.ReadFile(filepath.Join("testdata", "feed.item", "valid", "receipt.json"))
	invalid, _ := os.ReadFile(filepath.Join("testdata", "feed.item", "invalid", "bad_item_type.json"))
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				if err := r.Validate("feed.item", valid); err != nil {
					t.Error(err)
					return
				}
				if err := r.Validate("feed.item", invalid); err == nil {
					t.Error("invalid accepted")
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestVersion(t *testing.T) {
	t.Parallel()
	if Version != "0.1.0" || APIVersion != "0.1" || !strings.HasPrefix(Version, APIVersion+".") {
		t.Errorf("Version %q, APIVersion %q", Version, APIVersion)
	}
	raw, _ := Raw("describe.response")
	if !strings.Contains(string(raw), `"const": "`+APIVersion+`"`) {
		t.Error("describe.response does not pin api_version to APIVersion")
	}
}

func TestResourceLimit(t *testing.T) {
	t.Parallel()
	r := registry(t)
	items := func(n int, stage string) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = `{"item_id":"f` + strings.Repeat("x", i%5) + `","stage":"` + stage + `"}`
		}
		return `{"request_id":"a","consumer_id":"c","items":[` + strings.Join(parts, ",") + `]}`
	}
	ids := func(n int) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = `"actor_` + strings.Repeat("a", i%90+1) + `"`
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	memItems := func(n int) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = `{"item_id":"i` + strings.Repeat("x", i%90+1) + `","blob_id":"b","path":"p.md"}`
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	subscribe := func(extra string) string {
		return `{"request_id":"r","consumer_id":"c","event_types":["waypost.receipt.updated.v1"],` +
			`"delivery":{"mode":"webhook","url":"https://h.example/","secret":"whsec_rBdQJc8BCm4AiFLnM5qNWu1YmLzo+n2Drg7CWj+s408="}` + extra + `}`
	}
	tests := []struct {
		schema, in string
		limit      string // "" means not a pure limit failure
	}{
		{"inbox.ack.request", items(101, "received"), "ack_items_max"},
		{"inbox.ack.request", items(101, "read"), ""},
		{"inbox.read.request", `{"consumer_id":"c","limit":201}`, "inbox_page_max"},
		{"inbox.read.request", `{"consumer_id":"c","limit":0}`, ""},
		{"message.send.request", `{"request_id":"r","body":{"text":""},"recipient_ids":` + ids(65) + `}`, "max_recipients"},
		{"message.send.request", `{"request_id":"r","body":{"text":""},"attachment_ids":` + ids(33) + `}`, "max_attachments"},
		{"message.send.request", `{"request_id":"r","body":{"text":""},"attachment_ids":` + ids(33) + `,"x":1}`, ""},
		{"admin.consumer.create.request", `{"request_id":"r","actor_id":"a","view":"inbox","filter":{"thread_ids":` + ids(65) + `}}`, ""},
		{"memory.publish.request", `{"request_id":"r","expected_revision":0,"mode":"delta","items":` + memItems(501) + `}`, "memory_inline_changes_max"},
		{"memory.publish.request", `{"request_id":"r","expected_revision":0,"mode":"delta","delete_ids":` + ids(501) + `}`, "memory_inline_changes_max"},
		{"memory.publish.request", `{"request_id":"r","expected_revision":0,"mode":"snapshot","delete_ids":` + ids(501) + `}`, ""},
		{"memory.publish.request", `{"request_id":"r","expected_revision":0,"mode":"delta","items":` + memItems(501) + `,"x":1}`, ""},
		{"subscription.upsert.request", subscribe(`,"ttl_seconds":604801`), "subscription_ttl_max"},
		{"subscription.upsert.request", subscribe(`,"ttl_seconds":59`), ""},
		{"subscription.upsert.request", subscribe(`,"ttl_seconds":604801,"x":1`), ""},
	}
	for _, tc := range tests {
		verr, ok := errors.AsType[*ValidationError](r.Validate(tc.schema, []byte(tc.in)))
		if !ok {
			t.Errorf("%s %.60s: accepted", tc.schema, tc.in)
			continue
		}
		got, isLimit := verr.ResourceLimit()
		if got != tc.limit || isLimit != (tc.limit != "") {
			t.Errorf("%s %.60s: ResourceLimit() = %q, %v; want %q (%v)", tc.schema, tc.in, got, isLimit, tc.limit, verr)
		}
	}
}

// TestLimitAnnotations checks that every LimitKeyword names a limit that
// describe publishes and sits beside an upper-bound keyword.
func TestLimitAnnotations(t *testing.T) {
	t.Parallel()
	published := publishedLimits(t)
	found := 0
	var walk func(node any)
	walk = func(node any) {
		switch n := node.(type) {
		case map[string]any:
			if name, ok := n[LimitKeyword]; ok {
				found++
				s, _ := name.(string)
				if !slices.Contains(published, s) {
					t.Errorf("%s %q is not a published limit", LimitKeyword, name)
				}
				_, a := n["maxItems"]
				_, b := n["maximum"]
				_, c := n["maxLength"]
				if !a && !b && !c {
					t.Errorf("%s %q has no upper bound beside it", LimitKeyword, name)
				}
			}
			for _, v := range n {
				walk(v)
			}
		case []any:
			for _, v := range n {
				walk(v)
			}
		}
	}
	for _, n := range Names() {
		raw, _ := Raw(n)
		var doc any
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Fatal(err)
		}
		walk(doc)
	}
	if found != 8 {
		t.Errorf("found %d limit annotations, want 8", found)
	}
}

// TestWebhookSecretPattern checks the delivery.secret pattern of subscription.upsert.request against the
// documented recipe ("whsec_" + the standard base64 of 32 random bytes): every such secret is accepted,
// other lengths and alphabets are not.
func TestWebhookSecretPattern(t *testing.T) {
	t.Parallel()
	r := registry(t)
	req := func(secret string) []byte {
		return []byte(`{"request_id":"r","consumer_id":"c","event_types":["waypost.message.committed.v1"],` +
			`"delivery":{"mode":"webhook","url":"https://h.example/hook","secret":"` + secret + `"}}`)
	}
	for n := 0; n < 200; n++ {
		b := make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			t.Fatal(err)
		}
		s := "whsec_" + base64.StdEncoding.EncodeToString(b)
		if err := r.Validate("subscription.upsert.request", req(s)); err != nil {
			t.Fatalf("a generated secret was refused: %v", err)
		}
	}
	for _, n := range []int{0, 16, 31, 33, 48} {
		s := "whsec_" + base64.StdEncoding.EncodeToString(make([]byte, n))
		if err := r.Validate("subscription.upsert.request", req(s)); err == nil {
			t.Errorf("a secret of %d bytes was accepted", n)
		}
	}
	for _, s := range []string{
		"whsec_" + base64.RawStdEncoding.EncodeToString(make([]byte, 32)),
		"whsec_" + base64.URLEncoding.EncodeToString(bytes.Repeat([]byte{0xfb}, 32)),
		"WHSEC_" + base64.StdEncoding.EncodeToString(make([]byte, 32)),
		base64.StdEncoding.EncodeToString(make([]byte, 32)),
	} {
		if err := r.Validate("subscription.upsert.request", req(s)); err == nil {
			t.Errorf("secret %q was accepted", s)
		}
	}
}
