// Package queuerole gives domain services the SQS delivery queue of webhook wake-ups on AWS, with the
// webhook sender. The admin function (redeliveries) is its HTTP role; the dispatcher and the deliverer
// (package delivery) use its ports. Only these functions link the SQS client.
package queuerole

import (
	"fmt"
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/functions/config"
	"github.com/waypost/waypost/functions/internal/app"
	"github.com/waypost/waypost/functions/internal/httprole"
	"github.com/waypost/waypost/functions/internal/webhookrole"
	"github.com/waypost/waypost/store/sqsqueue"
)

// Admin serves the control plane (/admin/v0); it alone holds the admin secret, and it wakes the deliverer
// for a redelivery.
func Admin() app.Spec {
	return httprole.Spec(config.Admin, httprole.Options{Admin: true, Ports: Ports})
}

// Ports sets the webhook sender and, where the configuration names one, the delivery queue in opts.
func Ports(env app.Env, logger *slog.Logger, opts *app.ServiceOptions) error {
	if err := webhookrole.SenderPorts(env, logger, opts); err != nil {
		return err
	}
	var err error
	opts.DeliveryQueue, err = DeliveryQueue(env)
	return err
}

// DeliveryQueue returns the SQS delivery queue of the process, or nil when its configuration names none.
func DeliveryQueue(env app.Env) (port.DeliveryQueue, error) {
	if env.Config.DeliveryQueueURL == "" {
		return nil, nil
	}
	q, err := sqsqueue.New(sqs.NewFromConfig(env.AWS, sqsqueue.ClientOptions(env.Config.SQSEndpoint)), env.Config.DeliveryQueueURL, sqsqueue.Options{})
	if err != nil {
		return nil, fmt.Errorf("%s: delivery queue: %w", env.Name, err)
	}
	return q, nil
}
