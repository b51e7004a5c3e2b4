// Package openapi generates the OpenAPI 3.1 description of the Waypost HTTP API from the operation
// descriptors of api/ops and the JSON Schemas of package schemas: there is no second description to keep in
// step. Every route of ops.List is a path operation with its parameters, its request body (the same JSON
// Schema the server validates with), its success response and, per HTTP status, the error envelope with the
// error codes the route can answer with. The document is served at GET /v0/openapi.json and checked in as
// schemas/openapi/openapi.json (go generate ./api/openapi, or go test ./api/openapi -update).
package openapi

//go:generate go test -run TestCheckedInDocument -update .

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/waypost/waypost/api/ops"
	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/schemas"
)

// Path is where the HTTP API serves the document.
const Path = "/v0/openapi.json"

// MergePatchType is the media type of a JSON Merge Patch (RFC 7396), which PATCH routes accept besides
// application/json.
const MergePatchType = "application/merge-patch+json"

// OAuth describes an OAuth 2.1 authorization server whose access tokens the data plane accepts: with it the
// document adds an oauth2 authorizationCode security scheme beside bearer tokens.
type OAuth struct {
	AuthorizationURL, TokenURL string
	// Scopes maps each scope to its description; nil means the token scopes of the domain.
	Scopes map[string]string
}

// Options change what the document describes.
type Options struct {
	// OAuth adds the oauth2 security scheme to the data plane; nil describes bearer tokens only.
	OAuth *OAuth
	// ServerURL is the base URL of the servers entry; "" means "/" (the origin the document came from).
	ServerURL string
}

// Generate returns the OpenAPI 3.1 document describing list, whose schemas are in reg, as indented JSON.
func Generate(reg *schemas.Registry, list []*ops.Op, opts Options) ([]byte, error) {
	comps, err := components(reg)
	if err != nil {
		return nil, err
	}
	paths := map[string]any{}
	for _, o := range list {
		item, _ := paths[o.Path].(map[string]any)
		if item == nil {
			item = map[string]any{}
			paths[o.Path] = item
		}
		op, err := operation(reg, o)
		if err != nil {
			return nil, err
		}
		item[strings.ToLower(o.Method)] = op
	}
	server := opts.ServerURL
	if server == "" {
		server = "/"
	}
	schemes := map[string]any{
		"bearerToken": map[string]any{"type": "http", "scheme": "bearer",
			"description": "A space's token (data plane, /v0), created with POST /admin/v0/spaces/{space_id}/tokens."},
		"adminSecret": map[string]any{"type": "http", "scheme": "bearer",
			"description": "The instance's admin secret (control plane, /admin/v0)."},
	}
	if opts.OAuth != nil {
		scopes := opts.OAuth.Scopes
		if scopes == nil {
			scopes = map[string]string{}
			for _, s := range domain.AllScopes() {
				scopes[string(s)] = "The " + string(s) + " token scope."
			}
		}
		schemes["oauth2"] = map[string]any{"type": "oauth2", "description": "OAuth 2.1 authorization code with PKCE.",
			"flows": map[string]any{"authorizationCode": map[string]any{"authorizationUrl": opts.OAuth.AuthorizationURL,
				"tokenUrl": opts.OAuth.TokenURL, "scopes": scopes}}}
		for _, o := range list {
			if o.Plane == ops.Data {
				op := paths[o.Path].(map[string]any)[strings.ToLower(o.Method)].(map[string]any)
				op["security"] = append(op["security"].([]any), map[string]any{"oauth2": scopeNames(o.Scopes)})
			}
		}
	}
	prune(comps, paths)
	comps2 := map[string]any{"schemas": comps, "securitySchemes": schemes}
	doc := map[string]any{
		"openapi": "3.1.1",
		"info": map[string]any{
			"title":       "Waypost HTTP API",
			"version":     schemas.Version,
			"summary":     "An asynchronous mailbox and memory exchange for people, AI agents and clients (RFC-0001).",
			"description": "The data plane (/v0, a space's bearer token) and the control plane (/admin/v0, the admin secret). Every JSON answer is the RFC-0001 §5.2 envelope: {ok: true, request_id, data} or {ok: false, request_id, error: {code, message, retryable, details}}. Generated from the operation descriptors (api/ops); the request schemas are the ones the server validates with (GET /v0/schemas/{name}).",
			"license":     map[string]any{"name": "Proprietary", "identifier": "LicenseRef-Waypost"},
		},
		"servers":    []any{map[string]any{"url": server, "description": "This Waypost server."}},
		"paths":      paths,
		"components": comps2,
		"tags": []any{
			map[string]any{"name": "data", "description": "The data plane (SUPPLEMENT §11.1, RFC §12.3): a space's bearer token."},
			map[string]any{"name": "admin", "description": "The control plane (SUPPLEMENT §11.3): the admin secret."},
			map[string]any{"name": "public", "description": "The published descriptions: no credential."},
		},
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("openapi: encoding the document: %w", err)
	}
	return buf.Bytes(), nil
}

func scopeNames(scopes []domain.Scope) []any {
	out := []any{}
	for _, s := range scopes {
		out = append(out, string(s))
	}
	return out
}

// Document is the generated document of one operation set, computed once on first use. It is safe for
// concurrent use.
type Document struct {
	set  *ops.Set
	opts Options
	once sync.Once
	raw  []byte
	err  error
}

// NewDocument returns the document of set, generated when first asked for.
func NewDocument(set *ops.Set, opts Options) *Document { return &Document{set: set, opts: opts} }

// JSON returns the document.
func (d *Document) JSON() ([]byte, error) {
	d.once.Do(func() { d.raw, d.err = Generate(d.set.Schemas(), d.set.List(), d.opts) })
	return d.raw, d.err
}

// ref is a JSON Schema reference to a component.
func ref(name string) map[string]any { return map[string]any{"$ref": "#/components/schemas/" + name} }

// components returns every schema of reg as components: NAME for NAME.json, common.DEF for each definition
// of common.json and NAME.DEF for a local definition, with every $ref rewritten to point at them.
func components(reg *schemas.Registry) (map[string]any, error) {
	out := map[string]any{}
	for _, name := range reg.Names() {
		raw, ok := reg.Raw(name)
		if !ok {
			return nil, fmt.Errorf("openapi: schema %s is not in the registry", name)
		}
		var doc map[string]any
		if err := json.Unmarshal(raw, &doc); err != nil {
			return nil, fmt.Errorf("openapi: schema %s: %w", name, err)
		}
		defs, _ := doc["$defs"].(map[string]any)
		for def, s := range defs {
			out[name+"."+def] = rewrite(name, s)
		}
		delete(doc, "$defs")
		delete(doc, "$schema")
		delete(doc, "$id")
		if name != schemas.CommonName {
			out[name] = rewrite(name, doc)
		}
	}
	for name, s := range out {
		out[name] = explicit(s)
	}
	return out, nil
}

// prune removes the components no operation reaches (the published schemas nothing in the API answers with
// or takes any more, such as the whole-object rate_limits a PATCH used to demand).
func prune(comps map[string]any, paths map[string]any) {
	reached := map[string]bool{}
	var walk func(node any)
	walk = func(node any) {
		switch n := node.(type) {
		case map[string]any:
			if r, ok := n["$ref"].(string); ok {
				if name, ok := strings.CutPrefix(r, "#/components/schemas/"); ok && !reached[name] {
					reached[name] = true
					walk(comps[name])
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
	walk(paths)
	for name := range comps {
		if !reached[name] {
			delete(comps, name)
		}
	}
}

// explicit returns a schema with what JSON Schema leaves implicit spelled out, for OpenAPI tools that read
// each subschema on its own (linters, code generators), without changing what it accepts: a member a
// subschema requires but does not declare is declared there with the schema any undeclared member has
// (additionalProperties, or {} where there is none), and a member the whole schema requires that tells the
// oneOf branches apart (a const) is required in each branch too.
func explicit(node any) any {
	switch n := node.(type) {
	case map[string]any:
		for k, v := range n {
			n[k] = explicit(v)
		}
		if req, ok := n["required"].([]any); ok {
			props, _ := n["properties"].(map[string]any)
			var undeclared any = map[string]any{}
			_, hasPattern := n["patternProperties"]
			if ap, ok := n["additionalProperties"]; ok {
				undeclared = ap
			}
			if b, isBool := undeclared.(bool); !hasPattern && (!isBool || b) {
				for _, r := range req {
					name, _ := r.(string)
					if _, ok := props[name]; ok || name == "" {
						continue
					}
					if props == nil {
						props = map[string]any{}
						n["properties"] = props
					}
					props[name] = undeclared
				}
			}
		}
		if branches, ok := n["oneOf"].([]any); ok {
			req, _ := n["required"].([]any)
			for _, b := range branches {
				bm, ok := b.(map[string]any)
				if !ok {
					continue
				}
				props, _ := bm["properties"].(map[string]any)
				for _, r := range req {
					name, _ := r.(string)
					p, _ := props[name].(map[string]any)
					if _, isConst := p["const"]; !isConst {
						continue
					}
					breq, _ := bm["required"].([]any)
					if !slices.Contains(breq, r) {
						bm["required"] = append(breq, r)
					}
				}
			}
		}
		return n
	case []any:
		for i, v := range n {
			n[i] = explicit(v)
		}
	}
	return node
}

// rewrite returns node with its references (absolute $id URLs of the schema set, or local to doc) made
// references to components.
func rewrite(doc string, node any) any {
	switch n := node.(type) {
	case map[string]any:
		m := make(map[string]any, len(n))
		for k, v := range n {
			if s, ok := v.(string); ok && k == "$ref" {
				m[k] = refTarget(doc, s)
				continue
			}
			m[k] = rewrite(doc, v)
		}
		return m
	case []any:
		l := make([]any, len(n))
		for i, v := range n {
			l[i] = rewrite(doc, v)
		}
		return l
	}
	return node
}

func refTarget(doc, r string) string {
	target, frag, _ := strings.Cut(r, "#")
	name := doc
	if target != "" {
		name = strings.TrimSuffix(strings.TrimPrefix(target, schemas.BaseURI), ".json")
	}
	if def, ok := strings.CutPrefix(frag, "/$defs/"); ok {
		return "#/components/schemas/" + name + "." + def
	}
	return "#/components/schemas/" + name
}

// operation is the OpenAPI operation object of o.
func operation(reg *schemas.Registry, o *ops.Op) (map[string]any, error) {
	op := map[string]any{
		"operationId": o.Name,
		"summary":     summary(o),
		"tags":        []any{tag(o)},
	}
	if o.Tool != nil && o.Tool.Description != "" {
		op["description"] = o.Tool.Description
	}
	if len(o.Scopes) > 0 {
		op["x-waypost-scopes"] = scopeNames(o.Scopes)
	}
	switch o.Plane {
	case ops.Data:
		op["security"] = []any{map[string]any{"bearerToken": []any{}}}
	case ops.Admin:
		op["security"] = []any{map[string]any{"adminSecret": []any{}}}
	default:
		op["security"] = []any{}
	}
	params, err := parameters(o)
	if err != nil {
		return nil, err
	}
	if len(params) > 0 {
		op["parameters"] = params
	}
	if body := requestBody(o); body != nil {
		op["requestBody"] = body
	}
	op["responses"] = responses(o)
	return op, nil
}

func tag(o *ops.Op) string {
	switch o.Plane {
	case ops.Admin:
		return "admin"
	case ops.Public:
		return "public"
	}
	return "data"
}

func summary(o *ops.Op) string {
	if o.Tool != nil && o.Tool.Title != "" {
		return o.Tool.Title
	}
	if s := o.Summary; s != "" {
		return s
	}
	return o.Name
}

// parameters are o's path parameters and, for a call without a body, its query parameters (the members
// of its Args schema that are not in the path).
func parameters(o *ops.Op) ([]any, error) {
	var out []any
	inPath := o.PathParams()
	var args struct {
		Properties map[string]any `json:"properties"`
		Required   []string       `json:"required"`
	}
	if o.Args != "" {
		if err := json.Unmarshal([]byte(o.Args), &args); err != nil {
			return nil, fmt.Errorf("openapi: parameters of %s: %w", o.Name, err)
		}
	}
	for _, p := range inPath {
		s := any(ref("common.id"))
		if o.Plane == ops.Public { // a schema's name
			s = map[string]any{"type": "string", "pattern": "^[a-z0-9.]{1,96}$"}
		}
		out = append(out, map[string]any{"name": p, "in": "path", "required": true, "schema": s})
	}
	names := make([]string, 0, len(args.Properties))
	for name := range args.Properties {
		if !slices.Contains(inPath, name) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		s := queryParamSchema(args.Properties[name])
		p := map[string]any{"name": name, "in": "query", "schema": s}
		if slices.Contains(args.Required, name) {
			p["required"] = true
		}
		out = append(out, p)
	}
	for _, q := range o.Query {
		out = append(out, map[string]any{"name": q.Name, "in": "query", "description": q.Description, "schema": q.Schema})
	}
	return out, nil
}

// queryParamSchema drops the null alternative of a parameter schema: a query string has no null.
func queryParamSchema(s any) any {
	m, ok := s.(map[string]any)
	if !ok {
		return s
	}
	alts, ok := m["anyOf"].([]any)
	if !ok {
		return s
	}
	var keep []any
	for _, a := range alts {
		if am, ok := a.(map[string]any); ok && am["type"] == "null" {
			continue
		}
		keep = append(keep, a)
	}
	if len(keep) == 1 {
		return keep[0]
	}
	return s
}

func requestBody(o *ops.Op) map[string]any {
	switch {
	case o.Name == ops.Upload:
		return map[string]any{"required": true, "description": "The blob's bytes, exactly as prepared (size, SHA-256, content type).",
			"content": map[string]any{"*/*": map[string]any{"schema": map[string]any{}}}}
	case !o.HasBody():
		return nil
	}
	media := map[string]any{"schema": ref(o.Request)}
	if len(o.Examples) > 0 {
		ex := map[string]any{}
		for name, v := range o.Examples {
			ex[name] = map[string]any{"value": json.RawMessage(v)}
		}
		media["examples"] = ex
	}
	content := map[string]any{"application/json": media}
	body := map[string]any{"required": o.Request != "admin.empty.request", "content": content}
	if o.Method == http.MethodPatch {
		content[MergePatchType] = media
		body["description"] = o.Merge
	}
	return body
}

// envelope is the success envelope whose data is the named schema.
func envelope(data string) map[string]any {
	return map[string]any{"allOf": []any{ref("envelope.success"),
		map[string]any{"type": "object", "properties": map[string]any{"data": ref(data)}}}}
}

func responses(o *ops.Op) map[string]any {
	out := map[string]any{}
	jsonOK := func(desc string, schema any) map[string]any {
		return map[string]any{"description": desc, "content": map[string]any{"application/json": map[string]any{"schema": schema}}}
	}
	switch o.Name {
	case ops.BlobContent:
		out["200"] = map[string]any{"description": "The blob's bytes, with the content type it was prepared with.",
			"content": map[string]any{"*/*": map[string]any{"schema": map[string]any{}}}}
		out["302"] = map[string]any{"description": "Where the blob store serves the bytes itself: a short-lived presigned URL in Location."}
	case ops.MemoryExport:
		out["200"] = map[string]any{"description": "The export: the envelope (format=json), Markdown (format=markdown) or a ZIP archive (format=zip).",
			"content": map[string]any{
				"application/json":             map[string]any{"schema": envelope(o.Response)},
				"text/markdown; charset=utf-8": map[string]any{"schema": map[string]any{"type": "string"}},
				domain.ExportContentType:       map[string]any{"schema": map[string]any{}},
			}}
		out["302"] = map[string]any{"description": "format=zip where the blob store serves the archive itself: a short-lived presigned URL in Location."}
	case ops.SchemaList:
		out["200"] = jsonOK("The names of the published JSON Schemas.", map[string]any{"allOf": []any{ref("envelope.success"),
			map[string]any{"type": "object", "properties": map[string]any{"data": map[string]any{"type": "object", "required": []any{"version", "names"},
				"properties": map[string]any{"version": map[string]any{"type": "string"}, "names": map[string]any{"type": "array", "items": map[string]any{"type": "string"}}}}}}}})
	case ops.SchemaGet:
		out["200"] = map[string]any{"description": "The JSON Schema (draft 2020-12) document.",
			"content": map[string]any{"application/schema+json": map[string]any{"schema": map[string]any{"type": "object"}}}}
	case ops.OpenAPI:
		out["200"] = map[string]any{"description": "This document.",
			"content": map[string]any{"application/json": map[string]any{"schema": map[string]any{"type": "object"}}}}
	default:
		out["200"] = jsonOK("Success: the envelope with the operation's result in data.", envelope(o.Response))
	}
	byStatus := map[int][]string{}
	for _, c := range ErrorCodes(o) {
		byStatus[c.HTTPStatus()] = append(byStatus[c.HTTPStatus()], string(c))
	}
	for status, codes := range byStatus {
		slices.Sort(codes)
		codeList := make([]any, len(codes))
		for i, c := range codes {
			codeList[i] = c
		}
		r := jsonOK(http.StatusText(status)+": "+strings.Join(codes, ", ")+".", map[string]any{"allOf": []any{ref("envelope.error"),
			map[string]any{"type": "object", "properties": map[string]any{"error": map[string]any{"type": "object",
				"properties": map[string]any{"code": map[string]any{"enum": codeList}}}}}}})
		switch status {
		case http.StatusUnauthorized:
			r["headers"] = map[string]any{"WWW-Authenticate": map[string]any{"description": `Bearer realm="waypost"`, "schema": map[string]any{"type": "string"}}}
		case http.StatusTooManyRequests, http.StatusServiceUnavailable:
			r["headers"] = map[string]any{"Retry-After": map[string]any{"description": "Seconds to wait before retrying.", "schema": map[string]any{"type": "string"}}}
		}
		out[fmt.Sprint(status)] = r
	}
	return out
}

// ErrorCodes returns the error codes o can answer with, in the order of domain.AllCodes: those every route
// can (INTERNAL, STORAGE_UNAVAILABLE, RATE_LIMITED from the in-flight bound, NOT_FOUND, INVALID_REQUEST),
// those of its credential, of a body, of a write with a request_id, and the operation's own (ops.Op.Errors).
func ErrorCodes(o *ops.Op) []domain.Code {
	set := map[domain.Code]bool{domain.CodeInternal: true, domain.CodeStorageUnavailable: true, domain.CodeRateLimited: true,
		domain.CodeNotFound: true, domain.CodeInvalidRequest: true}
	if o.Plane != ops.Public {
		set[domain.CodeUnauthenticated] = true
	}
	if o.Plane == ops.Data {
		set[domain.CodeForbidden] = true
	}
	if o.HasBody() || o.Name == ops.Upload {
		set[domain.CodePayloadTooLarge] = true
	}
	if o.HasBody() || o.Args != "" || o.Name == ops.Upload {
		set[domain.CodeResourceLimit] = true // a schema bound that stands for a published limit, or a quota
	}
	if o.Submission || o.Plane == ops.Admin && o.HasBody() {
		set[domain.CodeIdempotencyConflict] = true
	}
	if o.Submission {
		set[domain.CodeSubmissionPending] = true
	}
	for _, c := range o.Errors {
		set[c] = true
	}
	var out []domain.Code
	for _, c := range domain.AllCodes() {
		if set[c] {
			out = append(out, c)
		}
	}
	return out
}
