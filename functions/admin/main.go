// Command admin is the Waypost control-plane Lambda function (/admin/v0: spaces, actors, consumers, grants,
// tokens) behind the API Gateway HTTP API. It requires the admin secret. Configuration: functions/config
// (config.VarsFor("admin")).
package main

import (
	"github.com/waypost/waypost/functions/internal/app"
	"github.com/waypost/waypost/functions/internal/queuerole"
)

func main() { app.Main(queuerole.Admin()) }
