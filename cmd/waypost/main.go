// Command waypost runs the Waypost service and talks to it: serve, admin, send, inbox, ack, status.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "0.1.0-dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := newRoot()
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "waypost:", err)
		os.Exit(exitCode(err)) // 2 for usage errors, 1 otherwise
	}
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "waypost",
		Short: "Asynchronous mailbox and memory exchange for people, agents and clients",
		Long: `Waypost lets producers commit messages into a space; every consumer reads its own feed with an
opaque cursor and acknowledges what it received and processed.

Start the embedded server with 'waypost serve', create a space and tokens with 'waypost admin',
then use 'waypost send', 'waypost inbox' and 'waypost ack' as a client.`,
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
		// Without a subcommand, print help; an unknown subcommand is a usage error (exit 2).
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("unknown command %q: see 'waypost --help'", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	withUsageErrors(root)
	root.AddCommand(commands()...)
	return root
}
