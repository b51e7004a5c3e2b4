// Command dispatcher is the Waypost webhook dispatcher Lambda function: it consumes the table's DynamoDB
// stream and, for every committed feed item, creates one delivery record per subscription that announces it
// and queues its wake-up on the delivery queue (SQS). Configure the event source mapping with
// ReportBatchItemFailures, bisect-on-error and a failure destination; the stream's view type must carry new
// images. Configuration: functions/config.
package main

import (
	"github.com/waypost/waypost/functions/internal/app"
	"github.com/waypost/waypost/functions/internal/delivery"
)

func main() { app.Main(delivery.DispatcherSpec()) }
