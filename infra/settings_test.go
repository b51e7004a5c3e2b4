package main

import (
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
	if s != DefaultSettings() || s.Stage != "dev" || s.LogRetentionDays != 30 || !s.DeletionProtection {
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
	} {
		if _, err := SettingsFromContext(ctx(c.ctx)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want one naming %s", c.ctx, err, c.want)
		}
	}
}
