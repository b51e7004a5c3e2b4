package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

func newGetCmd() *cobra.Command {
	c := &conn{}
	cmd := &cobra.Command{
		Use:   "get MESSAGE_ID",
		Short: "Show a published message with its body",
		Long: `Show a published message: its fixed envelope (producer, recipients, thread, commit time) and body.
The token's actor must be its producer, one of its recipients (with message.read), or an observer.`,
		Example: `  waypost get msg_0123456789abcdefghjk
  waypost get msg_0123456789abcdefghjk --json`,
		Args: exactArgs(1, "MESSAGE_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := c.data()
			if err != nil {
				return err
			}
			m, err := cl.GetMessage(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return c.show(cmd, m, func(w io.Writer) error {
				md := strings.TrimSpace(string(m.Metadata))
				if md == "{}" || md == "null" {
					md = ""
				}
				if err := fields(w, "message_id", m.MessageID, "from", m.ProducerID, "to", ids(m.RecipientIDs), "thread_id", m.ThreadID,
					"in_reply_to", orNone(m.InReplyTo), "kind", m.Kind, "subject", quote(m.Subject),
					"committed_at", m.CommittedAt.Format(time.RFC3339Nano), "visible_seq", m.VisibleSeq, "metadata", md); err != nil {
					return err
				}
				_, err := fmt.Fprintf(w, "\n%s\n", strings.TrimRight(m.Body.Text, "\n"))
				return err
			})
		},
	}
	c.addDataFlags(cmd.Flags())
	return withUsageErrors(cmd)
}
