package main

import (
	"fmt"
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
	return nil
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
