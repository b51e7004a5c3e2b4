package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
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
	cmd.AddCommand(adminSpaceCmd(c), adminActorCmd(c), adminConsumerCmd(c), adminCollectionCmd(c), adminGrantCmd(c), adminTokenCmd(c), adminDeliveriesCmd(c))
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

func adminSpaceCmd(c *conn) *cobra.Command {
	var name, rid string
	create := &cobra.Command{
		Use:   "create",
		Short: "Create a space with its default recipient actor",
		Example: `  waypost admin space create --name home
  export WAYPOST_SPACE=$(waypost admin space create --name home -q)`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ad, err := c.admin(cmd)
			if err != nil {
				return err
			}
			sp, err := ad.CreateSpace(cmd.Context(), domain.CreateSpaceRequest{RequestID: orNewID(rid), DisplayName: name})
			if err != nil {
				return err
			}
			return c.result(cmd.OutOrStdout(), sp, sp.SpaceID, "space_id", sp.SpaceID, "display_name", sp.DisplayName,
				"default_recipient_id", sp.DefaultRecipientID, "source_uri", sp.SourceURI)
		},
	}
	create.Flags().StringVar(&name, "name", "", "display name")
	create.Flags().StringVar(&rid, "request-id", "", "idempotency key of the create (default: a new random one)")
	get := &cobra.Command{
		Use:     "get SPACE_ID",
		Short:   "Show a space",
		Example: `  waypost admin space get sp_0123456789abcdefghjk`,
		Args:    exactArgs(1, "SPACE_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ad, err := c.admin(cmd)
			if err != nil {
				return err
			}
			sp, err := ad.GetSpace(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return c.result(cmd.OutOrStdout(), sp, sp.SpaceID, "space_id", sp.SpaceID, "display_name", sp.DisplayName,
				"default_recipient_id", sp.DefaultRecipientID, "source_uri", sp.SourceURI, "created_at", sp.CreatedAt.Format(time.RFC3339))
		},
	}
	return group("space", "Create or show spaces", create, get)
}

func adminActorCmd(c *conn) *cobra.Command {
	var name string
	create := &cobra.Command{
		Use:     "create",
		Short:   "Add an actor (a user, agent or client identity) to a space",
		Example: `  A=$(waypost admin actor create --space $WAYPOST_SPACE --name "agent A" -q)`,
		Args:    noArgs,
	}
	createSpace := spaceFlag(create)
	createRID := requestIDFlag(create)
	create.Flags().StringVar(&name, "name", "", "display name (not an identity credential)")
	create.RunE = func(cmd *cobra.Command, _ []string) error {
		space, err := createSpace()
		if err != nil {
			return err
		}
		ad, err := c.admin(cmd)
		if err != nil {
			return err
		}
		a, err := ad.CreateActor(cmd.Context(), space, domain.CreateActorRequest{RequestID: orNewID(*createRID), DisplayName: name})
		if err != nil {
			return err
		}
		return c.result(cmd.OutOrStdout(), a, a.ActorID, "actor_id", a.ActorID, "display_name", a.DisplayName)
	}
	revoke := &cobra.Command{
		Use:     "revoke ACTOR_ID",
		Short:   "Revoke an actor: every credential of it stops working at once",
		Example: `  waypost admin actor revoke act_0123456789abcdefghjk --space $WAYPOST_SPACE`,
		Args:    exactArgs(1, "ACTOR_ID"),
	}
	revokeSpace := spaceFlag(revoke)
	revoke.RunE = func(cmd *cobra.Command, args []string) error {
		space, err := revokeSpace()
		if err != nil {
			return err
		}
		ad, err := c.admin(cmd)
		if err != nil {
			return err
		}
		a, err := ad.RevokeActor(cmd.Context(), space, args[0])
		if err != nil {
			return err
		}
		return c.result(cmd.OutOrStdout(), a, a.ActorID, "actor_id", a.ActorID, "revoked", strconv.FormatBool(a.Revoked))
	}
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

func consumerFields(r domain.ConsumerResult) []string {
	kv := []string{"consumer_id", r.ConsumerID, "actor_id", r.ActorID, "view", string(r.View), "view_revision", strconv.FormatInt(r.ViewRevision, 10)}
	f := r.Filter
	if len(f.ProducerIDs)+len(f.ThreadIDs)+len(f.ItemTypes)+len(f.CollectionIDs) > 0 {
		kv = append(kv, "filter.producer_ids", strings.Join(f.ProducerIDs, ", "), "filter.thread_ids", strings.Join(f.ThreadIDs, ", "),
			"filter.item_types", strings.Join(f.ItemTypes, ", "), "filter.collection_ids", strings.Join(f.CollectionIDs, ", "))
	}
	return kv
}

func adminConsumerCmd(c *conn) *cobra.Command {
	var actor, view string
	var cf filterFlags
	create := &cobra.Command{
		Use:   "create",
		Short: "Create a consumer: a stable receiving identity of an actor, with its own cursor and receipts",
		Example: `  CB=$(waypost admin consumer create --actor $B -q)
  waypost admin consumer create --actor $B --producer $A --item-type message`,
		Args: noArgs,
	}
	createSpace := spaceFlag(create)
	createRID := requestIDFlag(create)
	create.Flags().StringVar(&actor, "actor", "", "the actor that owns the consumer (required)")
	create.Flags().StringVar(&view, "view", string(domain.ViewInbox), "view: inbox or space_log")
	cf.register(create)
	create.RunE = func(cmd *cobra.Command, _ []string) error {
		space, err := createSpace()
		if err != nil {
			return err
		}
		if err := need("actor", actor); err != nil {
			return err
		}
		ad, err := c.admin(cmd)
		if err != nil {
			return err
		}
		r, err := ad.CreateConsumer(cmd.Context(), space, domain.CreateConsumerRequest{RequestID: orNewID(*createRID), ActorID: actor,
			View: domain.View(view), Filter: cf.filter(cmd)})
		if err != nil {
			return err
		}
		return c.result(cmd.OutOrStdout(), r, r.ConsumerID, consumerFields(r)...)
	}
	var uview string
	var uf filterFlags
	update := &cobra.Command{
		Use:   "update CONSUMER_ID",
		Short: "Change a consumer's view or filter (bumps view_revision: old cursors must resynchronize)",
		Long: `Change a consumer's view or filter. Any filter flag replaces the whole filter (flags not given become
empty lists). The consumer's view_revision goes up, so cursors from before the change get
CURSOR_SCOPE_CHANGED and the client resynchronizes ('waypost inbox' does that by itself).`,
		Example: `  waypost admin consumer update con_0123456789abcdefghjk --producer $A
  waypost admin consumer update con_0123456789abcdefghjk --view space_log`,
		Args: exactArgs(1, "CONSUMER_ID"),
	}
	updateSpace := spaceFlag(update)
	update.Flags().StringVar(&uview, "view", "", "new view: inbox or space_log")
	uf.register(update)
	update.RunE = func(cmd *cobra.Command, args []string) error {
		space, err := updateSpace()
		if err != nil {
			return err
		}
		req := domain.UpdateConsumerRequest{View: domain.View(uview), Filter: uf.filter(cmd)}
		if req.View == "" && req.Filter == nil {
			return usagef("nothing to change: pass --view or a filter flag")
		}
		ad, err := c.admin(cmd)
		if err != nil {
			return err
		}
		r, err := ad.UpdateConsumer(cmd.Context(), space, args[0], req)
		if err != nil {
			return err
		}
		return c.result(cmd.OutOrStdout(), r, r.ConsumerID, consumerFields(r)...)
	}
	return group("consumer", "Create or change consumers", create, update)
}

func adminCollectionCmd(c *conn) *cobra.Command {
	var source, id, scope string
	create := &cobra.Command{
		Use:     "create",
		Short:   "Create an empty memory collection (revision 0) with an immutable scope text",
		Example: `  waypost admin collection create --source-actor $A --scope "project notes of agent A" --id notes`,
		Args:    noArgs,
	}
	createSpace := spaceFlag(create)
	createRID := requestIDFlag(create)
	create.Flags().StringVar(&source, "source-actor", "", "the actor whose memory the collection holds (required)")
	create.Flags().StringVar(&id, "id", "", "collection ID (default: generated)")
	create.Flags().StringVar(&scope, "scope", "", "what the collection covers, fixed forever (required)")
	create.RunE = func(cmd *cobra.Command, _ []string) error {
		space, err := createSpace()
		if err != nil {
			return err
		}
		if err := need("source-actor", source); err != nil {
			return err
		}
		if err := need("scope", scope); err != nil {
			return err
		}
		ad, err := c.admin(cmd)
		if err != nil {
			return err
		}
		r, err := ad.CreateCollection(cmd.Context(), space, domain.CreateCollectionRequest{RequestID: orNewID(*createRID),
			SourceActorID: source, CollectionID: id, Scope: scope})
		if err != nil {
			return err
		}
		return c.result(cmd.OutOrStdout(), r, r.CollectionID, "collection_id", r.CollectionID, "source_actor_id", r.SourceActorID,
			"scope", r.Scope, "current_revision", strconv.FormatInt(r.CurrentRevision, 10))
	}
	return group("collection", "Create memory collections", create)
}

func grantFields(g domain.GrantResult) []string {
	return []string{"grant_id", g.GrantID, "actor_id", g.ActorID, "permission", string(g.Permission), "collection_id", g.CollectionID,
		"blob_id", g.BlobID, "revoked", strconv.FormatBool(g.Revoked)}
}

func adminGrantCmd(c *conn) *cobra.Command {
	var actor, perm, coll, blob string
	create := &cobra.Command{
		Use:   "create",
		Short: "Give an actor a permission: memory.read, memory.write (on a collection), blob.reference, space.observe",
		Example: `  waypost admin grant create --actor $B --permission memory.read --collection notes
  waypost admin grant create --actor $B --permission space.observe`,
		Args: noArgs,
	}
	createSpace := spaceFlag(create)
	createRID := requestIDFlag(create)
	create.Flags().StringVar(&actor, "actor", "", "the actor that receives the permission (required)")
	create.Flags().StringVar(&perm, "permission", "", "memory.read, memory.write, blob.reference or space.observe (required)")
	create.Flags().StringVar(&coll, "collection", "", "collection ID (memory.read and memory.write)")
	create.Flags().StringVar(&blob, "blob", "", "blob ID (blob.reference)")
	create.RunE = func(cmd *cobra.Command, _ []string) error {
		space, err := createSpace()
		if err != nil {
			return err
		}
		if err := need("actor", actor); err != nil {
			return err
		}
		if err := need("permission", perm); err != nil {
			return err
		}
		ad, err := c.admin(cmd)
		if err != nil {
			return err
		}
		g, err := ad.CreateGrant(cmd.Context(), space, domain.CreateGrantRequest{RequestID: orNewID(*createRID), ActorID: actor,
			Permission: domain.Permission(perm), CollectionID: coll, BlobID: blob})
		if err != nil {
			return err
		}
		return c.result(cmd.OutOrStdout(), g, g.GrantID, grantFields(g)...)
	}
	revoke := &cobra.Command{
		Use:     "revoke GRANT_ID",
		Short:   "Revoke a grant",
		Example: `  waypost admin grant revoke grt_0123456789abcdefghjk`,
		Args:    exactArgs(1, "GRANT_ID"),
	}
	revokeSpace := spaceFlag(revoke)
	revoke.RunE = func(cmd *cobra.Command, args []string) error {
		space, err := revokeSpace()
		if err != nil {
			return err
		}
		ad, err := c.admin(cmd)
		if err != nil {
			return err
		}
		g, err := ad.RevokeGrant(cmd.Context(), space, args[0])
		if err != nil {
			return err
		}
		return c.result(cmd.OutOrStdout(), g, g.GrantID, grantFields(g)...)
	}
	return group("grant", "Create or revoke grants", create, revoke)
}

func tokenFields(t domain.TokenResult) []string {
	exp := "(never)"
	if t.ExpiresAt != nil {
		exp = t.ExpiresAt.Format(time.RFC3339)
	}
	kv := []string{"token_id", t.TokenID, "actor_id", t.ActorID, "consumer_id", orNone(t.ConsumerID), "scopes", ids(t.Scopes),
		"expires_at", exp}
	if t.Revoked {
		kv = append(kv, "revoked", "true")
	}
	if t.Token != "" {
		kv = append(kv, "token", t.Token, "note", "the token is shown only now: store it (e.g. export WAYPOST_TOKEN=...)")
	}
	return kv
}

// tokenResult prints a token; -q prints the secret when there is one.
func (c *conn) tokenResult(w io.Writer, t domain.TokenResult) error {
	id := t.TokenID
	if t.Token != "" {
		id = t.Token
	}
	return c.result(w, t, id, tokenFields(t)...)
}

func adminTokenCmd(c *conn) *cobra.Command {
	var actor, consumer, expiresAt string
	var scopes []string
	var expiresIn time.Duration
	create := &cobra.Command{
		Use:   "create",
		Short: "Issue a data-plane bearer token for an actor (the secret is shown once)",
		Long: `Issue a bearer token for an actor, optionally bound to one of its consumers, with a set of scopes:
` + ids(domain.AllScopes()) + `.
The token itself is printed only by this command (and by rotate); with -q only the token is printed.`,
		Example: `  export WAYPOST_TOKEN=$(waypost admin token create --actor $A --consumer $CA \
      --scope message.send,message.read,receipt.write -q)
  waypost admin token create --actor $B --scope message.read --expires-in 24h`,
		Args: noArgs,
	}
	createSpace := spaceFlag(create)
	createRID := requestIDFlag(create)
	create.Flags().StringVar(&actor, "actor", "", "the actor the token acts as (required)")
	create.Flags().StringVar(&consumer, "consumer", "", "bind the token to this consumer of the actor")
	create.Flags().StringSliceVar(&scopes, "scope", nil, "scopes, comma-separated or repeated (required)")
	create.Flags().DurationVar(&expiresIn, "expires-in", 0, "expire after this duration (e.g. 720h)")
	create.Flags().StringVar(&expiresAt, "expires-at", "", "expire at this RFC 3339 time")
	create.RunE = func(cmd *cobra.Command, _ []string) error {
		space, err := createSpace()
		if err != nil {
			return err
		}
		if err := need("actor", actor); err != nil {
			return err
		}
		if len(scopes) == 0 {
			return usagef("--scope is required: one or more of %s", ids(domain.AllScopes()))
		}
		req := domain.CreateTokenRequest{RequestID: orNewID(*createRID), ActorID: actor, ConsumerID: consumer}
		for _, s := range scopes {
			req.Scopes = append(req.Scopes, domain.Scope(strings.TrimSpace(s)))
		}
		switch {
		case expiresIn != 0 && expiresAt != "":
			return usagef("give --expires-in or --expires-at, not both")
		case expiresIn < 0:
			return usagef("--expires-in must be positive")
		case expiresIn > 0:
			t := time.Now().Add(expiresIn).UTC().Truncate(time.Second)
			req.ExpiresAt = &t
		case expiresAt != "":
			t, err := time.Parse(time.RFC3339, expiresAt)
			if err != nil {
				return usagef("--expires-at: %v", err)
			}
			req.ExpiresAt = &t
		}
		ad, err := c.admin(cmd)
		if err != nil {
			return err
		}
		t, err := ad.CreateToken(cmd.Context(), space, req)
		if err != nil {
			return err
		}
		return c.tokenResult(cmd.OutOrStdout(), t)
	}
	revoke := &cobra.Command{
		Use:     "revoke TOKEN_ID",
		Short:   "Revoke a token",
		Example: `  waypost admin token revoke tok_0123456789abcdefghjk`,
		Args:    exactArgs(1, "TOKEN_ID"),
	}
	revokeSpace := spaceFlag(revoke)
	revoke.RunE = func(cmd *cobra.Command, args []string) error {
		space, err := revokeSpace()
		if err != nil {
			return err
		}
		ad, err := c.admin(cmd)
		if err != nil {
			return err
		}
		t, err := ad.RevokeToken(cmd.Context(), space, args[0])
		if err != nil {
			return err
		}
		return c.tokenResult(cmd.OutOrStdout(), t)
	}
	rotate := &cobra.Command{
		Use:     "rotate TOKEN_ID",
		Short:   "Replace a token's secret (same ID, actor, consumer and scopes; the old secret stops working)",
		Example: `  export WAYPOST_TOKEN=$(waypost admin token rotate tok_0123456789abcdefghjk -q)`,
		Args:    exactArgs(1, "TOKEN_ID"),
	}
	rotateSpace := spaceFlag(rotate)
	rotate.RunE = func(cmd *cobra.Command, args []string) error {
		space, err := rotateSpace()
		if err != nil {
			return err
		}
		ad, err := c.admin(cmd)
		if err != nil {
			return err
		}
		t, err := ad.RotateToken(cmd.Context(), space, args[0])
		if err != nil {
			return err
		}
		return c.tokenResult(cmd.OutOrStdout(), t)
	}
	return group("token", "Create, revoke or rotate tokens", create, revoke, rotate)
}
