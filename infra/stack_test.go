package main

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/waypost/waypost/store/dynamo"
)

// TestStack synthesizes the default stack once (with the cdk-nag aspect, as `cdk synth` does) and checks
// the template: what issue 8 asks the deployment to be.
func TestStack(t *testing.T) {
	sy := synth(t, testSettings(t))

	t.Run("EveryRouteIntegrated", func(t *testing.T) { checkRoutes(t, sy) })
	t.Run("FunctionsArm64OwnRole", func(t *testing.T) { checkFunctions(t, sy, 30) })
	t.Run("NoWildcardBeyondAllowlist", func(t *testing.T) { checkWildcards(t, sy) })
	t.Run("Bucket", func(t *testing.T) { checkBucket(t, sy) })
	t.Run("Table", func(t *testing.T) { checkTable(t, sy, true) })
	t.Run("QueuesAndEventSources", func(t *testing.T) { checkQueues(t, sy) })
	t.Run("ChannelServiceWithoutNAT", func(t *testing.T) { checkNetwork(t, sy) })
	t.Run("ChannelTaskTableAccess", func(t *testing.T) { checkChannelTable(t, sy) })
	t.Run("FunctionsMayCallTheStore", func(t *testing.T) { checkStoreCalls(t, sy) })
	t.Run("Schedules", func(t *testing.T) {
		for fn, rate := range map[string]string{FnSweeper: "rate(15 minutes)", FnDeliverer: "rate(5 minutes)"} {
			hasProps(t, sy, "AWS::Events::Rule", map[string]any{
				"ScheduleExpression": rate,
				"Targets":            []any{like(map[string]any{"Arn": map[string]any{"Fn::GetAtt": []any{sy.logicalID(sy.stack.Functions[fn]), "Arn"}}})},
			})
		}
	})
	t.Run("Secrets", func(t *testing.T) {
		countIs(t, sy, "AWS::SecretsManager::Secret", 3)
		for _, r := range sy.resourcesOf("AWS::SecretsManager::Secret") {
			if get(r.Props, "GenerateSecretString") == nil {
				t.Errorf("secret %s is not generated", r.ID)
			}
		}
	})
	t.Run("Alarms", func(t *testing.T) { checkAlarms(t, sy) })
	t.Run("Outputs", func(t *testing.T) {
		for _, name := range []string{"ApiUrl", "McpUrl", "AdminSecretArn"} {
			hasOutput(t, sy, name, map[string]any{})
		}
		if got := flatten(get(sy.json, "Outputs", "McpUrl", "Value")); !strings.HasSuffix(got, "/mcp") {
			t.Errorf("McpUrl = %s", got)
		}
	})
	t.Run("CdkNagAwsSolutions", func(t *testing.T) { checkNag(t, sy) })
	t.Run("StageThrottling", func(t *testing.T) { checkThrottling(t, sy, DefaultSettings()) })
	t.Run("ReservedConcurrency", func(t *testing.T) { checkReserved(t, sy, DefaultReservedConcurrency()) })
	t.Run("ServiceAlarmsOnOneTopic", func(t *testing.T) { checkServiceAlarms(t, sy) })
	t.Run("UnmatchedPathsInvokeNoFunction", func(t *testing.T) { checkNoDefaultRoute(t, sy) })
	t.Run("MCPWaitCap", func(t *testing.T) { checkMCPWaitCap(t, sy, DefaultSettings().MCPWaitsPerSpace) })
	t.Run("VPCLinkAvailabilityZones", func(t *testing.T) { checkAZs(t, sy, nil) })
	t.Run("ExportsExpire", func(t *testing.T) { checkExportsLifecycle(t, sy) })
	t.Run("FunctionEnvironmentMatchesConfig", func(t *testing.T) { checkEnvironment(t, sy) })
	t.Run("OperationsDashboard", func(t *testing.T) { checkDashboard(t, sy) })
}

// checkDashboard: one dashboard graphs the metrics the functions write in embedded metric format
// (internal/metrics: namespace Waypost; RequestLatency by operation, RequestErrors, CommitLatency,
// CommitOps, CommitConflicts and CommitErrors by function).
func checkDashboard(t *testing.T, sy synthesized) {
	countIs(t, sy, "AWS::CloudWatch::Dashboard", 1)
	body := flatten(sy.resourcesOf("AWS::CloudWatch::Dashboard")[0].Props["DashboardBody"])
	q := func(dims, metric string) string { return "{Waypost," + dims + "} MetricName=\\\"" + metric + "\\\"" }
	for _, want := range []string{q("Function,Operation", "RequestLatency"), q("Function", "RequestErrors"), q("Function", "CommitLatency"),
		q("Function", "CommitOps"), q("Function", "CommitConflicts"), q("Function", "CommitErrors"), "'p99'", "'SampleCount'"} {
		if !strings.Contains(body, want) {
			t.Errorf("the dashboard has no %s:\n%s", want, body)
		}
	}
}

// TestStackContext synthesizes a stage with every context parameter changed from its default.
func TestStackContext(t *testing.T) {
	s := testSettings(t)
	s.Stage = "prod"
	s.LogRetentionDays = 7
	s.DeletionProtection = false
	s.DomainName = "waypost.example.com"
	s.CertificateARN = "arn:aws:acm:us-east-1:111111111111:certificate/00000000-0000-0000-0000-000000000000"
	s.AlarmEmail = "ops@example.com"
	s.ThrottleRateLimit, s.ThrottleBurstLimit = 12.5, 40
	s.ReservedConcurrency = map[string]int{FnMCP: 6, FnSweeper: 1}
	s.MCPWaitsPerSpace = 4
	s.AvailabilityZoneIDs = []string{"euw1-az1", "euw1-az3"}
	sy := synth(t, s)
	checkThrottling(t, sy, s)
	checkReserved(t, sy, s.ReservedConcurrency)
	checkMCPWaitCap(t, sy, 4)
	checkAZs(t, sy, s.AvailabilityZoneIDs)
	checkServiceAlarms(t, sy)
	if got := *sy.stack.Stack.StackName(); got != "Waypost-prod" {
		t.Errorf("stack name %s", got)
	}
	checkTable(t, sy, false)
	checkFunctions(t, sy, 7)
	for _, typ := range []string{"AWS::S3::Bucket", "AWS::SecretsManager::Secret"} {
		for _, r := range sy.resourcesOf(typ) {
			if r.Raw["DeletionPolicy"] != "Delete" {
				t.Errorf("%s %s: DeletionPolicy %v without deletion protection", typ, r.ID, r.Raw["DeletionPolicy"])
			}
		}
	}
	hasProps(t, sy, "AWS::ApiGatewayV2::DomainName", map[string]any{
		"DomainName": "waypost.example.com",
		"DomainNameConfigurations": []any{like(map[string]any{
			"CertificateArn": s.CertificateARN, "EndpointType": "REGIONAL",
		})},
	})
	countIs(t, sy, "AWS::ApiGatewayV2::ApiMapping", 1)
	hasOutput(t, sy, "ApiUrl", map[string]any{"Value": "https://waypost.example.com"})
	hasOutput(t, sy, "McpUrl", map[string]any{"Value": "https://waypost.example.com/mcp"})
	hasProps(t, sy, "AWS::SNS::Subscription", map[string]any{
		"Protocol": "email", "Endpoint": "ops@example.com",
		"TopicArn": map[string]any{"Ref": sy.resourcesOf("AWS::SNS::Topic")[0].ID},
	})
	checkNag(t, sy)
}

// TestMissingBinary: the app refuses to synthesize without a function's bootstrap, naming the fix.
func TestMissingBinary(t *testing.T) {
	s := testSettings(t)
	s.FunctionsDir = t.TempDir()
	defer func() {
		r := recover()
		if r == nil || !strings.Contains(strings.ToLower(toString(r)), "scripts/build-functions") {
			t.Fatalf("NewStack without binaries: recovered %v", r)
		}
	}()
	NewStack(awscdk.NewApp(nil), "Waypost-missing", s, nil)
}

func toString(v any) string {
	if err, ok := v.(error); ok {
		return err.Error()
	}
	if s, ok := v.(string); ok {
		return s
	}
	return ""
}

func checkRoutes(t *testing.T, sy synthesized) {
	routes := map[string]resource{}
	for _, r := range sy.resourcesOf("AWS::ApiGatewayV2::Route") {
		key := r.Props["RouteKey"].(string)
		if _, dup := routes[key]; dup {
			t.Errorf("route %s twice", key)
		}
		routes[key] = r
	}
	permissions := sy.resourcesOf("AWS::Lambda::Permission")
	integrationOf := func(key string) resource {
		t.Helper()
		r, ok := routes[key]
		if !ok {
			t.Fatalf("route %s missing", key)
		}
		if got := flatten(r.Props["Target"]); !strings.HasPrefix(got, "integrations/<") {
			t.Fatalf("route %s: target %s", key, got)
		}
		target := r.Props["Target"].(map[string]any)["Fn::Join"].([]any)[1].([]any)[1]
		return sy.resourceByID(t, refTo(target))
	}
	checkLambda := func(key, fn, path string) {
		t.Helper()
		in := integrationOf(key)
		want := sy.logicalID(sy.stack.Functions[fn])
		if in.Props["IntegrationType"] != "AWS_PROXY" || refTo(in.Props["IntegrationUri"]) != want || in.Props["PayloadFormatVersion"] != "2.0" {
			t.Errorf("route %s: integration %v, want AWS_PROXY to %s with payload 2.0", key, in.Props, want)
		}
		// API Gateway may invoke the function for this route.
		found := false
		for _, p := range permissions {
			if refTo(p.Props["FunctionName"]) == want && p.Props["Principal"] == "apigateway.amazonaws.com" &&
				strings.HasSuffix(flatten(p.Props["SourceArn"]), "/*/*"+path) {
				found = true
			}
		}
		if !found {
			t.Errorf("route %s: no lambda:InvokeFunction permission for API Gateway on %s", key, fn)
		}
	}
	want := map[string]bool{}
	for _, r := range Routes() {
		want[r.Key()] = true
		if r.Target == TargetChannel {
			in := integrationOf(r.Key())
			if in.Props["IntegrationType"] != "HTTP_PROXY" || in.Props["ConnectionType"] != "VPC_LINK" ||
				sy.resourceByID(t, refTo(in.Props["ConnectionId"])).Type != "AWS::ApiGatewayV2::VpcLink" ||
				sy.resourceByID(t, refTo(in.Props["IntegrationUri"])).Type != "AWS::ServiceDiscovery::Service" {
				t.Errorf("route %s: integration %v, want HTTP_PROXY over the VPC link to the Cloud Map service", r.Key(), in.Props)
			}
			continue
		}
		checkLambda(r.Key(), r.Target, r.Path)
	}
	for key := range routes {
		if !want[key] {
			t.Errorf("route %s is not in Routes()", key)
		}
	}
	if len(routes) != len(want) {
		t.Errorf("%d routes, want %d", len(routes), len(want))
	}
}

func checkFunctions(t *testing.T, sy synthesized, retention float64) {
	fns := sy.resourcesOf("AWS::Lambda::Function")
	if len(fns) != len(Functions()) {
		t.Errorf("%d functions, want %d (no custom-resource functions)", len(fns), len(Functions()))
	}
	roleOwner := map[string]string{}
	for _, name := range Functions() {
		r := sy.resourceByID(t, sy.logicalID(sy.stack.Functions[name]))
		p := r.Props
		if a := list(p["Architectures"]); len(a) != 1 || a[0] != "arm64" {
			t.Errorf("%s: architectures %v", name, p["Architectures"])
		}
		if p["Runtime"] != "provided.al2023" || p["Handler"] != "bootstrap" {
			t.Errorf("%s: runtime %v handler %v", name, p["Runtime"], p["Handler"])
		}
		role := refTo(p["Role"])
		if role == "" {
			t.Errorf("%s: role %v", name, p["Role"])
			continue
		}
		if other, ok := roleOwner[role]; ok {
			t.Errorf("%s and %s share role %s", name, other, role)
		}
		roleOwner[role] = name
		rr := sy.resourceByID(t, role)
		if got := flatten(get(rr.Props, "AssumeRolePolicyDocument")); !strings.Contains(got, `"Service":"lambda.amazonaws.com"`) {
			t.Errorf("%s: role trust %s", name, got)
		}
		if rr.Props["ManagedPolicyArns"] != nil {
			t.Errorf("%s: role has managed policies %v", name, rr.Props["ManagedPolicyArns"])
		}
		lg := refTo(get(p, "LoggingConfig", "LogGroup"))
		if lg == "" {
			t.Errorf("%s: no log group of its own", name)
			continue
		}
		if got := sy.resourceByID(t, lg).Props["RetentionInDays"]; got != retention {
			t.Errorf("%s: log retention %v, want %v", name, got, retention)
		}
	}
	for _, r := range sy.resourcesOf("AWS::Logs::LogGroup") {
		if got := r.Props["RetentionInDays"]; got != retention {
			t.Errorf("log group %s: retention %v, want %v", r.ID, got, retention)
		}
	}
}

// wildcardAllowlist names every IAM wildcard the stack may contain, with why a service requires it. Each
// entry has a matching cdk-nag AwsSolutions-IAM5 suppression in nag.go.
func wildcardAllowlist() []wildcardException {
	return []wildcardException{
		{"s3-objects-under-spaces: object keys are generated at run time, all under spaces/ (domain/keys.go)",
			[]string{"s3:GetObject", "s3:PutObject", "s3:DeleteObject"}, regexp.MustCompile(`^<Bucket[0-9A-F]+\.Arn>/spaces/\*$`)},
		{"s3-objects-under-exports: ZIP export objects are named at run time, all under exports/ (domain/keys.go)",
			[]string{"s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload"}, regexp.MustCompile(`^<Bucket[0-9A-F]+\.Arn>/exports/\*$`)},
		{"dynamodb-liststreams: dynamodb:ListStreams has no resource-level permissions (DynamoDB event source)",
			[]string{"dynamodb:ListStreams"}, regexp.MustCompile(`^\*$`)},
		{"ecr-authorization-token: ecr:GetAuthorizationToken has no resource-level permissions (image pull)",
			[]string{"ecr:GetAuthorizationToken"}, regexp.MustCompile(`^\*$`)},
	}
}

// wildcardException is one allowed wildcard: these actions, on resources matching resource.
type wildcardException struct {
	name     string
	actions  []string
	resource *regexp.Regexp
}

func checkWildcards(t *testing.T, sy synthesized) {
	var docs []struct {
		where string
		doc   any
	}
	for _, r := range sy.resourcesOf("AWS::IAM::Policy") {
		docs = append(docs, struct {
			where string
			doc   any
		}{r.ID, r.Props["PolicyDocument"]})
	}
	for _, r := range sy.resourcesOf("AWS::IAM::ManagedPolicy") {
		docs = append(docs, struct {
			where string
			doc   any
		}{r.ID, r.Props["PolicyDocument"]})
	}
	for _, r := range sy.resourcesOf("AWS::IAM::Role") {
		for _, p := range list(r.Props["Policies"]) {
			docs = append(docs, struct {
				where string
				doc   any
			}{r.ID, get(p, "PolicyDocument")})
		}
		for _, m := range list(r.Props["ManagedPolicyArns"]) {
			t.Errorf("role %s: AWS managed policy %s", r.ID, flatten(m))
		}
	}
	used := map[string]bool{}
	for _, d := range docs {
		for _, st := range list(get(d.doc, "Statement")) {
			if get(st, "Effect") != "Allow" {
				continue
			}
			actions := list(get(st, "Action"))
			resources := list(get(st, "Resource"))
			if get(st, "NotAction") != nil || get(st, "NotResource") != nil {
				t.Errorf("%s: NotAction/NotResource in %v", d.where, st)
			}
			for _, a := range actions {
				if strings.Contains(flatten(a), "*") {
					t.Errorf("%s: wildcard action %s", d.where, flatten(a))
				}
			}
			for _, res := range resources {
				r := flatten(res)
				if !strings.Contains(r, "*") {
					continue
				}
				ok := false
				for _, al := range wildcardAllowlist() {
					if !al.resource.MatchString(r) {
						continue
					}
					all := true
					for _, a := range actions {
						all = all && slices.Contains(al.actions, flatten(a))
					}
					if all {
						ok = true
						used[al.name] = true
					}
				}
				if !ok {
					t.Errorf("%s: wildcard resource %s for %v is not in the allowlist", d.where, r, actions)
				}
			}
		}
	}
	for _, al := range wildcardAllowlist() {
		if !used[al.name] {
			t.Errorf("allowlist entry %q matches nothing: remove it", al.name)
		}
	}
}

func checkBucket(t *testing.T, sy synthesized) {
	countIs(t, sy, "AWS::S3::Bucket", 1)
	hasProps(t, sy, "AWS::S3::Bucket", map[string]any{
		"PublicAccessBlockConfiguration": map[string]any{
			"BlockPublicAcls": true, "BlockPublicPolicy": true, "IgnorePublicAcls": true, "RestrictPublicBuckets": true,
		},
		"BucketEncryption": map[string]any{"ServerSideEncryptionConfiguration": []any{
			map[string]any{"ServerSideEncryptionByDefault": map[string]any{"SSEAlgorithm": "AES256"}},
		}},
		"OwnershipControls": map[string]any{"Rules": []any{map[string]any{"ObjectOwnership": "BucketOwnerEnforced"}}},
		// Unsealed uploads have no prefix of their own (the sweeper deletes them): no blob expires; only ZIP
		// exports under exports/ do (checkExportsLifecycle).
		"LifecycleConfiguration": map[string]any{"Rules": []any{like(map[string]any{
			"AbortIncompleteMultipartUpload": map[string]any{"DaysAfterInitiation": 1},
			"Status":                         "Enabled",
			"ExpirationInDays":               assertions.Match_Absent(),
			"Prefix":                         assertions.Match_Absent(),
		}), like(map[string]any{"Prefix": exportsPrefix, "ExpirationInDays": 1}),
			// Versioning is the blobs' backup: noncurrent versions live as long as PITR reaches back.
			like(map[string]any{"NoncurrentVersionExpiration": map[string]any{"NoncurrentDays": backupRetentionDays},
				"ExpiredObjectDeleteMarker": true, "Prefix": assertions.Match_Absent()})}},
		"VersioningConfiguration": map[string]any{"Status": "Enabled"},
	})
	// TLS only: a deny on aws:SecureTransport false for the bucket and its objects.
	hasProps(t, sy, "AWS::S3::BucketPolicy", map[string]any{
		"PolicyDocument": like(map[string]any{"Statement": assertions.Match_ArrayWith(&[]any{like(map[string]any{
			"Effect": "Deny", "Action": "s3:*", "Principal": map[string]any{"AWS": "*"},
			"Condition": map[string]any{"Bool": map[string]any{"aws:SecureTransport": "false"}},
		})})}),
	})
}

func checkTable(t *testing.T, sy synthesized, protected bool) {
	tables := sy.resourcesOf("AWS::DynamoDB::Table")
	if len(tables) != 1 {
		t.Fatalf("%d tables", len(tables))
	}
	hasProps(t, sy, "AWS::DynamoDB::Table", map[string]any{
		"KeySchema": []any{
			map[string]any{"AttributeName": "pk", "KeyType": "HASH"},
			map[string]any{"AttributeName": "sk", "KeyType": "RANGE"},
		},
		"AttributeDefinitions": []any{
			map[string]any{"AttributeName": "pk", "AttributeType": "S"},
			map[string]any{"AttributeName": "sk", "AttributeType": "S"},
		},
		"BillingMode":                      "PAY_PER_REQUEST",
		"PointInTimeRecoverySpecification": like(map[string]any{"PointInTimeRecoveryEnabled": true}),
		"StreamSpecification":              map[string]any{"StreamViewType": "NEW_IMAGE"},
		"DeletionProtectionEnabled":        protected,
		"GlobalSecondaryIndexes":           assertions.Match_Absent(),
		// store/dynamo writes the expiry of time-limited items (delivered webhook markers) to "ttl".
		"TimeToLiveSpecification": map[string]any{"AttributeName": "ttl", "Enabled": true},
	})
	want := "Delete"
	if protected {
		want = "Retain"
	}
	if got := tables[0].Raw["DeletionPolicy"]; got != want {
		t.Errorf("table DeletionPolicy %v, want %s", got, want)
	}
}

func checkQueues(t *testing.T, sy synthesized) {
	fn := func(name string) string { return sy.logicalID(sy.stack.Functions[name]) }
	// Dispatcher on the stream: bisect on error, bounded retries and age, failures to a queue.
	var dispatcher, redrive, deliverer resource
	for _, m := range sy.resourcesOf("AWS::Lambda::EventSourceMapping") {
		switch refTo(m.Props["FunctionName"]) {
		case fn(FnDispatcher):
			if m.Props["StartingPosition"] != nil {
				dispatcher = m // the stream
			} else {
				redrive = m // the stream-failure queue
			}
		case fn(FnDeliverer):
			deliverer = m
		default:
			t.Errorf("unexpected event source mapping %s", m.ID)
		}
	}
	if dispatcher.ID == "" || redrive.ID == "" || deliverer.ID == "" {
		t.Fatalf("event source mappings: dispatcher %q, re-drive %q, deliverer %q", dispatcher.ID, redrive.ID, deliverer.ID)
	}
	d := dispatcher.Props
	if flatten(d["EventSourceArn"]) != "<"+sy.resourcesOf("AWS::DynamoDB::Table")[0].ID+".StreamArn>" {
		t.Errorf("dispatcher source %s", flatten(d["EventSourceArn"]))
	}
	if d["BisectBatchOnFunctionError"] != true {
		t.Error("dispatcher: no bisect on error")
	}
	if rt := list(d["FunctionResponseTypes"]); len(rt) != 1 || rt[0] != "ReportBatchItemFailures" {
		t.Errorf("dispatcher: response types %v", d["FunctionResponseTypes"])
	}
	if r, ok := d["MaximumRetryAttempts"].(float64); !ok || r < 0 || r > 10 {
		t.Errorf("dispatcher: retries %v, want bounded", d["MaximumRetryAttempts"])
	}
	if a, ok := d["MaximumRecordAgeInSeconds"].(float64); !ok || a <= 0 {
		t.Errorf("dispatcher: record age %v, want bounded", d["MaximumRecordAgeInSeconds"])
	}
	failures := sy.resourceByID(t, refTo(get(d, "DestinationConfig", "OnFailure", "Destination")))
	if failures.Type != "AWS::SQS::Queue" {
		t.Errorf("dispatcher failure destination is a %s", failures.Type)
	}
	// The dispatcher re-drives what lands there (one message at a time, partial batch responses); what it
	// cannot re-drive goes to a dead-letter queue.
	if refTo(redrive.Props["EventSourceArn"]) != failures.ID || redrive.Props["BatchSize"] != float64(1) {
		t.Errorf("re-drive mapping reads %s (batch %v), want the stream failure queue %s, batch 1",
			refTo(redrive.Props["EventSourceArn"]), redrive.Props["BatchSize"], failures.ID)
	}
	if rt := list(redrive.Props["FunctionResponseTypes"]); len(rt) != 1 || rt[0] != "ReportBatchItemFailures" {
		t.Errorf("re-drive: response types %v", redrive.Props["FunctionResponseTypes"])
	}
	if dlq := refTo(get(failures.Props, "RedrivePolicy", "deadLetterTargetArn")); dlq == "" || dlq == failures.ID {
		t.Errorf("stream failure queue redrive %v", failures.Props["RedrivePolicy"])
	}
	if vis, _ := failures.Props["VisibilityTimeout"].(float64); vis <= sy.resourceByID(t, fn(FnDispatcher)).Props["Timeout"].(float64) {
		t.Errorf("stream failure queue visibility %v s: must be longer than the dispatcher's timeout", vis)
	}
	// Deliverer on the delivery queue with partial batch responses; the queue has a DLQ.
	if rt := list(deliverer.Props["FunctionResponseTypes"]); len(rt) != 1 || rt[0] != "ReportBatchItemFailures" {
		t.Errorf("deliverer: response types %v", deliverer.Props["FunctionResponseTypes"])
	}
	queue := sy.resourceByID(t, refTo(deliverer.Props["EventSourceArn"]))
	dlq := refTo(get(queue.Props, "RedrivePolicy", "deadLetterTargetArn"))
	if dlq == "" || sy.resourceByID(t, dlq).Type != "AWS::SQS::Queue" || dlq == queue.ID {
		t.Errorf("delivery queue redrive %v", queue.Props["RedrivePolicy"])
	}
	if n, ok := get(queue.Props, "RedrivePolicy", "maxReceiveCount").(float64); !ok || n < 1 {
		t.Errorf("delivery queue maxReceiveCount %v", get(queue.Props, "RedrivePolicy", "maxReceiveCount"))
	}
	timeout := sy.resourceByID(t, fn(FnDeliverer)).Props["Timeout"].(float64)
	if vis, _ := queue.Props["VisibilityTimeout"].(float64); vis <= timeout {
		t.Errorf("delivery queue visibility %v s, deliverer timeout %v s: must be longer", vis, timeout)
	}
	// The dispatcher fills the delivery queue it reads the URL of.
	url := get(sy.resourceByID(t, fn(FnDispatcher)).Props, "Environment", "Variables", envDeliveryQueueURL)
	if refTo(url) != queue.ID {
		t.Errorf("dispatcher %s = %s, want the delivery queue", envDeliveryQueueURL, flatten(url))
	}
	for _, q := range sy.resourcesOf("AWS::SQS::Queue") {
		if q.Props["SqsManagedSseEnabled"] != true {
			t.Errorf("queue %s: not encrypted", q.ID)
		}
	}
}

func checkNetwork(t *testing.T, sy synthesized) {
	for _, typ := range []string{"AWS::EC2::NatGateway", "AWS::EC2::VPCEndpoint", "AWS::EC2::EIP"} {
		countIs(t, sy, typ, 0)
	}
	for _, s := range sy.resourcesOf("AWS::EC2::Subnet") {
		if s.Props["MapPublicIpOnLaunch"] != true {
			t.Errorf("subnet %s is not public (only public subnets: no NAT)", s.ID)
		}
	}
	countIs(t, sy, "AWS::ECS::Service", 1)
	hasProps(t, sy, "AWS::ECS::Service", map[string]any{
		"DesiredCount": 1,
		"LaunchType":   "FARGATE",
		"NetworkConfiguration": map[string]any{"AwsvpcConfiguration": like(map[string]any{
			"AssignPublicIp": "ENABLED",
		})},
		"ServiceRegistries": []any{like(map[string]any{"ContainerPort": ChannelPort, "ContainerName": "channel"})},
	})
	hasProps(t, sy, "AWS::ECS::TaskDefinition", map[string]any{
		"Cpu": "256", "Memory": "512",
		"RuntimePlatform":         map[string]any{"CpuArchitecture": "ARM64", "OperatingSystemFamily": "LINUX"},
		"RequiresCompatibilities": []any{"FARGATE"},
	})
	hasProps(t, sy, "AWS::ServiceDiscovery::Service", map[string]any{
		"DnsConfig": like(map[string]any{"DnsRecords": []any{like(map[string]any{"Type": "SRV"})}}),
	})
	// The channel service's security group admits only the VPC link's group, on the service port.
	service := sy.resourcesOf("AWS::ECS::Service")[0]
	sgs := list(get(service.Props, "NetworkConfiguration", "AwsvpcConfiguration", "SecurityGroups"))
	if len(sgs) != 1 {
		t.Fatalf("service security groups %v", sgs)
	}
	channelSG := refTo(sgs[0])
	link := sy.resourcesOf("AWS::ApiGatewayV2::VpcLink")
	if len(link) != 1 {
		t.Fatalf("%d VPC links", len(link))
	}
	linkSGs := list(link[0].Props["SecurityGroupIds"])
	if len(linkSGs) != 1 {
		t.Fatalf("VPC link security groups %v", linkSGs)
	}
	if ingress := list(sy.resourceByID(t, channelSG).Props["SecurityGroupIngress"]); len(ingress) != 0 {
		t.Errorf("channel security group has inline ingress %v", ingress)
	}
	var rules []resource
	for _, r := range sy.resourcesOf("AWS::EC2::SecurityGroupIngress") {
		if refTo(r.Props["GroupId"]) == channelSG {
			rules = append(rules, r)
		}
	}
	if len(rules) != 1 || refTo(rules[0].Props["SourceSecurityGroupId"]) != refTo(linkSGs[0]) ||
		rules[0].Props["FromPort"] != float64(ChannelPort) || rules[0].Props["ToPort"] != float64(ChannelPort) {
		t.Errorf("channel ingress rules %v, want only the VPC link on %d", rules, ChannelPort)
	}
}

// checkStoreCalls: every function granted the table may make every call store/dynamo makes (the methods
// of dynamo.API; a TransactWriteItems is authorized by the item actions inside it), on any key. A call
// added to the store without its grant would be refused on AWS only: no emulator checks IAM.
func checkStoreCalls(t *testing.T, sy synthesized) {
	api := reflect.TypeFor[dynamo.API]()
	var need []string
	for i := range api.NumMethod() {
		if m := api.Method(i).Name; m == "TransactWriteItems" {
			need = append(need, "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:ConditionCheckItem")
		} else {
			need = append(need, "dynamodb:"+m)
		}
	}
	if !slices.Contains(need, "dynamodb:BatchGetItem") || !slices.Contains(need, "dynamodb:GetItem") {
		t.Fatalf("dynamo.API asks for %v: the test no longer reads it", need)
	}
	roles := map[string]string{} // function logical ID → role
	for _, r := range sy.resourcesOf("AWS::Lambda::Function") {
		roles[r.ID] = refTo(r.Props["Role"])
	}
	for _, name := range []string{FnMailbox, FnMemory, FnBlobs, FnMCP, FnAdmin, FnSweeper, FnDispatcher, FnDeliverer} {
		role := roles[sy.logicalID(sy.stack.Functions[name])]
		got := tableActions(sy, role)
		for _, a := range need {
			if keys, ok := got[a]; !ok || keys != "" {
				t.Errorf("function %s: table action %s granted %v (limited to %q), want granted on every key", name, a, ok, keys)
			}
		}
	}
}

// tableActions returns the table actions the policies of role allow, each with the leading keys it is
// limited to ("" for none).
func tableActions(sy synthesized, role string) map[string]string {
	table := sy.resourcesOf("AWS::DynamoDB::Table")[0].ID
	got := map[string]string{}
	for _, p := range sy.resourcesOf("AWS::IAM::Policy") {
		if roles := list(p.Props["Roles"]); len(roles) != 1 || refTo(roles[0]) != role {
			continue
		}
		for _, st := range list(get(p.Props["PolicyDocument"], "Statement")) {
			if !strings.Contains(flatten(get(st, "Resource")), table) {
				continue
			}
			keys := fmt.Sprint(get(st, "Condition", "ForAllValues:StringLike", "dynamodb:LeadingKeys"))
			if get(st, "Condition") == nil {
				keys = ""
			}
			acts := list(get(st, "Action"))
			if len(acts) == 0 {
				acts = []any{get(st, "Action")}
			}
			for _, a := range acts {
				got[flatten(a)] = keys
			}
		}
	}
	return got
}

// checkChannelTable: the channel task reads the table, and writes only what reading a visible head may
// write: the watermark (UpdateItem on SH#…) and a void slot (PutItem on FD#…).
func checkChannelTable(t *testing.T, sy synthesized) {
	task := sy.resourcesOf("AWS::ECS::TaskDefinition")[0]
	got := tableActions(sy, refTo(task.Props["TaskRoleArn"]))
	want := map[string]string{"dynamodb:GetItem": "", "dynamodb:BatchGetItem": "", "dynamodb:Query": "",
		"dynamodb:UpdateItem": "SH#*", "dynamodb:PutItem": "FD#*"}
	if len(got) != len(want) {
		t.Errorf("channel task table actions %v, want %v", got, want)
	}
	for a, k := range want {
		if g, ok := got[a]; !ok || !strings.Contains(g, k) || (k == "" && g != "") {
			t.Errorf("channel task: %s limited to %q, want %q", a, g, k)
		}
	}
}

func checkAlarms(t *testing.T, sy synthesized) {
	type key struct{ metric, dim string }
	have := map[key]bool{}
	for _, a := range sy.resourcesOf("AWS::CloudWatch::Alarm") {
		if len(list(a.Props["AlarmActions"])) == 0 {
			t.Errorf("alarm %s has no action", a.ID)
		}
		if m, ok := a.Props["MetricName"].(string); ok {
			for _, d := range list(a.Props["Dimensions"]) {
				have[key{m, refTo(get(d, "Value"))}] = true
			}
			continue
		}
		// A math expression (DynamoDB SystemErrors over operations).
		for _, m := range list(a.Props["Metrics"]) {
			if n, ok := get(m, "MetricStat", "Metric", "MetricName").(string); ok {
				for _, d := range list(get(m, "MetricStat", "Metric", "Dimensions")) {
					have[key{n, refTo(get(d, "Value"))}] = true
				}
			}
		}
	}
	for _, name := range Functions() {
		id := sy.logicalID(sy.stack.Functions[name])
		for _, m := range []string{"Errors", "Throttles"} {
			if !have[key{m, id}] {
				t.Errorf("no %s alarm on %s", m, name)
			}
		}
	}
	if !have[key{"SystemErrors", sy.resourcesOf("AWS::DynamoDB::Table")[0].ID}] {
		t.Error("no DynamoDB SystemErrors alarm")
	}
	var dlqs []string
	for _, q := range sy.resourcesOf("AWS::SQS::Queue") {
		if q.Props["RedrivePolicy"] == nil && have[key{"ApproximateNumberOfMessagesVisible", q.ID}] {
			dlqs = append(dlqs, q.ID)
		}
	}
	sort.Strings(dlqs)
	if len(dlqs) != 2 {
		t.Errorf("DLQ depth alarms on %v, want the delivery DLQ and the stream failure DLQ", dlqs)
	}
}

func checkNag(t *testing.T, sy synthesized) {
	ann := assertions.Annotations_FromStack(sy.stack.Stack)
	pattern := assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-.*"))
	for _, m := range *ann.FindError(jsii.String("*"), pattern) {
		//lint:ignore SA1019 the assertions API returns cxapi.SynthesisMessage; its successor has no Go binding
		t.Errorf("cdk-nag error at %s: %v", *m.Id, m.Entry.Data)
	}
	for _, m := range *ann.FindWarning(jsii.String("*"), pattern) {
		//lint:ignore SA1019 the assertions API returns cxapi.SynthesisMessage; its successor has no Go binding
		t.Errorf("cdk-nag warning at %s: %v", *m.Id, m.Entry.Data)
	}
	// Every suppression in the template carries a reason.
	n := 0
	for id, v := range sy.json["Resources"].(map[string]any) {
		for _, s := range list(get(v, "Metadata", "cdk_nag", "rules_to_suppress")) {
			n++
			reason, _ := get(s, "reason").(string)
			if len(reason) < 40 {
				t.Errorf("%s: suppression %v has no real justification", id, get(s, "id"))
			}
		}
	}
	if n == 0 {
		t.Error("no suppression found in the template metadata")
	}
}
