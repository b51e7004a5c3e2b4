// Package config is the configuration of the Waypost Lambda functions (functions/): every setting comes
// from one environment variable, listed with its meaning by Vars. The CDK app sets these variables on each
// function; its tests compare what it sets with EnvVars, so a variable added here and forgotten there (or the
// reverse) fails a test.
//
// Secrets may be given as a value (tests, emulators) or as the ARN of a Secrets Manager secret (deployed);
// Load reads the environment only and Resolve fetches secrets named by ARN.
package config

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
)

// Names of the environment variables.
const (
	EnvTable            = "WAYPOST_TABLE"
	EnvBucket           = "WAYPOST_BUCKET"
	EnvBlobPrefix       = "WAYPOST_BLOB_PREFIX"
	EnvAdminSecret      = "WAYPOST_ADMIN_SECRET"
	EnvAdminSecretARN   = "WAYPOST_ADMIN_SECRET_ARN"
	EnvCursorKey        = "WAYPOST_CURSOR_KEY"
	EnvCursorKeyARN     = "WAYPOST_CURSOR_KEY_ARN"
	EnvInlineBodyMax    = "WAYPOST_INLINE_BODY_MAX"
	EnvLogLevel         = "WAYPOST_LOG_LEVEL"
	EnvVersion          = "WAYPOST_VERSION"
	EnvDynamoDBEndpoint = "WAYPOST_DYNAMODB_ENDPOINT"
	EnvS3Endpoint       = "WAYPOST_S3_ENDPOINT"
	EnvChannelURL       = "WAYPOST_CHANNEL_URL"
	EnvChannelSecret    = "WAYPOST_CHANNEL_SECRET"
)

// Var documents one environment variable.
type Var struct {
	Name string
	// Required says whether every function needs it; "one of" pairs (a value or an ARN) are documented in
	// Doc and checked by Load.
	Required bool
	Doc      string
}

// Vars lists every environment variable the functions read, in a stable order.
func Vars() []Var {
	return []Var{
		{EnvTable, true, "name of the DynamoDB table (store/dynamo layout: pk, sk)"},
		{EnvBucket, true, "name of the S3 bucket holding blobs and large message bodies"},
		{EnvBlobPrefix, false, "key prefix inside the bucket (default none)"},
		{EnvAdminSecret, false, "admin secret (Bearer for /admin/v0) as a value; tests and emulators only"},
		{EnvAdminSecretARN, false, "ARN of the Secrets Manager secret holding the admin secret; only the admin function gets it or " + EnvAdminSecret + ". Without either, /admin/v0 is disabled"},
		{EnvCursorKey, false, "cursor HMAC key (at least 32 bytes) as a value; tests and emulators only"},
		{EnvCursorKeyARN, false, "ARN of the Secrets Manager secret holding the cursor HMAC key; this or " + EnvCursorKey + " is required, and every function of a deployment must share it"},
		{EnvInlineBodyMax, false, "largest message body in bytes committed inline in DynamoDB (default 4096); larger bodies go to S3"},
		{EnvLogLevel, false, "debug, info (default), warn or error; logs are JSON lines on stdout"},
		{EnvVersion, false, "application version published by describe (default dev)"},
		{EnvDynamoDBEndpoint, false, "DynamoDB endpoint URL override (emulators only; response checksums are then not validated)"},
		{EnvS3Endpoint, false, "S3 endpoint URL override (emulators only; path-style addressing)"},
		{EnvChannelURL, false, "base URL of the channel service; when set, every commit announces {visible_seq, item_id} there (best effort) so feed.wait wakes"},
		{EnvChannelSecret, false, "bearer secret of the channel service's internal API (required with " + EnvChannelURL + ")"},
	}
}

// EnvVars returns the names of Vars.
func EnvVars() []string {
	vs := Vars()
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.Name
	}
	return out
}

// DefaultInlineBodyMax is the default of WAYPOST_INLINE_BODY_MAX. Inline bodies cost 2 write units per KB
// of the message item; above about 4 KB one S3 PUT is cheaper (docs/dynamodb.md).
const DefaultInlineBodyMax = 4096

// Config is the loaded configuration.
type Config struct {
	Table            string
	Bucket           string
	BlobPrefix       string
	AdminSecret      string
	AdminSecretARN   string
	CursorKey        string
	CursorKeyARN     string
	InlineBodyMax    int
	LogLevel         slog.Level
	Version          string
	DynamoDBEndpoint string
	S3Endpoint       string
	ChannelURL       string
	ChannelSecret    string
}

// Load reads the configuration from the process environment.
func Load() (Config, error) { return LoadFrom(os.LookupEnv) }

// LoadFrom reads the configuration through lookup (os.LookupEnv in Load).
func LoadFrom(lookup func(string) (string, bool)) (Config, error) {
	get := func(name string) string {
		v, _ := lookup(name)
		return strings.TrimSpace(v)
	}
	c := Config{
		Table: get(EnvTable), Bucket: get(EnvBucket), BlobPrefix: get(EnvBlobPrefix),
		AdminSecret: get(EnvAdminSecret), AdminSecretARN: get(EnvAdminSecretARN),
		CursorKey: get(EnvCursorKey), CursorKeyARN: get(EnvCursorKeyARN),
		InlineBodyMax: DefaultInlineBodyMax, Version: get(EnvVersion),
		DynamoDBEndpoint: get(EnvDynamoDBEndpoint), S3Endpoint: get(EnvS3Endpoint),
		ChannelURL: get(EnvChannelURL), ChannelSecret: get(EnvChannelSecret),
	}
	var errs []error
	if c.Table == "" {
		errs = append(errs, fmt.Errorf("%s is required", EnvTable))
	}
	if c.Bucket == "" {
		errs = append(errs, fmt.Errorf("%s is required", EnvBucket))
	}
	if (c.ChannelURL == "") != (c.ChannelSecret == "") {
		errs = append(errs, fmt.Errorf("set %s and %s together", EnvChannelURL, EnvChannelSecret))
	}
	if c.AdminSecret != "" && c.AdminSecretARN != "" {
		errs = append(errs, fmt.Errorf("set %s or %s, not both", EnvAdminSecret, EnvAdminSecretARN))
	}
	switch {
	case c.CursorKey != "" && c.CursorKeyARN != "":
		errs = append(errs, fmt.Errorf("set %s or %s, not both", EnvCursorKey, EnvCursorKeyARN))
	case c.CursorKey == "" && c.CursorKeyARN == "":
		errs = append(errs, fmt.Errorf("%s or %s is required", EnvCursorKey, EnvCursorKeyARN))
	case c.CursorKey != "" && len(c.CursorKey) < 32:
		errs = append(errs, fmt.Errorf("%s must have at least 32 bytes", EnvCursorKey))
	}
	if v := get(EnvInlineBodyMax); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			errs = append(errs, fmt.Errorf("%s must be a byte count ≥ 0, not %q", EnvInlineBodyMax, v))
		}
		c.InlineBodyMax = n
	}
	if v := get(EnvLogLevel); v != "" {
		if err := c.LogLevel.UnmarshalText([]byte(v)); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", EnvLogLevel, err))
		}
	}
	if c.Version == "" {
		c.Version = "dev"
	}
	if err := errors.Join(errs...); err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	return c, nil
}

// SecretGetter fetches the string value of a secret by ARN (Secrets Manager's GetSecretValue).
type SecretGetter func(ctx context.Context, arn string) (string, error)

// Resolve fills AdminSecret and CursorKey from the secrets their ARNs name, if any.
func (c *Config) Resolve(ctx context.Context, get SecretGetter) error {
	for _, s := range []struct {
		arn, env string
		dst      *string
	}{{c.AdminSecretARN, EnvAdminSecretARN, &c.AdminSecret}, {c.CursorKeyARN, EnvCursorKeyARN, &c.CursorKey}} {
		if s.arn == "" {
			continue
		}
		v, err := get(ctx, s.arn)
		if err != nil {
			return fmt.Errorf("config: reading the secret of %s: %w", s.env, err)
		}
		*s.dst = strings.TrimSpace(v)
		if *s.dst == "" {
			return fmt.Errorf("config: the secret of %s is empty", s.env)
		}
	}
	if len(c.CursorKey) < 32 {
		return fmt.Errorf("config: the cursor key must have at least 32 bytes")
	}
	return nil
}
