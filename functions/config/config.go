// Package config is the configuration of the Waypost AWS processes: the Lambda functions (functions/) and
// the channel container (cmd/waypost-channel). Every setting comes from one environment variable, listed
// with its meaning by Vars; VarsFor says exactly which of them each function reads. The CDK app sets these
// variables on each function; its tests compare what it sets on a function with VarsFor, so a variable added
// here and forgotten there (or the reverse) fails a test.
//
// Secrets may be given as a value (tests, emulators) or as the ARN of a Secrets Manager secret (deployed);
// LoadFor reads the environment only and Resolve fetches secrets named by ARN.
package config

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sync/errgroup"
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
	EnvChannelSecretARN = "WAYPOST_CHANNEL_SECRET_ARN"
	EnvChannelAddr      = "WAYPOST_CHANNEL_ADDR"
	EnvDeliveryQueueURL = "WAYPOST_DELIVERY_QUEUE_URL"
	EnvSQSEndpoint      = "WAYPOST_SQS_ENDPOINT"
	// EnvMCPWaitsPerSpace caps the concurrent waypost_wait calls of one space in the MCP function.
	EnvMCPWaitsPerSpace = "WAYPOST_MCP_WAITS_PER_SPACE"
	// EnvWebhookAllowLoopback admits loopback and plain-http webhook targets: emulator tests ONLY.
	EnvWebhookAllowLoopback = "WAYPOST_WEBHOOK_ALLOW_LOOPBACK"
)

// Names of the functions: the Lambda functions (functions/<name>, or written later for dispatcher and
// deliverer) and Channel, the always-on channel container (cmd/waypost-channel, deploy/channel).
const (
	Mailbox    = "mailbox"    // HTTP: messages, inbox, status, describe
	Memory     = "memory"     // HTTP: memory routes
	Blobs      = "blobs"      // HTTP: blob and upload routes
	Admin      = "admin"      // HTTP: /admin/v0; the only holder of the admin secret
	MCP        = "mcp"        // HTTP: /mcp
	Sweeper    = "sweeper"    // EventBridge schedule: expires unsealed uploads
	Dispatcher = "dispatcher" // DynamoDB Streams → delivery queue
	Deliverer  = "deliverer"  // delivery queue → webhooks
	Channel    = "channel"    // container: channel hubs, their internal API, and feed.wait
)

// Functions returns every function name, in a stable order.
func Functions() []string {
	return []string{Mailbox, Memory, Blobs, Admin, MCP, Sweeper, Dispatcher, Deliverer, Channel}
}

// httpFunctions serve the shared HTTP handler behind API Gateway; each may be sent any route, so each reads
// the same variables (the admin function adds the admin secret).
func httpFunctions() []string { return []string{Mailbox, Memory, Blobs, Admin, MCP} }

// Var documents one environment variable.
type Var struct {
	Name string
	// Required says whether every function that reads it (Functions) needs it; "one of" pairs (a value or
	// an ARN) are documented in Doc and checked by LoadFor.
	Required bool
	Doc      string
	// Functions lists the functions that read the variable: VarsFor is derived from it.
	Functions []string
}

// Vars lists every environment variable the functions read, in a stable order.
func Vars() []Var {
	http := httpFunctions()
	all := Functions()
	withChannel := append(httpFunctions(), Channel)
	queue := []string{Dispatcher, Deliverer}
	webhooks := []string{Mailbox, Admin, MCP, Dispatcher, Deliverer} // the functions that build a webhook sender
	return []Var{
		{EnvTable, true, "name of the DynamoDB table (store/dynamo layout: pk, sk)", all},
		{EnvBucket, true, "name of the S3 bucket holding blobs and large message bodies", all},
		{EnvBlobPrefix, false, "key prefix inside the bucket (default none); every function of a deployment must share it", all},
		{EnvAdminSecret, false, "admin secret (Bearer for /admin/v0) as a value; tests and emulators only", []string{Admin}},
		{EnvAdminSecretARN, false, "ARN of the Secrets Manager secret holding the admin secret; only the admin function reads it or " + EnvAdminSecret + ", and requires one of them", []string{Admin}},
		{EnvCursorKey, false, "cursor HMAC key (at least 32 bytes) as a value; tests and emulators only", withChannel},
		{EnvCursorKeyARN, false, "ARN of the Secrets Manager secret holding the cursor HMAC key; this or " + EnvCursorKey + " is required by the HTTP functions and the channel container, which must all share it", withChannel},
		{EnvInlineBodyMax, false, "largest message body in bytes committed inline in DynamoDB (default 4096); larger bodies go to S3", http},
		{EnvLogLevel, false, "debug, info (default), warn or error; logs are JSON lines on stdout", all},
		{EnvVersion, false, "application version published by describe and logged at start-up (default dev)", all},
		{EnvDynamoDBEndpoint, false, "DynamoDB endpoint URL override (emulators only; response checksums are then not validated)", all},
		{EnvS3Endpoint, false, "S3 endpoint URL override (emulators only; path-style addressing)", all},
		{EnvChannelURL, false, "base URL of the channel service; when set, every commit announces {visible_seq, item_id} there (best effort) so feed.wait wakes", http},
		{EnvChannelSecret, false, "bearer secret (at least 16 bytes) of the channel service's internal API as a value; with " + EnvChannelURL + " in the HTTP functions, required (or its ARN) by the channel container", withChannel},
		{EnvChannelSecretARN, false, "ARN of the Secrets Manager secret holding the channel service's bearer secret, instead of " + EnvChannelSecret, withChannel},
		{EnvChannelAddr, false, "listen address of the channel container (default " + DefaultChannelAddr + "): internal API, feed.wait and /healthz on one port", []string{Channel}},
		{EnvDeliveryQueueURL, false, "URL of the SQS queue of webhook delivery wake-ups: required by the dispatcher (sends) and the deliverer (receives and re-queues); the admin function sends the wake-up of a redelivery there (without it, the deliverer's scheduled sweep finds the redelivery)", append(slices.Clone(queue), Admin)},
		{EnvSQSEndpoint, false, "SQS endpoint URL override (emulators only)", append(slices.Clone(queue), Admin)},
		{EnvMCPWaitsPerSpace, false, "most waypost_wait calls one space may hold at once across the MCP function's instances (default 0: no cap; the CDK stack sets its mcpWaitsPerSpace context value, default 10); one more answers RATE_LIMITED with Retry-After", []string{MCP}},
		{EnvWebhookAllowLoopback, false, "TESTS ONLY: \"1\" or \"true\" lets webhooks reach loopback addresses over plain http:// (emulator end-to-end tests); never set where untrusted users register targets. The function logs a warning at start when it is set", webhooks},
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

// VarsFor returns the names of exactly the environment variables function reads, in the order of Vars.
// It is the list the CDK app sets on that function (required ones always, optional ones when used).
func VarsFor(function string) ([]string, error) {
	if !slices.Contains(Functions(), function) {
		return nil, fmt.Errorf("config: unknown function %q (want one of %s)", function, strings.Join(Functions(), ", "))
	}
	var out []string
	for _, v := range Vars() {
		if slices.Contains(v.Functions, function) {
			out = append(out, v.Name)
		}
	}
	return out, nil
}

// DefaultInlineBodyMax is the default of WAYPOST_INLINE_BODY_MAX. Inline bodies cost 2 write units per KB
// of the message item; above about 4 KB one S3 PUT is cheaper (docs/dynamodb.md).
const DefaultInlineBodyMax = 4096

// DefaultChannelAddr is the default of WAYPOST_CHANNEL_ADDR: every interface, as a container needs.
const DefaultChannelAddr = ":8788"

// MinChannelSecretBytes is the shortest channel secret accepted (chanservice.MinSecretBytes).
const MinChannelSecretBytes = 16

// MinCursorKeyBytes is the shortest cursor key accepted.
const MinCursorKeyBytes = 32

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
	ChannelSecretARN string
	ChannelAddr      string
	DeliveryQueueURL string
	SQSEndpoint      string
	// WebhookAllowLoopback admits loopback and plain-http webhook targets (EnvWebhookAllowLoopback; tests only).
	WebhookAllowLoopback bool
	// MCPWaitsPerSpace caps the concurrent waypost_wait calls of one space (EnvMCPWaitsPerSpace); 0: no cap.
	MCPWaitsPerSpace int
}

// Load reads every variable of Vars from the process environment, with the checks of LoadFrom.
func Load() (Config, error) { return LoadFrom(os.LookupEnv) }

// LoadFrom reads every variable of Vars through lookup (os.LookupEnv in Load). It requires what every HTTP
// function requires (table, bucket, cursor key) and no admin secret; processes should use LoadFor, which
// reads and requires exactly what one function needs.
func LoadFrom(lookup func(string) (string, bool)) (Config, error) {
	return load("", EnvVars(), lookup)
}

// LoadFor reads the configuration of function through lookup (os.LookupEnv in a process): exactly the
// variables VarsFor(function) lists, and no other, each checked. Variables of other functions are never
// looked up, so setting them changes nothing.
func LoadFor(function string, lookup func(string) (string, bool)) (Config, error) {
	names, err := VarsFor(function)
	if err != nil {
		return Config{}, err
	}
	return load(function, names, lookup)
}

// load reads names through lookup and checks them for function ("" for LoadFrom).
func load(function string, names []string, lookup func(string) (string, bool)) (Config, error) {
	values := make(map[string]string, len(names))
	for _, n := range names {
		v, _ := lookup(n)
		values[n] = strings.TrimSpace(v)
	}
	reads := func(name string) bool { _, ok := values[name]; return ok }
	get := func(name string) string { return values[name] }
	c := Config{
		Table: get(EnvTable), Bucket: get(EnvBucket), BlobPrefix: get(EnvBlobPrefix),
		AdminSecret: get(EnvAdminSecret), AdminSecretARN: get(EnvAdminSecretARN),
		CursorKey: get(EnvCursorKey), CursorKeyARN: get(EnvCursorKeyARN),
		InlineBodyMax: DefaultInlineBodyMax, Version: get(EnvVersion),
		DynamoDBEndpoint: get(EnvDynamoDBEndpoint), S3Endpoint: get(EnvS3Endpoint),
		ChannelURL: get(EnvChannelURL), ChannelSecret: get(EnvChannelSecret), ChannelSecretARN: get(EnvChannelSecretARN),
		ChannelAddr: get(EnvChannelAddr), DeliveryQueueURL: get(EnvDeliveryQueueURL), SQSEndpoint: get(EnvSQSEndpoint),
	}
	var errs []error
	if c.Table == "" {
		errs = append(errs, fmt.Errorf("%s is required", EnvTable))
	}
	if c.Bucket == "" {
		errs = append(errs, fmt.Errorf("%s is required", EnvBucket))
	}
	errs = append(errs, oneOf(EnvAdminSecret, c.AdminSecret, EnvAdminSecretARN, c.AdminSecretARN, function == Admin))
	if reads(EnvCursorKey) {
		errs = append(errs, oneOf(EnvCursorKey, c.CursorKey, EnvCursorKeyARN, c.CursorKeyARN, true))
		if c.CursorKey != "" && len(c.CursorKey) < MinCursorKeyBytes {
			errs = append(errs, fmt.Errorf("%s must have at least %d bytes", EnvCursorKey, MinCursorKeyBytes))
		}
	}
	if reads(EnvChannelSecret) {
		hasSecret := c.ChannelSecret != "" || c.ChannelSecretARN != ""
		errs = append(errs, oneOf(EnvChannelSecret, c.ChannelSecret, EnvChannelSecretARN, c.ChannelSecretARN, function == Channel))
		if reads(EnvChannelURL) && (c.ChannelURL == "") != !hasSecret {
			errs = append(errs, fmt.Errorf("set %s and %s (or %s) together", EnvChannelURL, EnvChannelSecret, EnvChannelSecretARN))
		}
		if c.ChannelSecret != "" && len(c.ChannelSecret) < MinChannelSecretBytes {
			errs = append(errs, fmt.Errorf("%s must have at least %d bytes", EnvChannelSecret, MinChannelSecretBytes))
		}
	}
	if reads(EnvChannelAddr) && c.ChannelAddr == "" {
		c.ChannelAddr = DefaultChannelAddr
	}
	if (function == Dispatcher || function == Deliverer) && c.DeliveryQueueURL == "" {
		errs = append(errs, fmt.Errorf("%s is required", EnvDeliveryQueueURL))
	}
	if v := get(EnvWebhookAllowLoopback); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s must be true or false, not %q", EnvWebhookAllowLoopback, v))
		}
		c.WebhookAllowLoopback = b
	}
	if v := get(EnvMCPWaitsPerSpace); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			errs = append(errs, fmt.Errorf("%s must be a count ≥ 0, not %q", EnvMCPWaitsPerSpace, v))
		}
		c.MCPWaitsPerSpace = n
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
		if function != "" {
			return Config{}, fmt.Errorf("config of %s: %w", function, err)
		}
		return Config{}, fmt.Errorf("config: %w", err)
	}
	return c, nil
}

// oneOf checks a secret given as a value or as an ARN: never both, and one of them when required.
func oneOf(valueEnv, value, arnEnv, arn string, required bool) error {
	switch {
	case value != "" && arn != "":
		return fmt.Errorf("set %s or %s, not both", valueEnv, arnEnv)
	case required && value == "" && arn == "":
		return fmt.Errorf("%s or %s is required", valueEnv, arnEnv)
	}
	return nil
}

// SecretGetter fetches the string value of a secret by ARN (Secrets Manager's GetSecretValue).
type SecretGetter func(ctx context.Context, arn string) (string, error)

// HasSecretARNs says whether Resolve has anything to fetch.
func (c *Config) HasSecretARNs() bool {
	return c.AdminSecretARN != "" || c.CursorKeyARN != "" || c.ChannelSecretARN != ""
}

// Resolve fills AdminSecret, CursorKey and ChannelSecret from the secrets their ARNs name, if any, and
// checks the lengths of the cursor key and the channel secret when there is one.
func (c *Config) Resolve(ctx context.Context, get SecretGetter) error {
	// The secrets are fetched concurrently: a cold start waits for the slowest, not for their sum.
	g, gctx := errgroup.WithContext(ctx)
	for _, s := range []struct {
		arn, env string
		dst      *string
	}{
		{c.AdminSecretARN, EnvAdminSecretARN, &c.AdminSecret},
		{c.CursorKeyARN, EnvCursorKeyARN, &c.CursorKey},
		{c.ChannelSecretARN, EnvChannelSecretARN, &c.ChannelSecret},
	} {
		if s.arn == "" {
			continue
		}
		g.Go(func() error {
			v, err := get(gctx, s.arn)
			if err != nil {
				return fmt.Errorf("config: reading the secret of %s: %w", s.env, err)
			}
			if *s.dst = strings.TrimSpace(v); *s.dst == "" {
				return fmt.Errorf("config: the secret of %s is empty", s.env)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if (c.CursorKey != "" || c.CursorKeyARN != "") && len(c.CursorKey) < MinCursorKeyBytes {
		return fmt.Errorf("config: the cursor key must have at least %d bytes", MinCursorKeyBytes)
	}
	if c.ChannelSecret != "" && len(c.ChannelSecret) < MinChannelSecretBytes {
		return fmt.Errorf("config: the channel secret must have at least %d bytes", MinChannelSecretBytes)
	}
	return nil
}
