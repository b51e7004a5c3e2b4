// Command deliverer is the Waypost webhook deliverer Lambda function. Invoked with SQS batches of the
// delivery queue (ReportBatchItemFailures on), it makes the delivery attempts the messages wake and queues
// the next wake-up of every delivery that is not finished; invoked by an EventBridge schedule, it re-queues
// the deliveries that are due but whose wake-up was lost. Configuration: functions/config.
package main

import (
	"github.com/waypost/waypost/functions/internal/app"
	"github.com/waypost/waypost/functions/internal/delivery"
)

func main() { app.Main(delivery.DelivererSpec()) }
