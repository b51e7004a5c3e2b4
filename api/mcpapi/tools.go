package mcpapi

import (
	"encoding/json"
	"fmt"

	"github.com/waypost/waypost/api/ops"
	"github.com/waypost/waypost/schemas"
)

// tools returns the operations offered as MCP tools (ops.Op.Tool; SUPPLEMENT §11.1): those of a live feed
// only where the deployment has one.
func (h *Handler) tools() []*ops.Op {
	var ts []*ops.Op
	for _, o := range h.ops.List() {
		if o.Tool != nil && (!o.Tool.LiveFeed || h.svc.Capabilities().LiveFeed) {
			ts = append(ts, o)
		}
	}
	return ts
}

// outputSchema describes a tool's structured content: the RFC §5.2 envelope, either ok with data of the
// named response schema, or an error (isError). It is standalone and portable like the input schemas.
func outputSchema(reg *schemas.Registry, data string) (json.RawMessage, error) {
	part := func(name string) (map[string]any, error) {
		raw, err := reg.Bundled(name)
		if err != nil {
			return nil, err
		}
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, fmt.Errorf("decoding %s: %w", name, err)
		}
		delete(m, "$schema")
		return m, nil
	}
	ok, err := part("envelope.success")
	if err != nil {
		return nil, err
	}
	fail, err := part("envelope.error")
	if err != nil {
		return nil, err
	}
	d, err := part(data)
	if err != nil {
		return nil, err
	}
	props, isMap := ok["properties"].(map[string]any)
	if !isMap {
		return nil, fmt.Errorf("envelope.success has no properties")
	}
	props["data"] = d
	raw, err := json.Marshal(map[string]any{
		"type":        "object",
		"description": "The RFC-0001 §5.2 result envelope: ok with data, or (isError) ok false with error.",
		"anyOf":       []any{ok, fail},
	})
	if err != nil {
		return nil, err
	}
	return schemas.Portable(raw)
}
