package domain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/domain/retry"
)

// Delivery states. The admin plane lists pending, failed and cancelled records. A delivered record stays
// as a marker for deliveredRetention, so that a feed item dispatched again (a repeated table-stream batch,
// a dispatcher restart) is not announced twice, and is then removed; the subscription's health keeps the
// last success.
const (
	DeliveryPending   = "pending"
	DeliveryFailed    = "failed"
	DeliveryCancelled = "cancelled"
	DeliveryDelivered = "delivered"
)

// deliveredRetention is how long a delivered marker is kept: the retention of a DynamoDB stream record,
// the longest a dispatch of the same item can be repeated.
const deliveredRetention = 24 * time.Hour

// attemptLease is how long a claimed attempt keeps others off: the 10 s answer limit plus connect time and
// margin. A worker that dies mid-attempt leaves the delivery due again when the lease ends.
const attemptLease = 30 * time.Second

// AttemptRecord describes one delivery attempt. Each attempt has its own ID; the event ID (webhook-id)
// stays the same across attempts.
type AttemptRecord struct {
	AttemptID  string    `json:"attempt_id"`
	StartedAt  time.Time `json:"started_at"`
	EndedAt    time.Time `json:"ended_at"`
	StatusCode int       `json:"status_code"`
	Outcome    string    `json:"outcome"` // delivered, retry, give_up
	Reason     string    `json:"reason,omitempty"`
}

// Delivery is the durable record of one (event, subscription) pair: what is owed to whom and how the
// attempts went (RFC §12.4).
type Delivery struct {
	DeliveryID     string     `json:"delivery_id"`
	SpaceID        string     `json:"space_id"`
	SubscriptionID string     `json:"subscription_id"`
	ConsumerID     string     `json:"consumer_id"`
	EventID        string     `json:"event_id"`
	EventType      string     `json:"event_type"`
	VisibleSeq     string     `json:"visible_seq"`
	URL            string     `json:"url"`
	State          string     `json:"state"`
	Attempts       int        `json:"attempts"`
	NextAttemptAt  *time.Time `json:"next_attempt_at"`
	LeaseUntil     *time.Time `json:"lease_until,omitempty"`
	FailureReason  string     `json:"failure_reason,omitempty"`
	PurgeAt        *time.Time `json:"purge_at,omitempty"` // delivered markers only, purged through the due index
	// ExpiresAt is when a delivered marker expires on a store that deletes expired items itself (DynamoDB
	// time to live): such a marker has no due entry.
	ExpiresAt *time.Time      `json:"expires_at,omitempty"`
	History   []AttemptRecord `json:"attempts_log"`
	CreatedAt time.Time       `json:"created_at"`
	UpdatedAt time.Time       `json:"updated_at"`
}

// dueAt is when the delivery's current due-index entry is, if any.
func (d Delivery) dueAt() (time.Time, bool) {
	switch {
	case d.LeaseUntil != nil:
		return *d.LeaseUntil, true
	case d.NextAttemptAt != nil && d.State == DeliveryPending:
		return *d.NextAttemptAt, true
	case d.PurgeAt != nil && d.State == DeliveryDelivered:
		return *d.PurgeAt, true
	}
	return time.Time{}, false
}

func (d Delivery) ref() port.DeliveryRef {
	return port.DeliveryRef{SpaceID: d.SpaceID, DeliveryID: d.DeliveryID}
}

// DeliveryList is a page of delivery records (admin plane).
type DeliveryList struct {
	Deliveries []Delivery `json:"deliveries"`
}

// AttemptOutcome says what became of a delivery after AttemptDelivery.
type AttemptOutcome struct {
	// Done: nothing more is due for this delivery (delivered, failed, cancelled, gone or handled elsewhere).
	Done bool
	// NextAt is when the next attempt is due when not Done.
	NextAt time.Time
}

// DispatchResult counts what a dispatch pass did.
type DispatchResult struct {
	Items      int // feed items examined
	Deliveries int // delivery records created
}

// add counts the work of another dispatch pass in r.
func (r *DispatchResult) add(more DispatchResult) {
	r.Items += more.Items
	r.Deliveries += more.Deliveries
}

// principalOfToken re-reads the rights of the credential a subscription was made with.
func (s *Service) principalOfToken(ctx context.Context, space, tokenID string) (*Principal, error) {
	t, _, found, err := getRecord[Token](ctx, s.store, keyTokenByID(space, tokenID))
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, errUnauthenticated
	}
	return s.authenticateDigest(ctx, t.Digest)
}

// announces reports whether sub announces fi right now: active at now, the item's type subscribed, after the
// subscription's start, and visible to the subscription's credential under the consumer's view and filter
// and the subscription's own filter. A reason says why not ("" when it does).
func (s *Service) announces(ctx context.Context, sub Subscription, fi FeedItem, now time.Time) (string, error) {
	switch sub.stateAt(now) {
	case SubscriptionStopped:
		return "subscription_stopped", nil
	case SubscriptionExpired:
		return "subscription_expired", nil
	}
	seq, err := parseSeqSK(fi.VisibleSeq)
	if err != nil {
		return "", fmt.Errorf("feed item %s: visible_seq: %w", fi.ItemID, err)
	}
	if seq <= sub.FromSeq || !slices.Contains(sub.EventTypes, EventTypeOf(fi.ItemType)) {
		return "not_subscribed", nil
	}
	p, err := s.principalOfToken(ctx, sub.SpaceID, sub.TokenID)
	if err != nil {
		if AsError(err).Code == CodeUnauthenticated {
			return "credential_invalid", nil
		}
		return "", err
	}
	if p.ActorID != sub.ActorID {
		return "credential_invalid", nil
	}
	fs, err := s.consumerScope(ctx, p, sub.ConsumerID, ScopeSubscriptionManage)
	if err != nil {
		if de := AsError(err); de.Code == CodeForbidden || de.Code == CodeNotFound {
			return "unauthorized", nil
		}
		return "", err
	}
	if !p.HasScope(ScopeMessageRead) {
		// The credential cannot read the consumer's feed at all (inbox.read needs message.read): announcing
		// anything would make the subscription wider than the view (RFC §12.3).
		return "unauthorized", nil
	}
	if !fs.visible(fi, true) {
		return "not_visible", nil
	}
	own := fs
	own.consumer.Filter = sub.Filter
	if !own.visible(fi, true) {
		return "filtered", nil
	}
	return "", nil
}

// DispatchFeedItems derives the deliveries owed for committed feed items: one durable record per (item,
// announcing subscription), created once (a repeated dispatch of the same item creates nothing new). It
// serves the AWS stream dispatcher, which passes the items of the table's stream (items of other kinds
// are ignored), and the embedded dispatcher. Each created delivery is announced to the delivery queue.
func (s *Service) DispatchFeedItems(ctx context.Context, items []port.Item) (DispatchResult, error) {
	var res DispatchResult
	subsBySpace := map[string][]Subscription{}
	for _, it := range items {
		space, ok := strings.CutPrefix(it.PK, "FD#")
		if !ok {
			continue
		}
		fi, err := decodeItem[FeedItem](it)
		if err != nil {
			return res, err
		}
		subs, ok := subsBySpace[space]
		if !ok {
			if subs, err = s.subscriptions(ctx, space); err != nil {
				return res, err
			}
			subsBySpace[space] = subs
		}
		res.Items++
		n, err := s.dispatchItem(ctx, fi, subs)
		res.Deliveries += n
		if err != nil {
			return res, err
		}
	}
	return res, nil
}

func (s *Service) dispatchItem(ctx context.Context, fi FeedItem, subs []Subscription) (int, error) {
	n := 0
	for _, sub := range subs {
		now := s.clock.Now().UTC()
		why, err := s.announces(ctx, sub, fi, now)
		if err != nil {
			return n, err
		}
		if why != "" {
			continue
		}
		d := Delivery{DeliveryID: derivedID("dl", sub.SubscriptionID, fi.ItemID), SpaceID: sub.SpaceID,
			SubscriptionID: sub.SubscriptionID, ConsumerID: sub.ConsumerID, EventID: fi.ItemID,
			EventType: EventTypeOf(fi.ItemType), VisibleSeq: fi.VisibleSeq, URL: sub.URL, State: DeliveryPending,
			NextAttemptAt: &now, History: []AttemptRecord{}, CreatedAt: now, UpdatedAt: now}
		err = s.commitOps(ctx, []port.Op{
			port.Put(item(keyDelivery(d.SpaceID, d.DeliveryID), d, attrVersion, "1"), port.NotExists()),
			port.Put(port.Item{Key: keyDue(now, d.SpaceID, d.DeliveryID)}, port.Cond{}),
		})
		if _, exists := port.FailedOp(err); exists {
			continue // dispatched before (a repeated stream batch or a dispatcher restart)
		}
		if err != nil {
			return n, fmt.Errorf("creating delivery: %w", err)
		}
		n++
		s.wakeDelivery(ctx, d.ref(), now)
	}
	return n, nil
}

func (s *Service) wakeDelivery(ctx context.Context, ref port.DeliveryRef, at time.Time) {
	if s.deliveryQueue == nil {
		return
	}
	if err := s.deliveryQueue.Enqueue(ctx, ref, at); err != nil {
		// The due index still holds it; the next pass over due deliveries finds it.
		s.log.WarnContext(ctx, "delivery wake-up not queued", "space_id", ref.SpaceID, "delivery_id", ref.DeliveryID, "err", err)
	}
}

// DispatchPending is the embedded dispatcher: for every space with subscriptions it derives the deliveries
// of the feed items committed since its stored position, then advances the position. Because the position
// moves only after the deliveries are durable, a crash between a commit and its delivery loses nothing:
// the next pass derives them again from the feed.
func (s *Service) DispatchPending(ctx context.Context) (DispatchResult, error) {
	var res DispatchResult
	for _, pk := range indexPartitions(pkDispatch) {
		for markers, err := range s.pages(ctx, port.Query{PK: pk, Limit: 1000}) {
			if err != nil {
				return res, fmt.Errorf("reading dispatch positions: %w", err)
			}
			for _, m := range markers {
				r, err := s.dispatchSpace(ctx, m)
				res.add(r)
				if err != nil {
					return res, err
				}
			}
		}
	}
	return res, nil
}

// DispatchSpaces is DispatchPending for the named spaces only, as the embedded worker runs it for the spaces
// a commit was just announced in: a space without subscriptions costs a point read of its dispatch position
// (two while it has none: the position may still be kept where it was before the index was sharded),
// instead of a read of every shard of the position index. DispatchPending stays the safety net for a lost
// announcement.
func (s *Service) DispatchSpaces(ctx context.Context, spaces []string) (DispatchResult, error) {
	var res DispatchResult
	for i, space := range spaces {
		if slices.Contains(spaces[:i], space) {
			continue
		}
		marker, found, err := s.store.Get(ctx, keyDispatch(space))
		if err == nil && !found {
			marker, found, err = s.store.Get(ctx, keyDispatchUnsharded(space))
		}
		if err != nil {
			return res, fmt.Errorf("reading the dispatch position of %s: %w", space, err)
		}
		if !found {
			continue
		}
		r, err := s.dispatchSpace(ctx, marker)
		res.add(r)
		if err != nil {
			return res, err
		}
	}
	return res, nil
}

func (s *Service) dispatchSpace(ctx context.Context, marker port.Item) (DispatchResult, error) {
	var res DispatchResult
	space := marker.SK
	pos, err := parseSeqSK(marker.Attr(attrPos))
	if err != nil {
		return res, fmt.Errorf("dispatch position of %s: %w", space, err)
	}
	head, err := s.head(ctx, space)
	if err != nil {
		return res, err
	}
	var subs []Subscription
	for pos < head {
		items, err := s.store.Query(ctx, port.Query{PK: pkFeed(space), After: seqSK(pos), UpTo: seqSK(head), Limit: 100})
		if err != nil {
			return res, fmt.Errorf("reading feed of %s: %w", space, err)
		}
		if len(items) == 0 {
			break
		}
		if subs == nil {
			if subs, err = s.subscriptions(ctx, space); err != nil {
				return res, err
			}
		}
		for _, it := range items {
			fi, err := decodeItem[FeedItem](it)
			if err != nil {
				return res, err
			}
			res.Items++
			n, err := s.dispatchItem(ctx, fi, subs)
			res.Deliveries += n
			if err != nil {
				return res, err
			}
		}
		next, err := parseSeqSK(items[len(items)-1].SK)
		if err != nil {
			return res, err
		}
		err = s.commitOps(ctx, []port.Op{port.Put(port.Item{Key: marker.Key, Attrs: map[string]string{attrPos: fmt.Sprint(next)}},
			port.AttrEquals(attrPos, fmt.Sprint(pos)))})
		if _, lost := port.FailedOp(err); lost {
			return res, nil // another dispatcher moved it; it carries on from there
		}
		if err != nil {
			return res, fmt.Errorf("advancing dispatch position of %s: %w", space, err)
		}
		pos = next
	}
	return res, nil
}

// DueDeliveries returns deliveries whose next attempt is due at now, oldest first, at most limit. The due
// index is sharded: each shard is read (oldest first, at most limit), and the oldest of all are returned.
func (s *Service) DueDeliveries(ctx context.Context, limit int) ([]port.DeliveryRef, error) {
	now := s.clock.Now().UTC()
	var items []port.Item
	for _, pk := range indexPartitions(pkDue) {
		shard, err := s.store.Query(ctx, port.Query{PK: pk, UpTo: now.Format(dueTimeFormat) + "#~", Limit: limit})
		if err != nil {
			return nil, fmt.Errorf("reading due deliveries: %w", err)
		}
		items = append(items, shard...)
	}
	slices.SortFunc(items, func(a, b port.Item) int { return strings.Compare(a.SK, b.SK) })
	items = items[:min(len(items), limit)]
	out := make([]port.DeliveryRef, 0, len(items))
	for _, it := range items {
		parts := strings.SplitN(it.SK, "#", 3)
		if len(parts) != 3 {
			return nil, fmt.Errorf("malformed due entry %q", it.SK)
		}
		out = append(out, port.DeliveryRef{SpaceID: parts[1], DeliveryID: parts[2]})
	}
	return out, nil
}

// NextDue returns when the earliest delivery attempt is due (false when none is queued).
func (s *Service) NextDue(ctx context.Context) (time.Time, bool, error) {
	first := ""
	for _, pk := range indexPartitions(pkDue) {
		items, err := s.store.Query(ctx, port.Query{PK: pk, Limit: 1})
		if err != nil {
			return time.Time{}, false, err
		}
		if len(items) > 0 && (first == "" || items[0].SK < first) {
			first = items[0].SK
		}
	}
	if first == "" {
		return time.Time{}, false, nil
	}
	ts, _, _ := strings.Cut(first, "#")
	t, err := time.Parse(dueTimeFormat, ts)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("malformed due entry %q: %w", first, err)
	}
	return t, true, nil
}

// replaceDue returns the ops that move d's due entry from its old time to its new one. When both times
// are the same (a retry due exactly when the attempt's lease ends) the entry stays: one transaction may not
// act twice on one key.
func replaceDue(old, cur Delivery) []port.Op {
	var ops []port.Op
	oldAt, hadDue := old.dueAt()
	newAt, hasDue := cur.dueAt()
	if hadDue && (!hasDue || !oldAt.Equal(newAt)) {
		ops = append(ops, port.Delete(keyDue(oldAt, old.SpaceID, old.DeliveryID), port.Cond{}))
	}
	if hasDue {
		ops = append(ops, port.Put(port.Item{Key: keyDue(newAt, cur.SpaceID, cur.DeliveryID)}, port.Cond{}))
	}
	return ops
}

// saveDelivery replaces a delivery read at version it, moving its due entry. A delivered marker carries its
// expiry (port.AttrExpires).
func (s *Service) saveDelivery(ctx context.Context, it port.Item, old, cur Delivery) (port.Item, error) {
	v := itoa(attrInt(it, attrVersion) + 1)
	next := item(it.Key, cur, attrVersion, v)
	if exp := cur.PurgeAt; cur.State == DeliveryDelivered && (exp != nil || cur.ExpiresAt != nil) {
		if exp == nil {
			exp = cur.ExpiresAt
		}
		next.Attrs[port.AttrExpires] = strconv.FormatInt(exp.Unix(), 10)
	}
	ops := append([]port.Op{port.Put(next, port.AttrEquals(attrVersion, it.Attr(attrVersion)))}, replaceDue(old, cur)...)
	return next, s.commitOps(ctx, ops)
}

// AttemptDelivery makes the next attempt of a delivery if it is due: it claims the attempt (so two workers
// never send the same attempt), re-checks the subscription, its credential's rights and the item's
// visibility, sends the signed event, and records the outcome and the next attempt (RFC §12.4 schedule,
// Retry-After honoured but never past the subscription's expiry, at most 5 attempts, then a failure record).
func (s *Service) AttemptDelivery(ctx context.Context, ref port.DeliveryRef) (AttemptOutcome, error) {
	if err := s.webhooksOn(); err != nil {
		return AttemptOutcome{}, err
	}
	d, it, found, err := getRecord[Delivery](ctx, s.store, keyDelivery(ref.SpaceID, ref.DeliveryID))
	if err != nil {
		return AttemptOutcome{}, err
	}
	now := s.clock.Now().UTC()
	if found && d.State == DeliveryDelivered && d.PurgeAt != nil {
		// A delivered marker: removed with its due entry once its retention ends; nothing to send.
		if !now.Before(*d.PurgeAt) {
			ops := append([]port.Op{port.Delete(it.Key, port.AttrEquals(attrVersion, it.Attr(attrVersion)))}, replaceDue(d, Delivery{})...)
			if err := s.commitOps(ctx, ops); err != nil && !isConditionFailure(err) {
				return AttemptOutcome{}, fmt.Errorf("removing delivered marker: %w", err)
			}
		}
		return AttemptOutcome{Done: true}, nil
	}
	if !found || d.State != DeliveryPending {
		// A stale due entry (of a delivered or finished record) must not come back, but only while the
		// record is as read: a Redeliver committed since has its own due entry.
		unchanged := port.Check(keyDelivery(ref.SpaceID, ref.DeliveryID), port.NotExists())
		if found {
			unchanged.Cond = port.AttrEquals(attrVersion, it.Attr(attrVersion))
		}
		s.dropDue(ctx, ref, now, unchanged)
		return AttemptOutcome{Done: true}, nil
	}
	if due, _ := d.dueAt(); due.After(now) {
		return AttemptOutcome{NextAt: due}, nil
	}
	sub, _, subFound, err := getRecord[Subscription](ctx, s.store, keySubscription(d.SpaceID, d.SubscriptionID))
	if err != nil {
		return AttemptOutcome{}, err
	}
	fi, _, fiFound, err := s.feedItemOf(ctx, d)
	if err != nil {
		return AttemptOutcome{}, err
	}
	why := "subscription_gone"
	if subFound && fiFound {
		if why, err = s.announces(ctx, sub, fi, now); err != nil {
			return AttemptOutcome{}, err
		}
	}
	if why != "" {
		cur := d
		cur.State, cur.FailureReason, cur.NextAttemptAt, cur.LeaseUntil, cur.UpdatedAt = DeliveryCancelled, why, nil, nil, now
		if _, err := s.saveDelivery(ctx, it, d, cur); err != nil && !isConditionFailure(err) {
			return AttemptOutcome{}, fmt.Errorf("cancelling delivery: %w", err)
		}
		s.log.InfoContext(ctx, "webhook delivery cancelled", "space_id", d.SpaceID, "delivery_id", d.DeliveryID, "reason", why)
		return AttemptOutcome{Done: true}, nil
	}
	if d.Attempts >= retry.MaxAttempts {
		// The last attempt was claimed but its outcome never recorded (its worker died mid-request): it
		// counts, so no further attempt is made.
		cur := d
		cur.State, cur.NextAttemptAt, cur.LeaseUntil, cur.UpdatedAt = DeliveryFailed, nil, nil, now
		cur.FailureReason = string(retry.StopExhausted) + ": the last attempt did not complete"
		if _, err := s.saveDelivery(ctx, it, d, cur); err != nil && !isConditionFailure(err) {
			return AttemptOutcome{}, fmt.Errorf("recording failed delivery: %w", err)
		}
		s.log.InfoContext(ctx, "webhook delivery failed", "space_id", d.SpaceID, "delivery_id", d.DeliveryID, "reason", cur.FailureReason)
		return AttemptOutcome{Done: true}, nil
	}
	sp, err := s.space(ctx, d.SpaceID)
	if err != nil {
		return AttemptOutcome{}, err
	}
	// Claim the attempt: only the worker whose claim commits sends it.
	claimed := d
	lease := now.Add(attemptLease)
	claimed.Attempts++
	claimed.LeaseUntil, claimed.UpdatedAt = &lease, now
	attemptID := s.ids.NewID("at")
	claimedItem, err := s.saveDelivery(ctx, it, d, claimed)
	if isConditionFailure(err) {
		return AttemptOutcome{Done: true}, nil // another worker claimed it
	}
	if err != nil {
		return AttemptOutcome{}, fmt.Errorf("claiming delivery attempt: %w", err)
	}
	fiJSON, err := json.Marshal(fi)
	if err != nil {
		return AttemptOutcome{}, fmt.Errorf("encoding feed item: %w", err)
	}
	started := s.clock.Now().UTC()
	res, sendErr := s.webhooks.Deliver(ctx, sub.URL, sub.keys(started), port.WebhookEvent{SourceURI: sp.SourceURI, FeedItem: fiJSON})
	if sendErr != nil {
		if ctx.Err() != nil {
			return AttemptOutcome{}, fmt.Errorf("delivery attempt cut short: %w", sendErr) // the lease ends; it is retried
		}
		res = port.WebhookResult{Reason: "attempt not made: " + sendErr.Error()}
	}
	ended := s.clock.Now().UTC()
	rec := AttemptRecord{AttemptID: attemptID, StartedAt: started, EndedAt: ended, StatusCode: res.StatusCode, Reason: res.Reason}
	cur := claimed
	cur.LeaseUntil, cur.UpdatedAt = nil, ended
	var out AttemptOutcome
	switch {
	case res.Delivered:
		rec.Outcome = "delivered"
		out.Done = true
	case res.GiveUp:
		rec.Outcome = "give_up"
		cur.State, cur.FailureReason, cur.NextAttemptAt = DeliveryFailed, res.Reason, nil
		out.Done = true
	default:
		rec.Outcome = "retry"
		dec := s.retryPolicy.Next(cur.Attempts, ended, res.RetryAfter, sub.ExpiresAt)
		if dec.Stop {
			cur.State, cur.FailureReason, cur.NextAttemptAt = DeliveryFailed, string(dec.Reason)+": "+res.Reason, nil
			out.Done = true
		} else {
			at := dec.At.UTC()
			cur.NextAttemptAt, out.NextAt = &at, at
		}
	}
	cur.History = append(cur.History, rec)
	if len(cur.History) > retry.MaxAttempts*2 {
		cur.History = cur.History[len(cur.History)-retry.MaxAttempts*2:]
	}
	if err := s.finishAttempt(ctx, claimedItem, claimed, cur, res.Delivered); err != nil {
		return AttemptOutcome{}, err
	}
	s.recordHealth(ctx, sub, rec)
	s.log.InfoContext(ctx, "webhook delivery attempt", "space_id", d.SpaceID, "delivery_id", d.DeliveryID,
		"subscription_id", d.SubscriptionID, "event_id", d.EventID, "attempt_id", attemptID, "attempt", cur.Attempts,
		"outcome", rec.Outcome, "status", res.StatusCode, "reason", res.Reason)
	if !out.Done {
		s.wakeDelivery(ctx, cur.ref(), out.NextAt)
	}
	return out, nil
}

func (s *Service) feedItemOf(ctx context.Context, d Delivery) (FeedItem, port.Item, bool, error) {
	seq, err := parseSeqSK(d.VisibleSeq)
	if err != nil {
		return FeedItem{}, port.Item{}, false, fmt.Errorf("delivery %s: visible_seq: %w", d.DeliveryID, err)
	}
	return getRecord[FeedItem](ctx, s.store, keyFeed(d.SpaceID, seq))
}

// finishAttempt records an attempt's outcome: a delivered record becomes a marker, removed when
// deliveredRetention ends: by the store's own expiry when it has one (DynamoDB time to live), otherwise by
// the due index (its purge entry).
func (s *Service) finishAttempt(ctx context.Context, it port.Item, old, cur Delivery, delivered bool) error {
	if !delivered {
		if _, err := s.saveDelivery(ctx, it, old, cur); err != nil {
			return fmt.Errorf("recording delivery attempt: %w", err)
		}
		return nil
	}
	purge := cur.UpdatedAt.Add(deliveredRetention)
	cur.State, cur.NextAttemptAt = DeliveryDelivered, nil
	if s.expires {
		cur.ExpiresAt = &purge // the store deletes it: no due entry, no sweep
	} else {
		cur.PurgeAt = &purge
	}
	if _, err := s.saveDelivery(ctx, it, old, cur); err != nil {
		return fmt.Errorf("recording delivery: %w", err)
	}
	return nil
}

// dropDue removes the due entries of a delivery that no longer exists or is finished (bounded scan of what
// is due now), each in a transaction with unchanged, the check that the record is still as read.
func (s *Service) dropDue(ctx context.Context, ref port.DeliveryRef, now time.Time, unchanged port.Op) {
	var items []port.Item
	for _, pk := range []string{pkDueShard(ref.SpaceID, ref.DeliveryID), pkDue} { // its shard, and the unsharded partition
		shard, err := s.store.Query(ctx, port.Query{PK: pk, UpTo: now.Add(attemptLease).Format(dueTimeFormat) + "#~", Limit: 1000})
		if err != nil {
			return
		}
		items = append(items, shard...)
	}
	suffix := "#" + ref.SpaceID + "#" + ref.DeliveryID
	for _, it := range items {
		if strings.HasSuffix(it.SK, suffix) {
			_ = s.commitOps(ctx, []port.Op{unchanged, port.Delete(it.Key, port.Cond{})})
		}
	}
}

// recordHealth updates the subscription's delivery health after an attempt (best effort: health is advice
// for the subscriber; the delivery record is the truth).
func (s *Service) recordHealth(ctx context.Context, sub Subscription, rec AttemptRecord) {
	err := s.commitRetry(ctx, "recording delivery health", func(ctx context.Context) ([]port.Op, error) {
		h, it, found, err := getRecord[DeliveryHealth](ctx, s.store, keySubHealth(sub.SpaceID, sub.SubscriptionID))
		if err != nil {
			return nil, err
		}
		at := rec.EndedAt
		if rec.Outcome == "delivered" {
			h.LastSuccessAt, h.ConsecutiveFailures = &at, 0
		} else {
			reason := rec.Reason
			h.LastFailureAt, h.LastFailureReason = &at, &reason
			h.ConsecutiveFailures++
		}
		cond := port.NotExists()
		if found {
			cond = port.AttrEquals(attrVersion, it.Attr(attrVersion))
		}
		return []port.Op{port.Put(item(keySubHealth(sub.SpaceID, sub.SubscriptionID), h, attrVersion, itoa(attrInt(it, attrVersion)+1)), cond)}, nil
	})
	if err != nil {
		s.log.WarnContext(ctx, "delivery health not recorded", "subscription_id", sub.SubscriptionID, "err", err)
	}
}

func isConditionFailure(err error) bool {
	_, ok := port.FailedOp(err)
	return ok
}

// WorkDeliveries is one pass of the embedded webhook worker: dispatch what was committed since the last
// pass, then make every attempt that is due (at most limit). It returns how many attempts it made.
func (s *Service) WorkDeliveries(ctx context.Context, limit int) (int, error) {
	if s.webhooks == nil {
		return 0, nil
	}
	if _, err := s.DispatchPending(ctx); err != nil {
		return 0, err
	}
	refs, err := s.DueDeliveries(ctx, limit)
	if err != nil {
		return 0, err
	}
	var errs []error
	for _, ref := range refs {
		if _, err := s.AttemptDelivery(ctx, ref); err != nil {
			errs = append(errs, fmt.Errorf("delivery %s: %w", ref.DeliveryID, err))
		}
	}
	return len(refs), errors.Join(errs...)
}

// ListDeliveries lists a space's delivery records in one state (admin plane; default failed).
func (s *Service) ListDeliveries(ctx context.Context, spaceID, state string) (DeliveryList, error) {
	if _, err := s.liveSpace(ctx, spaceID); err != nil {
		return DeliveryList{}, err
	}
	if state == "" {
		state = DeliveryFailed
	}
	if state != DeliveryPending && state != DeliveryFailed && state != DeliveryCancelled {
		return DeliveryList{}, Errorf(CodeInvalidRequest, "state must be pending, failed or cancelled").WithDetails("field", "state")
	}
	out := DeliveryList{Deliveries: []Delivery{}}
	for items, err := range s.pages(ctx, port.Query{PK: pkDeliveries(spaceID), Limit: 200}) {
		if err != nil {
			return DeliveryList{}, fmt.Errorf("reading deliveries: %w", err)
		}
		for _, it := range items {
			d, err := decodeItem[Delivery](it)
			if err != nil {
				return DeliveryList{}, err
			}
			if d.State == state {
				out.Deliveries = append(out.Deliveries, d)
			}
		}
		if len(out.Deliveries) >= 1000 {
			break
		}
	}
	return out, nil
}

// Redeliver makes a failed or cancelled delivery pending again with a fresh schedule of attempts (admin
// plane). Authorization, expiry and the target are still re-checked before the attempt. A pending delivery
// is returned unchanged.
func (s *Service) Redeliver(ctx context.Context, spaceID, deliveryID string) (Delivery, error) {
	if err := s.webhooksOn(); err != nil {
		return Delivery{}, err
	}
	if _, err := s.liveSpace(ctx, spaceID); err != nil {
		return Delivery{}, err
	}
	notFound := Errorf(CodeNotFound, "no such delivery").WithDetails("delivery_id", deliveryID)
	if !ValidID(deliveryID) {
		return Delivery{}, notFound
	}
	var out Delivery
	for attempt := 0; attempt < s.retries; attempt++ {
		d, it, found, err := getRecord[Delivery](ctx, s.store, keyDelivery(spaceID, deliveryID))
		if err != nil {
			return Delivery{}, err
		}
		if !found || d.State == DeliveryDelivered { // a delivered marker is internal: nothing to redeliver
			return Delivery{}, notFound
		}
		if d.State == DeliveryPending {
			return d, nil
		}
		now := s.clock.Now().UTC()
		cur := d
		cur.State, cur.Attempts, cur.FailureReason, cur.NextAttemptAt, cur.LeaseUntil, cur.PurgeAt, cur.UpdatedAt = DeliveryPending, 0, "", &now, nil, nil, now
		if _, err := s.saveDelivery(ctx, it, d, cur); isConditionFailure(err) {
			continue
		} else if err != nil {
			return Delivery{}, fmt.Errorf("redeliver: %w", err)
		}
		out = cur
		s.wakeDelivery(ctx, cur.ref(), now)
		return out, nil
	}
	return Delivery{}, Errorf(CodeStorageUnavailable, "too much contention; retry")
}
