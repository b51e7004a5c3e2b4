package domain

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/waypost/waypost/domain/port"
)

// OpInboxAck is the idempotency operation name of inbox.ack.
const OpInboxAck = "inbox.ack"

// AckEntry is one item of an ack request.
type AckEntry struct {
	ItemID string `json:"item_id"`
	Stage  Stage  `json:"stage"`
}

// AckRequest is the body of inbox.ack (RFC §8.3).
type AckRequest struct {
	RequestID        string     `json:"request_id"`
	ConsumerID       string     `json:"consumer_id"`
	Items            []AckEntry `json:"items"`
	CheckpointCursor *string    `json:"checkpoint_cursor,omitempty"`
}

// AckReceipt reports the current stage of one acked item.
type AckReceipt struct {
	ItemID  string `json:"item_id"`
	Stage   Stage  `json:"stage"`
	Changed bool   `json:"changed"`
}

// AckResult is the result of inbox.ack.
type AckResult struct {
	Receipts         []AckReceipt `json:"receipts"`
	CheckpointCursor *string      `json:"checkpoint_cursor"`
}

// receiptRecord is the stored receipt state of (space, consumer, item).
type receiptRecord struct {
	ReceiptID string `json:"receipt_id"`
	Stage     Stage  `json:"stage"`
	Version   int64  `json:"version"`
}

// Ack records receipts and a checkpoint for a consumer (inbox.ack). Stages only advance
// none → received → processed; only a real advance publishes a receipt feed item, and acking a receipt
// item publishes none. Receipts, checkpoint and feed items commit atomically.
func (s *Service) Ack(ctx context.Context, p *Principal, req AckRequest) (AckResult, error) {
	if err := checkRequestID(req.RequestID); err != nil {
		return AckResult{}, err
	}
	if len(req.Items) > s.limits.AckItemsMax {
		return AckResult{}, Errorf(CodeResourceLimit, "more than %d items in one ack", s.limits.AckItemsMax).WithDetails("field", "items", "limit", s.limits.AckItemsMax)
	}
	for _, e := range req.Items {
		if e.Stage != StageReceived && e.Stage != StageProcessed {
			return AckResult{}, Errorf(CodeInvalidRequest, "stage must be received or processed").WithDetails("field", "items.stage")
		}
		if !ValidID(e.ItemID) {
			return AckResult{}, Errorf(CodeInvalidRequest, "item_id must match [A-Za-z0-9_-]{1,96}").WithDetails("field", "items.item_id")
		}
	}
	fs, err := s.consumerScope(ctx, p, req.ConsumerID, ScopeReceiptWrite)
	if err != nil {
		return AckResult{}, err
	}
	hasCP := req.CheckpointCursor != nil && *req.CheckpointCursor != ""
	if hasCP && !s.cursors.wellFormed(*req.CheckpointCursor) {
		return AckResult{}, errInvalidCursor // not one we issued, whatever its scope
	}
	// The strongest stage asked for each item, in first-seen order.
	want := map[string]Stage{}
	var order []string
	for _, e := range req.Items {
		if _, seen := want[e.ItemID]; !seen {
			order = append(order, e.ItemID)
		}
		if e.Stage.rank() > want[e.ItemID].rank() {
			want[e.ItemID] = e.Stage
		}
	}
	retried := false
	fp, ferr := ackFingerprintOf(req)
	if ferr != nil {
		return AckResult{}, ferr
	}
	var fresh any
	raw, published, err := s.runOnce(ctx, onceSpec{
		key: keySubmission(p.SpaceID, p.ActorID, OpInboxAck, req.RequestID), operation: OpInboxAck, requestID: req.RequestID, fingerprint: fp,
		fresh: &fresh,
		prepare: func(ctx context.Context) (*onceTx, error) {
			if retried {
				// A condition failed, possibly the generation check: re-check the credential and rights
				// (RFC §7.2), or a revoked principal would only ever see "too much contention".
				fresh, err := s.refresh(ctx, p)
				if err != nil {
					return nil, err
				}
				if fs, err = s.consumerScope(ctx, fresh, req.ConsumerID, ScopeReceiptWrite); err != nil {
					return nil, err
				}
			}
			retried = true
			// The checkpoint cursor is checked here, after the idempotency lookup: a replay returns the
			// stored result even when the cursor's scope changed since.
			var cpPos uint64
			if hasCP {
				var err error
				if cpPos, err = s.position(fs, req.CheckpointCursor); err != nil {
					return nil, err
				}
			}
			return s.prepareAck(ctx, fs, order, want, hasCP, cpPos)
		},
	})
	if err != nil {
		return AckResult{}, err
	}
	s.notify(ctx, published)
	if res, ok := fresh.(AckResult); ok {
		return res, nil // what a replay decodes from raw (TestAckResultAsReplayed)
	}
	return decodeResult[AckResult](raw, nil)
}

// ackFingerprintOf is the request's idempotency fingerprint: written directly (ackFingerprint), or on the
// generic path when a string is not valid UTF-8, which reports it.
func ackFingerprintOf(req AckRequest) (string, error) {
	if fp, ok := ackFingerprint(req); ok {
		return fp, nil
	}
	return ackFingerprintGeneric(req)
}

// ackFingerprintGeneric is the fingerprint of an ack request on the generic path (Fingerprint), which
// ackFingerprint writes directly; it reports a request that cannot be canonicalized.
func ackFingerprintGeneric(req AckRequest) (string, error) {
	return fingerprintOf(OpInboxAck, map[string]any{"consumer_id": req.ConsumerID, "items": req.Items, "checkpoint_cursor": req.CheckpointCursor})
}

type ackPlan struct {
	entry   AckReceipt
	acked   FeedItem
	rec     receiptRecord
	prevVer int64
	emit    bool // publish a receipt feed item
}

func (s *Service) prepareAck(ctx context.Context, fs feedScope, order []string, want map[string]Stage, hasCP bool, cpPos uint64) (*onceTx, error) {
	p, space, consumer := fs.p, fs.p.SpaceID, fs.consumer.ConsumerID
	plans := make([]ackPlan, len(order))
	ops := make([]port.Op, 0, len(order)+2) // generation check, receipts, checkpoint
	ops = append(ops, genCheck(p))
	var emits uint64
	ackedItems, err := s.feedItems(ctx, fs, order)
	if err != nil {
		return nil, err
	}
	receiptKeys := make([]port.Key, len(order))
	for i, id := range order {
		receiptKeys[i] = keyReceipt(space, consumer, id)
	}
	recs, recFound, err := getRecords[receiptRecord](ctx, s.store, receiptKeys)
	if err != nil {
		return nil, err
	}
	for i, id := range order {
		acked, rec, found := ackedItems[i], recs[i], recFound[i]
		pl := &plans[i]
		*pl = ackPlan{acked: acked, rec: rec, prevVer: rec.Version, entry: AckReceipt{ItemID: id, Stage: rec.Stage}}
		if want[id].rank() > rec.Stage.rank() {
			if !found {
				pl.rec.ReceiptID = s.ids.NewID("rcpt")
			}
			pl.rec.Stage, pl.rec.Version = want[id], rec.Version+1
			pl.entry = AckReceipt{ItemID: id, Stage: want[id], Changed: true}
			pl.emit = acked.ItemType != ItemReceipt
			if pl.emit {
				emits++
			}
			cond := port.NotExists()
			if found {
				cond = port.AttrEquals(attrVersion, itoa(rec.Version))
			}
			ops = append(ops, port.Put(item(keyReceipt(space, consumer, id), pl.rec, attrVersion, itoa(pl.rec.Version)), cond))
		}
	}
	// Checkpoint: per consumer, view revision and grant fingerprint; only moves forward (RFC §8.3).
	cpKey := keyCheckpoint(space, consumer, fs.consumer.ViewRevision, fs.binding.GrantFP)
	cur, found, err := s.store.Get(ctx, cpKey)
	if err != nil {
		return nil, err
	}
	var curPos uint64
	if found {
		if curPos, err = strconv.ParseUint(cur.Attr(attrPos), 10, 64); err != nil {
			return nil, fmt.Errorf("checkpoint position: %w", err)
		}
	}
	var cpOut *string
	if found {
		c := s.cursorAt(fs, curPos)
		cpOut = &c
	}
	if hasCP && (!found || cpPos > curPos) {
		cond := port.NotExists()
		if found {
			cond = port.AttrEquals(attrPos, cur.Attr(attrPos))
		}
		ops = append(ops, port.Put(port.Item{Key: cpKey, Attrs: map[string]string{attrPos: strconv.FormatUint(cpPos, 10),
			attrAt: s.clock.Now().UTC().Format(time.RFC3339Nano)}}, cond))
		c := s.cursorAt(fs, cpPos)
		cpOut = &c
	}
	var usage *port.Quota
	if emits > 0 {
		usage = &port.Quota{} // receipts count in the space's stored bytes; an ack is never refused (quota.go)
	}
	return &onceTx{resourceID: consumer, seqSpace: space, count: emits, quota: usage, build: func(first uint64) ([]port.Op, any, []port.Published) {
		out := append(make([]port.Op, 0, len(ops)+2*int(emits)), ops...) // two ops a receipt item
		res := AckResult{Receipts: make([]AckReceipt, 0, len(plans)), CheckpointCursor: cpOut}
		pub := make([]port.Published, 0, emits)
		now := s.clock.Now().UTC()
		seq := first
		for i := range plans {
			pl := &plans[i]
			res.Receipts = append(res.Receipts, pl.entry)
			if !pl.emit {
				continue
			}
			vs := strconv.FormatUint(seq, 10)
			fi := FeedItem{ItemID: newItemID(seq, pl.rec.ReceiptID), SpaceID: space, VisibleSeq: vs, ItemType: ItemReceipt,
				ResourceID: pl.rec.ReceiptID, ResourceVersion: pl.rec.Version, ProducerID: p.ActorID,
				RecipientIDs: []string{pl.acked.ProducerID}, ThreadID: pl.acked.ThreadID, CommittedAt: now,
				Data: encode(ReceiptItemData{ConsumerID: consumer, AckedItemID: pl.acked.ItemID, ResourceID: pl.acked.ResourceID,
					Stage: pl.rec.Stage, ReceiptVersion: pl.rec.Version})}
			data := encodeFeedItem(fi)
			out = append(out,
				port.Put(port.Item{Key: keyFeed(space, seq), Data: data}, port.NotExists()),
				s.inboxEntryPut(space, pl.acked.ProducerID, seq, data))
			pub = append(pub, port.Published{SpaceID: space, VisibleSeq: seq, ItemID: fi.ItemID})
			seq++
		}
		return out, res, pub
	}}, nil
}

// feedItems finds feed items by ID, in the order of ids, and checks that each is visible to the consumer's
// view and rights; NOT_FOUND names the first that is not. The items the consumer has just read come from
// the feed cache, the others from one GetMany.
func (s *Service) feedItems(ctx context.Context, fs feedScope, ids []string) ([]FeedItem, error) {
	out := make([]FeedItem, len(ids))
	known := make([]bool, len(ids))
	var keys []port.Key
	var at []int // the position in ids of each key
	for i, id := range ids {
		seq, ok := parseItemID(id)
		if !ok {
			continue // not found, said below in order
		}
		if out[i], known[i] = s.feed.get(fs.p.SpaceID, strconv.FormatUint(seq, 10)); !known[i] { // usually just read by the consumer
			keys, at = append(keys, keyFeed(fs.p.SpaceID, seq)), append(at, i)
		}
	}
	if len(keys) > 0 {
		read, found, err := getRecords[FeedItem](ctx, s.store, keys)
		if err != nil {
			return nil, err
		}
		for n, i := range at {
			if found[n] {
				out[i], known[i] = read[n], true
				s.feed.put(read[n])
			}
		}
	}
	for i, id := range ids {
		if !known[i] || out[i].ItemID != id || !fs.visible(out[i], false) {
			return nil, Errorf(CodeNotFound, "no such item for this consumer").WithDetails("item_id", id)
		}
	}
	return out, nil
}
