package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/waypost/waypost/channel"
	"github.com/waypost/waypost/channel/chanservice"
)

func newChannelServeCmd() *cobra.Command {
	var addr string
	cmd := &cobra.Command{
		Use:   "channel-serve",
		Short: "Run the standalone channel service (wait/publish hubs, one per space)",
		Long: `Run the channel service on its own: the always-on process that holds one wait/publish hub per
space (seed channel spec) and serves the internal API committers use to announce committed feed items:

  POST /internal/v0/spaces/{space_id}/channels/{name}/publish   {"text": "..."}
  POST /internal/v0/spaces/{space_id}/channels/{name}/close     {"reason": "..."}
  GET  /internal/v0/spaces/{space_id}/channels/{name}/count
  GET  /healthz

Every internal route needs "Authorization: Bearer $WAYPOST_CHANNEL_SECRET" (at least 16 bytes).
'waypost serve' runs the same service in-process. This command runs the hubs alone, without feed.wait;
the AWS deployment's channel container runs waypost-channel (cmd/waypost-channel, deploy/channel), which
adds GET /v0/feed/wait over the deployment's DynamoDB table on the same port.`,
		Example: `  WAYPOST_CHANNEL_SECRET=$(head -c 32 /dev/urandom | base64) waypost channel-serve --addr 127.0.0.1:8788`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			secret := os.Getenv("WAYPOST_CHANNEL_SECRET")
			if secret == "" {
				return errors.New("WAYPOST_CHANNEL_SECRET is not set (the internal API's bearer secret, at least 16 bytes)")
			}
			log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
			svc, err := chanservice.New(secret, channel.Limits{}, log)
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("listening on %s: %w", addr, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "waypost channel service listening on http://%s\n", ln.Addr())
			hs := &http.Server{Handler: svc, ReadHeaderTimeout: 10 * time.Second}
			errc := make(chan error, 1)
			go func() { errc <- hs.Serve(ln) }()
			select {
			case err := <-errc:
				return err
			case <-cmd.Context().Done():
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			return hs.Shutdown(ctx)
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:8788", "listen address")
	return cmd
}
