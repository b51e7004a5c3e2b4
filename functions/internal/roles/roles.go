// Package roles lists every Lambda function's role by name, for tests and tools. A function's main must
// not import it: it links every role, where each main links only its own (app's package documentation).
package roles

import (
	"github.com/waypost/waypost/functions/config"
	"github.com/waypost/waypost/functions/internal/app"
	"github.com/waypost/waypost/functions/internal/delivery"
	"github.com/waypost/waypost/functions/internal/httprole"
	"github.com/waypost/waypost/functions/internal/mcprole"
	"github.com/waypost/waypost/functions/internal/queuerole"
	"github.com/waypost/waypost/functions/internal/sweep"
)

// Specs returns the role of every Lambda function (config.Functions but the channel container), by name.
// These are the very constructors the mains in functions/<name> call.
func Specs() map[string]app.Spec {
	return map[string]app.Spec{
		config.Mailbox:    httprole.Mailbox(),
		config.Memory:     httprole.Memory(),
		config.Blobs:      httprole.Blobs(),
		config.Admin:      queuerole.Admin(),
		config.MCP:        mcprole.Spec(),
		config.Sweeper:    sweep.Spec(),
		config.Dispatcher: delivery.DispatcherSpec(),
		config.Deliverer:  delivery.DelivererSpec(),
	}
}
