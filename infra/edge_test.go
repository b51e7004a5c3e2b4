package main

import (
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Synthesis assertions of issue 17: edge protection, alarms, the MCP wait cap and the subnets' zones.

// checkThrottling: the $default stage throttles every route at the settings' rate and burst.
func checkThrottling(t *testing.T, sy synthesized, s Settings) {
	t.Helper()
	stages := sy.resourcesOf("AWS::ApiGatewayV2::Stage")
	if len(stages) != 1 {
		t.Fatalf("%d stages", len(stages))
	}
	st := stages[0].Props
	if st["StageName"] != "$default" || get(st, "DefaultRouteSettings", "ThrottlingRateLimit") != s.ThrottleRateLimit ||
		get(st, "DefaultRouteSettings", "ThrottlingBurstLimit") != float64(s.ThrottleBurstLimit) {
		t.Errorf("stage throttling %v, want rate %v burst %d", get(st, "DefaultRouteSettings"), s.ThrottleRateLimit, s.ThrottleBurstLimit)
	}
}

// checkReserved: each function has exactly the reserved concurrency of want (none when absent).
func checkReserved(t *testing.T, sy synthesized, want map[string]int) {
	t.Helper()
	for _, name := range Functions() {
		got := sy.resourceByID(t, sy.logicalID(sy.stack.Functions[name])).Props["ReservedConcurrentExecutions"]
		n, ok := want[name]
		switch {
		case ok && got != float64(n):
			t.Errorf("%s: reserved concurrency %v, want %d", name, got, n)
		case !ok && got != nil:
			t.Errorf("%s: reserved concurrency %v, want none", name, got)
		}
	}
}

// checkServiceAlarms: an alarm on each failure that matters, every one notifying the one alarm topic.
func checkServiceAlarms(t *testing.T, sy synthesized) {
	t.Helper()
	topics := sy.resourcesOf("AWS::SNS::Topic")
	if len(topics) != 1 {
		t.Fatalf("%d SNS topics, want one alarm topic", len(topics))
	}
	topic := topics[0].ID
	api := sy.resourcesOf("AWS::ApiGatewayV2::Api")[0].ID
	table := sy.resourcesOf("AWS::DynamoDB::Table")[0].ID
	dispatcher := sy.logicalID(sy.stack.Functions[FnDispatcher])
	service := sy.resourcesOf("AWS::ECS::Service")[0]
	var deliveryQueue string
	for _, q := range sy.resourcesOf("AWS::SQS::Queue") {
		if q.Props["RedrivePolicy"] != nil && strings.HasPrefix(q.ID, "DeliveryQueue") { // the stream-failure queue has a DLQ too
			deliveryQueue = q.ID
		}
	}
	type metric struct{ namespace, name, stat string }
	// metricsOf lists an alarm's metrics (one, or the members of a math expression) with their dimension values.
	metricsOf := func(a resource) map[metric][]string {
		out := map[metric][]string{}
		addOne := func(ns, name, stat any, dims any) {
			var vals []string
			for _, d := range list(dims) {
				vals = append(vals, flatten(get(d, "Value")))
			}
			out[metric{flatten(ns), flatten(name), flatten(stat)}] = vals
		}
		if a.Props["MetricName"] != nil {
			addOne(a.Props["Namespace"], a.Props["MetricName"], a.Props["Statistic"], a.Props["Dimensions"])
		}
		for _, m := range list(a.Props["Metrics"]) {
			if ms := get(m, "MetricStat"); ms != nil {
				addOne(get(ms, "Metric", "Namespace"), get(ms, "Metric", "MetricName"), get(ms, "Stat"), get(ms, "Metric", "Dimensions"))
			}
		}
		return out
	}
	find := func(what string, match func(m metric, dims []string) bool) resource {
		t.Helper()
		for _, a := range sy.resourcesOf("AWS::CloudWatch::Alarm") {
			for m, dims := range metricsOf(a) {
				if match(m, dims) {
					return a
				}
			}
		}
		t.Errorf("no alarm on %s", what)
		return resource{}
	}
	refs := func(dims []string, id string) bool {
		return slices.ContainsFunc(dims, func(d string) bool { return strings.Contains(d, "<"+id+">") || strings.Contains(d, "<"+id+".") })
	}
	checks := []struct {
		what, op string
		alarm    resource
	}{
		{"API 5xx", "GreaterThanThreshold", find("API 5xx", func(m metric, d []string) bool {
			return m.namespace == "AWS/ApiGateway" && m.name == "5xx" && refs(d, api)
		})},
		{"DynamoDB throttles", "GreaterThanThreshold", find("DynamoDB throttles", func(m metric, d []string) bool {
			return m.namespace == "AWS/DynamoDB" && m.name == "WriteThrottleEvents" && refs(d, table)
		})},
		{"DynamoDB transaction conflicts", "GreaterThanThreshold", find("DynamoDB transaction conflicts", func(m metric, d []string) bool {
			return m.namespace == "AWS/DynamoDB" && m.name == "TransactionConflict" && refs(d, table)
		})},
		{"stream iterator age", "GreaterThanThreshold", find("stream iterator age", func(m metric, d []string) bool {
			return m.namespace == "AWS/Lambda" && m.name == "IteratorAge" && m.stat == "Maximum" && refs(d, dispatcher)
		})},
		{"channel service running tasks", "LessThanThreshold", find("channel service running tasks", func(m metric, d []string) bool {
			return m.namespace == "AWS/ECS" && m.name == "CPUUtilization" && m.stat == "SampleCount" && refs(d, service.ID)
		})},
		{"age of the oldest delivery message", "GreaterThanThreshold", find("age of the oldest delivery message", func(m metric, d []string) bool {
			return m.namespace == "AWS/SQS" && m.name == "ApproximateAgeOfOldestMessage" && refs(d, deliveryQueue)
		})},
	}
	for _, c := range checks {
		if c.alarm.ID == "" {
			continue
		}
		if c.alarm.Props["ComparisonOperator"] != c.op {
			t.Errorf("%s alarm %s: %v", c.what, c.alarm.ID, c.alarm.Props["ComparisonOperator"])
		}
		if acts := list(c.alarm.Props["AlarmActions"]); len(acts) != 1 || refTo(acts[0]) != topic {
			t.Errorf("%s alarm %s notifies %v, want the alarm topic %s", c.what, c.alarm.ID, acts, topic)
		}
	}
	// The running-task alarm fires when ECS reports nothing at all.
	for _, c := range checks {
		if c.what == "channel service running tasks" && c.alarm.ID != "" && c.alarm.Props["TreatMissingData"] != "breaching" {
			t.Errorf("running-task alarm treats missing data as %v", c.alarm.Props["TreatMissingData"])
		}
	}
	// Every alarm of the stack notifies that one topic.
	for _, a := range sy.resourcesOf("AWS::CloudWatch::Alarm") {
		for _, act := range list(a.Props["AlarmActions"]) {
			if refTo(act) != topic {
				t.Errorf("alarm %s notifies %s", a.ID, flatten(act))
			}
		}
	}
}

// checkNoDefaultRoute: no $default route, so API Gateway answers unmatched paths with 404 itself and no
// function is invoked for them; every route is one of Routes().
func checkNoDefaultRoute(t *testing.T, sy synthesized) {
	t.Helper()
	for _, r := range sy.resourcesOf("AWS::ApiGatewayV2::Route") {
		if r.Props["RouteKey"] == "$default" {
			t.Errorf("route %s is $default: unmatched paths would invoke %s", r.ID, flatten(r.Props["Target"]))
		}
	}
	if n := len(sy.resourcesOf("AWS::ApiGatewayV2::Route")); n != len(Routes()) {
		t.Errorf("%d routes, want the %d of Routes()", n, len(Routes()))
	}
}

// checkMCPWaitCap: the MCP function, and only it, gets the per-space cap on concurrent waits.
func checkMCPWaitCap(t *testing.T, sy synthesized, want int) {
	t.Helper()
	for _, name := range Functions() {
		v := get(sy.resourceByID(t, sy.logicalID(sy.stack.Functions[name])).Props, "Environment", "Variables", envMCPWaitsPerSpace)
		switch {
		case name == FnMCP && v != strconv.Itoa(want):
			t.Errorf("mcp: %s = %v, want %d", envMCPWaitsPerSpace, v, want)
		case name != FnMCP && v != nil:
			t.Errorf("%s: %s is set", name, envMCPWaitsPerSpace)
		}
	}
}

// checkAZs: both public subnets are placed by AZ ID (never by account-specific AZ name): ids when given,
// else the region's entry of the VPC-link mapping.
func checkAZs(t *testing.T, sy synthesized, ids []string) {
	t.Helper()
	subnets := sy.resourcesOf("AWS::EC2::Subnet")
	if len(subnets) != 2 {
		t.Fatalf("%d subnets", len(subnets))
	}
	var got []string
	for _, sn := range subnets {
		if sn.Props["AvailabilityZone"] != nil {
			t.Errorf("subnet %s placed by AZ name %v", sn.ID, flatten(sn.Props["AvailabilityZone"]))
		}
		got = append(got, flatten(sn.Props["AvailabilityZoneId"]))
	}
	slices.Sort(got)
	if ids != nil {
		if want := slices.Sorted(slices.Values(ids)); !slices.Equal(got, want) {
			t.Errorf("subnet AZ IDs %v, want %v", got, want)
		}
		if sy.json["Mappings"] != nil && get(sy.json, "Mappings", vpcLinkAZMapping) != nil {
			t.Errorf("the default mapping is there although the AZ IDs were given")
		}
		return
	}
	for i, g := range got {
		if !strings.Contains(g, "Fn::FindInMap") || !strings.Contains(g, vpcLinkAZMapping) || !strings.Contains(g, "AWS::Region") ||
			!strings.Contains(g, "az"+strconv.Itoa(i)) {
			t.Errorf("subnet %d AZ ID %s, want the region's entry of %s", i, g, vpcLinkAZMapping)
		}
	}
	m, _ := get(sy.json, "Mappings", vpcLinkAZMapping).(map[string]any)
	for region, az := range DefaultVPCLinkAZIDs() {
		if get(m, region, "az0") != az[0] || get(m, region, "az1") != az[1] {
			t.Errorf("mapping for %s: %v, want %v", region, get(m, region), az)
		}
	}
}

// checkExportsLifecycle: ZIP export objects expire after a day, and only the memory function writes them.
func checkExportsLifecycle(t *testing.T, sy synthesized) {
	t.Helper()
	found := false
	for _, r := range list(get(sy.resourcesOf("AWS::S3::Bucket")[0].Props, "LifecycleConfiguration", "Rules")) {
		if get(r, "Prefix") == exportsPrefix && get(r, "ExpirationInDays") == float64(1) && get(r, "Status") == "Enabled" {
			found = true
		}
	}
	if !found {
		t.Errorf("no rule expiring %s after a day", exportsPrefix)
	}
	for _, name := range Functions() {
		role := refTo(sy.resourceByID(t, sy.logicalID(sy.stack.Functions[name])).Props["Role"])
		for _, p := range sy.resourcesOf("AWS::IAM::Policy") {
			for _, r := range list(p.Props["Roles"]) {
				if refTo(r) == role && strings.Contains(flatten(p.Props["PolicyDocument"]), "/"+exportsPrefix+"*") && name != FnMemory {
					t.Errorf("%s may write export objects", name)
				}
			}
		}
	}
}
