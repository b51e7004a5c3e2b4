// Command sweeper is the Waypost upload sweeper, a Lambda function invoked by an EventBridge schedule: each
// invocation expires the unsealed uploads whose upload_ttl_seconds passed (marks them expired and deletes
// their bytes from S3), logs the counts and returns them as {"expired", "batches", "more"}. Configuration:
// functions/config (config.VarsFor("sweeper")).
package main

import (
	"github.com/waypost/waypost/functions/internal/app"
	"github.com/waypost/waypost/functions/internal/sweep"
)

func main() { app.Main(sweep.Spec()) }
