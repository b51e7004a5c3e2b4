package schemas

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Bundled returns the named schema with every $ref to this schema set inlined, so that it stands alone
// (MCP clients receive tool input schemas without a way to fetch referenced documents). $id is dropped;
// $schema is kept.
func (r *Registry) Bundled(name string) (json.RawMessage, error) {
	raw, ok := r.Raw(name)
	if !ok {
		return nil, fmt.Errorf("schemas: bundle %q: %w", name, ErrUnknownSchema)
	}
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("schemas: bundle %q: %w", name, err)
	}
	out, err := r.inline(name, doc, 0)
	if err != nil {
		return nil, fmt.Errorf("schemas: bundle %q: %w", name, err)
	}
	if m, ok := out.(map[string]any); ok {
		delete(m, "$id")
		delete(m, "$defs")
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("schemas: bundle %q: %w", name, err)
	}
	return b, nil
}

// inline replaces $ref objects by (inlined copies of) their targets; doc is the document the node belongs
// to, for local "#/…" references.
func (r *Registry) inline(doc string, node any, depth int) (any, error) {
	if depth > 32 {
		return nil, fmt.Errorf("references nest deeper than 32")
	}
	switch n := node.(type) {
	case map[string]any:
		// A $ref object becomes its target; with other members, those (inlined) and allOf: [target].
		ref, isRef := n["$ref"].(string)
		var resolved any
		if isRef {
			target, targetDoc, err := r.resolve(doc, ref)
			if err != nil {
				return nil, err
			}
			resolved, err = r.inline(targetDoc, target, depth+1)
			if err != nil {
				return nil, err
			}
			if m, ok := resolved.(map[string]any); ok { // an inlined document is no longer a resource
				delete(m, "$id")
				delete(m, "$schema")
				delete(m, "$defs")
			}
			if len(n) == 1 {
				return resolved, nil
			}
		}
		out := make(map[string]any, len(n))
		for k, v := range n {
			if isRef && k == "$ref" {
				continue
			}
			iv, err := r.inline(doc, v, depth)
			if err != nil {
				return nil, err
			}
			out[k] = iv
		}
		if isRef {
			out["allOf"] = []any{resolved}
		}
		return out, nil
	case []any:
		out := make([]any, len(n))
		for i, v := range n {
			iv, err := r.inline(doc, v, depth)
			if err != nil {
				return nil, err
			}
			out[i] = iv
		}
		return out, nil
	default:
		return node, nil
	}
}

// resolve finds the target of ref, relative to document doc.
func (r *Registry) resolve(doc, ref string) (any, string, error) {
	base, frag, _ := strings.Cut(ref, "#")
	target := doc
	if base != "" {
		if !strings.HasPrefix(base, BaseURI) || !strings.HasSuffix(base, ".json") {
			return nil, "", fmt.Errorf("reference %q is outside this schema set", ref)
		}
		target = strings.TrimSuffix(strings.TrimPrefix(base, BaseURI), ".json")
	}
	raw, ok := r.Raw(target)
	if !ok {
		return nil, "", fmt.Errorf("reference %q: unknown schema %q", ref, target)
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, "", err
	}
	for _, tok := range strings.Split(strings.TrimPrefix(frag, "/"), "/") {
		if tok == "" {
			continue
		}
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := v.(map[string]any)
		if !ok {
			return nil, "", fmt.Errorf("reference %q does not resolve", ref)
		}
		if v, ok = m[tok]; !ok {
			return nil, "", fmt.Errorf("reference %q does not resolve", ref)
		}
	}
	return v, target, nil
}

// Portable rewrites a schema document into a form more clients understand: every "type" array (such as
// ["string","null"], which several MCP hosts reject) becomes an anyOf of one single-type schema per entry,
// each carrying the sibling constraint keywords (a keyword for another type is ignored for that entry). Descriptions and titles stay where they
// are. The result accepts exactly the same instances.
func Portable(raw json.RawMessage) (json.RawMessage, error) {
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("schemas: portable: %w", err)
	}
	out, err := json.Marshal(portable(doc))
	if err != nil {
		return nil, fmt.Errorf("schemas: portable: %w", err)
	}
	return out, nil
}

// annotations are the keywords that describe a schema rather than constrain it; they stay on the outer
// schema when a type array is split.
var annotations = map[string]bool{"title": true, "description": true, "default": true, "examples": true,
	"deprecated": true, "readOnly": true, "writeOnly": true, "$comment": true, "$schema": true, "$id": true}

func portable(node any) any {
	switch n := node.(type) {
	case map[string]any:
		m := make(map[string]any, len(n))
		for k, v := range n {
			m[k] = portable(v)
		}
		types, ok := m["type"].([]any)
		if !ok {
			return m
		}
		outer := map[string]any{}
		constraints := map[string]any{}
		for k, v := range m {
			switch {
			case k == "type":
			case annotations[k]:
				outer[k] = v
			default:
				constraints[k] = v
			}
		}
		branches := make([]any, 0, len(types))
		for _, t := range types {
			b := map[string]any{"type": t}
			for k, v := range constraints { // keywords of another type are ignored for this one
				b[k] = v
			}
			branches = append(branches, b)
		}
		if len(branches) == 1 {
			for k, v := range branches[0].(map[string]any) {
				outer[k] = v
			}
			return outer
		}
		outer["anyOf"] = branches
		return outer
	case []any:
		out := make([]any, len(n))
		for i, v := range n {
			out[i] = portable(v)
		}
		return out
	default:
		return node
	}
}
