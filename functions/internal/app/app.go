// Package app is the core every Waypost AWS process shares: configuration from the environment
// (functions/config, the variables config.VarsFor lists for the process and no other), the AWS SDK
// configuration, secrets named by ARN resolved concurrently, the DynamoDB item store, the S3 blob store and
// the domain service with the AWS limits, JSON logs, and the cold start and invocation loop of a Lambda
// function (Init, Main).
//
// What a function serves comes from a Spec, built by the small package of its role and nothing else, so a
// function's binary links only what its role uses (issue 17: each bootstrap ≤ 12 MB):
//
//	httprole      HTTP functions (memory, blobs): the shared HTTP API behind the API Gateway adapter
//	webhookrole   HTTP functions that manage webhooks (mailbox, admin): adds the webhook sender and SQS
//	mcprole       the MCP function: adds the MCP endpoint
//	delivery      the webhook dispatcher and deliverer (DynamoDB stream, SQS)
//	sweep         the upload sweeper (EventBridge schedule)
//	secrets       Secrets Manager, for the functions whose configuration names secrets by ARN
//	roles         every role's Spec by name, for tests only (importing it links every role)
//
// The mains in functions/<name> are one line: app.Main(<role package>.<Spec>()). The channel container
// (functions/channelhost) builds its service with Resolve and Env.Service.
package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/waypost/waypost/channel/chanclient"
	"github.com/waypost/waypost/channel/livefeed"
	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/functions/config"
	"github.com/waypost/waypost/internal/metrics"
	"github.com/waypost/waypost/internal/platform"
	"github.com/waypost/waypost/store/dynamo"
	"github.com/waypost/waypost/store/s3blob"
)

// AWSLimits are the limits published by every AWS process: the defaults, except where the AWS transport
// is the bound (SUPPLEMENT §5.3).
//   - feed_wait_max_ms 25000: API Gateway ends an integration after 30 s.
//   - max_blob_bytes 100 MiB, as embedded: blob bytes travel directly between clients and S3 through
//     presigned URLs (domain/transfer.go), never through API Gateway or a function, whose 6 MB payload
//     bounded them before. S3 would take up to 5 GiB in one PUT; the published figure is the one tested end
//     to end, and ZIP exports, which stream every item through the memory function into S3, stay well
//     within its 29 s.
func AWSLimits() domain.Limits {
	l := domain.DefaultLimits()
	l.FeedWaitMaxMS = 25000
	l.MaxBlobBytes = 100 << 20
	return l
}

// SecretSource returns how secrets named by ARN are fetched with an AWS configuration (package secrets:
// Secrets Manager). A role whose configuration names no secret has none.
type SecretSource func(aws.Config) config.SecretGetter

// Served is what a role serves once initialized.
type Served struct {
	// Lambda is the handler lambda.Start runs.
	Lambda any
	// HTTP is the HTTP handler behind Lambda, for the HTTP roles (nil otherwise).
	HTTP http.Handler
	// Svc is the role's domain service.
	Svc *domain.Service
}

// Spec is one function's role: its name in functions/config, where its secrets come from, and what it
// builds over its environment at cold start.
type Spec struct {
	Name    string
	Secrets SecretSource
	Start   func(ctx context.Context, env Env, logger *slog.Logger) (Served, error)
}

// Env is the AWS side of one process: its function name, the SDK configuration, and its configuration with
// every secret named by ARN resolved.
type Env struct {
	Name   string
	AWS    aws.Config
	Config config.Config
	// Metrics receives the process's measurements (EMF in the Lambda log); nil records nothing.
	Metrics metrics.Recorder
}

// Recorder returns e.Metrics, or a recorder that records nothing.
func (e Env) Recorder() metrics.Recorder {
	if e.Metrics == nil {
		return metrics.Nop{}
	}
	return e.Metrics
}

// LambdaAWSConfig is the AWS SDK configuration of a Lambda function, from the environment the runtime sets:
// AWS_REGION (or AWS_DEFAULT_REGION) and the execution role's AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
// AWS_SESSION_TOKEN, which stay valid for the execution environment's life. It does without the SDK's
// shared-config, SSO, STS and instance-metadata chain (config.LoadDefaultConfig), which a function never
// uses and which would double its binary's AWS code; the channel container, whose credentials come from
// the ECS endpoint, loads the full chain.
func LambdaAWSConfig(lookup func(string) (string, bool)) (aws.Config, error) {
	get := func(k string) string { v, _ := lookup(k); return v }
	region := get("AWS_REGION")
	if region == "" {
		region = get("AWS_DEFAULT_REGION")
	}
	id, secret := get("AWS_ACCESS_KEY_ID"), get("AWS_SECRET_ACCESS_KEY")
	switch {
	case region == "":
		return aws.Config{}, errors.New("AWS_REGION is not set")
	case id == "" || secret == "":
		return aws.Config{}, errors.New("AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are not set (the Lambda runtime sets them)")
	}
	return aws.Config{Region: region,
		Credentials: aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider(id, secret, get("AWS_SESSION_TOKEN")))}, nil
}

// Resolve returns the environment of process name over awsCfg, fetching the secrets cfg names by ARN
// through secrets (concurrently; nothing is fetched when there are none).
func Resolve(ctx context.Context, name string, cfg config.Config, awsCfg aws.Config, secrets SecretSource) (Env, error) {
	if cfg.HasSecretARNs() {
		if secrets == nil {
			return Env{}, fmt.Errorf("%s: the configuration names secrets by ARN but the function reads none", name)
		}
		if err := cfg.Resolve(ctx, secrets(awsCfg)); err != nil {
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
	// Webhooks enables webhook subscriptions and deliveries; nil turns them off.
	Webhooks port.WebhookSender
	// DeliveryQueue is told about every delivery attempt that becomes due; nil for none.
	DeliveryQueue port.DeliveryQueue
	// WaitsPerSpace caps the feed.waits one space holds at once across every process of the deployment
	// (the MCP function's WAYPOST_MCP_WAITS_PER_SPACE); 0 for no cap.
	WaitsPerSpace int
}

// Service builds the domain service of DomainConfig and returns it with the ID source it uses (the roles
// without a transport; the HTTP and MCP roles build theirs with api/transport over DomainConfig).
func (e Env) Service(logger *slog.Logger, opts ServiceOptions) (*domain.Service, port.IDSource, error) {
	cfg, err := e.DomainConfig(logger, opts)
	if err != nil {
		return nil, nil, err
	}
	svc, err := domain.New(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", e.Name, err)
	}
	return svc, cfg.IDs, nil
}

// DomainConfig is the configuration of the domain service over the DynamoDB table and the S3 bucket of
// e.Config, with AWSLimits. A function that reads no cursor key (config.VarsFor: the sweeper) never encodes
// or decodes a cursor, so it gets a random one of its own.
func (e Env) DomainConfig(logger *slog.Logger, opts ServiceOptions) (domain.Config, error) {
	cfg := e.Config
	ids := platform.IDs{}
	cursorKey := []byte(cfg.CursorKey)
	if names, err := config.VarsFor(e.Name); err == nil && !slices.Contains(names, config.EnvCursorKey) && len(cursorKey) == 0 {
		cursorKey = make([]byte, config.MinCursorKeyBytes)
		if err := ids.Random(cursorKey); err != nil {
			return domain.Config{}, fmt.Errorf("%s: %w", e.Name, err)
		}
	}
	st, err := dynamo.New(dynamodb.NewFromConfig(e.AWS, dynamo.ClientOptions(cfg.DynamoDBEndpoint)), cfg.Table, dynamo.Options{TTL: true}) // the CDK table has time to live on "ttl"
	if err != nil {
		return domain.Config{}, fmt.Errorf("%s: %w", e.Name, err)
	}
	blobs, err := s3blob.New(s3.NewFromConfig(e.AWS, s3blob.ClientOptions(cfg.S3Endpoint)), cfg.Bucket, s3blob.Options{Prefix: cfg.BlobPrefix})
	if err != nil {
		return domain.Config{}, fmt.Errorf("%s: %w", e.Name, err)
	}
	notifier := opts.Notifier
	if notifier == nil && cfg.ChannelURL != "" {
		api, err := chanclient.New(cfg.ChannelURL, cfg.ChannelSecret)
		if err != nil {
			return domain.Config{}, fmt.Errorf("%s: channel service: %w", e.Name, err)
		}
		notifier = livefeed.NewRemote(api, logger)
	}
	limits := AWSLimits()
	return domain.Config{Store: metrics.Store(st, e.Recorder()), Blobs: blobs, Clock: platform.Clock{}, IDs: ids, Logger: logger,
		Notifier: notifier, Watcher: opts.Watcher, Limits: &limits, Webhooks: opts.Webhooks, DeliveryQueue: opts.DeliveryQueue,
		CursorKey: cursorKey, AppVersion: cfg.Version, InlineBodyMax: cfg.InlineBodyMax, WaitsPerSpace: opts.WaitsPerSpace}, nil
}

// Function is one initialized function (a cold start): its configuration and what it serves.
type Function struct {
	Name string
	// Config is the configuration as loaded: secrets named by ARN are not filled in.
	Config config.Config
	Logger *slog.Logger
	// Handler serves the HTTP roles' requests; nil for the others.
	Handler http.Handler
	// Svc is the function's domain service.
	Svc    *domain.Service
	lambda any
	emf    *metrics.EMF
}

// NewLogger returns the JSON logger of a process: level, and the process name on every line.
func NewLogger(w io.Writer, level slog.Level, name string) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level})).With("function", name)
}

// Init is the cold start of spec: it loads the configuration through lookup (os.LookupEnv in Main),
// reading exactly the variables config.VarsFor lists for the role and the runtime's AWS variables, logs
// JSON lines to logs, and builds what the role serves. Errors are logged as well as returned.
func Init(ctx context.Context, spec Spec, lookup func(string) (string, bool), logs io.Writer) (*Function, error) {
	cfg, err := config.LoadFor(spec.Name, lookup)
	level := slog.LevelInfo
	if err == nil {
		level = cfg.LogLevel
	}
	logger := NewLogger(logs, level, spec.Name)
	if err == nil && spec.Start == nil {
		err = fmt.Errorf("%s: no such role", spec.Name)
	}
	if err != nil {
		logger.Error("configuration", "error", err.Error())
		return nil, err
	}
	emf := metrics.NewEMF(logs, spec.Name)
	served, err := start(ctx, spec, cfg, lookup, logger, emf)
	if err != nil {
		logger.Error("start-up", "error", err.Error())
		return nil, err
	}
	logger.Info("ready", "table", cfg.Table, "bucket", cfg.Bucket, "version", cfg.Version, "admin", cfg.AdminSecret != "" || cfg.AdminSecretARN != "")
	return &Function{Name: spec.Name, Config: cfg, Logger: logger, Handler: served.HTTP, Svc: served.Svc, lambda: served.Lambda, emf: emf}, nil
}

// Build builds what spec serves under cfg, with the AWS configuration read through lookup: Init without
// loading the configuration or logging (tests build handlers with it).
func Build(ctx context.Context, spec Spec, cfg config.Config, lookup func(string) (string, bool), logger *slog.Logger) (Served, error) {
	if spec.Start == nil {
		return Served{}, fmt.Errorf("%s: no such role", spec.Name)
	}
	return start(ctx, spec, cfg, lookup, logger, nil)
}

func start(ctx context.Context, spec Spec, cfg config.Config, lookup func(string) (string, bool), logger *slog.Logger, rec metrics.Recorder) (Served, error) {
	awsCfg, err := LambdaAWSConfig(lookup)
	if err != nil {
		return Served{}, fmt.Errorf("%s: AWS configuration: %w", spec.Name, err)
	}
	env, err := Resolve(ctx, spec.Name, cfg, awsCfg, spec.Secrets)
	if err != nil {
		return Served{}, err
	}
	env.Metrics = rec
	served, err := spec.Start(ctx, env, logger)
	if err == nil && served.Lambda == nil {
		err = fmt.Errorf("%s: the role serves nothing", spec.Name)
	}
	return served, err
}

// Main runs spec as a Lambda function: Init once per execution environment (cold start), then serve
// invocations. Start-up errors end the process with status 1, which Lambda reports as an init failure.
func Main(spec Spec) {
	f, err := Init(context.Background(), spec, os.LookupEnv, os.Stdout)
	if err != nil {
		os.Exit(1)
	}
	lambda.Start(f.LambdaHandler())
}

// LambdaHandler is the function's handler for the Lambda runtime: the role's, followed after every
// invocation by one flush of the measurements it made (CloudWatch embedded metric format in the log).
func (f *Function) LambdaHandler() lambda.Handler {
	return flushing{next: lambda.NewHandler(f.lambda), f: f}
}

type flushing struct {
	next lambda.Handler
	f    *Function
}

func (h flushing) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	out, err := h.next.Invoke(ctx, payload)
	if h.f.emf != nil {
		if ferr := h.f.emf.Flush(); ferr != nil {
			h.f.Logger.Warn("writing metrics", "error", ferr.Error())
		}
	}
	return out, err
}

// JSONHandler adapts a handler of raw JSON events (as the scheduled sweeper's) for lambda.Start.
func JSONHandler[T any](f func(ctx context.Context) (T, error)) func(context.Context, json.RawMessage) (T, error) {
	return func(ctx context.Context, _ json.RawMessage) (T, error) { return f(ctx) }
}
