// Package webhookrole gives domain services their webhook sender on AWS (SSRF-safe, Standard Webhooks
// signatures): the mailbox function (subscriptions: the verification challenge; httprole.Mailbox), the MCP
// function and the queue roles (package queuerole: admin, dispatcher, deliverer). It links no transport,
// so the MCP function does not link the HTTP API through it (issue 17's size budget).
package webhookrole

import (
	"fmt"
	"log/slog"

	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/functions/config"
	"github.com/waypost/waypost/functions/internal/app"
	"github.com/waypost/waypost/webhook/dial"
	"github.com/waypost/waypost/webhook/sender"
)

// SenderPorts sets the webhook sender in opts, without a delivery queue (roles whose configuration names
// none, which so never link the SQS client).
func SenderPorts(env app.Env, logger *slog.Logger, opts *app.ServiceOptions) error {
	var err error
	opts.Webhooks, err = Sender(env, logger)
	return err
}

// Sender returns the webhook sender of the process: public HTTPS targets only, unless the configuration
// sets config.EnvWebhookAllowLoopback (emulator tests only), which it then warns about.
func Sender(env app.Env, logger *slog.Logger) (port.WebhookSender, error) {
	allow := env.Config.WebhookAllowLoopback
	snd, err := sender.New(sender.Options{Dial: dial.Options{AllowHTTP: allow, AllowLoopback: allow}})
	if err != nil {
		return nil, fmt.Errorf("%s: webhook sender: %w", env.Name, err)
	}
	if allow {
		logger.Warn("WARNING: " + config.EnvWebhookAllowLoopback + " is set: webhooks may reach loopback addresses over plain http://. " +
			"This is for emulator tests only and must never be set where untrusted users register webhook targets.")
	}
	return snd, nil
}
