package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/waypost/waypost/client"
	"github.com/waypost/waypost/domain"
)

func newAckCmd() *cobra.Command {
	c := &conn{}
	var stage, checkpoint, consumer, requestID string
	cmd := &cobra.Command{
		Use:   "ack ITEM_ID...",
		Short: "Acknowledge feed items as received or processed (and optionally record a checkpoint)",
		Long: `Report receipts for feed items of a consumer: received (the input is reliably saved) or processed (it
was handled). Stages only move forward; repeating an acknowledgement changes nothing. --checkpoint
records the cursor up to which everything is saved; an older checkpoint is a no-op.

This talks to the service directly. 'waypost inbox' keeps a local queue and acknowledges by itself
(received on fetch, processed with --ack-processed); use 'ack' for scripts that keep their own state.`,
		Example: `  waypost ack it_3_9f86d081884c7d65 --stage processed
  waypost ack it_3_9f86d081884c7d65 it_4_2c26b46b68ffc68f --stage received --checkpoint "$CURSOR"`,
		Args: minArgs(1, "one or more ITEM_IDs"),
		RunE: func(cmd *cobra.Command, args []string) error {
			st := domain.Stage(stage)
			if st != domain.StageReceived && st != domain.StageProcessed {
				return usagef("--stage must be received or processed")
			}
			if requestID != "" && !domain.ValidRequestID(requestID) {
				return usagef("--request-id must match [A-Za-z0-9_.:-]{1,128}")
			}
			cl, con, err := c.consumerData(cmd.Context(), consumer)
			if err != nil {
				return err
			}
			req := domain.AckRequest{RequestID: orNewID(requestID), ConsumerID: con}
			for _, id := range args {
				req.Items = append(req.Items, domain.AckEntry{ItemID: id, Stage: st})
			}
			if checkpoint != "" {
				req.CheckpointCursor = &checkpoint
			}
			res, err := cl.Ack(cmd.Context(), req)
			if err != nil {
				return err
			}
			return c.show(cmd, res, func(w io.Writer) error {
				for _, r := range res.Receipts {
					change := "unchanged"
					if r.Changed {
						change = "changed"
					}
					fmt.Fprintf(w, "%s\t%s\t(%s)\n", r.ItemID, r.Stage, change)
				}
				if res.CheckpointCursor != nil {
					fmt.Fprintf(w, "checkpoint_cursor: %s\n", *res.CheckpointCursor)
				}
				return nil
			})
		},
	}
	f := cmd.Flags()
	c.addDataFlags(f)
	f.StringVar(&stage, "stage", "", "received or processed (required)")
	f.StringVar(&checkpoint, "checkpoint", "", "cursor up to which everything is reliably saved")
	f.StringVar(&consumer, "consumer", "", "consumer ID (default: the consumer the token is bound to)")
	f.StringVar(&requestID, "request-id", "", "idempotency key (default: a new random one)")
	return withUsageErrors(cmd)
}

// consumerData returns the data-plane client and the consumer it reads for (resolveConsumer).
func (c *conn) consumerData(ctx context.Context, flag string) (*client.Client, string, error) {
	cl, err := c.data()
	if err != nil {
		return nil, "", err
	}
	con, err := resolveConsumer(ctx, cl, flag)
	return cl, con, err
}

// resolveConsumer returns the --consumer value, else the consumer the token is bound to (from describe).
func resolveConsumer(ctx context.Context, cl *client.Client, flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	d, err := cl.Describe(ctx)
	if err != nil {
		return "", err
	}
	if d.ConsumerID == nil || *d.ConsumerID == "" {
		return "", usagef("the token is not bound to a consumer: pass --consumer")
	}
	return *d.ConsumerID, nil
}
