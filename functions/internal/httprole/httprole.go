// Package httprole builds the HTTP functions behind the API Gateway HTTP API (payload format 2.0): the
// shared HTTP API (api/httpapi) over the role's domain service, served through the API Gateway adapter.
// Memory and Blobs are its roles; webhookrole and mcprole build theirs with Spec and Options.
package httprole

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/waypost/waypost/api/httpapi"
	"github.com/waypost/waypost/api/ops"
	"github.com/waypost/waypost/api/transport"
	"github.com/waypost/waypost/channel/livefeed"
	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/functions/config"
	"github.com/waypost/waypost/functions/internal/app"
	"github.com/waypost/waypost/functions/internal/secrets"
	"github.com/waypost/waypost/functions/internal/webhookrole"
)

// Options are what an HTTP role adds to the shared API.
type Options struct {
	// Admin serves the control plane (/admin/v0) and requires the admin secret; other roles never hold it,
	// so their handler answers /admin/v0 as disabled.
	Admin bool
	// Ports adds ports to the role's domain service (webhookrole: the webhook sender and the delivery queue).
	Ports func(env app.Env, logger *slog.Logger, opts *app.ServiceOptions) error
}

// Spec is the role name with opts: secrets from Secrets Manager, the handler from Build.
func Spec(name string, opts Options) app.Spec {
	return app.Spec{Name: name, Secrets: secrets.Manager, Start: func(ctx context.Context, env app.Env, logger *slog.Logger) (app.Served, error) {
		h, svc, err := Handler(env, logger, opts)
		if err != nil {
			return app.Served{}, err
		}
		return app.Served{Lambda: httpadapter.NewV2(h).ProxyWithContext, HTTP: h, Svc: svc}, nil
	}}
}

// Mailbox serves messages, inbox, acks, status, describe and webhook subscriptions (the sender makes their
// verification challenge; the mailbox queues no delivery).
func Mailbox() app.Spec { return Spec(config.Mailbox, Options{Ports: webhookrole.SenderPorts}) }

// Memory serves the memory routes (memory.publish, memory.read, memory.export).
func Memory() app.Spec { return Spec(config.Memory, Options{}) }

// Blobs serves blob.prepare, the upload route, blob.commit and blob.get.
func Blobs() app.Spec { return Spec(config.Blobs, Options{}) }

// Handler builds the HTTP handler of an HTTP role over env.
//
// The live hubs are in the channel container, which serves HTTP feed.wait itself; here feed.wait (the MCP
// tool waypost_wait, or the HTTP route if routed to a function) re-reads the durable feed at
// livefeed.DefaultPollInterval, so describe's live_feed holds for every function that serves it.
func Handler(env app.Env, logger *slog.Logger, opts Options) (http.Handler, *domain.Service, error) {
	name := env.Name
	if !opts.Admin {
		env.Config.AdminSecret, env.Config.AdminSecretARN = "", "" // never fetched, never served
	} else if env.Config.AdminSecret == "" {
		return nil, nil, fmt.Errorf("%s: %s or %s is required", name, config.EnvAdminSecret, config.EnvAdminSecretARN)
	}
	sopts := app.ServiceOptions{Watcher: livefeed.Poller{}}
	if opts.Ports != nil {
		if err := opts.Ports(env, logger, &sopts); err != nil {
			return nil, nil, err
		}
	}
	cfg, err := env.DomainConfig(logger, sopts)
	if err != nil {
		return nil, nil, err
	}
	stack, err := transport.New(cfg, transport.Options{Ops: ops.List(), HTTP: httpapi.Over(httpapi.Options{}), AdminSecret: env.Config.AdminSecret, Logger: logger,
		Version: env.Config.Version, Metrics: env.Recorder()})
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	return stack.Handler, stack.Svc, nil
}
