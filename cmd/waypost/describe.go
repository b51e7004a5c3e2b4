package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/waypost/waypost/domain"
)

func newDescribeCmd() *cobra.Command {
	c := &conn{}
	cmd := &cobra.Command{
		Use:   "describe",
		Short: "Show who the token is, where it may send, the service's limits and capabilities",
		Example: `  waypost describe
  waypost describe --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := c.data()
			if err != nil {
				return err
			}
			d, err := cl.Describe(cmd.Context())
			if err != nil {
				return err
			}
			return c.show(cmd, d, func(w io.Writer) error {
				l := d.Limits
				return fields(w, "api_version", d.APIVersion, "app_version", d.AppVersion, "space_id", d.SpaceID, "actor_id", d.ActorID,
					"consumer_id", orNone(d.ConsumerID), "default_recipient_id", d.DefaultRecipientID,
					"allowed_recipient_ids", ids(d.AllowedRecipientIDs), "scopes", ids(d.Scopes),
					"capabilities", capabilities(d.Capabilities),
					"limits", fmt.Sprintf("max_body_text_bytes=%d max_subject_bytes=%d max_recipients=%d inbox_page_max=%d ack_items_max=%d (--json for all)",
						l.MaxBodyTextBytes, l.MaxSubjectBytes, l.MaxRecipients, l.InboxPageMax, l.AckItemsMax),
					"rate_limits", fmt.Sprintf("%d requests/s per credential, burst %d", d.RateLimits.RequestsPerSecond, d.RateLimits.Burst))
			})
		},
	}
	c.addDataFlags(cmd.Flags())
	return withUsageErrors(cmd)
}

// capabilities lists the capabilities the service publishes as supported.
func capabilities(c domain.Capabilities) string {
	var on []string
	for _, kv := range []struct {
		name string
		v    bool
	}{{"mailbox", c.Mailbox}, {"receipts", c.Receipts}, {"blob_upload", c.BlobUpload}, {"memory_snapshot", c.MemorySnapshot},
		{"memory_delta", c.MemoryDelta}, {"webhook_events", c.WebhookEvents}, {"server_export", c.ServerExport},
		{"live_feed", c.LiveFeed}, {"oauth", c.OAuth}} {
		if kv.v {
			on = append(on, kv.name)
		}
	}
	if len(on) == 0 {
		return "(none)"
	}
	return strings.Join(on, ", ")
}
