// Package schemas holds the JSON Schemas (draft 2020-12) of the Waypost v0
// wire format: one document per request body and per response `data`, plus
// the two result envelopes and a shared definitions document ("common").
//
// Each file NAME.json has the $id https://waypost.dev/schemas/v0/NAME.json;
// documents reference each other by $id only, so the set is self-contained
// and nothing is fetched from the network.
//
// Request schemas forbid undeclared members at every object level except
// user-defined `metadata` objects (RFC-0001 §5.1). Response schemas allow
// extra members, because responses may gain fields in later versions and
// clients ignore unknown response fields (RFC-0001 §5.2).
//
// Schemas check shapes. Byte-size limits and other limits a deployment may
// lower (SUPPLEMENT §5.3: subject and body bytes, recipients after
// de-duplication, metadata size and depth, …) are checked by the domain so
// that it can answer RESOURCE_LIMIT. A few count limits are also bounded in
// the schemas at their protocol defaults (recipient_ids ≤ 64 raw entries,
// attachment_ids ≤ 32, inbox.ack items ≤ 100, inbox.read limit ≤ 200); such
// a bound carries the annotation "x-waypost-limit": "<§5.3 limit name>", and
// a violation of it is reported in [Failure.Limit] so that the transport can
// answer RESOURCE_LIMIT rather than INVALID_REQUEST (see
// [ValidationError.ResourceLimit]).
//
// Use [New] once at start-up and share the returned [*Registry]; it is safe
// for concurrent use.
package schemas

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/waypost/waypost/internal/codec/strictjson"
	"github.com/waypost/waypost/internal/echo"
)

// Version is the version of this schema set. It changes together with the
// service, the Skill and the examples (SUPPLEMENT §17). The wire-level
// api_version published by describe is "0.1".
const Version = "0.1.0"

// APIVersion is the api_version value published by describe.
const APIVersion = "0.1"

// BaseURI is the common prefix of every schema $id.
const BaseURI = "https://waypost.dev/schemas/v0/"

// CommonName is the name of the shared definitions document. It holds only
// $defs and is not meant to validate instances.
const CommonName = "common"

// maxFailures bounds how many failures a ValidationError lists.
const maxFailures = 20

// LimitKeyword is the schema annotation naming the SUPPLEMENT §5.3 limit
// that the upper-bound keyword (maxItems, maximum, maxLength) of the same
// schema object enforces.
const LimitKeyword = "x-waypost-limit"

//go:embed *.json
var files embed.FS

// ErrUnknownSchema is returned by Validate for a name that is not in [Names].
var ErrUnknownSchema = errors.New("schemas: unknown schema name")

// ID returns the $id of the schema called name.
func ID(name string) string { return BaseURI + name + ".json" }

// Names returns the names of all embedded schema documents, sorted,
// including [CommonName]. A name is the file name without ".json", for
// example "message.send.request".
func Names() []string {
	entries, err := fs.ReadDir(files, ".")
	if err != nil {
		panic("schemas: reading embedded files: " + err.Error()) // cannot happen with embed
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		if n, ok := strings.CutSuffix(e.Name(), ".json"); ok && !e.IsDir() {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names
}

// Raw returns a copy of the schema document called name as stored, and
// whether it exists.
func Raw(name string) ([]byte, bool) {
	if !fs.ValidPath(name+".json") || strings.Contains(name, "/") {
		return nil, false
	}
	b, err := files.ReadFile(name + ".json")
	if err != nil {
		return nil, false
	}
	return b, true
}

// Registry holds every schema compiled once. It is immutable after [New]
// and safe for concurrent use.
type Registry struct {
	names    []string
	compiled map[string]*jsonschema.Schema
	printer  *message.Printer  // read-only after New
	limits   map[string]string // absolute schema location → §5.3 limit name
}

// New compiles every embedded schema with draft 2020-12 and format
// assertions (date-time) enabled. It fails if any document is not valid
// JSON, has a $id other than [ID](name), does not declare draft 2020-12, or
// does not compile; the error names every such document.
func New() (*Registry, error) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	names := Names()
	limits := map[string]string{}
	var errs []error
	for _, name := range names {
		raw, _ := Raw(name)
		if err := strictjson.CheckSyntax(raw); err != nil {
			errs = append(errs, fmt.Errorf("schema %s: %w", name, err))
			continue
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			errs = append(errs, fmt.Errorf("schema %s: %w", name, err))
			continue
		}
		m, ok := doc.(map[string]any)
		if !ok {
			errs = append(errs, fmt.Errorf("schema %s: not a JSON object", name))
			continue
		}
		if id, _ := m["$id"].(string); id != ID(name) {
			errs = append(errs, fmt.Errorf("schema %s: $id is %q, want %q", name, id, ID(name)))
		}
		if s, _ := m["$schema"].(string); s != "https://json-schema.org/draft/2020-12/schema" {
			errs = append(errs, fmt.Errorf("schema %s: $schema is %q, want draft 2020-12", name, s))
		}
		collectLimits(m, ID(name)+"#", limits)
		if err := c.AddResource(ID(name), doc); err != nil {
			errs = append(errs, fmt.Errorf("schema %s: %w", name, err))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	r := &Registry{
		names:    names,
		compiled: make(map[string]*jsonschema.Schema, len(names)),
		printer:  message.NewPrinter(language.English),
		limits:   limits,
	}
	for _, name := range names {
		s, err := c.Compile(ID(name))
		if err != nil {
			errs = append(errs, fmt.Errorf("schema %s: %w", name, err))
			continue
		}
		r.compiled[name] = s
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return r, nil
}

// MustNew is like [New] but panics if a schema is invalid. It suits
// start-up code and tests.
func MustNew() *Registry {
	r, err := New()
	if err != nil {
		panic(err)
	}
	return r
}

// Names returns the names of the compiled schemas, sorted.
func (r *Registry) Names() []string { return slices.Clone(r.names) }

// Raw returns a copy of the schema document called name.
func (r *Registry) Raw(name string) ([]byte, bool) {
	if _, ok := r.compiled[name]; !ok {
		return nil, false
	}
	return Raw(name)
}

// Validate checks the JSON text instance against the schema called name.
// It first applies [strictjson.CheckSyntax] (one well-formed value, valid
// UTF-8, no duplicate member names, finite numbers, depth ≤ 32), because a
// schema validator alone would let the last of two duplicate names win.
// A syntax error is returned as is (it wraps strictjson.ErrInvalid). A
// schema violation is a [*ValidationError], which also wraps
// strictjson.ErrInvalid. An unknown name returns [ErrUnknownSchema].
func (r *Registry) Validate(name string, instance []byte) error {
	if _, ok := r.compiled[name]; !ok {
		return fmt.Errorf("%w: %q", ErrUnknownSchema, name)
	}
	doc, err := strictjson.Parse(instance)
	if err != nil {
		return err
	}
	return r.ValidateDoc(name, doc)
}

// ValidateDoc checks a document parsed by strictjson.Parse (which also applied the strict syntax rules)
// against the schema called name, like [Registry.Validate] without parsing again. The busiest request
// schemas first try a quick check that only ever accepts (fast.go).
func (r *Registry) ValidateDoc(name string, doc any) error {
	s, ok := r.compiled[name]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownSchema, name)
	}
	if quick := quickAccept(name); quick != nil && quick(doc) {
		return nil
	}
	return r.validateDoc(name, s, doc, r.limits)
}

// Schema is a schema compiled outside the embedded set (for example the argument schema of an MCP tool
// whose HTTP form takes path or query parameters). It validates and reports failures exactly like the
// registry's own schemas.
type Schema struct {
	r      *Registry
	name   string
	s      *jsonschema.Schema
	limits map[string]string
}

// Compile compiles raw (draft 2020-12 unless it says otherwise, with format assertions) as a standalone
// schema; name appears in its failure messages. raw may refer to the embedded schemas by their $id.
func (r *Registry) Compile(name string, raw []byte) (*Schema, error) {
	if err := strictjson.CheckSyntax(raw); err != nil {
		return nil, fmt.Errorf("schemas: compile %s: %w", name, err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("schemas: compile %s: %w", name, err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	for _, n := range r.names {
		embedded, _ := Raw(n)
		d, err := jsonschema.UnmarshalJSON(bytes.NewReader(embedded))
		if err != nil {
			return nil, fmt.Errorf("schemas: compile %s: %w", name, err)
		}
		if err := c.AddResource(ID(n), d); err != nil {
			return nil, fmt.Errorf("schemas: compile %s: %w", name, err)
		}
	}
	loc := "mem:///" + name + ".json"
	limits := map[string]string{}
	collectLimits(doc, loc+"#", limits)
	for k, v := range r.limits {
		limits[k] = v
	}
	if err := c.AddResource(loc, doc); err != nil {
		return nil, fmt.Errorf("schemas: compile %s: %w", name, err)
	}
	s, err := c.Compile(loc)
	if err != nil {
		return nil, fmt.Errorf("schemas: compile %s: %w", name, err)
	}
	return &Schema{r: r, name: name, s: s, limits: limits}, nil
}

// Validate checks the JSON text instance like [Registry.Validate]: strict syntax first, then the schema;
// a violation is a [*ValidationError].
func (s *Schema) Validate(instance []byte) error {
	doc, err := strictjson.Parse(instance)
	if err != nil {
		return err
	}
	return s.ValidateDoc(doc)
}

// ValidateDoc checks a document parsed by strictjson.Parse, like [Schema.Validate] without parsing again.
func (s *Schema) ValidateDoc(doc any) error {
	return s.r.validateDoc(s.name, s.s, doc, s.limits)
}

// ValidateValue marshals v with github.com/go-json-experiment/json and
// validates the result like [Registry.Validate]. It is meant for tests that
// check what the service sends.
func (r *Registry) ValidateValue(name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("schemas: marshal %T: %w", v, err)
	}
	return r.Validate(name, b)
}

func (r *Registry) validateDoc(name string, s *jsonschema.Schema, doc any, limits map[string]string) error {
	err := s.Validate(doc)
	if err == nil {
		return nil
	}
	verr, ok := errors.AsType[*jsonschema.ValidationError](err)
	if !ok {
		return fmt.Errorf("schemas: validating against %s: %w", name, err)
	}
	out := &ValidationError{Schema: name}
	seen := map[Failure]bool{}
	r.collectFailures(verr, out, seen, limits)
	if len(out.Failures) == 0 {
		out.Failures = append(out.Failures, Failure{Pointer: "", Field: "", Keyword: "", Message: "does not match the schema"})
	}
	return out
}

// ValidationError lists where and why an instance does not match a schema.
// It wraps strictjson.ErrInvalid. Messages never contain string values from
// the instance (patterns and formats are reported without the offending
// text); member names may appear, as they do in JSON pointers, but never more
// than their first 100 bytes.
type ValidationError struct {
	// Schema is the name of the schema that was applied.
	Schema string
	// Failures are the individual violations, in the validator's order,
	// without duplicates, at most 20.
	Failures []Failure
	// Truncated reports whether failures were left off.
	Truncated bool
}

// Failure is one schema violation.
type Failure struct {
	// Pointer is the RFC 6901 JSON pointer of the failing value within the
	// instance ("" for the whole instance).
	Pointer string
	// Field is the JSON pointer of the member the failure is about: Pointer,
	// or for a missing ("required") or undeclared ("additionalProperties")
	// member, Pointer followed by that member's name.
	Field string
	// Keyword is the JSON Schema keyword that failed, such as "required",
	// "additionalProperties", "pattern", "maxItems", "format" or "const". A
	// transport may map limit keywords to RESOURCE_LIMIT if it wishes.
	Keyword string
	// Message describes the violation.
	Message string
	// Limit is the SUPPLEMENT §5.3 limit name (for example "ack_items_max")
	// when the failure is exceeding a bound annotated with [LimitKeyword],
	// and "" otherwise.
	Limit string
}

// Error implements the error interface.
func (e *ValidationError) Error() string {
	var b strings.Builder
	b.WriteString("schemas: instance does not match ")
	b.WriteString(e.Schema)
	for i, f := range e.Failures {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		b.WriteString("at ")
		b.WriteString(strconv.Quote(f.Pointer))
		b.WriteString(": ")
		b.WriteString(f.Message)
	}
	if e.Truncated {
		b.WriteString("; …")
	}
	return b.String()
}

// Unwrap returns strictjson.ErrInvalid.
func (e *ValidationError) Unwrap() error { return strictjson.ErrInvalid }

// ResourceLimit reports whether every failure is the exceeding of a
// published limit, and if so returns the first limit's name. The transport
// should then answer RESOURCE_LIMIT (SUPPLEMENT §5.3) instead of
// INVALID_REQUEST; a request that also has a shape error stays
// INVALID_REQUEST.
func (e *ValidationError) ResourceLimit() (limit string, ok bool) {
	if len(e.Failures) == 0 || e.Truncated {
		return "", false
	}
	for _, f := range e.Failures {
		if f.Limit == "" {
			return "", false
		}
	}
	return e.Failures[0].Limit, true
}

// Pointers returns the distinct JSON pointers of the failures, in order.
func (e *ValidationError) Pointers() []string {
	var ps []string
	for _, f := range e.Failures {
		if !slices.Contains(ps, f.Pointer) {
			ps = append(ps, f.Pointer)
		}
	}
	return ps
}

func (r *Registry) collectFailures(v *jsonschema.ValidationError, out *ValidationError, seen map[Failure]bool, limits map[string]string) {
	if len(v.Causes) > 0 {
		for _, c := range relevantCauses(v) {
			r.collectFailures(c, out, seen, limits)
		}
		return
	}
	f := Failure{Pointer: pointer(v.InstanceLocation), Keyword: keyword(v.ErrorKind), Message: r.message(v.ErrorKind)}
	f.Field = f.Pointer
	switch k := v.ErrorKind.(type) {
	case *kind.Required:
		if len(k.Missing) > 0 {
			f.Field += "/" + escapeToken(echo.Clip(k.Missing[0]))
		}
	case *kind.AdditionalProperties:
		if len(k.Properties) > 0 {
			f.Field += "/" + escapeToken(echo.Clip(k.Properties[0]))
		}
	}
	switch f.Keyword {
	case "maxItems", "maximum", "maxLength":
		f.Limit = limits[v.SchemaURL]
	}
	if seen[f] {
		return
	}
	seen[f] = true
	if len(out.Failures) >= maxFailures {
		out.Truncated = true
		return
	}
	out.Failures = append(out.Failures, f)
}

// collectLimits records, for every schema object under node carrying
// LimitKeyword, its absolute location (base is "<$id>#" plus the JSON
// pointer of node).
func collectLimits(node any, loc string, out map[string]string) {
	switch n := node.(type) {
	case map[string]any:
		if name, ok := n[LimitKeyword].(string); ok {
			out[loc] = name
		}
		for k, v := range n {
			collectLimits(v, loc+"/"+escapeToken(k), out)
		}
	case []any:
		for i, v := range n {
			collectLimits(v, loc+"/"+strconv.Itoa(i), out)
		}
	}
}

func escapeToken(t string) string {
	return strings.ReplaceAll(strings.ReplaceAll(t, "~", "~0"), "/", "~1")
}

// relevantCauses drops, from a failed oneOf or anyOf, the alternatives that
// failed on a "const" (a discriminator such as item_type), as long as some
// alternative did not: those alternatives were never meant to match, and
// listing their failures would only hide the real problem.
func relevantCauses(v *jsonschema.ValidationError) []*jsonschema.ValidationError {
	switch v.ErrorKind.(type) {
	case *kind.OneOf, *kind.AnyOf:
	default:
		return v.Causes
	}
	var kept []*jsonschema.ValidationError
	for _, c := range v.Causes {
		if !hasConstFailure(c) {
			kept = append(kept, c)
		}
	}
	if len(kept) == 0 {
		return v.Causes
	}
	return kept
}

func hasConstFailure(v *jsonschema.ValidationError) bool {
	if _, ok := v.ErrorKind.(*kind.Const); ok {
		return true
	}
	return slices.ContainsFunc(v.Causes, hasConstFailure)
}

func pointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(escapeToken(echo.Clip(t)))
	}
	return b.String()
}

func keyword(k jsonschema.ErrorKind) string {
	if p := k.KeywordPath(); len(p) > 0 {
		return p[len(p)-1]
	}
	return ""
}

// message renders an error kind without copying string values from the
// instance.
func (r *Registry) message(k jsonschema.ErrorKind) string {
	switch k := k.(type) {
	case *kind.Pattern:
		return "does not match pattern " + strconv.Quote(k.Want)
	case *kind.Format:
		return "is not a valid " + k.Want
	case *kind.Type:
		return "got " + k.Got + ", want " + strings.Join(k.Want, " or ")
	case *kind.MinLength:
		return "must have at least " + strconv.Itoa(k.Want) + " characters"
	case *kind.MaxLength:
		return "must have at most " + strconv.Itoa(k.Want) + " characters"
	case *kind.FalseSchema:
		return "not allowed here"
	case *kind.AdditionalProperties: // member names are the caller's: at most the first 100 bytes of each
		names := make([]string, 0, min(len(k.Properties), 5))
		for _, n := range k.Properties[:min(len(k.Properties), 5)] {
			names = append(names, strconv.Quote(echo.Clip(n)))
		}
		more := ""
		if len(k.Properties) > 5 {
			more = fmt.Sprintf(" and %d more", len(k.Properties)-5)
		}
		return "undeclared member " + strings.Join(names, ", ") + more + " not allowed"
	case *kind.PropertyNames:
		return "invalid member name " + strconv.Quote(echo.Clip(k.Property))
	default:
		return k.LocalizedString(r.printer)
	}
}
