// Command mailbox is the Waypost data-plane Lambda function (messages, inbox, acks, status, describe; SUPPLEMENT
// §11.1) behind the API Gateway HTTP API. It never holds the admin secret. Configuration: functions/config
// (config.VarsFor("mailbox")).
package main

import (
	"github.com/waypost/waypost/functions/internal/app"
	"github.com/waypost/waypost/functions/internal/httprole"
)

func main() { app.Main(httprole.Mailbox()) }
