// Package app wires the Waypost AWS processes: configuration from the environment (functions/config, the
// variables config.VarsFor lists for the process and no other), secrets from Secrets Manager, the DynamoDB
// item store and the S3 blob store, and the domain service. For the HTTP functions it serves the shared HTTP
// API through the API Gateway HTTP API (payload 2.0) adapter; for the sweeper it runs the upload sweep per
// scheduled invocation. The mains in functions/<name> only pick a Role; the channel container
// (functions/channelhost) builds its service with Resolve and Env.Service.
package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/waypost/waypost/api/httpapi"
	"github.com/waypost/waypost/api/mcpapi"
	"github.com/waypost/waypost/channel/chanclient"
	"github.com/waypost/waypost/channel/livefeed"
	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/functions/config"
	"github.com/waypost/waypost/platform"
	"github.com/waypost/waypost/schemas"
	"github.com/waypost/waypost/store/dynamo"
	"github.com/waypost/waypost/store/s3blob"
)

// Role is what one function serves; its value is the function's name in functions/config.
type Role string

// Roles of the functions built by scripts/build-functions. Every HTTP role serves the whole shared handler
// (API Gateway routes only its operation group to it); they differ in what they hold. The dispatcher and
// deliverer roles, which carry webhook deliveries, are in delivery.go.
const (
	// Mailbox serves messages, inbox, acks, status, describe and subscriptions.
	Mailbox Role = config.Mailbox
	// Memory serves the memory routes (publish, read, export).
	Memory Role = config.Memory
	// Blobs serves blob.prepare, the upload PUT, blob.commit and blob.get.
	Blobs Role = config.Blobs
	// Admin serves the control plane (/admin/v0); it alone holds the admin secret.
	Admin Role = config.Admin
	// MCP serves the MCP endpoint at /mcp (api/mcpapi, stateless Streamable HTTP with JSON responses).
	MCP Role = config.MCP
	// Sweeper runs on an EventBridge schedule: each invocation expires the unsealed uploads whose time passed.
	Sweeper Role = config.Sweeper
)

// Name is the function's name (in every log line).
func (r Role) Name() string { return string(r) }

// Admin reports whether the role serves the control plane (and requires the admin secret); other functions
// never hold it, so their handler answers /admin/v0 as disabled.
func (r Role) Admin() bool { return r == Admin }

// HTTP reports whether the role serves API Gateway HTTP API events.
func (r Role) HTTP() bool {
	switch r {
	case Mailbox, Memory, Blobs, Admin, MCP:
		return true
	}
	return false
}

// MountsMCP reports whether the role's handler serves /mcp.
func (r Role) MountsMCP() bool { return r == MCP }

// AWSLimits are the limits published by every AWS process: the defaults, except where the AWS transport
// is the bound (SUPPLEMENT §2).
//   - feed_wait_max_ms 25000: API Gateway ends an integration after 30 s.
//   - max_blob_bytes 4 MiB: the upload PUT reaches Lambda through API Gateway as a base64 body in a
//     synchronous invocation, whose payload is at most 6 MB (4 MiB encodes to 5.6 MB, leaving room for the
//     event's headers); the content GET returns through the same 6 MB response.
func AWSLimits() domain.Limits {
	l := domain.DefaultLimits()
	l.FeedWaitMaxMS = 25000
	l.MaxBlobBytes = 4 << 20
	return l
}

// Env is the AWS side of one process: its function name, the SDK configuration, and its configuration with
// every secret named by ARN resolved.
type Env struct {
	Name   string
	AWS    aws.Config
	Config config.Config
}

// Resolve loads the AWS SDK configuration (region and credentials from the runtime) and fetches the secrets
// cfg names by ARN from Secrets Manager (nothing is fetched when there are none).
func Resolve(ctx context.Context, name string, cfg config.Config) (Env, error) {
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return Env{}, fmt.Errorf("%s: loading AWS configuration: %w", name, err)
	}
	if cfg.HasSecretARNs() {
		sm := secretsmanager.NewFromConfig(awsCfg)
		err := cfg.Resolve(ctx, func(ctx context.Context, arn string) (string, error) {
			out, err := sm.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(arn)})
			if err != nil {
				return "", fmt.Errorf("GetSecretValue: %w", err)
			}
			return aws.ToString(out.SecretString), nil
		})
		if err != nil {
			return Env{}, fmt.Errorf("%s: %w", name, err)
		}
	}
	return Env{Name: name, AWS: awsCfg, Config: cfg}, nil
}

// ServiceOptions are the live-feed and webhook ports of a domain service.
type ServiceOptions struct {
	// Notifier receives committed items; nil means announcing them to the channel service at
	// Config.ChannelURL when it is set, and nowhere otherwise.
	Notifier port.Notifier
	// Watcher enables feed.wait: the channel container's in-process hubs, or a livefeed.Poller in the HTTP
	// functions.
	Watcher port.FeedWatcher
	// Webhooks enables webhook subscriptions and deliveries (Env.WebhookSender); nil turns them off.
	Webhooks port.WebhookSender
	// DeliveryQueue is told about every delivery attempt that becomes due (Env.DeliveryQueue); nil for none.
	DeliveryQueue port.DeliveryQueue
}

// Service builds the domain service over the DynamoDB table and the S3 bucket of e.Config, with AWSLimits,
// and returns it with the ID source it uses.
// A function that reads no cursor key (config.VarsFor: the sweeper) never encodes or decodes a cursor, so it
// gets a random one of its own.
func (e Env) Service(logger *slog.Logger, opts ServiceOptions) (*domain.Service, port.IDSource, error) {
	cfg := e.Config
	ids := platform.IDs{}
	cursorKey := []byte(cfg.CursorKey)
	if names, err := config.VarsFor(e.Name); err == nil && !slices.Contains(names, config.EnvCursorKey) && len(cursorKey) == 0 {
		cursorKey = make([]byte, config.MinCursorKeyBytes)
		if err := ids.Random(cursorKey); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", e.Name, err)
		}
	}
	st, err := dynamo.New(dynamodb.NewFromConfig(e.AWS, dynamo.ClientOptions(cfg.DynamoDBEndpoint)), cfg.Table, dynamo.Options{})
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", e.Name, err)
	}
	s3c := s3.NewFromConfig(e.AWS, func(o *s3.Options) {
		if cfg.S3Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.S3Endpoint)
			o.UsePathStyle = true
		}
	})
	blobs, err := s3blob.New(s3c, cfg.Bucket, s3blob.Options{Prefix: cfg.BlobPrefix})
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", e.Name, err)
	}
	notifier := opts.Notifier
	if notifier == nil && cfg.ChannelURL != "" {
		api, err := chanclient.New(cfg.ChannelURL, cfg.ChannelSecret)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: channel service: %w", e.Name, err)
		}
		notifier = livefeed.NewRemote(api, logger)
	}
	limits := AWSLimits()
	svc, err := domain.New(domain.Config{Store: st, Blobs: blobs, Clock: platform.Clock{}, IDs: ids, Logger: logger,
		Notifier: notifier, Watcher: opts.Watcher, Limits: &limits, Webhooks: opts.Webhooks, DeliveryQueue: opts.DeliveryQueue,
		CursorKey: cursorKey, AppVersion: cfg.Version, InlineBodyMax: cfg.InlineBodyMax})
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", e.Name, err)
	}
	return svc, ids, nil
}

// Build returns the HTTP handler of an HTTP role under cfg, resolving secrets named by ARN through Secrets
// Manager. The MCP role also serves /mcp.
func Build(ctx context.Context, role Role, cfg config.Config, logger *slog.Logger) (http.Handler, error) {
	if !role.HTTP() {
		return nil, fmt.Errorf("%s: not an HTTP function", role)
	}
	if !role.Admin() {
		cfg.AdminSecret, cfg.AdminSecretARN = "", "" // never fetched, never served
	}
	env, err := Resolve(ctx, role.Name(), cfg)
	if err != nil {
		return nil, err
	}
	if role.Admin() && env.Config.AdminSecret == "" {
		return nil, fmt.Errorf("%s: %s or %s is required", role, config.EnvAdminSecret, config.EnvAdminSecretARN)
	}
	// The live hubs are in the channel container, which serves HTTP feed.wait itself; here feed.wait (the
	// MCP tool waypost_wait, or the HTTP route if routed to a function) re-reads the durable feed at
	// livefeed.DefaultPollInterval, so describe's live_feed holds for every function that serves it.
	sopts, err := env.webhookPorts(logger, ServiceOptions{Watcher: livefeed.Poller{}})
	if err != nil {
		return nil, err
	}
	svc, ids, err := env.Service(logger, sopts)
	if err != nil {
		return nil, err
	}
	reg, err := schemas.New()
	if err != nil {
		return nil, fmt.Errorf("%s: loading schemas: %w", role, err)
	}
	opts := httpapi.Options{AdminSecret: env.Config.AdminSecret, Logger: logger, IDs: ids, Schemas: reg}
	if role.MountsMCP() {
		mcpHandler, err := mcpapi.New(svc, mcpapi.Options{Schemas: reg, IDs: ids, Logger: logger, Version: env.Config.Version})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", role, err)
		}
		opts.Extra = func(mux *http.ServeMux, _ *httpapi.API) { mux.Handle("/mcp", mcpHandler) }
	}
	api, err := httpapi.New(svc, opts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", role, err)
	}
	return api, nil
}

// Function is one initialized function (a cold start): its configuration and what it serves.
type Function struct {
	Role Role
	// Config is the configuration as loaded: secrets named by ARN are not filled in.
	Config config.Config
	Logger *slog.Logger
	// Handler serves the HTTP roles' requests; nil for the sweeper.
	Handler http.Handler
	svc     *domain.Service
	// dispatch and deliver serve the dispatcher and the deliverer (delivery.go).
	dispatch *DispatchHandler
	deliver  *DeliverHandler
}

// NewLogger returns the JSON logger of a process: level, and the process name on every line.
func NewLogger(w io.Writer, level slog.Level, name string) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level})).With("function", name)
}

// Init is the cold start of role: it loads the configuration through lookup (os.LookupEnv in Main),
// reading exactly the variables config.VarsFor lists for the role, logs JSON lines to logs, and builds what
// the role serves. Errors are logged as well as returned.
func Init(ctx context.Context, role Role, lookup func(string) (string, bool), logs io.Writer) (*Function, error) {
	cfg, err := config.LoadFor(role.Name(), lookup)
	level := slog.LevelInfo
	if err == nil {
		level = cfg.LogLevel
	}
	logger := NewLogger(logs, level, role.Name())
	if err != nil {
		logger.Error("configuration", "error", err.Error())
		return nil, err
	}
	f := &Function{Role: role, Logger: logger}
	switch {
	case role.HTTP():
		f.Handler, err = Build(ctx, role, cfg, logger)
	case role == Sweeper:
		var env Env
		if env, err = Resolve(ctx, role.Name(), cfg); err == nil {
			f.svc, _, err = env.Service(logger, ServiceOptions{})
		}
	case role == Dispatcher || role == Deliverer:
		err = f.initDelivery(ctx, cfg)
	default:
		err = fmt.Errorf("%s: no such role", role)
	}
	if err != nil {
		logger.Error("start-up", "error", err.Error())
		return nil, err
	}
	f.Config = cfg
	logger.Info("ready", "table", cfg.Table, "bucket", cfg.Bucket, "version", cfg.Version, "admin", role.Admin())
	return f, nil
}

// lambdaHandler is the handler lambda.Start runs for the function.
func (f *Function) lambdaHandler() any {
	if f.Handler != nil {
		return httpadapter.NewV2(f.Handler).ProxyWithContext
	}
	if f.dispatch != nil {
		return f.dispatch.Handle
	}
	if f.deliver != nil {
		return f.deliver.Handle
	}
	// The EventBridge scheduled event carries nothing the sweep needs.
	return func(ctx context.Context, _ json.RawMessage) (SweepResult, error) { return f.Sweep(ctx) }
}

// Main runs role as a Lambda function: Init once per execution environment (cold start), then serve
// invocations. Start-up errors end the process with status 1, which Lambda reports as an init failure.
func Main(role Role) {
	f, err := Init(context.Background(), role, os.LookupEnv, os.Stdout)
	if err != nil {
		os.Exit(1)
	}
	lambda.Start(f.lambdaHandler())
}
