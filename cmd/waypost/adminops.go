package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/waypost/waypost/client"
	"github.com/waypost/waypost/domain"
)

// The owner's operations on a space (issue 16): delete it, count its stages.

// deletionFields shows the state of a space and, while or once it is deleted, what was removed.
func deletionFields(sp domain.SpaceResult) []string {
	kv := []string{"state", sp.State}
	d := sp.Deletion
	if d == nil {
		return kv
	}
	kv = append(kv, "deletion_requested_at", d.RequestedAt.Format(time.RFC3339))
	if d.CompletedAt != nil {
		kv = append(kv, "deletion_completed_at", d.CompletedAt.Format(time.RFC3339))
	}
	if d.Phase != "" {
		kv = append(kv, "deletion_phase", d.Phase)
	}
	if d.WaitUntil != nil {
		kv = append(kv, "deletion_waits_until", d.WaitUntil.Format(time.RFC3339)+" (upload URLs still valid)")
	}
	r := d.Removed
	kv = append(kv, "removed", fmt.Sprintf("%d records, %d objects (%d bytes)", r.Records, r.Objects, r.ObjectBytes))
	if len(r.Resources) > 0 {
		kv = append(kv, "removed_resources", countsLine(r.Resources))
	}
	return kv
}

func adminSpaceDeleteCmd(c *conn) *cobra.Command {
	var wait time.Duration
	return adminSub(c, &cobra.Command{
		Use:   "delete SPACE_ID",
		Short: "Delete a space: stop every access at once, then remove all its records and bytes",
		Long: `Delete a space and everything in it (RFC §10.7). From the answer on, no token of the space works (401) and
nothing can be added to it; its messages, memory, blobs, receipts, consumers, actors and tokens are then
removed in the background, in bounded batches that survive restarts. The space stays visible to
'waypost admin space get' with state "deleting", then "deleted" with the counts of what was removed.
There is no undo.

--wait polls until the space is deleted (or the duration passes) and prints the final state.`,
		Example: `  waypost admin space delete sp_0123456789abcdefghjk
  waypost admin space delete sp_0123456789abcdefghjk --wait 10m --json`,
		Args: exactArgs(1, "SPACE_ID"),
	}, adminOp[domain.SpaceResult]{
		flags: func(cmd *cobra.Command) {
			cmd.Flags().DurationVar(&wait, "wait", 0, "wait up to this long for the deletion to complete (0: answer at once)")
		},
		call: func(ctx context.Context, ad *client.Admin, in adminIn) (domain.SpaceResult, error) {
			sp, err := ad.DeleteSpace(ctx, in.args[0])
			if err != nil || wait <= 0 {
				return sp, err
			}
			deadline := time.Now().Add(wait)
			for sp.State != domain.SpaceDeleted && time.Now().Before(deadline) {
				select {
				case <-ctx.Done():
					return sp, ctx.Err()
				case <-time.After(500 * time.Millisecond):
				}
				if sp, err = ad.GetSpace(ctx, in.args[0]); err != nil {
					return sp, err
				}
			}
			if sp.State != domain.SpaceDeleted {
				return sp, fmt.Errorf("the space is still %s after %s (it goes on in the background)", sp.State, wait)
			}
			return sp, nil
		},
		show: func(sp domain.SpaceResult) (string, []string) {
			return sp.SpaceID, append([]string{"space_id", sp.SpaceID}, deletionFields(sp)...)
		},
	})
}

func adminStatsCmd(c *conn) *cobra.Command {
	var maxScan int
	return adminSub(c, &cobra.Command{
		Use:   "stats",
		Short: "Count the exact stage of everything in a space",
		Long: `Show where everything in a space stands (RFC §19.2), counted from its records rather than estimated:

  submissions     writes by stage — reserved (key held, nothing written yet), prepared (body written, not
                  committed), committed, failed — in total and per operation
  blobs           pending (no bytes yet), uploaded (bytes, not sealed), sealed (referenced or not),
                  expiring, expired
  consumers       per consumer: items after its checkpoint it has not received, items received but not
                  processed, items processed, and its checkpoint's position and age
  memory          collections, revisions, publishes that lost the revision check (REVISION_CONFLICT)
  webhooks        subscriptions by state, delivery records by state

A space with more records than --max-scan is counted up to that many and says complete: false.`,
		Example: `  waypost admin stats --space $WAYPOST_SPACE
  waypost admin stats --space $WAYPOST_SPACE --json | jq .consumers`,
		Args: noArgs,
	}, adminOp[domain.SpaceStats]{
		space: true,
		flags: func(cmd *cobra.Command) {
			cmd.Flags().IntVar(&maxScan, "max-scan", 0, "read at most this many records (0: the server's default, 200000)")
		},
		call: func(ctx context.Context, ad *client.Admin, in adminIn) (domain.SpaceStats, error) {
			return ad.Stats(ctx, in.space, maxScan)
		},
		print: func(cmd *cobra.Command, st domain.SpaceStats) error {
			return c.show(cmd, st, func(w io.Writer) error { return printStats(w, st) })
		},
	})
}

func stageLine(c domain.StageCounts) string {
	return fmt.Sprintf("reserved %d, prepared %d, committed %d, failed %d", c.Reserved, c.Prepared, c.Committed, c.Failed)
}

func printStats(w io.Writer, st domain.SpaceStats) error {
	kv := []string{"space_id", st.SpaceID, "state", st.State, "generated_at", st.GeneratedAt.Format(time.RFC3339),
		"complete", strconv.FormatBool(st.Complete), "visible_head", st.VisibleHead, "submissions", stageLine(st.Submissions)}
	ops := make([]string, 0, len(st.SubmissionsByOperation))
	for op := range st.SubmissionsByOperation {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	for _, op := range ops {
		kv = append(kv, "  "+op, stageLine(st.SubmissionsByOperation[op]))
	}
	b := st.Blobs
	kv = append(kv, "blobs", fmt.Sprintf("pending %d, uploaded %d, sealed %d, sealed unreferenced %d, expiring %d, expired %d",
		b.Pending, b.Uploaded, b.Sealed, b.SealedUnreferenced, b.Expiring, b.Expired))
	kv = append(kv, "memory", fmt.Sprintf("collections %d, revisions %d, conflicts %d", st.Memory.Collections, st.Memory.Revisions, st.Memory.Conflicts))
	kv = append(kv, "webhook subscriptions", countsLine(st.Webhooks.Subscriptions), "webhook deliveries", countsLine(st.Webhooks.Deliveries))
	for _, cs := range st.Consumers {
		cp := "none"
		if cs.Checkpoint != nil {
			cp = "visible_seq " + cs.Checkpoint.VisibleSeq
			if cs.Checkpoint.AgeSeconds != nil {
				cp += fmt.Sprintf(", %s old", time.Duration(*cs.Checkpoint.AgeSeconds)*time.Second)
			}
		}
		kv = append(kv, "consumer "+cs.ConsumerID, fmt.Sprintf("actor %s, %s; not received %d, received not processed %d, processed %d; checkpoint %s",
			cs.ActorID, cs.View, cs.NotReceived, cs.ReceivedNotProcessed, cs.Processed, cp))
	}
	if v := st.Storage; v != nil {
		state := "writes taken"
		if v.WritesRefused {
			state = "WRITES REFUSED: free space on this volume"
			if v.RefusedSince != nil {
				state += " (since " + v.RefusedSince.Format(time.RFC3339) + ")"
			}
		}
		kv = append(kv, "storage", fmt.Sprintf("%s: %d bytes free of %d, %d needed to take writes; %s",
			v.Dir, v.FreeBytes, v.TotalBytes, v.NeededBytes, state))
	}
	return fields(w, kv...)
}

// countsLine renders counts by name, sorted ("none" when empty).
func countsLine(m map[string]int64) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
