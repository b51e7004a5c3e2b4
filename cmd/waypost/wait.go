package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/waypost/waypost/client"
	"github.com/waypost/waypost/client/queue"
	"github.com/waypost/waypost/domain"
)

// defaultWait is the default long-poll duration: it fits the 25 s feed_wait_max_ms of the AWS deployment.
const defaultWait = 25 * time.Second

func newWaitCmd() *cobra.Command {
	c := &conn{}
	var consumer, cursor, state string
	var wait time.Duration
	var limit int
	var follow, withBody, ackProcessed bool
	cmd := &cobra.Command{
		Use:   "wait",
		Short: "Wait until something new reaches a consumer's feed (long poll); --follow keeps receiving",
		Long: `Long-poll the consumer's feed (feed.wait, capability live_feed): return as soon as an item visible to
the consumer commits after --cursor (default: the beginning of the retained history, so anything retained
returns at once), or with no items when --timeout passes. Nothing is acknowledged: print the page and its
next_cursor, and pass that cursor to the next wait. The consumer is --consumer, else the consumer the
token is bound to.

--follow keeps receiving until interrupted (Ctrl-C), through the same local durable queue as
'waypost inbox' (default ~/.waypost/<consumer>.queue, --state): every page is saved locally before it is
acknowledged as received, so nothing is lost or shown twice across interruptions, crashes or network
failures (retried with backoff). feed.wait only wakes it up; the items always come from the durable read.
New items are printed as they arrive (--json: one JSON object per line); --ack-processed marks them
processed once printed. Without live_feed it polls every 5 s instead.`,
		Example: `  waypost wait
  waypost wait --consumer con_0123456789abcdefghjk --cursor "$NEXT_CURSOR" --timeout 10s --json
  waypost wait --follow
  waypost wait --follow --body --ack-processed --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if wait <= 0 || wait%time.Millisecond != 0 {
				return usagef("--timeout must be a positive whole number of milliseconds")
			}
			if limit < 0 {
				return usagef("--limit must be positive")
			}
			if follow && cursor != "" {
				return usagef("--cursor is for a single wait; --follow keeps its cursor in the queue")
			}
			if !follow && (state != "" || ackProcessed) {
				return usagef("--state and --ack-processed need --follow")
			}
			ctx := cmd.Context()
			cl, con, err := c.consumerData(ctx, consumer)
			if err != nil {
				return err
			}
			if !follow {
				req := domain.WaitRequest{ConsumerID: con, TimeoutMS: int(wait / time.Millisecond), Limit: limit}
				if cursor != "" {
					req.Cursor = &cursor
				}
				page, err := cl.WaitFeed(ctx, req)
				if err != nil {
					return err
				}
				return c.show(cmd, page, func(w io.Writer) error {
					if len(page.Items) == 0 {
						fmt.Fprintf(cmd.ErrOrStderr(), "nothing new within %s\n", wait)
					}
					if err := printItems(cmd, cl, w, page.Items, withBody); err != nil {
						return err
					}
					return fields(w, "next_cursor", page.NextCursor, "has_more", fmt.Sprint(page.HasMore))
				})
			}
			q, path, err := openQueue(state, cl, con)
			if err != nil {
				return err
			}
			defer q.Close()
			return followQueue(cmd, c, cl, q, path, queue.FollowOptions{Limit: limit, Wait: wait}, ackProcessed, withBody)
		},
	}
	f := cmd.Flags()
	// Not addDataFlags: --timeout is the long-poll duration here (the HTTP exchange is allowed that plus a margin).
	f.StringVar(&c.url, "url", "", "service base URL (default $"+envURL+", else "+defaultURL+")")
	f.StringVar(&c.token, "token", "", "bearer token (default $"+envToken+"; prefer the variable: flags show in ps)")
	f.BoolVar(&c.json, "json", false, "print the page (with --follow: each item) as JSON")
	c.timeout = client.DefaultTimeout
	f.DurationVar(&wait, "timeout", defaultWait, "how long one long poll waits (at most the service's feed_wait_max_ms)")
	f.StringVar(&consumer, "consumer", "", "consumer ID (default: the consumer the token is bound to)")
	f.StringVar(&cursor, "cursor", "", "wait for items after this cursor (default: the beginning)")
	f.IntVar(&limit, "limit", 0, "items per page (default: the service's inbox_page_default)")
	f.BoolVar(&follow, "follow", false, "keep receiving through the local durable queue until interrupted")
	f.StringVar(&state, "state", "", "with --follow: queue file (default ~/.waypost/<consumer>.queue)")
	f.BoolVar(&ackProcessed, "ack-processed", false, "with --follow: mark the printed items processed")
	f.BoolVar(&withBody, "body", false, "also fetch and print the text of each message")
	return withUsageErrors(cmd)
}

// followQueue follows a consumer's feed through its durable queue until the command's context ends (the
// 'waypost wait --follow' loop; 'waypost inbox --follow' can run the same): new items are printed as they
// are saved, and marked processed after printing with ackProcessed.
func followQueue(cmd *cobra.Command, c *conn, cl *client.Client, q *queue.Queue, path string, opts queue.FollowOptions, ackProcessed, withBody bool) error {
	ctx := cmd.Context()
	w, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	opts.OnRetry = func(err error, delay time.Duration) {
		fmt.Fprintf(stderr, "%v; trying again in %s\n", err, delay)
	}
	fmt.Fprintf(stderr, "following consumer %s through queue %s (interrupt to stop)\n", q.ConsumerID(), path)
	received, processed := 0, 0
	err := q.Follow(ctx, cl, opts, func(ctx context.Context, items []domain.FeedItem) error {
		for _, it := range items {
			if c.json {
				if err := enc.Encode(it); err != nil {
					return fmt.Errorf("writing output: %w", err)
				}
			} else if err := printItem(cmd, cl, w, it, withBody); err != nil {
				return err
			}
		}
		received += len(items)
		if ackProcessed {
			ids := make([]string, len(items))
			for i, it := range items {
				ids[i] = it.ItemID
			}
			err := q.MarkProcessed(ctx, ids)
			if err != nil && ctx.Err() == nil {
				return err
			}
			// Interrupted: the items are processed locally; the acknowledgement is sent by the next run.
			processed += len(ids)
		}
		return nil
	})
	if err != nil && ctx.Err() != nil {
		// Interrupted while handing items over: they are saved in the queue, pending (or processed locally,
		// their acknowledgement owed and sent by the next run).
		err = nil
	}
	st, serr := q.State()
	if serr == nil {
		fmt.Fprintf(stderr, "%d new item(s) received, %d marked processed, %d pending (queue %s)\n", received, processed, st.Pending, path)
	}
	if err != nil {
		return err
	}
	return serr
}
