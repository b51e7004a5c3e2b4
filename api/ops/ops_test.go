package ops_test

import (
	"net/url"
	"reflect"
	"slices"
	"testing"

	"github.com/waypost/waypost/api/ops"
	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/schemas"
)

// TestDescriptorsAreComplete checks what every transport relies on: unique names and routes, existing
// schemas, a domain call wherever one is needed, a request schema for every call.
func TestDescriptorsAreComplete(t *testing.T) {
	t.Parallel()
	set := newSet(t)
	reg := set.Schemas()
	routes := map[string]bool{}
	tools := map[string]bool{}
	for _, o := range set.List() {
		key := o.Method + " " + o.Path
		if routes[key] {
			t.Errorf("%s: route %s twice", o.Name, key)
		}
		routes[key] = true
		for _, name := range []string{o.Request, o.Response} {
			if _, ok := reg.Raw(name); name != "" && !ok {
				t.Errorf("%s: no schema %q", o.Name, name)
			}
		}
		if !o.Served() && !o.Stream && !o.Embedded {
			t.Errorf("%s: neither a domain call nor a handler of its own", o.Name)
		}
		if (o.Method == "PATCH") != (o.Merge != "") {
			t.Errorf("%s: a PATCH says how its body merges (Merge), and only a PATCH", o.Name)
		}
		if o.Embedded && (o.Served() || o.Stream || o.Tool != nil) {
			t.Errorf("%s: an embedded-only operation has a call, a stream handler or a tool of its own", o.Name)
		}
		if o.Served() && o.Request == "" && o.Args == "" {
			t.Errorf("%s: a call without a request schema", o.Name)
		}
		if o.Method == "GET" && o.Request != "" {
			t.Errorf("%s: a GET with a body schema %q (give it Args)", o.Name, o.Request)
		}
		if o.Tool != nil {
			if tools[o.Tool.Name] || !o.Served() || o.Response == "" {
				t.Errorf("%s: tool %s is a duplicate, has no call or no response schema", o.Name, o.Tool.Name)
			}
			tools[o.Tool.Name] = true
		}
	}
}

// TestStatusOperations: status reports exactly the write operations that record a submission.
func TestStatusOperations(t *testing.T) {
	t.Parallel()
	want := []string{domain.OpMessageSend, domain.OpInboxAck, domain.OpBlobPrepare, domain.OpBlobCommit, domain.OpMemoryPublish,
		domain.OpSubscriptionUpsert, domain.OpSubscriptionStop}
	if got := ops.StatusOperations(); !slices.Equal(got, want) {
		t.Errorf("StatusOperations() = %v, want %v", got, want)
	}
}

// TestQueryParametersAreCheckedLikeArguments: a GET's path and query become the same document the MCP
// tool receives as arguments, typed by the request, and the same schema accepts or refuses it.
func TestQueryParametersAreCheckedLikeArguments(t *testing.T) {
	t.Parallel()
	set := newSet(t)
	read := set.Op("memory.read")
	path := func(string) string { return "c1" }
	for _, tc := range []struct {
		query string
		doc   string
		field string // details.field of the refusal; "" when accepted
	}{
		{"", `{"collection_id":"c1"}`, ""},
		{"limit=5&include_tombstones=1&revision=3&cursor=abc", `{"collection_id":"c1","cursor":"abc","include_tombstones":true,"limit":5,"revision":3}`, ""},
		{"include_tombstones=FALSE&unknown=x", `{"collection_id":"c1","include_tombstones":false}`, ""},
		{"revision=abc", `{"collection_id":"c1","revision":"abc"}`, "revision"},
		{"limit=0", `{"collection_id":"c1","limit":0}`, "limit"},
		{"include_tombstones=maybe", `{"collection_id":"c1","include_tombstones":"maybe"}`, "include_tombstones"},
	} {
		q, _ := url.ParseQuery(tc.query)
		doc := read.Params(path, q)
		if string(doc) != tc.doc {
			t.Errorf("%q: document %s, want %s", tc.query, doc, tc.doc)
		}
		_, httpRID, httpErr := set.Decode(read, doc, false, nil)
		_, _, mcpErr := set.Decode(read, doc, true, nil)
		if domain.CodeOf(httpErr) != domain.CodeOf(mcpErr) || httpRID != "" {
			t.Errorf("%q: HTTP %v, MCP %v", tc.query, httpErr, mcpErr)
		}
		got := ""
		if httpErr != nil {
			got, _ = domain.AsError(httpErr).Details["field"].(string)
		}
		if got != tc.field {
			t.Errorf("%q: refused on %q (%v), want %q", tc.query, got, httpErr, tc.field)
		}
	}
}

// TestPathParametersFillTheRequest: the body of a control-plane call and its path make one request.
func TestPathParametersFillTheRequest(t *testing.T) {
	t.Parallel()
	set := newSet(t)
	o := set.Op("admin.token.rotate")
	req, rid, err := set.Decode(o, []byte(`{"request_id":"r-1"}`), false, func(n string) string { return n + "-value" })
	if err != nil || rid != "r-1" || !o.EchoesRequestID() {
		t.Fatalf("Decode = %q, %v (echoes %v)", rid, err, o.EchoesRequestID())
	}
	v := reflect.ValueOf(req).Elem()
	for member, want := range map[string]string{"SpaceID": "space_id-value", "TokenID": "token_id-value", "RequestID": "r-1"} {
		if got := v.FieldByName(member).String(); got != want {
			t.Errorf("the decoded request's %s is %q, want %q", member, got, want)
		}
	}
	if _, _, err := set.Decode(o, []byte(`{"request_id":"r-1","space_id":"s"}`), false, nil); domain.CodeOf(err) != domain.CodeInvalidRequest {
		t.Errorf("a path parameter in the body: %v, want INVALID_REQUEST", err)
	}
}

// TestDecodeFindsTheRequestID: a request refused after its syntax was checked still names its request_id
// for the error envelope (from the one parse that serves the schema too); one refused for its syntax, or
// whose request_id is not valid, names none.
func TestDecodeFindsTheRequestID(t *testing.T) {
	t.Parallel()
	set := newSet(t)
	send := set.Op("message.send")
	for _, tc := range []struct {
		doc, rid string
		code     domain.Code
	}{
		{`{"request_id":"r-1","body":{"text":"hi"}}`, "r-1", ""},
		{`{"request_id":"r-2"}`, "r-2", domain.CodeInvalidRequest},                                // schema: body is required
		{`{"request_id":"r-3","body":{"text":"hi"},"extra":1}`, "r-3", domain.CodeInvalidRequest}, // schema: undeclared member
		{`{"request_id":"r-4","body":{"text":"hi"},"recipient_ids":[]}`, "r-4", domain.CodeInvalidRequest},
		{`{"request_id":"r-5","request_id":"r-5","body":{"text":"hi"}}`, "", domain.CodeInvalidRequest}, // syntax: duplicate
		{`{"request_id":"bad id with spaces","body":{"text":"hi"}}`, "", domain.CodeInvalidRequest},
		{`{"request_id":7,"body":{"text":"hi"}}`, "", domain.CodeInvalidRequest},
		{`[1]`, "", domain.CodeInvalidRequest},
	} {
		_, rid, err := set.Decode(send, []byte(tc.doc), false, nil)
		if rid != tc.rid || domain.CodeOf(err) != tc.code {
			t.Errorf("%s: request_id %q, %v; want %q, %q", tc.doc, rid, err, tc.rid, tc.code)
		}
	}
}

// newSet compiles every operation against the published schemas.
func newSet(t *testing.T) *ops.Set {
	t.Helper()
	set, err := ops.NewSet(schemas.MustNew(), ops.List())
	if err != nil {
		t.Fatal(err)
	}
	return set
}
