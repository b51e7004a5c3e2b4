package main

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
)

// Settings parameterise the stack. Every field comes from CDK context (cdk.json or `cdk … -c key=value`);
// SettingsFromContext documents the keys and defaults.
type Settings struct {
	// Stage names the deployment ("dev", "prod", …); it is part of the stack name, so several stages can
	// live in one account.
	Stage string
	// LogRetentionDays is how long every log group keeps its events; one of the values CloudWatch Logs
	// accepts (1, 3, 5, 7, 14, 30, 60, 90, …).
	LogRetentionDays int
	// DeletionProtection turns on DynamoDB deletion protection and retains the table, the bucket and the
	// secrets when the stack is destroyed. On by default; turn it off only for throw-away stages.
	DeletionProtection bool
	// DomainName and CertificateARN, both or neither, give the HTTP API a custom domain (an ACM
	// certificate in the stack's region). The DNS record pointing at it is left to the user.
	DomainName     string
	CertificateARN string
	// AlarmEmail, when set, subscribes this address to the alarm topic.
	AlarmEmail string
	// AppVersion is published by describe (WAYPOST_VERSION).
	AppVersion string
	// FunctionsDir holds one directory per function with its `bootstrap` (scripts/build-functions
	// writes bin/functions/<name>/bootstrap).
	FunctionsDir string
	// ChannelContextDir is the Docker build context of the channel service (the repository root) and
	// ChannelDockerfile its Dockerfile, relative to that context.
	ChannelContextDir string
	ChannelDockerfile string

	// Edge protection (issue 17).

	// ThrottleRateLimit and ThrottleBurstLimit are the HTTP API stage's default route throttling: steady
	// requests per second and burst, across all clients. Beyond them API Gateway answers 429 before any
	// function runs.
	ThrottleRateLimit  float64
	ThrottleBurstLimit int
	// ReservedConcurrency caps how many instances of each function run at once (and reserves them out of
	// the account's concurrency): a flood on one route cannot take the account's whole quota, and one
	// function cannot starve the others. A function absent from the map (or every function, with the context
	// value "off") runs unreserved, in the account's shared pool.
	ReservedConcurrency map[string]int
	// MCPWaitsPerSpace caps the waypost_wait calls one space may hold at once in the MCP function (each holds
	// a function instance for up to 25 s); 0 turns the cap off.
	MCPWaitsPerSpace int
	// AvailabilityZoneIDs are the AZ IDs (e.g. use1-az1) of the VPC's two public subnets, where the channel
	// task and the VPC link's interfaces live. HTTP API VPC links exist only in some AZ IDs of each region;
	// empty means the stack's per-region default (DefaultVPCLinkAZIDs), looked up at deploy time.
	AvailabilityZoneIDs []string
}

// DefaultReservedConcurrency is the reserved concurrency of each function without context: 78 in all,
// well inside the 1000 of a standard account quota (AWS keeps at least 100 unreserved). Accounts with a
// lower quota (new accounts may start at 10) set reservedConcurrency=off or ask for an increase first.
func DefaultReservedConcurrency() map[string]int {
	return map[string]int{FnMailbox: 20, FnMemory: 10, FnBlobs: 10, FnAdmin: 2, FnMCP: 20, FnDispatcher: 5, FnDeliverer: 10, FnSweeper: 1}
}

// DefaultVPCLinkAZIDs are, per region, two AZ IDs in which API Gateway offers HTTP API VPC links (from
// the API Gateway developer guide, "Set up VPC links for HTTP APIs": availability by region). A stack
// deployed to another region needs the availabilityZoneIds context value.
func DefaultVPCLinkAZIDs() map[string][2]string {
	return map[string][2]string{
		"us-east-1":      {"use1-az1", "use1-az2"},
		"us-east-2":      {"use2-az1", "use2-az2"},
		"us-west-1":      {"usw1-az1", "usw1-az3"},
		"us-west-2":      {"usw2-az1", "usw2-az2"},
		"ap-east-1":      {"ape1-az2", "ape1-az3"},
		"ap-south-1":     {"aps1-az1", "aps1-az2"},
		"ap-northeast-2": {"apne2-az1", "apne2-az2"},
		"ap-southeast-1": {"apse1-az1", "apse1-az2"},
	}
}

// Context keys read by SettingsFromContext.
const (
	CtxStage              = "stage"
	CtxLogRetentionDays   = "logRetentionDays"
	CtxDeletionProtection = "deletionProtection"
	CtxDomainName         = "domainName"
	CtxCertificateARN     = "certificateArn"
	CtxAlarmEmail         = "alarmEmail"
	CtxAppVersion         = "appVersion"
	CtxFunctionsDir       = "functionsDir"
	CtxChannelContextDir  = "channelContextDir"
	CtxChannelDockerfile  = "channelDockerfile"
	// CtxThrottleRateLimit and CtxThrottleBurstLimit set the stage throttling (requests per second, burst).
	CtxThrottleRateLimit  = "throttleRateLimit"
	CtxThrottleBurstLimit = "throttleBurstLimit"
	// CtxReservedConcurrency is "off", or "name=n,…" (or a JSON object) overriding DefaultReservedConcurrency;
	// n = 0 leaves that function unreserved.
	CtxReservedConcurrency = "reservedConcurrency"
	// CtxMCPWaitsPerSpace sets MCPWaitsPerSpace.
	CtxMCPWaitsPerSpace = "mcpWaitsPerSpace"
	// CtxAvailabilityZoneIDs is a comma-separated list of two AZ IDs, e.g. "euw1-az1,euw1-az2".
	CtxAvailabilityZoneIDs = "availabilityZoneIds"
)

// DefaultSettings are the settings without any context: stage dev, 30-day logs, deletion protection on,
// functions in bin/functions and the channel image built from deploy/channel/Dockerfile, both relative to
// the working directory (the repository root, where cdk.json is).
func DefaultSettings() Settings {
	return Settings{
		Stage:              "dev",
		LogRetentionDays:   30,
		DeletionProtection: true,
		AppVersion:         "0.1.0-dev",
		FunctionsDir:       "bin/functions",
		ChannelContextDir:  ".",
		ChannelDockerfile:  "deploy/channel/Dockerfile",

		ThrottleRateLimit:   100,
		ThrottleBurstLimit:  200,
		ReservedConcurrency: DefaultReservedConcurrency(),
		MCPWaitsPerSpace:    10,
	}
}

// SettingsFromContext reads the settings through get (the app's TryGetContext): each key absent from the
// context keeps its default. Values may be strings (from -c) or JSON values (from cdk.json).
func SettingsFromContext(get func(key string) any) (Settings, error) {
	s := DefaultSettings()
	str := func(key string, dst *string) {
		if v := get(key); v != nil {
			*dst = strings.TrimSpace(fmt.Sprint(v))
		}
	}
	str(CtxStage, &s.Stage)
	str(CtxDomainName, &s.DomainName)
	str(CtxCertificateARN, &s.CertificateARN)
	str(CtxAlarmEmail, &s.AlarmEmail)
	str(CtxAppVersion, &s.AppVersion)
	str(CtxFunctionsDir, &s.FunctionsDir)
	str(CtxChannelContextDir, &s.ChannelContextDir)
	str(CtxChannelDockerfile, &s.ChannelDockerfile)
	if v := get(CtxLogRetentionDays); v != nil {
		n, err := strconv.Atoi(strings.TrimSpace(fmt.Sprint(v)))
		if err != nil {
			return Settings{}, fmt.Errorf("context %s: %q is not a number of days", CtxLogRetentionDays, fmt.Sprint(v))
		}
		s.LogRetentionDays = n
	}
	if v := get(CtxThrottleRateLimit); v != nil {
		n, err := strconv.ParseFloat(strings.TrimSpace(fmt.Sprint(v)), 64)
		if err != nil {
			return Settings{}, fmt.Errorf("context %s: %q is not a number of requests per second", CtxThrottleRateLimit, fmt.Sprint(v))
		}
		s.ThrottleRateLimit = n
	}
	for key, dst := range map[string]*int{CtxThrottleBurstLimit: &s.ThrottleBurstLimit, CtxMCPWaitsPerSpace: &s.MCPWaitsPerSpace} {
		if v := get(key); v != nil {
			n, err := strconv.Atoi(strings.TrimSpace(fmt.Sprint(v)))
			if err != nil {
				return Settings{}, fmt.Errorf("context %s: %q is not a whole number", key, fmt.Sprint(v))
			}
			*dst = n
		}
	}
	if v := get(CtxReservedConcurrency); v != nil {
		rc, err := parseReserved(v)
		if err != nil {
			return Settings{}, err
		}
		s.ReservedConcurrency = rc
	}
	if v := get(CtxAvailabilityZoneIDs); v != nil {
		s.AvailabilityZoneIDs = nil
		for _, id := range strings.Split(fmt.Sprint(v), ",") {
			if id = strings.TrimSpace(id); id != "" {
				s.AvailabilityZoneIDs = append(s.AvailabilityZoneIDs, id)
			}
		}
	}
	if v := get(CtxDeletionProtection); v != nil {
		b, err := strconv.ParseBool(strings.TrimSpace(fmt.Sprint(v)))
		if err != nil {
			return Settings{}, fmt.Errorf("context %s: %q is not true or false", CtxDeletionProtection, fmt.Sprint(v))
		}
		s.DeletionProtection = b
	}
	return s, s.Validate()
}

// Validate reports settings the stack cannot be built with.
func (s Settings) Validate() error {
	if s.Stage == "" || strings.Trim(s.Stage, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-") != "" || len(s.Stage) > 32 {
		return fmt.Errorf("context %s: %q must be 1-32 letters, digits or '-'", CtxStage, s.Stage)
	}
	if _, err := retentionDays(s.LogRetentionDays); err != nil {
		return err
	}
	if (s.DomainName == "") != (s.CertificateARN == "") {
		return fmt.Errorf("context %s and %s go together", CtxDomainName, CtxCertificateARN)
	}
	if s.FunctionsDir == "" || s.ChannelContextDir == "" || s.ChannelDockerfile == "" {
		return fmt.Errorf("context %s, %s and %s must not be empty", CtxFunctionsDir, CtxChannelContextDir, CtxChannelDockerfile)
	}
	if s.ThrottleRateLimit <= 0 || s.ThrottleBurstLimit <= 0 {
		return fmt.Errorf("context %s and %s must be positive (got %v and %d)", CtxThrottleRateLimit, CtxThrottleBurstLimit, s.ThrottleRateLimit, s.ThrottleBurstLimit)
	}
	for name, n := range s.ReservedConcurrency {
		if !slices.Contains(Functions(), name) || n < 0 {
			return fmt.Errorf("context %s: %s=%d: want a function of %v and a count ≥ 0", CtxReservedConcurrency, name, n, Functions())
		}
	}
	if s.MCPWaitsPerSpace < 0 {
		return fmt.Errorf("context %s: %d must be ≥ 0", CtxMCPWaitsPerSpace, s.MCPWaitsPerSpace)
	}
	if n := s.ReservedConcurrency[FnMCP]; n > 0 && s.MCPWaitsPerSpace >= n {
		return fmt.Errorf("context %s: %d waits per space would let one space hold every one of the MCP function's %d reserved instances", CtxMCPWaitsPerSpace, s.MCPWaitsPerSpace, n)
	}
	if s.AvailabilityZoneIDs != nil {
		if len(s.AvailabilityZoneIDs) != 2 || s.AvailabilityZoneIDs[0] == s.AvailabilityZoneIDs[1] {
			return fmt.Errorf("context %s: want two distinct AZ IDs (such as use1-az1,use1-az2), got %q", CtxAvailabilityZoneIDs, s.AvailabilityZoneIDs)
		}
		for _, id := range s.AvailabilityZoneIDs {
			if !azIDPattern.MatchString(id) {
				return fmt.Errorf("context %s: %q is not an AZ ID (such as use1-az1; AZ names like us-east-1a differ between accounts)", CtxAvailabilityZoneIDs, id)
			}
		}
	}
	return nil
}

// azIDPattern matches an Availability Zone ID (use1-az1, apne1-az4, usw2-lax1-az1).
var azIDPattern = regexp.MustCompile(`^[a-z]{2,5}[0-9](-[a-z]{3}[0-9])?-az[0-9]+$`)

// parseReserved reads the reservedConcurrency context value: "off" (no function reserved), "name=n,…" or
// a JSON object {"name": n}, each name overriding DefaultReservedConcurrency.
func parseReserved(v any) (map[string]int, error) {
	out := DefaultReservedConcurrency()
	set := func(name string, n int) { out[strings.TrimSpace(name)] = n }
	switch x := v.(type) {
	case map[string]any:
		for name, val := range x {
			n, err := strconv.Atoi(strings.TrimSpace(fmt.Sprint(val)))
			if err != nil {
				return nil, fmt.Errorf("context %s: %s=%v is not a whole number", CtxReservedConcurrency, name, val)
			}
			set(name, n)
		}
	default:
		str := strings.TrimSpace(fmt.Sprint(v))
		if str == "off" {
			return map[string]int{}, nil
		}
		for _, part := range strings.Split(str, ",") {
			name, val, ok := strings.Cut(part, "=")
			n, err := strconv.Atoi(strings.TrimSpace(val))
			if !ok || err != nil {
				return nil, fmt.Errorf("context %s: %q: want off, or name=n,… (functions %v)", CtxReservedConcurrency, str, Functions())
			}
			set(name, n)
		}
	}
	for name, n := range out {
		if n == 0 {
			delete(out, name)
		}
	}
	return out, nil
}

// retentionDays maps a number of days to the CloudWatch Logs retention of that length.
func retentionDays(days int) (awslogs.RetentionDays, error) {
	table := map[int]awslogs.RetentionDays{
		1: awslogs.RetentionDays_ONE_DAY, 3: awslogs.RetentionDays_THREE_DAYS, 5: awslogs.RetentionDays_FIVE_DAYS,
		7: awslogs.RetentionDays_ONE_WEEK, 14: awslogs.RetentionDays_TWO_WEEKS, 30: awslogs.RetentionDays_ONE_MONTH,
		60: awslogs.RetentionDays_TWO_MONTHS, 90: awslogs.RetentionDays_THREE_MONTHS, 120: awslogs.RetentionDays_FOUR_MONTHS,
		150: awslogs.RetentionDays_FIVE_MONTHS, 180: awslogs.RetentionDays_SIX_MONTHS, 365: awslogs.RetentionDays_ONE_YEAR,
		400: awslogs.RetentionDays_THIRTEEN_MONTHS, 545: awslogs.RetentionDays_EIGHTEEN_MONTHS, 731: awslogs.RetentionDays_TWO_YEARS,
		1096: awslogs.RetentionDays_THREE_YEARS, 1827: awslogs.RetentionDays_FIVE_YEARS, 2192: awslogs.RetentionDays_SIX_YEARS,
		2557: awslogs.RetentionDays_SEVEN_YEARS, 2922: awslogs.RetentionDays_EIGHT_YEARS, 3288: awslogs.RetentionDays_NINE_YEARS,
		3653: awslogs.RetentionDays_TEN_YEARS,
	}
	if r, ok := table[days]; ok {
		return r, nil
	}
	valid := make([]int, 0, len(table))
	for d := range table {
		valid = append(valid, d)
	}
	sort.Ints(valid)
	return "", fmt.Errorf("context %s: %d is not a retention CloudWatch Logs offers (%v)", CtxLogRetentionDays, days, valid)
}
