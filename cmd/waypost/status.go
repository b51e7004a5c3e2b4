package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/waypost/waypost/api/ops"
	"github.com/waypost/waypost/domain"
)

func newStatusCmd() *cobra.Command {
	c := &conn{}
	var operation, requestID string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the state of one of your own submissions (after a timeout or an interrupted send)",
		Long: `Ask the service about a submission made with the token's actor: reserved, prepared, committed or failed,
with the stable result once committed. NOT_FOUND means the service has no reservation for this request
ID, which is not proof that nothing happened elsewhere: repeat the send with the same --request-id.`,
		Example: `  waypost status --request-id req_3f2a9c0d4e5b6a7c8d9e0f1a2b3c4d5e
  waypost status --operation inbox.ack --request-id req_3f2a9c0d4e5b6a7c8d9e0f1a2b3c4d5e --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := need("request-id", requestID); err != nil {
				return err
			}
			cl, err := c.data()
			if err != nil {
				return err
			}
			st, err := cl.Status(cmd.Context(), operation, requestID)
			if err != nil {
				return err
			}
			return c.show(cmd, st, func(w io.Writer) error {
				kv := []string{"operation", st.Operation, "request_id", st.RequestID, "submission_state", string(st.SubmissionState),
					"resource_id", st.ResourceID}
				if st.Error != nil {
					kv = append(kv, "error", fmt.Sprintf("%s: %s", st.Error.Code, st.Error.Message))
				}
				if err := fields(w, kv...); err != nil {
					return err
				}
				if len(st.Result) == 0 {
					return nil
				}
				var buf bytes.Buffer
				if err := json.Indent(&buf, st.Result, "", "  "); err != nil {
					return fmt.Errorf("formatting the result: %w", err)
				}
				_, err := fmt.Fprintf(w, "result:\n%s\n", buf.String())
				return err
			})
		},
	}
	f := cmd.Flags()
	c.addDataFlags(f)
	f.StringVar(&operation, "operation", domain.OpMessageSend, "operation name: "+strings.Join(ops.StatusOperations(), ", "))
	f.StringVar(&requestID, "request-id", "", "the request ID of the submission (required)")
	return withUsageErrors(cmd)
}
