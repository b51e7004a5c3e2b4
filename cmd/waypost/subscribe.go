package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/waypost/waypost/client"
	"github.com/waypost/waypost/domain"
)

// eventTypes lists the event types a subscription can name.
var eventTypes = []string{domain.EventMessageCommitted, domain.EventMemoryRevisionPublished, domain.EventReceiptUpdated}

func newSubscribeCmd() *cobra.Command {
	c := &conn{}
	var consumer, target, secretFile, requestID string
	var events []string
	var ttl time.Duration
	var newSecret bool
	var cf filterFlags
	cmd := &cobra.Command{
		Use:   "subscribe",
		Short: "Create or renew a webhook subscription (signed push notifications of new items)",
		Long: `Subscribe a webhook receiver to new items of a consumer (capability webhook_events; the token needs the
subscription.manage scope). Each notification is a signed CloudEvent that only says which item was
committed: the receiver reads the content with its own token (inbox, get). Event types:
` + strings.Join(eventTypes, ", ") + `.

Before answering, the service sends the receiver a signed verification challenge that it must echo within
10 seconds; a receiver that does not gets WEBHOOK_VERIFICATION_FAILED, and a target the address rules
refuse (not public HTTPS) gets FORBIDDEN_TARGET. The secret is "whsec_" + the standard base64 of 32 random
bytes: put it in a file the receiver also reads and pass --secret-file, or let --new-secret generate one,
which is printed once on standard output (store it at once: nobody can show it again). A receiver that checks
the challenge's signature needs the secret before the call, so generate it beforehand, e.g.
  printf 'whsec_%s\n' "$(head -c 32 /dev/urandom | base64)" > hook.secret

The same consumer, filter and URL again renew the subscription (do it before refresh_before); a new
secret rotates it, and the old one keeps signing for five more minutes. Without --request-id one is
generated and printed on stderr; repeat the command with it after an interruption.`,
		Example: `  waypost subscribe --event waypost.message.committed.v1 --webhook-url https://hooks.example.com/waypost --secret-file hook.secret
  waypost subscribe --consumer con_0123456789abcdefghjk --event waypost.message.committed.v1 \
      --event waypost.receipt.updated.v1 --webhook-url https://hooks.example.com/waypost --new-secret --ttl 72h
  waypost subscribe --event waypost.memory.revision.published.v1 --collection notes --webhook-url https://hooks.example.com/m --secret-file hook.secret -q`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(events) == 0 {
				return usagef("--event is required: one or more of %s", strings.Join(eventTypes, ", "))
			}
			for _, e := range events {
				if !slices.Contains(eventTypes, e) {
					return usagef("--event %q is not an event type: use %s", e, strings.Join(eventTypes, ", "))
				}
			}
			if err := need("webhook-url", target); err != nil {
				return err
			}
			switch {
			case secretFile != "" && newSecret:
				return usagef("give --secret-file or --new-secret, not both")
			case secretFile == "" && !newSecret:
				return usagef("no secret: pass --secret-file FILE (the receiver's secret) or --new-secret")
			case newSecret && c.json:
				return usagef("--new-secret prints the secret as text: with --json, pass --secret-file")
			}
			if requestID != "" && !domain.ValidRequestID(requestID) {
				return usagef("--request-id must match [A-Za-z0-9_.:-]{1,128}")
			}
			req := domain.UpsertSubscriptionRequest{RequestID: requestID, EventTypes: events, Filter: cf.filter(cmd),
				Delivery: domain.SubscriptionDelivery{Mode: domain.DeliveryModeWebhook, URL: target}}
			if cmd.Flags().Changed("ttl") {
				if ttl <= 0 || ttl%time.Second != 0 {
					return usagef("--ttl must be a positive whole number of seconds, e.g. 24h")
				}
				s := int(ttl / time.Second)
				req.TTLSeconds = &s
			}
			cl, con, err := c.consumerData(cmd.Context(), consumer)
			if err != nil {
				return err
			}
			req.ConsumerID = con
			w, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
			if newSecret {
				if req.Delivery.Secret, err = client.NewWebhookSecret(); err != nil {
					return err
				}
				// Printed before the call, so that it is not lost when the call fails.
				fmt.Fprintln(stderr, "a new webhook secret follows on standard output: store it now and give it to the receiver; it is shown only once")
				if _, err := fmt.Fprintln(w, req.Delivery.Secret); err != nil {
					return fmt.Errorf("writing the secret: %w", err)
				}
			} else if req.Delivery.Secret, err = readSecretFile(cmd.InOrStdin(), secretFile); err != nil {
				return err
			}
			if req.RequestID == "" {
				req.RequestID = client.NewRequestID()
				fmt.Fprintf(stderr, "request_id: %s (to repeat this subscribe safely: --request-id %s)\n", req.RequestID, req.RequestID)
			}
			sub, err := cl.UpsertSubscription(cmd.Context(), req)
			if err != nil {
				return err
			}
			return c.result(w, sub, sub.SubscriptionID, subscriptionFields(sub)...)
		},
	}
	f := cmd.Flags()
	c.addDataFlags(f)
	f.BoolVarP(&c.quiet, "quiet", "q", false, "print only the subscription ID (after the secret with --new-secret)")
	f.StringVar(&consumer, "consumer", "", "consumer ID (default: the consumer the token is bound to)")
	f.StringSliceVar(&events, "event", nil, "event type (repeatable, required): "+strings.Join(eventTypes, ", "))
	f.StringVar(&target, "webhook-url", "", "the receiver's URL, public HTTPS (required; --url is the service's)")
	f.StringVar(&secretFile, "secret-file", "", "file holding the receiver's whsec_ secret ('-' for standard input)")
	f.BoolVar(&newSecret, "new-secret", false, "generate a new secret and print it once on standard output")
	f.DurationVar(&ttl, "ttl", 0, "lifetime, e.g. 24h (default: the service's subscription_ttl_default; at most 168h)")
	f.StringVar(&requestID, "request-id", "", "idempotency key (default: generated and printed on stderr)")
	cf.register(cmd)
	return withUsageErrors(cmd)
}

// readSecretFile reads a webhook secret from a file ("-": standard input). Its content is never printed.
func readSecretFile(stdin io.Reader, path string) (string, error) {
	var raw []byte
	var err error
	if path == "-" {
		raw, err = io.ReadAll(io.LimitReader(stdin, 4096))
	} else {
		raw, err = os.ReadFile(path)
	}
	if err != nil {
		return "", usagef("--secret-file: %v", err)
	}
	s := strings.TrimSpace(string(raw))
	if !strings.HasPrefix(s, domain.SecretPrefix) || strings.ContainsAny(s, " \t\r\n") {
		return "", usagef("--secret-file: the file must hold one secret, %q + the standard base64 of 32 random bytes", domain.SecretPrefix)
	}
	return s, nil
}

func subscriptionFields(s domain.SubscriptionResult) []string {
	kv := []string{"subscription_id", s.SubscriptionID, "state", s.State, "consumer_id", s.ConsumerID,
		"event_types", strings.Join(s.EventTypes, ", "), "url", s.Delivery.URL}
	f := s.Filter
	if len(f.ProducerIDs)+len(f.ThreadIDs)+len(f.ItemTypes)+len(f.CollectionIDs) > 0 {
		kv = append(kv, "filter.producer_ids", strings.Join(f.ProducerIDs, ", "), "filter.thread_ids", strings.Join(f.ThreadIDs, ", "),
			"filter.item_types", strings.Join(f.ItemTypes, ", "), "filter.collection_ids", strings.Join(f.CollectionIDs, ", "))
	}
	kv = append(kv, "created_at", s.CreatedAt.Format(time.RFC3339), "expires_at", s.ExpiresAt.Format(time.RFC3339),
		"refresh_before", s.RefreshBefore.Format(time.RFC3339))
	if h := s.Health; h != nil {
		kv = append(kv, "last_success_at", timeOrNone(h.LastSuccessAt), "last_failure_at", timeOrNone(h.LastFailureAt),
			"last_failure_reason", orNone(h.LastFailureReason), "consecutive_failures", strconv.Itoa(h.ConsecutiveFailures))
	}
	return kv
}

func timeOrNone(t *time.Time) string {
	if t == nil {
		return "(none)"
	}
	return t.Format(time.RFC3339)
}

func newSubscriptionsCmd() *cobra.Command {
	c := &conn{}
	cmd := &cobra.Command{
		Use:   "subscriptions",
		Short: "List your webhook subscriptions with their delivery health",
		Long: `List the webhook subscriptions of the token's actor (and of its consumer, for a token bound to one): state
(active, stopped, expired), expiry, and how deliveries went lately (last success, last failure and its
reason, consecutive failures).`,
		Example: `  waypost subscriptions
  waypost subscriptions --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := c.data()
			if err != nil {
				return err
			}
			list, err := cl.ListSubscriptions(cmd.Context())
			if err != nil {
				return err
			}
			ids := make([]string, len(list.Subscriptions))
			for i, s := range list.Subscriptions {
				ids[i] = s.SubscriptionID
			}
			return c.list(cmd, list, ids, "no subscriptions", "SUBSCRIPTION\tSTATE\tCONSUMER\tEXPIRES_AT\tLAST_SUCCESS\tFAILURES\tLAST_FAILURE\tURL",
				func(i int) string {
					s := list.Subscriptions[i]
					var last, reason string
					n := 0
					if h := s.Health; h != nil {
						last, n, reason = timeOrNone(h.LastSuccessAt), h.ConsecutiveFailures, orNone(h.LastFailureReason)
					}
					return fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s", s.SubscriptionID, s.State, s.ConsumerID, s.ExpiresAt.Format(time.RFC3339),
						last, n, reason, s.Delivery.URL)
				})
		},
	}
	c.addDataFlags(cmd.Flags())
	cmd.Flags().BoolVarP(&c.quiet, "quiet", "q", false, "print only the subscription IDs")
	return withUsageErrors(cmd)
}

func newUnsubscribeCmd() *cobra.Command {
	c := &conn{}
	var requestID string
	cmd := &cobra.Command{
		Use:   "unsubscribe SUBSCRIPTION_ID",
		Short: "Stop a webhook subscription",
		Long: `Stop a webhook subscription: no further attempt is made. A notification already in flight may still
arrive. Stopping a stopped subscription succeeds again.`,
		Example: `  waypost unsubscribe sub_0123456789abcdefghjkmnpqrs
  waypost subscriptions -q | xargs -n1 waypost unsubscribe -q`,
		Args: exactArgs(1, "SUBSCRIPTION_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if requestID != "" && !domain.ValidRequestID(requestID) {
				return usagef("--request-id must match [A-Za-z0-9_.:-]{1,128}")
			}
			cl, err := c.data()
			if err != nil {
				return err
			}
			if requestID == "" {
				requestID = client.NewRequestID()
				fmt.Fprintf(cmd.ErrOrStderr(), "request_id: %s\n", requestID)
			}
			res, err := cl.StopSubscription(cmd.Context(), args[0], domain.StopSubscriptionRequest{RequestID: requestID})
			if err != nil {
				return err
			}
			return c.result(cmd.OutOrStdout(), res, res.SubscriptionID, "subscription_id", res.SubscriptionID, "state", res.State)
		},
	}
	f := cmd.Flags()
	c.addDataFlags(f)
	f.BoolVarP(&c.quiet, "quiet", "q", false, "print only the subscription ID")
	f.StringVar(&requestID, "request-id", "", "idempotency key (default: generated and printed on stderr)")
	return withUsageErrors(cmd)
}

// adminDeliveriesCmd is `waypost admin deliveries`: the webhook failure records of a space.
func adminDeliveriesCmd(c *conn) *cobra.Command {
	var state string
	list := adminSub(c, &cobra.Command{
		Use:   "list",
		Short: "List a space's webhook delivery records (failed by default)",
		Long: `List the webhook delivery records of a space in one state: failed (attempts exhausted or the receiver
answered 410 Gone), pending (attempts under way) or cancelled (the subscription stopped, expired or lost
its rights before an attempt). Delivered notifications leave no record.`,
		Example: `  waypost admin deliveries list --space $WAYPOST_SPACE
  waypost admin deliveries list --state pending --json`,
		Args: noArgs,
	}, adminOp[domain.DeliveryList]{
		space: true,
		flags: func(cmd *cobra.Command) {
			cmd.Flags().StringVar(&state, "state", domain.DeliveryFailed, "failed, pending or cancelled")
		},
		check: func(*cobra.Command) error {
			switch state {
			case domain.DeliveryFailed, domain.DeliveryPending, domain.DeliveryCancelled:
				return nil
			}
			return usagef("--state must be failed, pending or cancelled")
		},
		call: func(ctx context.Context, ad *client.Admin, in adminIn) (domain.DeliveryList, error) {
			return ad.ListDeliveries(ctx, in.space, state)
		},
		print: func(cmd *cobra.Command, res domain.DeliveryList) error {
			ids := make([]string, len(res.Deliveries))
			for i, d := range res.Deliveries {
				ids[i] = d.DeliveryID
			}
			return c.list(cmd, res, ids, "no "+state+" deliveries", "DELIVERY\tSTATE\tATTEMPTS\tEVENT_TYPE\tEVENT_ID\tSUBSCRIPTION\tUPDATED_AT\tREASON",
				func(i int) string {
					d := res.Deliveries[i]
					reason := d.FailureReason
					if reason == "" {
						reason = "-"
					}
					return fmt.Sprintf("%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s", d.DeliveryID, d.State, d.Attempts, d.EventType, d.EventID, d.SubscriptionID,
						d.UpdatedAt.Format(time.RFC3339), reason)
				})
		},
	})
	redeliver := adminIDSub(c, &cobra.Command{
		Use:   "redeliver DELIVERY_ID",
		Short: "Make a failed or cancelled delivery pending again, with a fresh schedule of attempts",
		Long: `Make a failed or cancelled webhook delivery pending again: the same event (same id) is attempted again on
the full schedule. The subscription, its credential's rights and the target are re-checked first, so a
delivery of a stopped or expired subscription ends cancelled. A pending delivery is left as it is.`,
		Example: `  waypost admin deliveries redeliver dl_0123456789abcdefghjkmnpqrs --space $WAYPOST_SPACE
  waypost admin deliveries list -q | xargs -n1 waypost admin deliveries redeliver -q`,
	}, (*client.Admin).Redeliver, func(d domain.Delivery) (string, []string) {
		next := "(none)"
		if d.NextAttemptAt != nil {
			next = d.NextAttemptAt.Format(time.RFC3339)
		}
		return d.DeliveryID, []string{"delivery_id", d.DeliveryID, "state", d.State, "event_id", d.EventID,
			"subscription_id", d.SubscriptionID, "next_attempt_at", next}
	})
	return group("deliveries", "List or redeliver webhook deliveries", list, redeliver)
}
