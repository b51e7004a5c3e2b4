// Command memory is the Waypost memory Lambda function (memory.publish, memory.read, memory.export;
// SUPPLEMENT §11.1) behind the API Gateway HTTP API. It never holds the admin secret. Configuration:
// functions/config (config.VarsFor("memory")).
package main

import (
	"github.com/waypost/waypost/functions/internal/app"
	"github.com/waypost/waypost/functions/internal/httprole"
)

func main() { app.Main(httprole.Memory()) }
