package livefeed

import (
	"context"
	"log/slog"
	"time"

	"github.com/waypost/waypost/channel/chanclient"
	"github.com/waypost/waypost/domain/port"
)

// Remote is a port.Notifier that announces committed items to a channel service over its internal API
// (the AWS topology: Lambdas commit, the always-on channel service wakes feed.wait). It is best effort:
// each announcement gets a short deadline and failures are only logged.
type Remote struct {
	api     chanclient.API
	log     *slog.Logger
	timeout time.Duration
}

// NewRemote returns a notifier publishing through api (chanclient.New or chanclient.NewInProcess).
func NewRemote(api chanclient.API, log *slog.Logger) *Remote {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Remote{api: api, log: log, timeout: 500 * time.Millisecond}
}

// Notify publishes each item on its space's feed channel.
func (r *Remote) Notify(ctx context.Context, items []port.Published) {
	for _, it := range items {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.timeout)
		_, err := r.api.Publish(cctx, it.SpaceID, ChannelName, Encode(it))
		cancel()
		if err != nil {
			r.log.LogAttrs(ctx, slog.LevelWarn, "livefeed: announcing to the channel service failed",
				slog.String("space_id", it.SpaceID), slog.String("error", err.Error()))
		}
	}
}
