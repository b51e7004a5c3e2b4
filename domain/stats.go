package domain

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/waypost/waypost/domain/port"
)

// Space statistics (RFC §19.2): the exact stage of everything in a space, for its owner, rather than one
// success rate. GetStats reads the space's records (submissions, blobs, consumers with their receipts and
// checkpoints, collections, webhook deliveries) and counts them; nothing is sampled or estimated. Reading
// is bounded by StatsOptions.MaxScan records: a space larger than that gets counts of what was read, with
// Complete false.

// DefaultStatsMaxScan bounds the records one GetStats reads unless StatsOptions says otherwise.
const DefaultStatsMaxScan = 200_000

// StatsOptions adjust GetStats.
type StatsOptions struct {
	// MaxScan bounds the records read; 0 means DefaultStatsMaxScan.
	MaxScan int
}

// StageCounts counts submissions by stage (RFC §6.3): reserved (idempotency key held, nothing written
// outside the store yet), prepared (reserved, its body object written), committed, failed (a permanent
// business failure recorded for the key).
type StageCounts struct {
	Reserved  int64 `json:"reserved"`
	Prepared  int64 `json:"prepared"`
	Committed int64 `json:"committed"`
	Failed    int64 `json:"failed"`
}

func (c *StageCounts) add(o StageCounts) {
	c.Reserved += o.Reserved
	c.Prepared += o.Prepared
	c.Committed += o.Committed
	c.Failed += o.Failed
}

// BlobStageCounts counts a space's blobs by stage (RFC §9): pending (prepared, no bytes yet), uploaded
// (bytes stored, not sealed), sealed (and referenced by a message or memory revision), sealed_unreferenced,
// expiring and expired (unsealed uploads the sweeper removed).
type BlobStageCounts struct {
	Pending            int64 `json:"pending"`
	Uploaded           int64 `json:"uploaded"`
	Sealed             int64 `json:"sealed"`
	SealedUnreferenced int64 `json:"sealed_unreferenced"`
	Expiring           int64 `json:"expiring"`
	Expired            int64 `json:"expired"`
}

// CheckpointStats is a consumer's most advanced checkpoint for its current view revision.
type CheckpointStats struct {
	// VisibleSeq is the checkpoint's position.
	VisibleSeq string `json:"visible_seq"`
	// UpdatedAt is when it last moved (absent for checkpoints stored before this was recorded).
	UpdatedAt *time.Time `json:"updated_at,omitempty"`
	// AgeSeconds is how long ago that was.
	AgeSeconds *int64 `json:"age_seconds,omitempty"`
}

// ConsumerStats describes one consumer's progress. Its feed is counted as its actor's current rights let
// it read (every read scope the actor's grants allow), with the consumer's view and filter.
type ConsumerStats struct {
	ConsumerID   string `json:"consumer_id"`
	ActorID      string `json:"actor_id"`
	View         View   `json:"view"`
	ViewRevision int64  `json:"view_revision"`
	// NotReceived counts the items of its feed after its checkpoint that have no receipt.
	NotReceived int64 `json:"not_received"`
	// ReceivedNotProcessed counts the items acked "received" and not yet "processed".
	ReceivedNotProcessed int64 `json:"received_not_processed"`
	// Processed counts the items acked "processed".
	Processed int64 `json:"processed"`
	// Checkpoint is absent when the consumer never stored one for its current view revision.
	Checkpoint *CheckpointStats `json:"checkpoint"`
}

// MemoryStats counts a space's collections, their revisions and the publishes that lost the revision
// compare-and-swap (REVISION_CONFLICT, recorded as failed submissions).
type MemoryStats struct {
	Collections int64 `json:"collections"`
	Revisions   int64 `json:"revisions"`
	Conflicts   int64 `json:"conflicts"`
}

// WebhookStats counts a space's webhook subscriptions (active, stopped, expired) and delivery records
// (pending, failed, cancelled, and delivered markers kept for de-duplication).
type WebhookStats struct {
	Subscriptions map[string]int64 `json:"subscriptions"`
	Deliveries    map[string]int64 `json:"deliveries"`
}

// SpaceStats is the result of GET /admin/v0/spaces/{space_id}/stats.
type SpaceStats struct {
	SpaceID     string    `json:"space_id"`
	State       string    `json:"state"`
	GeneratedAt time.Time `json:"generated_at"`
	// Complete is false when the space has more records than one read may visit (StatsOptions.MaxScan):
	// the counts are then those of the records read, lower bounds of the true ones.
	Complete bool `json:"complete"`
	// VisibleHead is the highest visible_seq below which every item is visible.
	VisibleHead string `json:"visible_head"`
	// Submissions counts every write of the space by stage; SubmissionsByOperation splits them by
	// operation (message.send, memory.publish, inbox.ack, blob.prepare, blob.commit, admin.*, …).
	Submissions            StageCounts            `json:"submissions"`
	SubmissionsByOperation map[string]StageCounts `json:"submissions_by_operation"`
	Blobs                  BlobStageCounts        `json:"blobs"`
	Consumers              []ConsumerStats        `json:"consumers"`
	Memory                 MemoryStats            `json:"memory"`
	Webhooks               WebhookStats           `json:"webhooks"`
	// Quotas are the space's capacity quotas in force, Usage what it uses of them (quota.go).
	Quotas Quotas     `json:"quotas"`
	Usage  QuotaUsage `json:"usage"`
	// Storage is the state of the deployment's local storage volume (embedded only; absent on AWS).
	Storage *StorageStatus `json:"storage,omitempty"`
}

// StorageStatus is the state of a local storage volume: its free room and whether writes are refused for
// want of it (every write then answers STORAGE_UNAVAILABLE until the store recovers by itself).
type StorageStatus struct {
	// Dir is the directory of the store on the volume.
	Dir string `json:"dir"`
	// FreeBytes and TotalBytes are the volume's free and total bytes (-1 when unknown).
	FreeBytes  int64 `json:"free_bytes"`
	TotalBytes int64 `json:"total_bytes"`
	// NeededBytes is the free room the store needs to take writes again once they are refused.
	NeededBytes int64 `json:"needed_bytes"`
	// WritesRefused is true while writes are refused.
	WritesRefused bool `json:"writes_refused"`
	// RefusedSince is when writes began to be refused (only while they are).
	RefusedSince *time.Time `json:"refused_since,omitempty"`
}

// errScanBudget stops a stats scan that read StatsOptions.MaxScan records.
var errScanBudget = errors.New("stats scan budget used")

// statsScan visits records under a budget shared by one GetStats.
type statsScan struct {
	s    *Service
	left int
}

// each is Service.eachItem under the budget; it returns errScanBudget when the budget ran out.
func (sc *statsScan) each(ctx context.Context, q port.Query, fn func(port.Item) error) error {
	return sc.s.eachItem(ctx, q, func(it port.Item) error {
		if sc.left <= 0 {
			return errScanBudget
		}
		sc.left--
		return fn(it)
	})
}

// GetStats counts the stages of everything in a space (control plane).
func (s *Service) GetStats(ctx context.Context, spaceID string, opts StatsOptions) (SpaceStats, error) {
	sp, _, err := s.existingSpace(ctx, spaceID)
	if err != nil {
		return SpaceStats{}, err
	}
	if opts.MaxScan <= 0 {
		opts.MaxScan = DefaultStatsMaxScan
	}
	now := s.clock.Now().UTC()
	st := SpaceStats{SpaceID: spaceID, State: sp.state(), GeneratedAt: now, Complete: true,
		SubmissionsByOperation: map[string]StageCounts{}, Consumers: []ConsumerStats{},
		Webhooks: WebhookStats{Subscriptions: map[string]int64{}, Deliveries: map[string]int64{}}}
	head, err := s.head(ctx, spaceID)
	if err != nil {
		return SpaceStats{}, err
	}
	st.VisibleHead = strconv.FormatUint(head, 10)
	if s.storage != nil {
		v := s.storage()
		st.Storage = &v
	}
	st.Quotas = s.effectiveQuotas(sp)
	if st.Usage, err = s.usage(ctx, spaceID); err != nil {
		return SpaceStats{}, err
	}
	sc := &statsScan{s: s, left: opts.MaxScan}
	for _, part := range []func(context.Context, *statsScan, *SpaceStats) error{
		s.statsSubmissions, s.statsBlobs, s.statsMemory, s.statsWebhooks, s.statsConsumers,
	} {
		err := part(ctx, sc, &st)
		if errors.Is(err, errScanBudget) {
			st.Complete = false
			continue
		}
		if err != nil {
			return SpaceStats{}, fmt.Errorf("space stats: %w", err)
		}
	}
	for _, c := range st.SubmissionsByOperation {
		st.Submissions.add(c)
	}
	return st, nil
}

// statsSubmissions counts the idempotency records of every producer of the space (its actors and the
// control plane), and the memory publishes that failed their revision check.
func (s *Service) statsSubmissions(ctx context.Context, sc *statsScan, st *SpaceStats) error {
	producers := []string{adminProducer}
	if err := sc.each(ctx, port.Query{PK: "SP#" + st.SpaceID, After: "ACT#", UpTo: "ACT#~"}, func(it port.Item) error {
		producers = append(producers, strings.TrimPrefix(it.SK, "ACT#"))
		return nil
	}); err != nil {
		return err
	}
	for _, producer := range producers {
		err := sc.each(ctx, port.Query{PK: "ID#" + st.SpaceID + "#" + producer}, func(it port.Item) error {
			op, _, _ := strings.Cut(it.SK, "#")
			c := st.SubmissionsByOperation[op]
			switch SubmissionState(it.Attr(attrState)) {
			case StateCommitted:
				c.Committed++
			case StateFailed:
				c.Failed++
				if op == OpMemoryPublish {
					sub, err := decodeItem[Submission](it)
					if err != nil {
						return err
					}
					if sub.Error != nil && sub.Error.Code == CodeRevisionConflict {
						st.Memory.Conflicts++
					}
				}
			case StateReserved:
				prepared, err := s.submissionPrepared(ctx, st.SpaceID, op, it)
				if err != nil {
					return err
				}
				if prepared {
					c.Prepared++
				} else {
					c.Reserved++
				}
			}
			st.SubmissionsByOperation[op] = c
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// submissionPrepared reports whether a reserved submission already wrote what it publishes outside the
// item store (a message send's body object).
func (s *Service) submissionPrepared(ctx context.Context, space, op string, it port.Item) (bool, error) {
	if op != OpMessageSend {
		return false, nil
	}
	sub, err := decodeItem[Submission](it)
	if err != nil {
		return false, err
	}
	prepared, err := s.sendPrepared(ctx, space, sub.ResourceID)
	if err != nil {
		return false, fmt.Errorf("checking a reserved send's body: %w", err)
	}
	return prepared, nil
}

// statsBlobs counts the space's blobs by stage.
func (s *Service) statsBlobs(ctx context.Context, sc *statsScan, st *SpaceStats) error {
	return sc.each(ctx, port.Query{PK: "SP#" + st.SpaceID, After: "UPL#", UpTo: "UPL#~"}, func(it port.Item) error {
		ptr, err := decodeItem[uploadPointer](it)
		if err != nil {
			return err
		}
		b, _, found, err := getRecord[blobRecord](ctx, s.store, keyBlob(st.SpaceID, ptr.BlobID))
		if err != nil || !found {
			return err
		}
		switch b.State {
		case BlobPending:
			_, err := s.blobs.Head(ctx, blobObjectKey(st.SpaceID, b.BlobID))
			switch {
			case err == nil:
				st.Blobs.Uploaded++
			case errors.Is(err, port.ErrBlobNotFound):
				st.Blobs.Pending++
			default:
				return fmt.Errorf("checking an upload's bytes: %w", err)
			}
		case BlobSealed:
			refs, err := s.store.Query(ctx, port.Query{PK: pkBlobRefs(st.SpaceID, b.BlobID), Limit: 1})
			if err != nil {
				return fmt.Errorf("reading blob references: %w", err)
			}
			if len(refs) > 0 {
				st.Blobs.Sealed++
			} else {
				st.Blobs.SealedUnreferenced++
			}
		case BlobExpiring:
			st.Blobs.Expiring++
		case BlobExpired:
			st.Blobs.Expired++
		}
		return nil
	})
}

// statsMemory counts collections and their revisions (each collection's current revision).
func (s *Service) statsMemory(ctx context.Context, sc *statsScan, st *SpaceStats) error {
	return sc.each(ctx, port.Query{PK: "SP#" + st.SpaceID, After: "COL#", UpTo: "COL#~"}, func(it port.Item) error {
		st.Memory.Collections++
		st.Memory.Revisions += attrInt(it, attrVersion)
		return nil
	})
}

// statsWebhooks counts subscriptions by their state now and delivery records by state.
func (s *Service) statsWebhooks(ctx context.Context, sc *statsScan, st *SpaceStats) error {
	if err := sc.each(ctx, port.Query{PK: pkSubscriptions(st.SpaceID), After: "S#", UpTo: "S#~"}, func(it port.Item) error {
		sub, err := decodeItem[Subscription](it)
		if err != nil {
			return err
		}
		st.Webhooks.Subscriptions[sub.stateAt(st.GeneratedAt)]++
		return nil
	}); err != nil {
		return err
	}
	return sc.each(ctx, port.Query{PK: pkDeliveries(st.SpaceID)}, func(it port.Item) error {
		d, err := decodeItem[Delivery](it)
		if err != nil {
			return err
		}
		st.Webhooks.Deliveries[d.State]++
		return nil
	})
}

// statsConsumers describes every consumer of the space.
func (s *Service) statsConsumers(ctx context.Context, sc *statsScan, st *SpaceStats) error {
	var consumers []Consumer
	if err := sc.each(ctx, port.Query{PK: "SP#" + st.SpaceID, After: "CON#", UpTo: "CON#~"}, func(it port.Item) error {
		c, err := decodeItem[Consumer](it)
		if err != nil {
			return err
		}
		consumers = append(consumers, c)
		return nil
	}); err != nil {
		return err
	}
	for _, c := range consumers {
		cs, err := s.consumerStats(ctx, sc, st, c)
		st.Consumers = append(st.Consumers, cs)
		if err != nil {
			return err
		}
	}
	return nil
}

func (s *Service) consumerStats(ctx context.Context, sc *statsScan, st *SpaceStats, c Consumer) (ConsumerStats, error) {
	space := st.SpaceID
	cs := ConsumerStats{ConsumerID: c.ConsumerID, ActorID: c.ActorID, View: c.View, ViewRevision: c.ViewRevision}
	// The checkpoint of the current view revision that went furthest (there is one per grant fingerprint).
	var pos uint64
	prefix := fmt.Sprintf("%020d#", c.ViewRevision)
	if err := sc.each(ctx, port.Query{PK: "CP#" + space + "#" + c.ConsumerID}, func(it port.Item) error {
		if !strings.HasPrefix(it.SK, prefix) {
			return nil
		}
		p, err := strconv.ParseUint(it.Attr(attrPos), 10, 64)
		if err != nil {
			return fmt.Errorf("checkpoint position: %w", err)
		}
		if cs.Checkpoint != nil && p < pos {
			return nil
		}
		pos = p
		cp := &CheckpointStats{VisibleSeq: strconv.FormatUint(p, 10)}
		if at, err := time.Parse(time.RFC3339Nano, it.Attr(attrAt)); err == nil {
			age := int64(st.GeneratedAt.Sub(at) / time.Second)
			cp.UpdatedAt, cp.AgeSeconds = &at, &age
		}
		cs.Checkpoint = cp
		return nil
	}); err != nil {
		return cs, err
	}
	stages := map[string]Stage{}
	if err := sc.each(ctx, port.Query{PK: "RC#" + space + "#" + c.ConsumerID}, func(it port.Item) error {
		r, err := decodeItem[receiptRecord](it)
		if err != nil {
			return err
		}
		stages[it.SK] = r.Stage
		switch r.Stage {
		case StageReceived:
			cs.ReceivedNotProcessed++
		case StageProcessed:
			cs.Processed++
		}
		return nil
	}); err != nil {
		return cs, err
	}
	actor, _, found, err := getRecord[Actor](ctx, s.store, keyActor(space, c.ActorID))
	if err != nil || !found || actor.Revoked {
		return cs, err // a revoked actor's consumer reads nothing
	}
	grants, err := s.activeGrants(ctx, space, c.ActorID)
	if err != nil {
		return cs, err
	}
	p := &Principal{SpaceID: space, ActorID: c.ActorID, Scopes: []Scope{ScopeMessageRead, ScopeMemoryRead, ScopeSpaceObserve}, Grants: grants}
	fs := feedScope{p: p, consumer: c}
	if c.View == ViewSpaceLog && !p.CanObserve() {
		return cs, nil // it cannot read its feed at all
	}
	head, err := s.head(ctx, space)
	if err != nil || pos >= head {
		return cs, err
	}
	pks, err := s.partitions(ctx, fs)
	if err != nil {
		return cs, err
	}
	m := newMerger(s, space, pks, pos, head, 200)
	for {
		if sc.left <= 0 {
			return cs, errScanBudget
		}
		e, ok, err := m.next(ctx)
		if err != nil {
			return cs, fmt.Errorf("reading a consumer's feed: %w", err)
		}
		if !ok {
			return cs, nil
		}
		sc.left--
		fi, err := m.decode(e)
		if err != nil {
			return cs, err
		}
		if fs.visible(fi, true) && stages[fi.ItemID] == StageNone {
			cs.NotReceived++
		}
	}
}
