package main

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// Helpers that read the synthesized template as plain JSON.

// resource is one resource of the template.
type resource struct {
	ID    string
	Type  string
	Props map[string]any
	Raw   map[string]any
}

// resourcesOf returns the resources of type typ, ordered by logical ID.
func (sy synthesized) resourcesOf(typ string) []resource {
	var out []resource
	for id, v := range sy.json["Resources"].(map[string]any) {
		r := v.(map[string]any)
		if r["Type"] != typ {
			continue
		}
		props, _ := r["Properties"].(map[string]any)
		out = append(out, resource{ID: id, Type: typ, Props: props, Raw: r})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// resourceByID returns the resource with logical ID id.
func (sy synthesized) resourceByID(t *testing.T, id string) resource {
	t.Helper()
	v, ok := sy.json["Resources"].(map[string]any)[id]
	if !ok {
		t.Fatalf("no resource %s", id)
	}
	r := v.(map[string]any)
	props, _ := r["Properties"].(map[string]any)
	return resource{ID: id, Type: r["Type"].(string), Props: props, Raw: r}
}

// logicalID is the logical ID of construct's default CloudFormation resource.
func (sy synthesized) logicalID(c constructs.IConstruct) string {
	return *sy.stack.Stack.GetLogicalId(c.Node().DefaultChild().(awscdk.CfnElement))
}

// flatten renders a template value as a string: literals as they are, {"Ref": X} as <X>,
// {"Fn::GetAtt": [X, A]} as <X.A>, Fn::Join as the joined parts, Fn::Sub as its template; anything else
// as JSON. It is what cdk-nag prints for IAM findings.
func flatten(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case map[string]any:
		if ref, ok := x["Ref"]; ok {
			return "<" + fmt.Sprint(ref) + ">"
		}
		if ga, ok := x["Fn::GetAtt"].([]any); ok && len(ga) == 2 {
			return fmt.Sprintf("<%v.%v>", ga[0], ga[1])
		}
		if j, ok := x["Fn::Join"].([]any); ok && len(j) == 2 {
			parts, _ := j[1].([]any)
			ss := make([]string, len(parts))
			for i, p := range parts {
				ss[i] = flatten(p)
			}
			return strings.Join(ss, fmt.Sprint(j[0]))
		}
		if sub, ok := x["Fn::Sub"].(string); ok {
			return sub
		}
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// refTo returns the logical ID a {"Ref": X} or {"Fn::GetAtt": [X, …]} value points at ("" otherwise).
func refTo(v any) string {
	m, ok := v.(map[string]any)
	if !ok {
		return ""
	}
	if ref, ok := m["Ref"].(string); ok {
		return ref
	}
	if ga, ok := m["Fn::GetAtt"].([]any); ok && len(ga) == 2 {
		return fmt.Sprint(ga[0])
	}
	return ""
}

// list returns v as a slice (a lone value becomes a one-element slice).
func list(v any) []any {
	if l, ok := v.([]any); ok {
		return l
	}
	if v == nil {
		return nil
	}
	return []any{v}
}

// get walks a path of map keys.
func get(v any, path ...string) any {
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

// like matches an object that has at least the given keys (nested literal objects match exactly).
func like(m map[string]any) assertions.Matcher { return assertions.Match_ObjectLike(&m) }

// The assertions package panics on a mismatch; these helpers report it as a test error instead, so one
// failed expectation does not end the run.

func hasProps(t *testing.T, sy synthesized, typ string, props map[string]any) {
	t.Helper()
	noPanic(t, func() { sy.template.HasResourceProperties(jsii.String(typ), props) })
}

func countIs(t *testing.T, sy synthesized, typ string, n int) {
	t.Helper()
	noPanic(t, func() { sy.template.ResourceCountIs(jsii.String(typ), jsii.Number(float64(n))) })
}

func hasOutput(t *testing.T, sy synthesized, name string, props map[string]any) {
	t.Helper()
	noPanic(t, func() { sy.template.HasOutput(jsii.String(name), props) })
}

func noPanic(t *testing.T, f func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%v", r)
		}
	}()
	f()
}
