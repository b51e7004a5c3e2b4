package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/waypost/waypost/client"
	"github.com/waypost/waypost/domain"
)

func newSmokeCmd() *cobra.Command {
	c := &conn{}
	var blobBytes int64
	var waitTimeout time.Duration
	cmd := &cobra.Command{
		Use:   "smoke",
		Short: "Check a deployment end to end: the async loop, a blob, memory and feed.wait, with latencies",
		Long: `Run a short end-to-end check against a Waypost deployment (embedded or AWS), as its owner: it creates a
space of its own with the admin secret (--admin-secret, else WAYPOST_ADMIN_SECRET), then runs

  - the first async loop of RFC §16.1: A sends to B; B reads its inbox and the message, acknowledges it
    (received, with its checkpoint) and replies; A reads the receipt and the reply and acknowledges them;
  - a blob round trip: prepare, upload (to upload_url, wherever it points: the service or a presigned
    storage URL), commit, download with its SHA-256 checked;
  - a memory publish of that blob by A and a read by B (memory.read grant);
  - feed.wait: B waits, A sends, the wait answers with A's message (skipped where describe says
    live_feed=false).

Each step prints its latency. The first failure ends the run with exit status 1. Afterwards it revokes
the tokens and actors it created; the space and what was committed in it stay, for inspection (delete
them with 'waypost admin space delete SPACE_ID').
Run it right after a deployment ('cdk deploy'), with the URL the stack outputs as ApiUrl.`,
		Example: `  WAYPOST_ADMIN_SECRET=$(aws secretsmanager get-secret-value --secret-id "$ADMIN_SECRET_ARN" \
    --query SecretString --output text) waypost smoke --url "$API_URL"`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if blobBytes < 0 {
				return usagef("--blob-bytes must not be negative")
			}
			adm, err := c.admin(cmd)
			if err != nil {
				return err
			}
			s := &smoke{out: cmd.OutOrStdout(), admin: adm, url: c.baseURL(), timeout: c.timeout, blobBytes: blobBytes, waitTimeout: waitTimeout}
			return s.run(cmd.Context())
		},
	}
	c.addAdminFlags(cmd.Flags())
	cmd.Flags().Int64Var(&blobBytes, "blob-bytes", 1<<20, "size of the blob of the round trip")
	cmd.Flags().DurationVar(&waitTimeout, "wait-timeout", 20*time.Second, "timeout_ms of the feed.wait step (at most the deployment's feed_wait_max_ms)")
	return withUsageErrors(cmd)
}

// smoke is one run of the smoke check.
type smoke struct {
	out         io.Writer
	admin       *client.Admin
	url         string
	timeout     time.Duration
	blobBytes   int64
	waitTimeout time.Duration

	steps   int
	started time.Time
	space   string
	tokens  []string
	actors  []string
}

// smokeParty is one side of the loop.
type smokeParty struct {
	actor, consumer string
	cl              *client.Client
	cursor          *string
}

// step runs f as one named step and prints its outcome and latency.
func (s *smoke) step(name string, f func() (string, error)) error {
	start := time.Now()
	detail, err := f()
	ms := float64(time.Since(start).Microseconds()) / 1000
	s.steps++
	if err != nil {
		fmt.Fprintf(s.out, "  FAIL  %-44s %9.1f ms  %v\n", name, ms, err)
		return fmt.Errorf("smoke: %s: %w", name, err)
	}
	if detail != "" {
		detail = "  " + detail
	}
	fmt.Fprintf(s.out, "  ok    %-44s %9.1f ms%s\n", name, ms, detail)
	return nil
}

// smokeStep is one named step of a sequence (runSteps).
type smokeStep struct {
	name string
	f    func() (string, error)
}

// runSteps runs steps in order as s.step does, stopping at the first failure.
func (s *smoke) runSteps(steps []smokeStep) error {
	for _, st := range steps {
		if err := s.step(st.name, st.f); err != nil {
			return err
		}
	}
	return nil
}

func (s *smoke) run(ctx context.Context) error {
	s.started = time.Now()
	fmt.Fprintf(s.out, "waypost smoke against %s\n", s.url)
	err := s.checks(ctx)
	if cerr := s.cleanup(ctx); err == nil {
		err = cerr
	}
	if err != nil {
		fmt.Fprintf(s.out, "smoke: FAILED after %d steps (%.1f s)\n", s.steps, time.Since(s.started).Seconds())
		return err
	}
	fmt.Fprintf(s.out, "smoke: %d steps passed in %.1f s\n", s.steps, time.Since(s.started).Seconds())
	return nil
}

func (s *smoke) checks(ctx context.Context) error {
	var a, b smokeParty
	var coll string
	if err := s.step("admin: space, actors, consumers, tokens", func() (string, error) {
		var err error
		if a, b, coll, err = s.setUp(ctx); err != nil {
			return "", err
		}
		return "space " + s.space, nil
	}); err != nil {
		return err
	}
	var desc domain.DescribeResult
	if err := s.step("describe", func() (string, error) {
		var err error
		if desc, err = a.cl.Describe(ctx); err != nil {
			return "", err
		}
		if desc.SpaceID != s.space || desc.ActorID != a.actor {
			return "", fmt.Errorf("describe names space %s actor %s", desc.SpaceID, desc.ActorID)
		}
		return fmt.Sprintf("max_blob_bytes %d, live_feed %v", desc.Limits.MaxBlobBytes, desc.Capabilities.LiveFeed), nil
	}); err != nil {
		return err
	}
	if err := s.loop(ctx, &a, &b); err != nil {
		return err
	}
	blobID, err := s.blob(ctx, &a)
	if err != nil {
		return err
	}
	if err := s.memory(ctx, &a, &b, coll, blobID); err != nil {
		return err
	}
	if !desc.Capabilities.LiveFeed {
		fmt.Fprintf(s.out, "  skip  %-44s %12s  describe says live_feed=false\n", "feed.wait", "")
		return nil
	}
	return s.wait(ctx, &a, &b, min(s.waitTimeout, time.Duration(desc.Limits.FeedWaitMaxMS)*time.Millisecond))
}

func (s *smoke) setUp(ctx context.Context) (a, b smokeParty, coll string, err error) {
	sp, err := s.admin.CreateSpace(ctx, domain.CreateSpaceRequest{RequestID: client.NewRequestID(),
		DisplayName: "waypost smoke " + time.Now().UTC().Format(time.RFC3339)})
	if err != nil {
		return a, b, "", err
	}
	s.space = sp.SpaceID
	party := func(name string, scopes ...domain.Scope) (smokeParty, error) {
		act, err := s.admin.CreateActor(ctx, s.space, domain.CreateActorRequest{RequestID: client.NewRequestID(), DisplayName: "smoke " + name})
		if err != nil {
			return smokeParty{}, err
		}
		s.actors = append(s.actors, act.ActorID)
		con, err := s.admin.CreateConsumer(ctx, s.space, domain.CreateConsumerRequest{RequestID: client.NewRequestID(), ActorID: act.ActorID, View: domain.ViewInbox})
		if err != nil {
			return smokeParty{}, err
		}
		tok, err := s.admin.CreateToken(ctx, s.space, domain.CreateTokenRequest{RequestID: client.NewRequestID(), ActorID: act.ActorID,
			ConsumerID: con.ConsumerID, Scopes: scopes})
		if err != nil {
			return smokeParty{}, err
		}
		s.tokens = append(s.tokens, tok.TokenID)
		return smokeParty{actor: act.ActorID, consumer: con.ConsumerID, cl: client.New(s.url, tok.Token, client.WithTimeout(s.timeout))}, nil
	}
	common := []domain.Scope{domain.ScopeMessageSend, domain.ScopeMessageRead, domain.ScopeReceiptWrite, domain.ScopeBlobRead, domain.ScopeMemoryRead}
	if a, err = party("A", append(common, domain.ScopeBlobWrite, domain.ScopeMemoryWrite)...); err != nil {
		return a, b, "", err
	}
	if b, err = party("B", common...); err != nil {
		return a, b, "", err
	}
	c, err := s.admin.CreateCollection(ctx, s.space, domain.CreateCollectionRequest{RequestID: client.NewRequestID(), SourceActorID: a.actor, Scope: "waypost smoke"})
	if err != nil {
		return a, b, "", err
	}
	_, err = s.admin.CreateGrant(ctx, s.space, domain.CreateGrantRequest{RequestID: client.NewRequestID(), ActorID: b.actor,
		Permission: domain.PermMemoryRead, CollectionID: c.CollectionID})
	return a, b, c.CollectionID, err
}

// read reads p's inbox from its cursor and advances the cursor.
func (p *smokeParty) read(ctx context.Context) (domain.Page, error) {
	pg, err := p.cl.ReadInbox(ctx, domain.ReadRequest{ConsumerID: p.consumer, Cursor: p.cursor})
	if err == nil {
		p.cursor = &pg.NextCursor
	}
	return pg, err
}

// loop is RFC §16.1: send, read, ack with checkpoint, reply, read the reply and the receipt, ack.
func (s *smoke) loop(ctx context.Context, a, b *smokeParty) error {
	var sent, reply domain.SendResult
	var item domain.FeedItem
	steps := []smokeStep{
		{"16.1: A sends to B", func() (string, error) {
			var err error
			sent, err = a.cl.Send(ctx, domain.SendRequest{RequestID: client.NewRequestID(), RecipientIDs: []string{b.actor},
				Kind: "request", Subject: "smoke", Body: &domain.MessageBody{Text: "waypost smoke: please reply"}})
			if err == nil && sent.SubmissionState != domain.StateCommitted {
				err = fmt.Errorf("submission_state %s", sent.SubmissionState)
			}
			return "visible_seq " + sent.VisibleSeq, err
		}},
		{"16.1: B reads its inbox", func() (string, error) {
			pg, err := b.read(ctx)
			if err != nil {
				return "", err
			}
			i := slices.IndexFunc(pg.Items, func(it domain.FeedItem) bool { return it.ResourceID == sent.ResourceID })
			if i < 0 {
				return "", fmt.Errorf("message %s not in B's inbox (%d items)", sent.ResourceID, len(pg.Items))
			}
			item = pg.Items[i]
			return "", nil
		}},
		{"16.1: B gets the message", func() (string, error) {
			m, err := b.cl.GetMessage(ctx, sent.ResourceID)
			if err == nil && m.Body.Text != "waypost smoke: please reply" {
				err = errors.New("the body differs from what A sent")
			}
			return "", err
		}},
		{"16.1: B acks received with its checkpoint", func() (string, error) {
			_, err := b.cl.Ack(ctx, domain.AckRequest{RequestID: client.NewRequestID(), ConsumerID: b.consumer,
				Items: []domain.AckEntry{{ItemID: item.ItemID, Stage: domain.StageReceived}}, CheckpointCursor: b.cursor})
			return "", err
		}},
		{"16.1: B replies", func() (string, error) {
			var err error
			reply, err = b.cl.Send(ctx, domain.SendRequest{RequestID: client.NewRequestID(), RecipientIDs: []string{a.actor},
				InReplyTo: &sent.ResourceID, Kind: "answer", Body: &domain.MessageBody{Text: "waypost smoke: reply"}})
			if err == nil && reply.ThreadID != sent.ThreadID {
				err = fmt.Errorf("the reply is in thread %s, not %s", reply.ThreadID, sent.ThreadID)
			}
			return "", err
		}},
		{"16.1: A reads the receipt and the reply", func() (string, error) {
			pg, err := a.read(ctx)
			if err != nil {
				return "", err
			}
			var acks []domain.AckEntry
			var gotReceipt, gotReply bool
			for _, it := range pg.Items {
				gotReceipt = gotReceipt || it.ItemType == domain.ItemReceipt
				gotReply = gotReply || it.ResourceID == reply.ResourceID
				acks = append(acks, domain.AckEntry{ItemID: it.ItemID, Stage: domain.StageProcessed})
			}
			if !gotReceipt || !gotReply {
				return "", fmt.Errorf("actor A's inbox has receipt %v, reply %v (%d items)", gotReceipt, gotReply, len(pg.Items))
			}
			_, err = a.cl.Ack(ctx, domain.AckRequest{RequestID: client.NewRequestID(), ConsumerID: a.consumer, Items: acks, CheckpointCursor: a.cursor})
			return "and acked them processed", err
		}},
	}
	return s.runSteps(steps)
}

// blob uploads and downloads a random blob of s.blobBytes.
func (s *smoke) blob(ctx context.Context, a *smokeParty) (string, error) {
	content := make([]byte, s.blobBytes)
	if _, err := rand.Read(content); err != nil {
		return "", err
	}
	sum := sha256.Sum256(content)
	digest := hex.EncodeToString(sum[:])
	var prep domain.BlobPrepareResult
	var info domain.BlobInfo
	steps := []smokeStep{
		{"blob: prepare", func() (string, error) {
			var err error
			prep, err = a.cl.PrepareBlob(ctx, domain.BlobPrepareRequest{RequestID: client.NewRequestID(), ContentType: "application/octet-stream",
				SizeBytes: s.blobBytes, SHA256: digest, Filename: "smoke.bin"})
			where := "upload to the service"
			if u := prep.UploadURL; len(u) > 4 && u[:4] == "http" {
				where = "upload straight to storage"
			}
			return where, err
		}},
		{fmt.Sprintf("blob: upload %d bytes", s.blobBytes), func() (string, error) {
			_, err := a.cl.UploadPrepared(ctx, prep, s.blobBytes, bytes.NewReader(content))
			return "", err
		}},
		{"blob: commit", func() (string, error) {
			var err error
			info, err = a.cl.CommitBlob(ctx, domain.BlobCommitRequest{RequestID: client.NewRequestID(), UploadID: prep.UploadID})
			if err == nil && (info.State != domain.BlobSealed || info.SHA256 != digest) {
				err = fmt.Errorf("sealed as %s with sha256 %s", info.State, info.SHA256)
			}
			return "", err
		}},
		{"blob: download and check sha256", func() (string, error) {
			bc, err := a.cl.OpenBlobContent(ctx, info.BlobID)
			if err != nil {
				return "", err
			}
			defer bc.Close()
			h := sha256.New()
			if _, err := io.Copy(h, bc); err != nil {
				return "", err
			}
			if got := hex.EncodeToString(h.Sum(nil)); got != digest {
				return "", fmt.Errorf("downloaded sha256 %s, uploaded %s", got, digest)
			}
			return "", nil
		}},
	}
	if err := s.runSteps(steps); err != nil {
		return "", err
	}
	return info.BlobID, nil
}

// memory publishes the blob as the collection's first revision and reads it back as B.
func (s *smoke) memory(ctx context.Context, a, b *smokeParty, coll, blobID string) error {
	var rev int64
	if err := s.step("memory: A publishes a revision", func() (string, error) {
		zero := int64(0)
		r, err := a.cl.PublishMemory(ctx, coll, domain.MemoryPublishRequest{RequestID: client.NewRequestID(), ExpectedRevision: &zero,
			Mode: "snapshot", Items: []domain.MemoryItemInput{{ItemID: "smoke", BlobID: blobID, Path: "smoke/blob.bin"}}})
		rev = r.Revision
		return fmt.Sprintf("revision %d", r.Revision), err
	}); err != nil {
		return err
	}
	return s.step("memory: B reads it", func() (string, error) {
		pg, err := b.cl.ReadMemory(ctx, coll, domain.MemoryReadRequest{})
		if err != nil {
			return "", err
		}
		if pg.Revision != rev || len(pg.Items) != 1 || pg.Items[0].BlobID != blobID {
			return "", fmt.Errorf("actor B reads revision %d with %d items", pg.Revision, len(pg.Items))
		}
		return "", nil
	})
}

// wait has B wait on its feed while A sends: the wait answers with the message.
func (s *smoke) wait(ctx context.Context, a, b *smokeParty, timeout time.Duration) error {
	// B's cursor is past everything it has seen; the receipt of A's ack may still be ahead of it.
	if _, err := b.read(ctx); err != nil {
		return s.step("feed.wait", func() (string, error) { return "", err })
	}
	type result struct {
		page domain.Page
		err  error
		at   time.Time
	}
	done := make(chan result, 1)
	var sent domain.SendResult
	return s.step("feed.wait: B waits, A sends", func() (string, error) {
		go func() {
			cursor := b.cursor
			for {
				pg, err := b.cl.WaitFeed(ctx, domain.WaitRequest{ConsumerID: b.consumer, Cursor: cursor, TimeoutMS: int(timeout.Milliseconds())})
				if err == nil && len(pg.Items) == 0 && ctx.Err() == nil {
					cursor = &pg.NextCursor
					continue // timed out before anything came: the send below failed or is slow; the step fails on its own clock
				}
				done <- result{pg, err, time.Now()}
				return
			}
		}()
		time.Sleep(300 * time.Millisecond) // let the wait subscribe: it would also find the message by replay
		sending := time.Now()
		var err error
		if sent, err = a.cl.Send(ctx, domain.SendRequest{RequestID: client.NewRequestID(), RecipientIDs: []string{b.actor},
			Body: &domain.MessageBody{Text: "waypost smoke: wake up"}}); err != nil {
			return "", err
		}
		select {
		case r := <-done:
			if r.err != nil {
				return "", r.err
			}
			if !slices.ContainsFunc(r.page.Items, func(it domain.FeedItem) bool { return it.ResourceID == sent.ResourceID }) {
				return "", fmt.Errorf("the wait answered %d items without A's message", len(r.page.Items))
			}
			return fmt.Sprintf("answered %.0f ms after A's send began", float64(r.at.Sub(sending).Microseconds())/1000), nil
		case <-time.After(timeout + 5*time.Second):
			return "", fmt.Errorf("no answer within %s of A's send", timeout+5*time.Second)
		}
	})
}

// cleanup revokes the tokens and actors the run created. The space and its content stay.
func (s *smoke) cleanup(ctx context.Context) error {
	if s.space == "" {
		return nil
	}
	return s.step("cleanup: revoke tokens and actors", func() (string, error) {
		var errs []error
		for _, id := range s.tokens {
			if _, err := s.admin.RevokeToken(ctx, s.space, id); err != nil {
				errs = append(errs, fmt.Errorf("token %s: %w", id, err))
			}
		}
		for _, id := range s.actors {
			if _, err := s.admin.RevokeActor(ctx, s.space, id); err != nil {
				errs = append(errs, fmt.Errorf("actor %s: %w", id, err))
			}
		}
		return "space " + s.space + " stays (waypost admin space delete " + s.space + " removes it)", errors.Join(errs...)
	})
}
