// Package ops describes every operation of the Waypost API once: its name, HTTP method and path, the
// credential it takes, the scopes the domain checks, its request and response schemas, its MCP tool, how
// the path, query and body bind into its typed request, and the domain call. The HTTP routes
// (api/httpapi), the MCP tools (api/mcpapi), the API Gateway route table (infra/routes.go) and the
// operations waypost_status reports on are all derived from [List]: adding an operation is the domain
// call, its schemas, one descriptor in catalog.go, the client and CLI, and the docs
// (docs/contributing.md).
package ops

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/waypost/waypost/api/boundary"
	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/schemas"
)

// Plane is the credential an operation takes.
type Plane int

// The planes of SUPPLEMENT §11.
const (
	// Data operations take a space's bearer token (/v0).
	Data Plane = iota + 1
	// Admin operations take the admin secret (/admin/v0, the control plane).
	Admin
	// Public operations take no credential (the published schema documents).
	Public
)

// Where an operation runs on AWS: the function (or the channel container) API Gateway routes it to.
const (
	FnMailbox = "mailbox"
	FnMemory  = "memory"
	FnBlobs   = "blobs"
	FnAdmin   = "admin"
	FnChannel = "channel"
)

// Tool is how an operation is offered as an MCP tool (SUPPLEMENT §11.1).
type Tool struct {
	Name        string
	Title       string
	Description string
	ReadOnly    bool
	// OpenWorld marks a tool that reaches a third party (the subscribe challenge goes to the receiver).
	OpenWorld bool
	// Args is the tool's argument schema (inline JSON Schema) where it differs from the operation's: the
	// HTTP form takes part of the request from the path.
	Args string
	// LiveFeed lists the tool only where the deployment has a live feed (describe's live_feed).
	LiveFeed bool
}

// Call is one invocation of an operation, as a transport hands it over.
type Call struct {
	Svc *domain.Service
	// P is the authenticated caller; nil on the admin and public planes.
	P *domain.Principal
	// BaseURL is the public base URL when the transport's answers leave the service's own links
	// absolute (MCP); "" keeps them relative (HTTP).
	BaseURL string
}

// Link returns a link of the service as the transport publishes it: absolute under BaseURL when there is
// one, unchanged otherwise (and always when it already is absolute).
func (c Call) Link(path string) string {
	if c.BaseURL == "" || path == "" || strings.HasPrefix(path, "http://") || strings.HasPrefix(path, "https://") {
		return path
	}
	return strings.TrimSuffix(c.BaseURL, "/") + path
}

// Op is the description of one operation.
type Op struct {
	// Name is the operation's name (RFC, SUPPLEMENT §11), e.g. "message.send"; for a write operation it is
	// also the operation name status takes.
	Name string
	// Method and Path are the HTTP route, in net/http pattern syntax ({name} wildcards).
	Method, Path string
	Plane        Plane
	// Function is where API Gateway routes the operation on AWS (Fn…).
	Function string
	// Scopes are the token scopes the domain requires (documentation: the domain enforces them).
	Scopes []domain.Scope
	// Request is the named schema (package schemas) of the JSON body, for the methods with one.
	Request string
	// Args is the inline JSON Schema of the path and query parameters, for the methods without a body:
	// the HTTP query and path are checked against it as the MCP arguments are.
	Args string
	// Response is the named schema of the result's data.
	Response string
	// Submission marks a write operation whose submissions status reports (RFC §11.2).
	Submission bool
	// Tool offers the operation over MCP; nil: HTTP only.
	Tool *Tool
	// Stream marks an operation whose HTTP answer is not (only) the JSON envelope — bytes, a redirect, another
	// format: the HTTP transport serves it with a handler of its own (named by Name).
	Stream bool
	// Embedded marks an operation that only the embedded deployment serves, with a handler package server
	// mounts (admin.backup): api/httpapi does not route it and the AWS route table leaves it out.
	Embedded bool
	// Merge says how a PATCH body merges into what it changes (the OpenAPI document's request description).
	Merge string
	// Summary names the operation in the OpenAPI document where it has no tool title.
	Summary string
	// Errors are the error codes of the operation beyond those every route of its kind can answer with
	// (api/openapi.ErrorCodes): the OpenAPI document lists them, and the test clients check every answer
	// against it.
	Errors []domain.Code
	// Query are the query parameters the HTTP form reads beyond Args (a Stream operation's own).
	Query []QueryParam
	// Examples are named example request bodies (JSON) for the OpenAPI document.
	Examples map[string]string

	newReq func() reflect.Value
	run    func(ctx context.Context, c Call, req any) (any, error)
	fields map[string]field // json member name → field of the request type
	paths  []field          // fields taken from the HTTP path after the body is decoded
	echoes bool             // the body carries a request_id the envelope echoes
}

// QueryParam is a query parameter of an operation's HTTP form, with its JSON Schema.
type QueryParam struct {
	Name, Description string
	Schema            map[string]any
}

// field is one member of a request type.
type field struct {
	name  string
	index []int
	typ   reflect.Type
}

// define completes op with its request type (R is a pointer to it) and its domain call. (One type
// parameter of pointer shape: a single instantiation serves every operation, which keeps the Lambda
// binaries small.)
func define[R any](op Op, run func(ctx context.Context, c Call, req R) (any, error)) *Op {
	t := reflect.TypeFor[R]().Elem()
	op.newReq = func() reflect.Value { return reflect.New(t) }
	op.run = func(ctx context.Context, c Call, req any) (any, error) { return run(ctx, c, req.(R)) }
	op.fields = map[string]field{}
	for _, f := range reflect.VisibleFields(t) {
		if !f.IsExported() || f.Anonymous {
			continue
		}
		if p := f.Tag.Get("path"); p != "" {
			op.paths = append(op.paths, field{name: p, index: f.Index, typ: f.Type})
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name != "" && name != "-" {
			op.fields[name] = field{name: name, index: f.Index, typ: f.Type}
		}
	}
	_, op.echoes = op.fields["request_id"]
	return &op
}

// EchoesRequestID reports whether the HTTP envelope of the operation carries the request_id of its body.
func (o *Op) EchoesRequestID() bool { return o.Request != "" && o.echoes }

// Run runs the domain call with a request decoded by [Set.Decode].
func (o *Op) Run(ctx context.Context, c Call, req any) (any, error) { return o.run(ctx, c, req) }

// Served reports whether the operation has a domain call (every one but the byte streams and the schema
// documents, which the HTTP transport serves by itself).
func (o *Op) Served() bool { return o.run != nil }

// wildcard matches a {name} of a route path.
var wildcard = regexp.MustCompile(`\{([a-z_]+)\}`)

// PathParams returns the names of the route's wildcards, in order.
func (o *Op) PathParams() []string {
	var names []string
	for _, m := range wildcard.FindAllStringSubmatch(o.Path, -1) {
		names = append(names, m[1])
	}
	return names
}

// Params returns the request document of a call without a body: every member of the request type taken
// from the path (a wildcard of that name) or else from the query (its first value), typed as the member
// is (an integer or a boolean that does not parse stays a string, for the schema to refuse). Query
// parameters the request does not declare are left out, as HTTP has always ignored them.
func (o *Op) Params(pathValue func(string) string, q url.Values) json.RawMessage {
	doc := map[string]any{}
	inPath := o.PathParams()
	for name, f := range o.fields {
		if slices.Contains(inPath, name) {
			doc[name] = pathValue(name)
			continue
		}
		v, ok := q[name]
		if !ok || len(v) == 0 || v[0] == "" {
			continue
		}
		doc[name] = typed(f.typ, v[0])
	}
	raw, err := json.Marshal(doc)
	if err != nil { // a map of strings, integers and booleans always encodes
		panic(fmt.Sprintf("ops: encoding the parameters of %s: %v", o.Name, err))
	}
	return raw
}

// typed converts a query value to the JSON type of a request member.
func typed(t reflect.Type, s string) any {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int32, reflect.Int64:
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return n
		}
	case reflect.Bool:
		switch strings.ToLower(s) {
		case "true", "1":
			return true
		case "false", "0":
			return false
		}
	}
	return s
}

// Set is the operations with their inline schemas compiled against a registry: what both transports use
// to check and decode a request. It is immutable and safe for concurrent use.
type Set struct {
	reg    *schemas.Registry
	list   []*Op
	byName map[string]*Op
	args   map[string]*schemas.Schema // op name → compiled Args
	tools  map[string]*schemas.Schema // op name → compiled Tool.Args
}

// NewSet compiles the inline schemas of list ([List], or [DataPlane]) against reg.
func NewSet(reg *schemas.Registry, list []*Op) (*Set, error) {
	s := &Set{reg: reg, list: list, byName: map[string]*Op{}, args: map[string]*schemas.Schema{}, tools: map[string]*schemas.Schema{}}
	for _, o := range s.list {
		if _, dup := s.byName[o.Name]; dup {
			return nil, fmt.Errorf("ops: two operations are named %s", o.Name)
		}
		s.byName[o.Name] = o
		if o.Args != "" {
			c, err := reg.Compile(o.Name+" parameters", []byte(o.Args))
			if err != nil {
				return nil, fmt.Errorf("ops: %s: %w", o.Name, err)
			}
			s.args[o.Name] = c
		}
		if o.Tool != nil && o.Tool.Args != "" {
			c, err := reg.Compile(o.Tool.Name+" arguments", []byte(o.Tool.Args))
			if err != nil {
				return nil, fmt.Errorf("ops: %s: %w", o.Tool.Name, err)
			}
			s.tools[o.Name] = c
		}
	}
	return s, nil
}

// Schemas returns the registry the set was compiled against.
func (s *Set) Schemas() *schemas.Registry { return s.reg }

// List returns the operations, in the order of [List].
func (s *Set) List() []*Op { return s.list }

// Op returns the operation called name, or nil.
func (s *Set) Op(name string) *Op { return s.byName[name] }

// Decode checks a request document strictly — syntax (duplicate keys, non-finite numbers), then its
// schema (the tool's arguments when tool is set) — and decodes it into a fresh request of o, with the
// path parameters of an HTTP call (pathValue; nil over MCP) filled in. It returns the request_id the
// document carries ("" when none is valid), for the error envelope (boundary.DecodeRequest: one pass for
// the syntax, the request_id and the schema, then the strict decoding).
func (s *Set) Decode(o *Op, raw []byte, tool bool, pathValue func(string) string) (req any, requestID string, err error) {
	v := o.newReq()
	rid, err := boundary.DecodeRequest(raw, s.validator(o, tool), v.Interface())
	if err != nil {
		return nil, rid, err
	}
	if pathValue != nil {
		for _, f := range o.paths {
			v.Elem().FieldByIndex(f.index).SetString(pathValue(f.name))
		}
	}
	return v.Interface(), rid, nil
}

// validator is the schema check of o's request (its tool's arguments when tool is set), on a document
// parsed by strictjson.Parse.
func (s *Set) validator(o *Op, tool bool) func(doc any) error {
	if c := s.tools[o.Name]; tool && c != nil {
		return c.ValidateDoc
	}
	if c := s.args[o.Name]; c != nil {
		return c.ValidateDoc
	}
	return func(doc any) error { return s.reg.ValidateDoc(o.Request, doc) }
}

// ToolSchema returns the tool's argument schema as a standalone, portable JSON document (no references,
// no type arrays).
func (s *Set) ToolSchema(o *Op) (json.RawMessage, error) {
	var raw json.RawMessage
	switch {
	case o.Tool != nil && o.Tool.Args != "":
		raw = json.RawMessage(o.Tool.Args)
	case o.Args != "":
		raw = json.RawMessage(o.Args)
	default:
		var err error
		if raw, err = s.reg.Bundled(o.Request); err != nil {
			return nil, err
		}
	}
	return schemas.Portable(raw)
}

// HasBody reports whether the operation's HTTP request carries a JSON body: it names a Request schema and
// its method is not GET (the revoke and rotate calls, POSTs, take an optional one).
func (o *Op) HasBody() bool { return o.Request != "" && o.Method != http.MethodGet }

// StatusOperations are the write operations whose submissions status reports, in [List] order.
func StatusOperations() []string { return submissions(DataPlane()) }
