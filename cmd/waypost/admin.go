package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/waypost/waypost/client"
	"github.com/waypost/waypost/domain"
)

func newAdminCmd() *cobra.Command {
	c := &conn{}
	cmd := &cobra.Command{
		Use:   "admin",
		Short: "Manage spaces, actors, consumers, collections, grants, tokens and webhook deliveries (control plane)",
		Long: `Call the control plane (/admin/v0) with the instance admin secret. The secret is for the owner of the
instance only: never give it to an agent. It is read from --admin-secret, else WAYPOST_ADMIN_SECRET, else
./waypost-data/admin-secret (the file 'waypost serve' generates with its default --data).

Creates accept --request-id: repeating a create with the same request ID returns the original object
instead of a second one (a repeated token create returns the token ID without the secret).
Commands that act inside a space take --space, or WAYPOST_SPACE.`,
		Example: `  export WAYPOST_ADMIN_SECRET=$(cat waypost-data/admin-secret)
  export WAYPOST_SPACE=$(waypost admin space create --name home -q)
  A=$(waypost admin actor create --name "agent A" -q)
  CA=$(waypost admin consumer create --actor $A -q)
  waypost admin token create --actor $A --consumer $CA --scope message.send,message.read,receipt.write`,
		Args: noArgs,
	}
	c.addAdminFlags(cmd.PersistentFlags())
	cmd.PersistentFlags().BoolVarP(&c.quiet, "quiet", "q", false, "print only the new or changed ID (token create and rotate: only the token)")
	cmd.AddCommand(adminSpaceCmd(c), adminActorCmd(c), adminConsumerCmd(c), adminCollectionCmd(c), adminGrantCmd(c), adminTokenCmd(c), adminOAuthCmd(c), adminDeliveriesCmd(c), adminStatsCmd(c))
	return withUsageErrors(cmd)
}

// group makes a command that only holds subcommands.
func group(use, short string, subs ...*cobra.Command) *cobra.Command {
	g := &cobra.Command{Use: use, Short: short, Args: noArgs}
	g.AddCommand(subs...)
	return g
}

// spaceFlag registers --space on cmd and returns a resolver for it.
func spaceFlag(cmd *cobra.Command) func() (string, error) {
	var v string
	cmd.Flags().StringVar(&v, "space", "", "space ID (default $"+envSpace+")")
	return func() (string, error) {
		s := stringOrEnv(v, envSpace)
		if s == "" {
			return "", usagef("no space: pass --space or set %s", envSpace)
		}
		return s, nil
	}
}

func requestIDFlag(cmd *cobra.Command) *string {
	var v string
	cmd.Flags().StringVar(&v, "request-id", "", "idempotency key of the create (default: a new random one)")
	return &v
}

func orNewID(rid string) string {
	if rid == "" {
		return client.NewRequestID()
	}
	return rid
}

func need(name, value string) error {
	if value == "" {
		return usagef("--%s is required", name)
	}
	return nil
}

// needAll is need for each flag name and value pair, in order.
func needAll(nameValue ...string) error {
	for i := 0; i+1 < len(nameValue); i += 2 {
		if err := need(nameValue[i], nameValue[i+1]); err != nil {
			return err
		}
	}
	return nil
}

// result prints v as JSON (--json), its primary ID (-q), or the given fields.
func (c *conn) result(w io.Writer, v any, id string, kv ...string) error {
	switch {
	case c.json:
		return printJSON(w, v)
	case c.quiet:
		_, err := fmt.Fprintln(w, id)
		return err
	default:
		return fields(w, kv...)
	}
}

// list prints a list v as JSON (--json), the IDs of its entries one per line (-q), none (the message empty
// on stderr) when it has no entries, or a table: the header, then row(i) for entry i (cells separated by
// tabs).
func (c *conn) list(cmd *cobra.Command, v any, ids []string, empty, header string, row func(i int) string) error {
	w := cmd.OutOrStdout()
	switch {
	case c.json:
		return printJSON(w, v)
	case c.quiet:
		for _, id := range ids {
			if _, err := fmt.Fprintln(w, id); err != nil {
				return err
			}
		}
		return nil
	case len(ids) == 0:
		fmt.Fprintln(cmd.ErrOrStderr(), empty)
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for i := range ids {
		fmt.Fprintln(tw, row(i))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("writing output: %w", err)
	}
	return nil
}

// adminOp is what one admin subcommand adds to the shape they all share: resolve --space, check the
// flags, read the admin secret, make one call, print its result.
type adminOp[T any] struct {
	space     bool                           // takes --space (default $WAYPOST_SPACE), resolved first
	requestID bool                           // takes --request-id (a create)
	flags     func(cmd *cobra.Command)       // registers the command's own flags
	check     func(cmd *cobra.Command) error // usage checks, before the admin secret is read
	// call is the control-plane call.
	call func(ctx context.Context, ad *client.Admin, in adminIn) (T, error)
	// show gives what result prints: the ID for -q, the fields otherwise (--json prints r itself).
	show func(r T) (id string, kv []string)
	// print replaces show for output that is not one object.
	print func(cmd *cobra.Command, r T) error
}

// adminIn is what the shared part resolved for the call.
type adminIn struct {
	cmd       *cobra.Command // the running command (for its flags)
	space     string         // with adminOp.space
	requestID string         // with adminOp.requestID: the flag, or a new random ID
	args      []string       // the positional arguments
}

// adminSub gives cmd (Use, Short, Long, Example and Args set) the flags and RunE of op.
func adminSub[T any](c *conn, cmd *cobra.Command, op adminOp[T]) *cobra.Command {
	var space func() (string, error)
	if op.space {
		space = spaceFlag(cmd)
	}
	var rid *string
	if op.requestID {
		rid = requestIDFlag(cmd)
	}
	if op.flags != nil {
		op.flags(cmd)
	}
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		in := adminIn{cmd: cmd, args: args}
		if space != nil {
			s, err := space()
			if err != nil {
				return err
			}
			in.space = s
		}
		if op.check != nil {
			if err := op.check(cmd); err != nil {
				return err
			}
		}
		if rid != nil {
			in.requestID = orNewID(*rid)
		}
		ad, err := c.admin(cmd)
		if err != nil {
			return err
		}
		r, err := op.call(cmd.Context(), ad, in)
		if err != nil {
			return err
		}
		if op.print != nil {
			return op.print(cmd, r)
		}
		id, kv := op.show(r)
		return c.result(cmd.OutOrStdout(), r, id, kv...)
	}
	return cmd
}

// adminIDSub is adminSub for a subcommand that acts on one object of a space, named by its one argument
// (the second word of cmd.Use, e.g. "revoke GRANT_ID"): it calls call(ad, ctx, space, id) and prints the
// result with show.
func adminIDSub[T any](c *conn, cmd *cobra.Command, call func(*client.Admin, context.Context, string, string) (T, error),
	show func(r T) (id string, kv []string)) *cobra.Command {
	cmd.Args = exactArgs(1, strings.Fields(cmd.Use)[1])
	return adminSub(c, cmd, adminOp[T]{
		space: true,
		call: func(ctx context.Context, ad *client.Admin, in adminIn) (T, error) {
			return call(ad, ctx, in.space, in.args[0])
		},
		show: show,
	})
}

func spaceFields(sp domain.SpaceResult) []string {
	kv := []string{"space_id", sp.SpaceID, "display_name", sp.DisplayName, "default_recipient_id", sp.DefaultRecipientID,
		"source_uri", sp.SourceURI}
	if sp.RateLimits != nil {
		kv = append(kv, "rate_limits", fmt.Sprintf("%d requests/s per credential, burst %d", sp.RateLimits.RequestsPerSecond, sp.RateLimits.Burst))
	}
	if sp.Quotas != nil {
		kv = append(kv, "quotas", fmt.Sprintf("%d bytes stored, %d items", sp.Quotas.MaxStoredBytes, sp.Quotas.MaxItems))
	}
	if sp.Usage != nil {
		kv = append(kv, "usage", fmt.Sprintf("%d bytes stored, %d items", sp.Usage.StoredBytes, sp.Usage.Items))
	}
	return kv
}

func adminSpaceCmd(c *conn) *cobra.Command {
	var name string
	create := adminSub(c, &cobra.Command{
		Use:   "create",
		Short: "Create a space with its default recipient actor",
		Example: `  waypost admin space create --name home
  export WAYPOST_SPACE=$(waypost admin space create --name home -q)`,
		Args: noArgs,
	}, adminOp[domain.SpaceResult]{
		requestID: true,
		flags:     func(cmd *cobra.Command) { cmd.Flags().StringVar(&name, "name", "", "display name") },
		call: func(ctx context.Context, ad *client.Admin, in adminIn) (domain.SpaceResult, error) {
			return ad.CreateSpace(ctx, domain.CreateSpaceRequest{RequestID: in.requestID, DisplayName: name})
		},
		show: func(sp domain.SpaceResult) (string, []string) { return sp.SpaceID, spaceFields(sp) },
	})
	get := adminSub(c, &cobra.Command{
		Use:     "get SPACE_ID",
		Short:   "Show a space",
		Example: `  waypost admin space get sp_0123456789abcdefghjk`,
		Args:    exactArgs(1, "SPACE_ID"),
	}, adminOp[domain.SpaceResult]{
		call: func(ctx context.Context, ad *client.Admin, in adminIn) (domain.SpaceResult, error) {
			return ad.GetSpace(ctx, in.args[0])
		},
		show: func(sp domain.SpaceResult) (string, []string) {
			return sp.SpaceID, append(append(spaceFields(sp), "created_at", sp.CreatedAt.Format(time.RFC3339)), deletionFields(sp)...)
		},
	})
	var limits domain.RateLimits
	var quotas domain.Quotas
	update := adminSub(c, &cobra.Command{
		Use:   "update SPACE_ID",
		Short: "Change a space's per-credential rate limits or its capacity quotas",
		Long: `Change a space's settings.

--rate and --burst set the request rate limit of each of its credentials (tokens): a token bucket
refilled at --rate requests per second that holds at most --burst requests. A request over it gets 429
RATE_LIMITED with Retry-After.

--max-bytes and --max-items set its capacity quotas: the bytes it may store (metadata records and
blob-store objects: message bodies, blobs, memory states) and the items it may publish (messages and
memory revisions). A send, memory publish or blob seal that would pass one is refused with 422
RESOURCE_LIMIT and publishes nothing; acknowledgements are never refused. One of the two alone keeps the
other as it is. Lowering a quota below the usage refuses new writes until it is raised again.

'waypost admin space get' shows the settings in force (the defaults until the owner sets them) and the
usage; describe publishes them to the space's agents.`,
		Example: `  waypost admin space update sp_0123456789abcdefghjk --rate 20 --burst 60
  waypost admin space update sp_0123456789abcdefghjk --max-bytes 1073741824 --max-items 100000`,
		Args: exactArgs(1, "SPACE_ID"),
	}, adminOp[domain.SpaceResult]{
		flags: func(cmd *cobra.Command) {
			cmd.Flags().IntVar(&limits.RequestsPerSecond, "rate", 0, "requests per second each credential may make (1…100000)")
			cmd.Flags().IntVar(&limits.Burst, "burst", 0, "requests a credential may make at once (1…1000000)")
			cmd.Flags().Int64Var(&quotas.MaxStoredBytes, "max-bytes", 0, "bytes the space may store: metadata and blobs")
			cmd.Flags().Int64Var(&quotas.MaxItems, "max-items", 0, "items the space may publish: messages and memory revisions")
		},
		check: func(cmd *cobra.Command) error {
			f := cmd.Flags()
			rate := f.Changed("rate") || f.Changed("burst")
			if rate && (!f.Changed("rate") || !f.Changed("burst")) {
				return usagef("--rate and --burst go together")
			}
			if !rate && !f.Changed("max-bytes") && !f.Changed("max-items") {
				return usagef("nothing to change: pass --rate and --burst, or --max-bytes and/or --max-items")
			}
			return nil
		},
		call: func(ctx context.Context, ad *client.Admin, in adminIn) (domain.SpaceResult, error) {
			f := in.cmd.Flags()
			var req domain.UpdateSpaceRequest
			if f.Changed("rate") {
				req.RateLimits = &limits
			}
			if f.Changed("max-bytes") || f.Changed("max-items") {
				q := quotas // a merge patch: the member not given is absent (zero) and keeps its value
				req.Quotas = &q
			}
			return ad.UpdateSpace(ctx, in.args[0], req)
		},
		show: func(sp domain.SpaceResult) (string, []string) { return sp.SpaceID, spaceFields(sp) },
	})
	return group("space", "Create, show, change or delete spaces", create, get, update, adminSpaceDeleteCmd(c))
}

func adminActorCmd(c *conn) *cobra.Command {
	var name string
	create := adminSub(c, &cobra.Command{
		Use:     "create",
		Short:   "Add an actor (a user, agent or client identity) to a space",
		Example: `  A=$(waypost admin actor create --space $WAYPOST_SPACE --name "agent A" -q)`,
		Args:    noArgs,
	}, adminOp[domain.ActorResult]{
		space: true, requestID: true,
		flags: func(cmd *cobra.Command) {
			cmd.Flags().StringVar(&name, "name", "", "display name (not an identity credential)")
		},
		call: func(ctx context.Context, ad *client.Admin, in adminIn) (domain.ActorResult, error) {
			return ad.CreateActor(ctx, in.space, domain.CreateActorRequest{RequestID: in.requestID, DisplayName: name})
		},
		show: func(a domain.ActorResult) (string, []string) {
			return a.ActorID, []string{"actor_id", a.ActorID, "display_name", a.DisplayName}
		},
	})
	revoke := adminIDSub(c, &cobra.Command{
		Use:     "revoke ACTOR_ID",
		Short:   "Revoke an actor: every credential of it stops working at once",
		Example: `  waypost admin actor revoke act_0123456789abcdefghjk --space $WAYPOST_SPACE`,
	}, (*client.Admin).RevokeActor, func(a domain.ActorResult) (string, []string) {
		return a.ActorID, []string{"actor_id", a.ActorID, "revoked", strconv.FormatBool(a.Revoked)}
	})
	return group("actor", "Create or revoke actors", create, revoke)
}

// filterFlags registers the consumer filter flags.
type filterFlags struct {
	producers, threads, itemTypes, collections []string
}

func (f *filterFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringSliceVar(&f.producers, "producer", nil, "only items produced by these actors (repeatable)")
	fs.StringSliceVar(&f.threads, "thread", nil, "only items of these threads (repeatable)")
	fs.StringSliceVar(&f.itemTypes, "item-type", nil, "only these item types: message, receipt, memory_revision (repeatable)")
	fs.StringSliceVar(&f.collections, "collection", nil, "only memory revisions of these collections (repeatable)")
}

// filter returns the filter, or nil when no filter flag was given.
func (f *filterFlags) filter(cmd *cobra.Command) *domain.Filter {
	fs := cmd.Flags()
	if !fs.Changed("producer") && !fs.Changed("thread") && !fs.Changed("item-type") && !fs.Changed("collection") {
		return nil
	}
	return &domain.Filter{ProducerIDs: f.producers, ThreadIDs: f.threads, ItemTypes: f.itemTypes, CollectionIDs: f.collections}
}

func consumerShow(r domain.ConsumerResult) (string, []string) {
	kv := []string{"consumer_id", r.ConsumerID, "actor_id", r.ActorID, "view", string(r.View), "view_revision", strconv.FormatInt(r.ViewRevision, 10)}
	f := r.Filter
	if len(f.ProducerIDs)+len(f.ThreadIDs)+len(f.ItemTypes)+len(f.CollectionIDs) > 0 {
		kv = append(kv, "filter.producer_ids", strings.Join(f.ProducerIDs, ", "), "filter.thread_ids", strings.Join(f.ThreadIDs, ", "),
			"filter.item_types", strings.Join(f.ItemTypes, ", "), "filter.collection_ids", strings.Join(f.CollectionIDs, ", "))
	}
	return r.ConsumerID, kv
}

func adminConsumerCmd(c *conn) *cobra.Command {
	var actor, view string
	var cf filterFlags
	create := adminSub(c, &cobra.Command{
		Use:   "create",
		Short: "Create a consumer: a stable receiving identity of an actor, with its own cursor and receipts",
		Example: `  CB=$(waypost admin consumer create --actor $B -q)
  waypost admin consumer create --actor $B --producer $A --item-type message`,
		Args: noArgs,
	}, adminOp[domain.ConsumerResult]{
		space: true, requestID: true,
		flags: func(cmd *cobra.Command) {
			cmd.Flags().StringVar(&actor, "actor", "", "the actor that owns the consumer (required)")
			cmd.Flags().StringVar(&view, "view", string(domain.ViewInbox), "view: inbox or space_log")
			cf.register(cmd)
		},
		check: func(*cobra.Command) error { return need("actor", actor) },
		call: func(ctx context.Context, ad *client.Admin, in adminIn) (domain.ConsumerResult, error) {
			return ad.CreateConsumer(ctx, in.space, domain.CreateConsumerRequest{RequestID: in.requestID, ActorID: actor,
				View: domain.View(view), Filter: cf.filter(in.cmd)})
		},
		show: consumerShow,
	})
	var req domain.UpdateConsumerRequest
	var uview string
	var uf filterFlags
	update := adminSub(c, &cobra.Command{
		Use:   "update CONSUMER_ID",
		Short: "Change a consumer's view or filter (bumps view_revision: old cursors must resynchronize)",
		Long: `Change a consumer's view or filter. Any filter flag replaces the whole filter (flags not given become
empty lists). The consumer's view_revision goes up, so cursors from before the change get
CURSOR_SCOPE_CHANGED and the client resynchronizes ('waypost inbox' does that by itself).`,
		Example: `  waypost admin consumer update con_0123456789abcdefghjk --producer $A
  waypost admin consumer update con_0123456789abcdefghjk --view space_log`,
		Args: exactArgs(1, "CONSUMER_ID"),
	}, adminOp[domain.ConsumerResult]{
		space: true,
		flags: func(cmd *cobra.Command) {
			cmd.Flags().StringVar(&uview, "view", "", "new view: inbox or space_log")
			uf.register(cmd)
		},
		check: func(cmd *cobra.Command) error {
			req = domain.UpdateConsumerRequest{View: domain.View(uview), Filter: uf.filter(cmd)}
			if req.View == "" && req.Filter == nil {
				return usagef("nothing to change: pass --view or a filter flag")
			}
			return nil
		},
		call: func(ctx context.Context, ad *client.Admin, in adminIn) (domain.ConsumerResult, error) {
			return ad.UpdateConsumer(ctx, in.space, in.args[0], req)
		},
		show: consumerShow,
	})
	return group("consumer", "Create or change consumers", create, update)
}

func adminCollectionCmd(c *conn) *cobra.Command {
	var source, id, scope string
	create := adminSub(c, &cobra.Command{
		Use:     "create",
		Short:   "Create an empty memory collection (revision 0) with an immutable scope text",
		Example: `  waypost admin collection create --source-actor $A --scope "project notes of agent A" --id notes`,
		Args:    noArgs,
	}, adminOp[domain.CollectionResult]{
		space: true, requestID: true,
		flags: func(cmd *cobra.Command) {
			cmd.Flags().StringVar(&source, "source-actor", "", "the actor whose memory the collection holds (required)")
			cmd.Flags().StringVar(&id, "id", "", "collection ID (default: generated)")
			cmd.Flags().StringVar(&scope, "scope", "", "what the collection covers, fixed forever (required)")
		},
		check: func(*cobra.Command) error { return needAll("source-actor", source, "scope", scope) },
		call: func(ctx context.Context, ad *client.Admin, in adminIn) (domain.CollectionResult, error) {
			return ad.CreateCollection(ctx, in.space, domain.CreateCollectionRequest{RequestID: in.requestID,
				SourceActorID: source, CollectionID: id, Scope: scope})
		},
		show: func(r domain.CollectionResult) (string, []string) {
			return r.CollectionID, []string{"collection_id", r.CollectionID, "source_actor_id", r.SourceActorID,
				"scope", r.Scope, "current_revision", strconv.FormatInt(r.CurrentRevision, 10)}
		},
	})
	return group("collection", "Create memory collections", create)
}

func grantShow(g domain.GrantResult) (string, []string) {
	return g.GrantID, []string{"grant_id", g.GrantID, "actor_id", g.ActorID, "permission", string(g.Permission),
		"collection_id", g.CollectionID, "blob_id", g.BlobID, "revoked", strconv.FormatBool(g.Revoked)}
}

func adminGrantCmd(c *conn) *cobra.Command {
	var actor, perm, coll, blob string
	create := adminSub(c, &cobra.Command{
		Use:   "create",
		Short: "Give an actor a permission: memory.read, memory.write (on a collection), blob.reference, space.observe",
		Example: `  waypost admin grant create --actor $B --permission memory.read --collection notes
  waypost admin grant create --actor $B --permission space.observe`,
		Args: noArgs,
	}, adminOp[domain.GrantResult]{
		space: true, requestID: true,
		flags: func(cmd *cobra.Command) {
			cmd.Flags().StringVar(&actor, "actor", "", "the actor that receives the permission (required)")
			cmd.Flags().StringVar(&perm, "permission", "", "memory.read, memory.write, blob.reference or space.observe (required)")
			cmd.Flags().StringVar(&coll, "collection", "", "collection ID (memory.read and memory.write)")
			cmd.Flags().StringVar(&blob, "blob", "", "blob ID (blob.reference)")
		},
		check: func(*cobra.Command) error { return needAll("actor", actor, "permission", perm) },
		call: func(ctx context.Context, ad *client.Admin, in adminIn) (domain.GrantResult, error) {
			return ad.CreateGrant(ctx, in.space, domain.CreateGrantRequest{RequestID: in.requestID, ActorID: actor,
				Permission: domain.Permission(perm), CollectionID: coll, BlobID: blob})
		},
		show: grantShow,
	})
	revoke := adminIDSub(c, &cobra.Command{
		Use:     "revoke GRANT_ID",
		Short:   "Revoke a grant",
		Example: `  waypost admin grant revoke grt_0123456789abcdefghjk`,
	}, (*client.Admin).RevokeGrant, grantShow)
	return group("grant", "Create or revoke grants", create, revoke)
}

// tokenShow is a token's fields; -q prints the secret when there is one.
func tokenShow(t domain.TokenResult) (string, []string) {
	exp := "(never)"
	if t.ExpiresAt != nil {
		exp = t.ExpiresAt.Format(time.RFC3339)
	}
	kv := []string{"token_id", t.TokenID, "actor_id", t.ActorID, "consumer_id", orNone(t.ConsumerID), "scopes", ids(t.Scopes),
		"expires_at", exp}
	if t.Revoked {
		kv = append(kv, "revoked", "true")
	}
	id := t.TokenID
	if t.Token != "" {
		kv = append(kv, "token", t.Token, "note", "the token is shown only now: store it (e.g. export WAYPOST_TOKEN=...)")
		id = t.Token
	}
	return id, kv
}

func adminTokenCmd(c *conn) *cobra.Command {
	var actor, consumer, expiresAt string
	var scopes []string
	var expiresIn time.Duration
	var expires *time.Time
	create := adminSub(c, &cobra.Command{
		Use:   "create",
		Short: "Issue a data-plane bearer token for an actor (the secret is shown once)",
		Long: `Issue a bearer token for an actor, optionally bound to one of its consumers, with a set of scopes:
` + ids(domain.AllScopes()) + `.
The token itself is printed only by this command (and by rotate); with -q only the token is printed.`,
		Example: `  export WAYPOST_TOKEN=$(waypost admin token create --actor $A --consumer $CA \
      --scope message.send,message.read,receipt.write -q)
  waypost admin token create --actor $B --scope message.read --expires-in 24h`,
		Args: noArgs,
	}, adminOp[domain.TokenResult]{
		space: true, requestID: true,
		flags: func(cmd *cobra.Command) {
			cmd.Flags().StringVar(&actor, "actor", "", "the actor the token acts as (required)")
			cmd.Flags().StringVar(&consumer, "consumer", "", "bind the token to this consumer of the actor")
			cmd.Flags().StringSliceVar(&scopes, "scope", nil, "scopes, comma-separated or repeated (required)")
			cmd.Flags().DurationVar(&expiresIn, "expires-in", 0, "expire after this duration (e.g. 720h)")
			cmd.Flags().StringVar(&expiresAt, "expires-at", "", "expire at this RFC 3339 time")
		},
		check: func(*cobra.Command) error {
			expires = nil
			if err := need("actor", actor); err != nil {
				return err
			}
			if len(scopes) == 0 {
				return usagef("--scope is required: one or more of %s", ids(domain.AllScopes()))
			}
			switch {
			case expiresIn != 0 && expiresAt != "":
				return usagef("give --expires-in or --expires-at, not both")
			case expiresIn < 0:
				return usagef("--expires-in must be positive")
			case expiresIn > 0:
				t := time.Now().Add(expiresIn).UTC().Truncate(time.Second)
				expires = &t
			case expiresAt != "":
				t, err := time.Parse(time.RFC3339, expiresAt)
				if err != nil {
					return usagef("--expires-at: %v", err)
				}
				expires = &t
			}
			return nil
		},
		call: func(ctx context.Context, ad *client.Admin, in adminIn) (domain.TokenResult, error) {
			req := domain.CreateTokenRequest{RequestID: in.requestID, ActorID: actor, ConsumerID: consumer, ExpiresAt: expires}
			for _, s := range scopes {
				req.Scopes = append(req.Scopes, domain.Scope(strings.TrimSpace(s)))
			}
			return ad.CreateToken(ctx, in.space, req)
		},
		show: tokenShow,
	})
	revoke := adminIDSub(c, &cobra.Command{
		Use:     "revoke TOKEN_ID",
		Short:   "Revoke a token",
		Example: `  waypost admin token revoke tok_0123456789abcdefghjk`,
	}, (*client.Admin).RevokeToken, tokenShow)
	rotate := adminIDSub(c, &cobra.Command{
		Use:     "rotate TOKEN_ID",
		Short:   "Replace a token's secret (same ID, actor, consumer and scopes; the old secret stops working)",
		Example: `  export WAYPOST_TOKEN=$(waypost admin token rotate tok_0123456789abcdefghjk -q)`,
	}, (*client.Admin).RotateToken, tokenShow)
	list := adminSub(c, &cobra.Command{
		Use:   "list",
		Short: "List a space's tokens (never their secrets), with the OAuth client that holds each",
		Long: `List every token of a space: the ones minted with 'token create' and the ones OAuth hosts obtained
through the consent page (their OAUTH_CLIENT column names the client; 'waypost admin oauth list' tells
which host it is). Revoked tokens are listed as revoked. Secrets are never shown.`,
		Example: `  waypost admin token list --space $WAYPOST_SPACE
  waypost admin token list --json`,
		Args: noArgs,
	}, adminOp[domain.TokenList]{
		space: true,
		call: func(ctx context.Context, ad *client.Admin, in adminIn) (domain.TokenList, error) {
			return ad.ListTokens(ctx, in.space)
		},
		print: func(cmd *cobra.Command, res domain.TokenList) error {
			tokenIDs := make([]string, len(res.Tokens))
			for i, t := range res.Tokens {
				tokenIDs[i] = t.TokenID
			}
			return c.list(cmd, res, tokenIDs, "no tokens in this space", "TOKEN\tACTOR\tCONSUMER\tSCOPES\tEXPIRES_AT\tSTATE\tOAUTH_CLIENT",
				func(i int) string {
					t := res.Tokens[i]
					exp, state, holder := "(never)", "active", "-"
					if t.ExpiresAt != nil {
						exp = t.ExpiresAt.Format(time.RFC3339)
						if !t.ExpiresAt.After(time.Now()) {
							state = "expired"
						}
					}
					if t.Revoked {
						state = "revoked"
					}
					if t.OAuthClientID != "" {
						holder = t.OAuthClientID
					}
					return fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s\t%s", t.TokenID, t.ActorID, orNone(t.ConsumerID), ids(t.Scopes), exp, state, holder)
				})
		},
	})
	return group("token", "Create, list, revoke or rotate tokens", create, list, revoke, rotate)
}

func adminOAuthCmd(c *conn) *cobra.Command {
	list := adminSub(c, &cobra.Command{
		Use:   "list",
		Short: "List the OAuth clients (MCP hosts) registered with the server",
		Long: `List the clients that registered with the OAuth authorization server (RFC 7591): MCP hosts such as
claude.ai or ChatGPT connectors. A client can do nothing until you approve it on the consent page
(/authorize); the tokens it then holds are listed by 'waypost admin token list'.`,
		Example: `  waypost admin oauth list`,
		Args:    noArgs,
	}, adminOp[domain.OAuthClientList]{
		call: func(ctx context.Context, ad *client.Admin, _ adminIn) (domain.OAuthClientList, error) {
			return ad.ListOAuthClients(ctx)
		},
		print: func(cmd *cobra.Command, res domain.OAuthClientList) error {
			clientIDs := make([]string, len(res.Clients))
			for i, cl := range res.Clients {
				clientIDs[i] = cl.ClientID
			}
			return c.list(cmd, res, clientIDs, "no OAuth clients registered", "CLIENT\tNAME\tREDIRECT_URIS\tAUTH\tREGISTERED_AT\tSTATE",
				func(i int) string {
					cl := res.Clients[i]
					state := "active"
					if cl.Revoked {
						state = "revoked"
					}
					name := cl.ClientName
					if name == "" {
						name = "-"
					}
					return fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s", cl.ClientID, name, strings.Join(cl.RedirectURIs, ","), cl.TokenEndpointAuthMethod,
						cl.CreatedAt.Format(time.RFC3339), state)
				})
		},
	})
	revoke := adminSub(c, &cobra.Command{
		Use:     "revoke CLIENT_ID",
		Short:   "Revoke an OAuth client: every token it holds stops working, and it can no longer refresh or ask again",
		Example: `  waypost admin oauth revoke oc_0123456789abcdefghjk`,
		Args:    exactArgs(1, "CLIENT_ID"),
	}, adminOp[domain.OAuthClient]{
		call: func(ctx context.Context, ad *client.Admin, in adminIn) (domain.OAuthClient, error) {
			return ad.RevokeOAuthClient(ctx, in.args[0])
		},
		show: func(cl domain.OAuthClient) (string, []string) {
			return cl.ClientID, []string{"client_id", cl.ClientID, "client_name", cl.ClientName, "revoked", fmt.Sprint(cl.Revoked)}
		},
	})
	return group("oauth", "List or revoke the OAuth clients (MCP hosts) that connect through the consent page", list, revoke)
}
