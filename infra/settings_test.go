package main

import (
	"reflect"
	"strings"
	"testing"
)

func TestSettingsFromContext(t *testing.T) {
	ctx := func(m map[string]any) func(string) any {
		return func(k string) any { return m[k] }
	}
	s, err := SettingsFromContext(ctx(nil))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s, DefaultSettings()) || s.Stage != "dev" || s.LogRetentionDays != 30 || !s.DeletionProtection {
		t.Errorf("defaults: %+v", s)
	}
	// -c values arrive as strings, cdk.json values as JSON numbers and booleans.
	for _, m := range []map[string]any{
		{"stage": "prod", "logRetentionDays": "90", "deletionProtection": "false"},
		{"stage": "prod", "logRetentionDays": float64(90), "deletionProtection": false},
	} {
		s, err := SettingsFromContext(ctx(m))
		if err != nil {
			t.Fatal(err)
		}
		if s.Stage != "prod" || s.LogRetentionDays != 90 || s.DeletionProtection {
			t.Errorf("%v → %+v", m, s)
		}
	}
	for _, c := range []struct {
		ctx  map[string]any
		want string
	}{
		{map[string]any{"stage": "my stage"}, "stage"},
		{map[string]any{"stage": ""}, "stage"},
		{map[string]any{"logRetentionDays": "31"}, "logRetentionDays"},
		{map[string]any{"logRetentionDays": "a month"}, "logRetentionDays"},
		{map[string]any{"deletionProtection": "maybe"}, "deletionProtection"},
		{map[string]any{"domainName": "waypost.example.com"}, "certificateArn"},
		{map[string]any{"certificateArn": "arn:aws:acm:us-east-1:111111111111:certificate/x"}, "domainName"},
		{map[string]any{"throttleRateLimit": "fast"}, "throttleRateLimit"},
		{map[string]any{"throttleBurstLimit": "0"}, "throttleBurstLimit"},
		{map[string]any{"reservedConcurrency": "mailbox=many"}, "reservedConcurrency"},
		{map[string]any{"reservedConcurrency": "billing=3"}, "reservedConcurrency"},
		{map[string]any{"mcpWaitsPerSpace": "-1"}, "mcpWaitsPerSpace"},
		{map[string]any{"mcpWaitsPerSpace": "20"}, "mcpWaitsPerSpace"}, // as many as the MCP function's 20 reserved
		{map[string]any{"availabilityZoneIds": "us-east-1a,us-east-1b"}, "availabilityZoneIds"},
		{map[string]any{"availabilityZoneIds": "use1-az1"}, "availabilityZoneIds"},
	} {
		if _, err := SettingsFromContext(ctx(c.ctx)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want one naming %s", c.ctx, err, c.want)
		}
	}

	// Edge settings from context: strings from -c, JSON from cdk.json.
	for _, m := range []map[string]any{
		{"throttleRateLimit": "25.5", "throttleBurstLimit": "50", "reservedConcurrency": "mcp=4,sweeper=0", "mcpWaitsPerSpace": "3", "availabilityZoneIds": "euw1-az1, euw1-az3"},
		{"throttleRateLimit": 25.5, "throttleBurstLimit": float64(50), "reservedConcurrency": map[string]any{"mcp": float64(4), "sweeper": float64(0)}, "mcpWaitsPerSpace": float64(3), "availabilityZoneIds": "euw1-az1,euw1-az3"},
	} {
		s, err := SettingsFromContext(ctx(m))
		if err != nil {
			t.Fatalf("%v: %v", m, err)
		}
		want := DefaultReservedConcurrency()
		want[FnMCP] = 4
		delete(want, FnSweeper)
		if s.ThrottleRateLimit != 25.5 || s.ThrottleBurstLimit != 50 || !reflect.DeepEqual(s.ReservedConcurrency, want) || s.MCPWaitsPerSpace != 3 ||
			!reflect.DeepEqual(s.AvailabilityZoneIDs, []string{"euw1-az1", "euw1-az3"}) {
			t.Errorf("%v → %+v", m, s)
		}
	}
	if s, err := SettingsFromContext(ctx(map[string]any{"reservedConcurrency": "off"})); err != nil || len(s.ReservedConcurrency) != 0 {
		t.Errorf("reservedConcurrency=off: %v %v", s.ReservedConcurrency, err)
	}
}
