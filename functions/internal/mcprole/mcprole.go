// Package mcprole builds the MCP function: /mcp (api/mcpapi, stateless Streamable HTTP with JSON
// responses) behind the API Gateway adapter, with the webhook sender (the subscription tools) and the
// per-space cap on concurrent waypost_wait calls (config.EnvMCPWaitsPerSpace). API Gateway routes only /mcp
// here, so the function does not link the shared HTTP API: every other path answers NOT_FOUND.
package mcprole

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/waypost/waypost/api/mcpapi"
	"github.com/waypost/waypost/api/ops"
	"github.com/waypost/waypost/api/transport"
	"github.com/waypost/waypost/channel/livefeed"
	"github.com/waypost/waypost/functions/config"
	"github.com/waypost/waypost/functions/internal/app"
	"github.com/waypost/waypost/functions/internal/secrets"
	"github.com/waypost/waypost/functions/internal/webhookrole"
)

// Spec is the MCP function's role.
func Spec() app.Spec { return app.Spec{Name: config.MCP, Secrets: secrets.Manager, Start: start} }

func start(_ context.Context, env app.Env, logger *slog.Logger) (app.Served, error) {
	// waypost_wait re-reads the durable feed (livefeed.Poller), holding one of the space's wait slots.
	opts := app.ServiceOptions{Watcher: livefeed.Poller{}, WaitsPerSpace: env.Config.MCPWaitsPerSpace}
	if err := webhookrole.SenderPorts(env, logger, &opts); err != nil {
		return app.Served{}, err
	}
	cfg, err := env.DomainConfig(logger, opts)
	if err != nil {
		return app.Served{}, err
	}
	stack, err := transport.New(cfg, transport.Options{Ops: ops.DataPlane(), MCP: mcpapi.Over, Logger: logger, Version: env.Config.Version, Metrics: env.Recorder()})
	if err != nil {
		return app.Served{}, fmt.Errorf("%s: %w", env.Name, err)
	}
	return app.Served{Lambda: httpadapter.NewV2(stack.Handler).ProxyWithContext, HTTP: stack.Handler, Svc: stack.Svc}, nil
}
