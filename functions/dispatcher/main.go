// Command dispatcher is the Waypost webhook dispatcher Lambda function: it consumes the table's DynamoDB
// stream and, for every committed feed item, creates one delivery record per subscription that announces it
// and queues its wake-up on the delivery queue (SQS). Configure the event source mapping with
// ReportBatchItemFailures, bisect-on-error and a failure destination (an SQS queue); the stream's view type
// must carry new images. The failure queue is an event source of this function too: it re-drives each failed
// batch by reading its records from the stream again (dynamodb:GetShardIterator, GetRecords). Configuration:
// functions/config.
package main

import (
	"github.com/waypost/waypost/functions/internal/app"
	"github.com/waypost/waypost/functions/internal/delivery"
)

func main() { app.Main(delivery.DispatcherSpec()) }
