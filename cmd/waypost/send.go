package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/waypost/waypost/client"
	"github.com/waypost/waypost/domain"
)

func newSendCmd() *cobra.Command {
	c := &conn{}
	var to []string
	var subject, text, file, kind, thread, replyTo, metadata, requestID string
	cmd := &cobra.Command{
		Use:   "send",
		Short: "Send a message (committed exactly once, retried safely with the same request ID)",
		Long: `Send a message as the token's actor. The text comes from --text, --file, or standard input.
Without --to the message goes to the space's default recipient. A reply (--reply-to MESSAGE_ID) must
name its recipients with --to; it joins the original's thread.

Every send has a request ID. Without --request-id one is generated and printed on stderr before
anything is sent: if the command is interrupted or the outcome is unknown, run it again with the same
--request-id (or check with 'waypost status --request-id ...'); the message is never stored twice.
On a timeout or a retryable error the command asks the service about the original submission and
retries at most twice with the same request ID; it stops on a conflict or an authentication failure.`,
		Example: `  waypost send --to $B --subject "report ready" --text "Three options are in the notes."
  echo "see attachment" | waypost send --to $B --kind result
  waypost send --to $A --reply-to msg_0123456789abcdefghjk --text "Thanks, option 2."
  waypost send --request-id req-2026-10-11-001 --file report.md --metadata '{"origin":"cli"}'`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if text != "" && file != "" {
				return usagef("give --text or --file, not both")
			}
			if replyTo != "" && len(to) == 0 {
				return usagef("a reply must name its recipients: add --to (the producer of %s, usually)", replyTo)
			}
			if requestID != "" && !domain.ValidRequestID(requestID) {
				return usagef("--request-id must match [A-Za-z0-9_.:-]{1,128}")
			}
			var md json.RawMessage
			if metadata != "" {
				var obj map[string]any
				if err := json.Unmarshal([]byte(metadata), &obj); err != nil || obj == nil {
					return usagef("--metadata must be a JSON object")
				}
				md = json.RawMessage(metadata)
			}
			body, err := messageText(cmd, text, file)
			if err != nil {
				return err
			}
			stderr := cmd.ErrOrStderr()
			cl, err := c.data(client.WithRetryNotify(func(retry int, cause error) {
				fmt.Fprintf(stderr, "retry %d/%d with the same request_id after: %v\n", retry, client.MaxSendRetries, cause)
			}))
			if err != nil {
				return err
			}
			req := domain.SendRequest{RequestID: requestID, RecipientIDs: to, Kind: kind, Subject: subject, Body: &domain.MessageBody{Text: body},
				Metadata: md}
			if thread != "" {
				req.ThreadID = &thread
			}
			if replyTo != "" {
				req.InReplyTo = &replyTo
			}
			if req.RequestID == "" {
				req.RequestID = client.NewRequestID()
				// Printed before sending, so that an interrupted send can be repeated with the same key.
				fmt.Fprintf(stderr, "request_id: %s (to repeat this send safely: --request-id %s)\n", req.RequestID, req.RequestID)
			}
			res, err := cl.SendWithRetry(cmd.Context(), req)
			if err != nil {
				if client.IsRetryable(err) {
					return fmt.Errorf("%w\nthe outcome is unknown: check with 'waypost status --request-id %s' or repeat the send with --request-id %s",
						err, req.RequestID, req.RequestID)
				}
				return err
			}
			return c.result(cmd.OutOrStdout(), res, res.MessageID, "submission_state", string(res.SubmissionState), "message_id", res.MessageID,
				"thread_id", res.ThreadID, "visible_seq", res.VisibleSeq, "committed_at", res.CommittedAt.Format(time.RFC3339Nano))
		},
	}
	f := cmd.Flags()
	c.addDataFlags(f)
	f.BoolVarP(&c.quiet, "quiet", "q", false, "print only the message ID")
	f.StringSliceVar(&to, "to", nil, "recipient actor ID (repeatable; default: the space's default recipient)")
	f.StringVar(&subject, "subject", "", "subject")
	f.StringVar(&text, "text", "", "message text")
	f.StringVar(&file, "file", "", "read the message text from this file ('-' for standard input)")
	f.StringVar(&kind, "kind", "", "kind, e.g. message, result, question (default message)")
	f.StringVar(&thread, "thread", "", "thread ID (default: a new thread, or the thread of --reply-to)")
	f.StringVar(&replyTo, "reply-to", "", "message ID this message answers")
	f.StringVar(&metadata, "metadata", "", "metadata as a JSON object")
	f.StringVar(&requestID, "request-id", "", "idempotency key (default: generated and printed on stderr before sending)")
	return withUsageErrors(cmd)
}

// messageText reads the body from --text, --file, or standard input.
func messageText(cmd *cobra.Command, text, file string) (string, error) {
	if text != "" {
		return text, nil
	}
	var r io.Reader
	switch file {
	case "", "-":
		in := cmd.InOrStdin()
		if f, ok := in.(*os.File); ok {
			if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
				fmt.Fprintln(cmd.ErrOrStderr(), "reading the message text from standard input (end with Ctrl-D)")
			}
		}
		r = in
	default:
		f, err := os.Open(file)
		if err != nil {
			return "", usagef("--file: %v", err)
		}
		defer f.Close()
		r = f
	}
	// Read a little more than the largest body the service accepts, so that it reports the limit.
	raw, err := io.ReadAll(io.LimitReader(r, int64(domain.DefaultLimits().MaxBodyTextBytes)+1))
	if err != nil {
		return "", fmt.Errorf("reading the message text: %w", err)
	}
	return string(raw), nil
}

// quote shows a subject on one line.
func quote(s string) string { return strconv.Quote(s) }
