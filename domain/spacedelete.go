package domain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/waypost/waypost/domain/port"
)

// Deleting a space (RFC §10.7): an explicit owner operation that stops access, produces an explicit state
// and confirms what it removed.
//
// DeleteSpace commits, in one transaction, the space's state "deleting", a marker that every later
// control-plane create and settings change of the space checks (so nothing new appears in it), and an
// entry in the deployment's deletion queue. Before it answers it revokes every actor of the space (the
// revocation increments each actor's authorization generation, so every token of the space stops working
// at once, also in processes that cached its authentication, and every write in flight fails its
// generation check). The bytes and records are then removed by ContinueDeletions, which `waypost serve`
// runs in the background and the AWS sweeper function on its schedule: in phases, each a sequence of
// bounded batches, each batch one transaction that also records the progress and the counts in the space
// record. A crash or a restart loses at most the batch in progress, which the next run repeats.

// Space states (SpaceResult.State).
const (
	SpaceActive   = "active"
	SpaceDeleting = "deleting"
	SpaceDeleted  = "deleted"
)

// SpaceDeletion describes the deletion of a space: when it was asked for, how far it is and what it removed.
type SpaceDeletion struct {
	RequestedAt time.Time  `json:"requested_at"`
	CompletedAt *time.Time `json:"completed_at,omitempty"`
	// Phase is the phase in progress while the space is deleting.
	Phase string `json:"phase,omitempty"`
	// WaitUntil, while deleting, is when the last upload URL handed out for the space expires: objects
	// written through such a URL after the space's records were removed are removed then.
	WaitUntil *time.Time `json:"wait_until,omitempty"`
	// Removed counts what the deletion removed so far (everything, once deleted).
	Removed DeletionCounts `json:"removed"`
	// PendingObjects are the objects of the last batch, removed after it committed (internal).
	PendingObjects []string `json:"pending_objects,omitempty"`
}

// DeletionCounts is what a space deletion removed.
type DeletionCounts struct {
	// Records counts the metadata records removed.
	Records int64 `json:"records"`
	// Objects counts the objects removed from the blob store (blob bytes, message bodies, memory states).
	Objects int64 `json:"objects"`
	// ObjectBytes is the size of those objects.
	ObjectBytes int64 `json:"object_bytes"`
	// Resources counts the removed resources by kind: messages, memory_revisions, receipts, blobs, actors,
	// consumers, collections, tokens, grants, submissions, subscriptions, deliveries.
	Resources map[string]int64 `json:"resources"`
}

func (c *DeletionCounts) add(o DeletionCounts) {
	c.Records += o.Records
	c.Objects += o.Objects
	c.ObjectBytes += o.ObjectBytes
	for k, v := range o.Resources {
		if c.Resources == nil {
			c.Resources = map[string]int64{}
		}
		c.Resources[k] += v
	}
}

func (c *DeletionCounts) resource(kind string) {
	if c.Resources == nil {
		c.Resources = map[string]int64{}
	}
	c.Resources[kind]++
}

// state returns the space's state ("" in records written before deletion existed means active).
func (sp Space) state() string {
	if sp.State == "" {
		return SpaceActive
	}
	return sp.State
}

// keySpaceDeleting is the marker of a space being deleted; control-plane writes that could add to a space
// check that it is absent, in the same transaction.
func keySpaceDeleting(space string) port.Key { return port.Key{PK: "SP#" + space, SK: "DELETING"} }

// pkDeletions is the deployment's queue of spaces being deleted (SK = space ID), worked by ContinueDeletions.
const pkDeletions = "DQ"

func keyDeletion(space string) port.Key { return port.Key{PK: pkDeletions, SK: space} }

// spaceLive is the condition, in a control-plane write, that the space is not being deleted.
func spaceLive(space string) port.Op { return port.Check(keySpaceDeleting(space), port.NotExists()) }

// attrDeletion is the META attribute that versions the deletion progress (one writer per batch).
const attrDeletion = "dv"

// The phases of a deletion, in order.
const (
	phaseRevoke      = "revoke"
	phaseFeed        = "feed"
	phaseActors      = "actors"
	phaseConsumers   = "consumers"
	phaseCollections = "collections"
	phaseBlobs       = "blobs"
	phaseTokens      = "tokens"
	phaseWebhooks    = "webhooks"
	phaseRest        = "rest"
)

var deletionPhases = []string{phaseRevoke, phaseFeed, phaseActors, phaseConsumers, phaseCollections, phaseBlobs,
	phaseTokens, phaseWebhooks, phaseRest}

// DeleteSpace starts deleting a space (DELETE /admin/v0/spaces/{space_id}): from its answer on, no token of
// the space authenticates and no control-plane call adds to it; its records and bytes are removed in the
// background (ContinueDeletions). The answer, and GET of the space, show state "deleting", then "deleted"
// with what was removed. Deleting a space that is deleting or deleted returns its state.
func (s *Service) DeleteSpace(ctx context.Context, spaceID string) (SpaceResult, error) {
	sp, _, err := s.existingSpace(ctx, spaceID)
	if err != nil {
		return SpaceResult{}, err
	}
	if sp.state() == SpaceActive {
		now := s.clock.Now().UTC()
		err := s.commitRetry(ctx, "delete space", func(ctx context.Context) ([]port.Op, error) {
			cur, it, err := s.existingSpace(ctx, spaceID)
			if err != nil {
				return nil, err
			}
			if cur.state() != SpaceActive {
				return nil, nil
			}
			cur.State = SpaceDeleting
			cur.Deletion = &SpaceDeletion{RequestedAt: now, Phase: phaseRevoke, Removed: DeletionCounts{Resources: map[string]int64{}}}
			return []port.Op{
				port.Put(item(it.Key, cur, attrDeletion, "1"), port.Exists()),
				port.Put(port.Item{Key: keySpaceDeleting(spaceID)}, port.NotExists()),
				port.Put(port.Item{Key: keyDeletion(spaceID)}, port.Cond{}),
			}, nil
		})
		if err != nil {
			return SpaceResult{}, err
		}
		s.log.LogAttrs(ctx, slog.LevelInfo, "space deletion started", slog.String("space_id", spaceID))
	}
	// Stop access before answering, also when an earlier call crashed between its commit and this point.
	if sp, _, _, err = s.spaceRecord(ctx, spaceID); err != nil {
		return SpaceResult{}, err
	}
	if sp.state() == SpaceDeleting {
		if err := s.revokeSpace(ctx, spaceID); err != nil {
			return SpaceResult{}, err
		}
		if s.deletionKick != nil {
			s.deletionKick()
		}
	}
	return s.spaceResult(sp), nil
}

// revokeSpace revokes every actor of a space that is not revoked yet, incrementing its generation.
func (s *Service) revokeSpace(ctx context.Context, spaceID string) error {
	batch := s.deletionBatch()
	for attempt := 0; attempt < s.retries; attempt++ {
		var ops []port.Op
		err := s.eachItem(ctx, port.Query{PK: "SP#" + spaceID, After: "ACT#", UpTo: "ACT#~"}, func(it port.Item) error {
			a, err := decodeItem[Actor](it)
			if err != nil {
				return err
			}
			if a.Revoked {
				return nil
			}
			a.Revoked = true
			ops = append(ops, actorWrite(it, a))
			if len(ops) < batch {
				return nil
			}
			err = s.commitOps(ctx, ops)
			ops = nil
			return err
		})
		if err == nil && len(ops) > 0 {
			err = s.commitOps(ctx, ops)
		}
		if _, conflict := port.FailedOp(err); conflict {
			continue // an actor changed meanwhile: read them again
		}
		if err != nil {
			return fmt.Errorf("revoking the actors of the space: %w", err)
		}
		return nil
	}
	return Errorf(CodeStorageUnavailable, "too much contention while revoking the space's actors; retry")
}

// eachItem calls fn for every item of a partition range, in key order, a page at a time. Items fn deletes
// while it runs do not disturb the paging (it continues after the last key seen).
func (s *Service) eachItem(ctx context.Context, q port.Query, fn func(port.Item) error) error {
	q.Limit = 100
	for items, err := range s.pages(ctx, q) {
		if err != nil {
			return fmt.Errorf("reading %s: %w", q.PK, err)
		}
		for _, it := range items {
			if err := fn(it); err != nil {
				return err
			}
		}
	}
	return nil
}

// deletionBatch is how many records one deletion batch removes: as many as a transaction holds, less the
// space record that carries the progress, and at most 99.
func (s *Service) deletionBatch() int {
	return max(1, min(s.store.MaxOps()-1, 99))
}

// DeletionOptions bound one ContinueDeletions run.
type DeletionOptions struct {
	// MaxBatches bounds the batches (transactions) of the run; 0 means no bound (until done or ctx ends).
	MaxBatches int
	// Pause is waited between two batches, to leave the store to live traffic.
	Pause time.Duration
}

// DeletionRun reports what one ContinueDeletions run did.
type DeletionRun struct {
	// Batches counts the transactions committed.
	Batches int
	// Completed lists the spaces whose deletion completed in this run.
	Completed []string
	// Pending counts the spaces still deleting after the run (out of batches, or waiting for upload URLs
	// to expire).
	Pending int
	// NextAt, when not zero, is the earliest time a waiting deletion can continue.
	NextAt time.Time
}

// errDeletionBudget stops a run that used its batches.
var errDeletionBudget = errors.New("deletion batch budget used")

// errDeletionRace stops a space's deletion whose progress record another process moved meanwhile.
var errDeletionRace = errors.New("the deletion progressed elsewhere meanwhile")

// errDeletionWait stops a space's deletion that must wait for upload URLs to expire.
var errDeletionWait = errors.New("deletion waits for upload URLs to expire")

// ContinueDeletions advances the deletion of every space in state deleting, in bounded batches, until
// they are deleted, the batch budget is used or ctx ends. It is safe to run in several processes at once
// (a batch whose progress record moved meanwhile commits nothing and is repeated) and to interrupt at any
// point.
func (s *Service) ContinueDeletions(ctx context.Context, opts DeletionOptions) (DeletionRun, error) {
	var run DeletionRun
	budget := opts.MaxBatches
	if budget <= 0 {
		budget = -1
	}
	var queued []string
	if err := s.eachItem(ctx, port.Query{PK: pkDeletions}, func(it port.Item) error {
		queued = append(queued, it.SK)
		return nil
	}); err != nil {
		return run, err
	}
	for i, space := range queued {
		d := &spaceDeleter{s: s, space: space, batch: s.deletionBatch(), budget: &budget, pause: opts.Pause, run: &run}
		done, err := d.continueDeletion(ctx)
		switch {
		case errors.Is(err, errDeletionRace):
			run.Pending++
		case errors.Is(err, errDeletionWait):
			run.Pending++
			if run.NextAt.IsZero() || d.waitUntil.Before(run.NextAt) {
				run.NextAt = d.waitUntil
			}
		case errors.Is(err, errDeletionBudget):
			run.Pending += len(queued) - i
			return run, nil
		case err != nil:
			run.Pending += len(queued) - i
			return run, fmt.Errorf("deleting space %s: %w", space, err)
		case done:
			run.Completed = append(run.Completed, space)
		}
	}
	return run, nil
}

// spaceDeleter runs the deletion of one space.
type spaceDeleter struct {
	s         *Service
	space     string
	batch     int
	budget    *int
	pause     time.Duration
	run       *DeletionRun
	sp        Space
	ver       int64
	ops       []port.Op
	queued    map[port.Key]bool
	objects   []string
	counts    DeletionCounts
	waitUntil time.Time
}

// continueDeletion runs the remaining phases; done is true when the space is deleted (now or before).
func (d *spaceDeleter) continueDeletion(ctx context.Context) (bool, error) {
	s := d.s
	sp, it, found, err := s.spaceRecord(ctx, d.space)
	if err != nil {
		return false, err
	}
	if !found || sp.state() != SpaceDeleting || sp.Deletion == nil {
		// Not (or no longer) deleting: drop the queue entry.
		return found && sp.state() == SpaceDeleted, s.commitOps(ctx, []port.Op{port.Delete(keyDeletion(d.space), port.Cond{})})
	}
	d.sp, d.ver = sp, attrInt(it, attrDeletion)
	if err := d.removePending(ctx); err != nil { // a batch a crash interrupted after its commit
		return false, err
	}
	start := 0
	for i, ph := range deletionPhases {
		if ph == sp.Deletion.Phase {
			start = i
		}
	}
	for i := start; i < len(deletionPhases); i++ {
		if err := d.runPhase(ctx, deletionPhases[i]); err != nil {
			return false, err
		}
		if i+1 < len(deletionPhases) {
			if err := d.flush(ctx, deletionPhases[i+1]); err != nil {
				return false, err
			}
		}
	}
	return true, d.finish(ctx)
}

// finish commits the last batch with the state "deleted", the completion time and the final counts, and
// leaves the deletion queue.
func (d *spaceDeleter) finish(ctx context.Context) error {
	s := d.s
	if *d.budget == 0 {
		return errDeletionBudget
	}
	if err := d.flush(ctx, ""); err != nil { // the rest phase's last records and objects
		return err
	}
	now := s.clock.Now().UTC()
	sp := d.sp
	del := *sp.Deletion
	del.Phase, del.WaitUntil, del.CompletedAt, del.PendingObjects = "", nil, &now, nil
	sp.State, sp.Deletion = SpaceDeleted, &del
	err := s.commitOps(ctx, []port.Op{
		port.Put(item(keySpace(d.space), sp, attrDeletion, itoa(d.ver+1)), port.AttrEquals(attrDeletion, itoa(d.ver))),
		port.Delete(keyDeletion(d.space), port.Cond{}),
	})
	if _, ok := port.FailedOp(err); ok {
		return errDeletionRace
	}
	if err != nil {
		return fmt.Errorf("completing the deletion: %w", err)
	}
	d.run.Batches++
	s.log.LogAttrs(ctx, slog.LevelInfo, "space deleted", slog.String("space_id", d.space),
		slog.Int64("records", del.Removed.Records), slog.Int64("objects", del.Removed.Objects),
		slog.Int64("object_bytes", del.Removed.ObjectBytes))
	return nil
}

// del queues the deletion of a record that exists, counting it (and a resource of kind, when not "").
func (d *spaceDeleter) del(ctx context.Context, key port.Key, kind string) error {
	if d.queued[key] {
		return nil // already in this batch (a thread record of two messages)
	}
	d.queue(key)
	d.counts.Records++
	if kind != "" {
		d.counts.resource(kind)
	}
	if d.full() {
		return d.flush(ctx, "")
	}
	return nil
}

// delIfPresent queues the deletion of a record that may be absent, counting it only when present.
func (d *spaceDeleter) delIfPresent(ctx context.Context, key port.Key, kind string) error {
	_, found, err := d.s.store.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("reading %s: %w", key, err)
	}
	if !found {
		return nil
	}
	return d.del(ctx, key, kind)
}

// delIndex queues the deletion of an index entry derived from a record (not counted as a record).
func (d *spaceDeleter) delIndex(key port.Key) {
	if !d.queued[key] {
		d.queue(key)
	}
}

func (d *spaceDeleter) queue(key port.Key) {
	if d.queued == nil {
		d.queued = map[port.Key]bool{}
	}
	d.queued[key] = true
	d.ops = append(d.ops, port.Delete(key, port.Cond{}))
}

// object queues the deletion of a blob-store object, done before the batch that removes its record.
func (d *spaceDeleter) object(key string) { d.objects = append(d.objects, key) }

// full reports whether the batch should be committed now.
func (d *spaceDeleter) full() bool { return len(d.ops) >= d.batch || len(d.objects) >= d.batch }

// flush commits the queued record deletions together with the progress: the counts (an object counted with
// its size if it exists now), the phase when next is not "", and the queued objects, which it removes after
// the commit. The object list stays in the space record until the next batch replaces it, so objects whose
// removal a crash interrupted are removed when the deletion resumes (removePending); counts are thus exact
// across restarts, but for bytes a writer stores while the deletion runs (removed, not counted).
// A batch whose progress record changed since it was read (another process works on the same deletion)
// commits nothing and ends this run for the space.
func (d *spaceDeleter) flush(ctx context.Context, next string) error {
	s := d.s
	if len(d.ops) == 0 && len(d.objects) == 0 && next == "" {
		return nil
	}
	if *d.budget == 0 {
		return errDeletionBudget
	}
	for _, key := range d.objects {
		info, err := s.blobs.Head(ctx, key)
		if errors.Is(err, port.ErrBlobNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("deleting object: %w", err)
		}
		d.counts.Objects++
		d.counts.ObjectBytes += info.Size
	}
	sp := d.sp
	del := *sp.Deletion
	del.Removed.add(d.counts)
	// Every queued object is removed after the commit, also one absent now: a writer that authenticated
	// before the deletion may still be storing it (a body of a send reserved before, an upload); it checks
	// its record once stored and removes the bytes itself when the record is gone, so either way they go.
	del.PendingObjects = d.objects
	if next != "" {
		del.Phase, del.WaitUntil = next, nil
	}
	if !d.waitUntil.IsZero() {
		w := d.waitUntil
		del.WaitUntil = &w
	}
	sp.Deletion = &del
	ops := append(d.ops, port.Put(item(keySpace(d.space), sp, attrDeletion, itoa(d.ver+1)),
		port.AttrEquals(attrDeletion, itoa(d.ver))))
	if err := s.commitOps(ctx, ops); err != nil {
		if _, ok := port.FailedOp(err); ok {
			return errDeletionRace
		}
		return fmt.Errorf("committing a deletion batch: %w", err)
	}
	d.sp.Deletion = &del
	d.ver++
	d.ops, d.objects, d.counts, d.queued = nil, nil, DeletionCounts{}, nil
	d.run.Batches++
	if *d.budget > 0 {
		*d.budget--
	}
	if err := d.removePending(ctx); err != nil {
		return err
	}
	if d.pause > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d.pause):
		}
	}
	return nil
}

// removePending removes the objects the last committed batch counted (again, after a crash: removing an
// absent object is not an error).
func (d *spaceDeleter) removePending(ctx context.Context) error {
	for _, key := range d.sp.Deletion.PendingObjects {
		if err := d.s.blobs.Delete(ctx, key); err != nil {
			return fmt.Errorf("deleting object: %w", err)
		}
	}
	return nil
}

// runPhase removes what one phase covers.
func (d *spaceDeleter) runPhase(ctx context.Context, phase string) error {
	s, space := d.s, d.space
	switch phase {
	case phaseRevoke:
		return s.revokeSpace(ctx, space)
	case phaseFeed:
		return s.eachItem(ctx, port.Query{PK: pkFeed(space)}, func(it port.Item) error { return d.feedItem(ctx, it) })
	case phaseActors:
		return d.eachSpaceItem(ctx, "ACT#", func(it port.Item) error {
			actor := strings.TrimPrefix(it.SK, "ACT#")
			for _, pk := range []string{pkInbox(space, actor), pkGrants(space, actor), pkSourceCollections(space, actor)} {
				if err := d.drain(ctx, pk, ""); err != nil {
					return err
				}
			}
			if err := d.submissions(ctx, actor); err != nil {
				return err
			}
			return d.del(ctx, it.Key, "actors")
		})
	case phaseConsumers:
		if err := d.submissions(ctx, adminProducer); err != nil {
			return err
		}
		return d.eachSpaceItem(ctx, "CON#", func(it port.Item) error {
			consumer := strings.TrimPrefix(it.SK, "CON#")
			if err := d.drain(ctx, "RC#"+space+"#"+consumer, ""); err != nil {
				return err
			}
			if err := d.drain(ctx, "CP#"+space+"#"+consumer, ""); err != nil {
				return err
			}
			return d.del(ctx, it.Key, "consumers")
		})
	case phaseCollections:
		return d.eachSpaceItem(ctx, "COL#", func(it port.Item) error {
			coll := strings.TrimPrefix(it.SK, "COL#")
			if err := s.eachItem(ctx, port.Query{PK: pkRevisions(space, coll)}, func(rit port.Item) error {
				rr, err := decodeItem[revisionRecord](rit)
				if err != nil {
					return err
				}
				d.object(rr.StateKey)
				return d.del(ctx, rit.Key, "memory_revisions")
			}); err != nil {
				return err
			}
			if err := d.drain(ctx, pkCollectionFeed(space, coll), ""); err != nil {
				return err
			}
			return d.del(ctx, it.Key, "collections")
		})
	case phaseBlobs:
		return d.blobs(ctx)
	case phaseTokens:
		return d.eachSpaceItem(ctx, "TOK#", func(it port.Item) error {
			if dg := it.Attr(attrDigest); dg != "" {
				if err := d.delIfPresent(ctx, keyTokenByDigest(dg), ""); err != nil {
					return err
				}
			}
			return d.del(ctx, it.Key, "tokens")
		})
	case phaseWebhooks:
		if err := s.eachItem(ctx, port.Query{PK: pkDeliveries(space)}, func(it port.Item) error {
			dl, err := decodeItem[Delivery](it)
			if err != nil {
				return err
			}
			if at, ok := dl.dueAt(); ok {
				d.delIndex(keyDue(at, space, dl.DeliveryID))
			}
			return d.del(ctx, it.Key, "deliveries")
		}); err != nil {
			return err
		}
		if err := s.eachItem(ctx, port.Query{PK: pkSubscriptions(space)}, func(it port.Item) error {
			return d.del(ctx, it.Key, kindIf(it.SK, "S#", "subscriptions"))
		}); err != nil {
			return err
		}
		if err := d.drain(ctx, "WH#"+space, ""); err != nil {
			return err
		}
		if err := d.delIfPresent(ctx, keyDispatch(space), ""); err != nil {
			return err
		}
		return d.delIfPresent(ctx, keyDispatchUnsharded(space), "")
	case phaseRest:
		if err := d.drain(ctx, pkWaitSlots(space), ""); err != nil {
			return err
		}
		if err := d.eachSpaceItem(ctx, "", func(it port.Item) error {
			if it.SK == "META" || it.SK == keySpaceDeleting(space).SK {
				return nil
			}
			return d.del(ctx, it.Key, kindIf(it.SK, "GRT#", "grants"))
		}); err != nil {
			return err
		}
		// What the store keeps of the sequence besides the feed (DynamoDB: void slots, the watermark).
		for {
			n, err := s.store.DropSequence(ctx, *sequence(space), d.batch)
			if err != nil {
				return fmt.Errorf("dropping the sequence: %w", err)
			}
			if n == 0 {
				return nil
			}
		}
	}
	return fmt.Errorf("unknown deletion phase %q", phase)
}

// kindIf is kind when sk starts with prefix (the record is a resource of that kind), else "".
func kindIf(sk, prefix, kind string) string {
	if strings.HasPrefix(sk, prefix) {
		return kind
	}
	return ""
}

// eachSpaceItem visits the items of the space's own partition whose sort key starts with prefix.
func (d *spaceDeleter) eachSpaceItem(ctx context.Context, prefix string, fn func(port.Item) error) error {
	q := port.Query{PK: "SP#" + d.space}
	if prefix != "" {
		q.After, q.UpTo = prefix, prefix+"~" // "~" sorts after every ID character
	}
	return d.s.eachItem(ctx, q, fn)
}

// drain deletes every item of a partition, counting each as a resource of kind.
func (d *spaceDeleter) drain(ctx context.Context, pk, kind string) error {
	return d.s.eachItem(ctx, port.Query{PK: pk}, func(it port.Item) error { return d.del(ctx, it.Key, kind) })
}

// feedItem removes one space feed item and what only it leads to: a message's record, body object and
// thread record.
func (d *spaceDeleter) feedItem(ctx context.Context, it port.Item) error {
	s, space := d.s, d.space
	fi, err := decodeItem[FeedItem](it)
	if err != nil {
		return err
	}
	switch fi.ItemType {
	case ItemMessage:
		msg, mit, found, err := getRecord[storedMessage](ctx, s.store, keyMessage(space, fi.ResourceID))
		if err != nil {
			return err
		}
		if found {
			if !msg.Inline {
				d.object(messageBodyKey(space, msg.MessageID))
			}
			if err := d.del(ctx, mit.Key, "messages"); err != nil {
				return err
			}
		}
		if fi.ThreadID != nil {
			if err := d.delIfPresent(ctx, keyThread(space, *fi.ThreadID), ""); err != nil {
				return err
			}
		}
		return d.del(ctx, it.Key, "")
	case ItemReceipt:
		return d.del(ctx, it.Key, "receipts")
	default:
		return d.del(ctx, it.Key, "")
	}
}

// submissions removes the idempotency records of one producer, and the body objects of message sends that
// were reserved but never committed.
func (d *spaceDeleter) submissions(ctx context.Context, producer string) error {
	return d.s.eachItem(ctx, port.Query{PK: "ID#" + d.space + "#" + producer}, func(it port.Item) error {
		if it.Attr(attrState) == string(StateReserved) && strings.HasPrefix(it.SK, OpMessageSend+"#") {
			sub, err := decodeItem[Submission](it)
			if err != nil {
				return err
			}
			d.object(messageBodyKey(d.space, sub.ResourceID))
		}
		return d.del(ctx, it.Key, "submissions")
	})
}

// blobs removes every blob of the space: bytes, record, references, upload pointer and expiry entry. An
// unsealed upload whose presigned URL is still valid keeps its records (its bytes are removed now) until
// the URL expires, so that bytes a client still puts through it are removed too.
func (d *spaceDeleter) blobs(ctx context.Context) error {
	s, space := d.s, d.space
	now := s.clock.Now()
	direct := s.presigner() != nil
	err := d.eachSpaceItem(ctx, "UPL#", func(it port.Item) error {
		upload := strings.TrimPrefix(it.SK, "UPL#")
		ptr, err := decodeItem[uploadPointer](it)
		if err != nil {
			return err
		}
		b, bit, found, err := getRecord[blobRecord](ctx, s.store, keyBlob(space, ptr.BlobID))
		if err != nil {
			return err
		}
		d.object(blobObjectKey(space, ptr.BlobID))
		if found && direct && b.State == BlobPending && now.Before(b.ExpiresAt) {
			if d.waitUntil.Before(b.ExpiresAt) {
				d.waitUntil = b.ExpiresAt
			}
			return nil
		}
		if err := d.drain(ctx, pkBlobRefs(space, ptr.BlobID), ""); err != nil {
			return err
		}
		if found {
			d.delIndex(keyUploadExpiry(b.ExpiresAt, space, upload))
			if err := d.del(ctx, bit.Key, "blobs"); err != nil {
				return err
			}
		}
		return d.del(ctx, it.Key, "")
	})
	if err != nil {
		return err
	}
	if !d.waitUntil.IsZero() {
		if err := d.flush(ctx, ""); err != nil {
			return err
		}
		return errDeletionWait
	}
	return nil
}
