package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/waypost/waypost/client"
	"github.com/waypost/waypost/client/queue"
	"github.com/waypost/waypost/domain"
)

// maxInboxPages bounds how many pages one 'waypost inbox' reads.
const maxInboxPages = 1000

func newInboxCmd() *cobra.Command {
	c := &conn{}
	var consumer, state, cursor string
	var limit int
	var raw, ackProcessed, showPending, withBody, follow bool
	var followWait time.Duration
	cmd := &cobra.Command{
		Use:   "inbox",
		Short: "Fetch new feed items into a local durable queue, acknowledge them as received, and print them",
		Long: `Read the consumer's feed through a local durable queue (a file, by default ~/.waypost/<consumer>.queue):
each page is saved with the new cursor in one local transaction before it is acknowledged as received
with that cursor as checkpoint, so an interrupted run loses nothing and shows nothing twice. New items
are printed; items received earlier and not yet processed stay pending (--pending lists them).
--ack-processed marks the printed items processed once they are shown.

The consumer is --consumer, else the consumer the token is bound to. When the consumer's view changed
since the last run (CURSOR_SCOPE_CHANGED), the queue starts again from the beginning and skips the items
it already has.

--raw reads one page from --cursor (or the beginning) without the queue and without acknowledging.`,
		Example: `  waypost inbox
  waypost inbox --body --ack-processed
  waypost inbox --pending
  waypost inbox --raw --limit 10 --cursor "$NEXT_CURSOR" --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cursor != "" && !raw {
				return usagef("--cursor needs --raw (the queue keeps its own cursor)")
			}
			if raw && (state != "" || ackProcessed || showPending) {
				return usagef("--raw reads without the queue: it takes no --state, --pending or --ack-processed")
			}
			if follow && (raw || showPending) {
				return usagef("--follow keeps reading through the queue: it takes no --raw or --pending")
			}
			if limit < 0 {
				return usagef("--limit must be positive")
			}
			cl, con, err := c.consumerData(cmd.Context(), consumer)
			if err != nil {
				return err
			}
			if raw {
				return rawInbox(cmd, c, cl, con, cursor, limit, withBody)
			}
			q, path, err := openQueue(state, cl, con)
			if err != nil {
				return err
			}
			defer q.Close()
			if follow {
				// Long-polls feed.wait to wake up; items still come through the queue (saved, then acknowledged).
				return followQueue(cmd, c, cl, q, path, queue.FollowOptions{Limit: limit, Wait: followWait}, ackProcessed, withBody)
			}
			return queueInbox(cmd, c, cl, q, path, limit, showPending, ackProcessed, withBody)
		},
	}
	f := cmd.Flags()
	c.addDataFlags(f)
	f.StringVar(&consumer, "consumer", "", "consumer ID (default: the consumer the token is bound to)")
	f.StringVar(&state, "state", "", "queue file (default ~/.waypost/<consumer>.queue)")
	f.IntVar(&limit, "limit", 0, "items per page (default: the service's inbox_page_default)")
	f.BoolVar(&ackProcessed, "ack-processed", false, "after printing, mark the printed items processed")
	f.BoolVar(&showPending, "pending", false, "print every pending item, not only the new ones")
	f.BoolVar(&withBody, "body", false, "also fetch and print the text of each message")
	f.BoolVar(&raw, "raw", false, "read one page directly, without the queue and without acknowledging")
	f.BoolVar(&follow, "follow", false, "keep reading: wait for new items with feed.wait until interrupted")
	f.DurationVar(&followWait, "wait", 25*time.Second, "with --follow: how long one long poll waits")
	f.StringVar(&cursor, "cursor", "", "with --raw: start after this cursor (default: the beginning)")
	return withUsageErrors(cmd)
}

// inboxResult is the --json output of the queue mode.
type inboxResult struct {
	ConsumerID string            `json:"consumer_id"`
	Queue      string            `json:"queue"`
	Items      []domain.FeedItem `json:"items"`
	Pending    int               `json:"pending"`
	Processed  []string          `json:"processed"`
	Resynced   bool              `json:"resynced"`
	Cursor     *string           `json:"cursor"`
}

func queueInbox(cmd *cobra.Command, c *conn, cl *client.Client, q *queue.Queue, path string, limit int, showPending, ackProcessed, withBody bool) error {
	ctx := cmd.Context()
	w, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	out := inboxResult{ConsumerID: q.ConsumerID(), Queue: path, Items: []domain.FeedItem{}, Processed: []string{}}
	var fetchErr error
	for range maxInboxPages {
		res, err := q.Fetch(ctx, limit)
		out.Items = append(out.Items, res.New...)
		out.Resynced = out.Resynced || res.Resynced
		if err != nil {
			fetchErr = err
			break
		}
		if !res.HasMore {
			break
		}
	}
	if showPending {
		p, err := q.Pending()
		if err != nil {
			return err
		}
		out.Items = p
	}
	if !c.json {
		if out.Resynced {
			fmt.Fprintln(stderr, "the consumer's view or rights changed: resynchronized from the beginning, skipping items already received")
		}
		if err := printItems(cmd, cl, w, out.Items, withBody); err != nil {
			return err
		}
	}
	if fetchErr != nil {
		if c.json {
			_ = printJSON(w, out) // what was saved before the failure; it stays pending in the queue
		}
		return fetchErr
	}
	if ackProcessed && len(out.Items) > 0 {
		for _, it := range out.Items {
			out.Processed = append(out.Processed, it.ItemID)
		}
		if err := q.MarkProcessed(ctx, out.Processed); err != nil {
			return err
		}
	}
	st, err := q.State()
	if err != nil {
		return err
	}
	out.Pending, out.Cursor = st.Pending, st.Cursor
	if c.json {
		return printJSON(w, out)
	}
	if showPending {
		fmt.Fprintf(stderr, "%d pending item(s) shown, %d marked processed, %d still pending (queue %s)\n",
			len(out.Items), len(out.Processed), st.Pending, path)
	} else {
		news := "no new items"
		if len(out.Items) > 0 {
			news = fmt.Sprintf("%d new item(s) saved and acknowledged as received", len(out.Items))
		}
		fmt.Fprintf(stderr, "%s, %d marked processed, %d pending (queue %s)\n", news, len(out.Processed), st.Pending, path)
	}
	return nil
}

func rawInbox(cmd *cobra.Command, c *conn, cl *client.Client, con, cursor string, limit int, withBody bool) error {
	req := domain.ReadRequest{ConsumerID: con, Limit: limit}
	if cursor != "" {
		req.Cursor = &cursor
	}
	p, err := cl.ReadInbox(cmd.Context(), req)
	if err != nil {
		return err
	}
	return c.show(cmd, p, func(w io.Writer) error {
		if err := printItems(cmd, cl, w, p.Items, withBody); err != nil {
			return err
		}
		return fields(w, "next_cursor", p.NextCursor, "has_more", fmt.Sprint(p.HasMore), "checkpoint_cursor", orNone(p.CheckpointCursor))
	})
}

// printItems prints feed items, one a line (and each message's text with withBody).
func printItems(cmd *cobra.Command, cl *client.Client, w io.Writer, items []domain.FeedItem, withBody bool) error {
	for _, it := range items {
		if err := printItem(cmd, cl, w, it, withBody); err != nil {
			return err
		}
	}
	return nil
}

// printItem prints one feed item on one line (and the message text with withBody).
func printItem(cmd *cobra.Command, cl *client.Client, w io.Writer, it domain.FeedItem, withBody bool) error {
	var line string
	switch it.ItemType {
	case domain.ItemMessage:
		var d domain.MessageItemData
		_ = json.Unmarshal(it.Data, &d)
		line = fmt.Sprintf("%s  message  %s  from %s  kind=%s  subject=%s", it.ItemID, it.ResourceID, it.ProducerID, d.Kind, quote(d.Subject))
		if d.InReplyTo != nil {
			line += "  in_reply_to=" + *d.InReplyTo
		}
		if d.AttachmentCount > 0 {
			line += fmt.Sprintf("  attachments=%d", d.AttachmentCount)
		}
	case domain.ItemReceipt:
		var d domain.ReceiptItemData
		_ = json.Unmarshal(it.Data, &d)
		line = fmt.Sprintf("%s  receipt  %s  by consumer %s of %s (item %s)", it.ItemID, d.Stage, d.ConsumerID, d.ResourceID, d.AckedItemID)
	case domain.ItemMemoryRevision:
		var d domain.MemoryRevisionItemData
		_ = json.Unmarshal(it.Data, &d)
		line = fmt.Sprintf("%s  memory_revision  collection=%s  revision=%d  mode=%s  upserted=%d  deleted=%d", it.ItemID, d.CollectionID,
			d.Revision, d.Mode, d.Upserted, d.Deleted)
	default:
		line = fmt.Sprintf("%s  %s  %s", it.ItemID, it.ItemType, it.ResourceID)
	}
	if _, err := fmt.Fprintln(w, line); err != nil {
		return fmt.Errorf("writing output: %w", err)
	}
	if withBody && it.ItemType == domain.ItemMessage {
		m, err := cl.GetMessage(cmd.Context(), it.ResourceID)
		if err != nil {
			return err
		}
		text := strings.TrimRight(m.Body.Text, "\n")
		fmt.Fprintf(w, "    %s\n", strings.ReplaceAll(text, "\n", "\n    "))
	}
	return nil
}

// openQueue opens the consumer's durable queue (queuePath) and returns it with its file.
func openQueue(state string, cl *client.Client, consumer string) (*queue.Queue, string, error) {
	path, err := queuePath(state, consumer)
	if err != nil {
		return nil, "", err
	}
	q, err := queue.Open(path, cl, consumer)
	return q, path, err
}

// queuePath is the consumer's durable queue file: --state, or ~/.waypost/<consumer>.queue.
func queuePath(state, consumer string) (string, error) {
	if state != "" {
		return state, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", usagef("no home directory for the default queue file (%v): pass --state", err)
	}
	return filepath.Join(home, ".waypost", consumer+".queue"), nil
}
