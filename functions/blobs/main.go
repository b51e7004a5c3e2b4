// Command blobs is the Waypost blob Lambda function (blob.prepare, the upload PUT, blob.commit, blob.get and
// its content; SUPPLEMENT §11.1) behind the API Gateway HTTP API. It never holds the admin secret.
// Configuration: functions/config (config.VarsFor("blobs")).
package main

import (
	"github.com/waypost/waypost/functions/internal/app"
	"github.com/waypost/waypost/functions/internal/httprole"
)

func main() { app.Main(httprole.Blobs()) }
