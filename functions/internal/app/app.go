// Package app wires one Waypost Lambda function: configuration from the environment (functions/config),
// the DynamoDB item store and the S3 blob store, the domain service, and the shared HTTP API served through
// the API Gateway HTTP API (payload 2.0) adapter. The mains in functions/<name> only pick a Role.
package app

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/waypost/waypost/api/httpapi"
	"github.com/waypost/waypost/channel/chanclient"
	"github.com/waypost/waypost/channel/livefeed"
	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/functions/config"
	"github.com/waypost/waypost/platform"
	"github.com/waypost/waypost/store/dynamo"
	"github.com/waypost/waypost/store/s3blob"
)

// Role is what one function serves.
type Role struct {
	// Name appears in every log line.
	Name string
	// Admin enables the control plane (/admin/v0) and requires the admin secret; other functions never
	// hold it, so their handler answers /admin/v0 as disabled.
	Admin bool
}

// Roles of the functions built by scripts/build-functions.
var (
	Mailbox = Role{Name: "mailbox"}
	Admin   = Role{Name: "admin", Admin: true}
)

// Build returns the HTTP handler of role under cfg, resolving secrets named by ARN through Secrets Manager.
func Build(ctx context.Context, role Role, cfg config.Config, logger *slog.Logger) (http.Handler, error) {
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: loading AWS configuration: %w", role.Name, err)
	}
	if !role.Admin {
		cfg.AdminSecret, cfg.AdminSecretARN = "", "" // never fetched, never served
	}
	if cfg.AdminSecretARN != "" || cfg.CursorKeyARN != "" {
		sm := secretsmanager.NewFromConfig(awsCfg)
		err := cfg.Resolve(ctx, func(ctx context.Context, arn string) (string, error) {
			out, err := sm.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(arn)})
			if err != nil {
				return "", err
			}
			return aws.ToString(out.SecretString), nil
		})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", role.Name, err)
		}
	}
	if role.Admin && cfg.AdminSecret == "" {
		return nil, fmt.Errorf("%s: %s or %s is required", role.Name, config.EnvAdminSecret, config.EnvAdminSecretARN)
	}
	st, err := dynamo.New(dynamodb.NewFromConfig(awsCfg, dynamo.ClientOptions(cfg.DynamoDBEndpoint)), cfg.Table, dynamo.Options{})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", role.Name, err)
	}
	s3c := s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		if cfg.S3Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.S3Endpoint)
			o.UsePathStyle = true
		}
	})
	blobs, err := s3blob.New(s3c, cfg.Bucket, s3blob.Options{Prefix: cfg.BlobPrefix})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", role.Name, err)
	}
	ids := platform.IDs{}
	var notifier port.Notifier
	if cfg.ChannelURL != "" {
		api, err := chanclient.New(cfg.ChannelURL, cfg.ChannelSecret)
		if err != nil {
			return nil, fmt.Errorf("%s: channel service: %w", role.Name, err)
		}
		notifier = livefeed.NewRemote(api, logger)
	}
	svc, err := domain.New(domain.Config{Store: st, Blobs: blobs, Clock: platform.Clock{}, IDs: ids, Logger: logger, Notifier: notifier,
		CursorKey: []byte(cfg.CursorKey), AppVersion: cfg.Version, InlineBodyMax: cfg.InlineBodyMax})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", role.Name, err)
	}
	api, err := httpapi.New(svc, httpapi.Options{AdminSecret: cfg.AdminSecret, Logger: logger, IDs: ids})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", role.Name, err)
	}
	return api, nil
}

// Main runs role as a Lambda function: it loads the configuration, builds the handler once per execution
// environment (cold start) and serves API Gateway HTTP API events. Start-up errors are logged and end the
// process with status 1, which Lambda reports as an init failure.
func Main(role Role) {
	cfg, err := config.Load()
	level := slog.LevelInfo
	if err == nil {
		level = cfg.LogLevel
	}
	logger := slog.New(slog.NewJSONHandler(os.Stdout, &slog.HandlerOptions{Level: level})).With("function", role.Name)
	if err != nil {
		logger.Error("configuration", "error", err.Error())
		os.Exit(1)
	}
	h, err := Build(context.Background(), role, cfg, logger)
	if err != nil {
		logger.Error("start-up", "error", err.Error())
		os.Exit(1)
	}
	logger.Info("ready", "table", cfg.Table, "bucket", cfg.Bucket, "version", cfg.Version, "admin", role.Admin)
	lambda.Start(httpadapter.NewV2(h).ProxyWithContext)
}
