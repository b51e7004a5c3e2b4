package domain

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/waypost/waypost/domain/port"
)

// WaitRequest is the query of feed.wait (SUPPLEMENT §11.1, capability live_feed).
type WaitRequest struct {
	ConsumerID string  `json:"consumer_id"`
	Cursor     *string `json:"cursor"`
	TimeoutMS  int     `json:"timeout_ms,omitempty"`
	Limit      int     `json:"limit,omitempty"`
}

// WaitFeed is a long poll over a consumer's feed: it returns as soon as an item visible to the consumer
// commits after the cursor, or an empty page at the timeout, in the inbox.read page shape.
//
// It follows the seed channel spec's correct usage: subscribe first, then read the durable feed up to its
// head; live announcements only wake the waiter, and every item returned comes from the durable feed read
// after the wake-up, so an item is never skipped or repeated, whatever announcements are lost, duplicated
// or reordered. When the subscription is evicted for backlog, it subscribes again and reads again from the
// last position returned.
func (s *Service) WaitFeed(ctx context.Context, p *Principal, req WaitRequest) (Page, error) {
	if s.watcher == nil || !s.caps.LiveFeed {
		return Page{}, Errorf(CodeUnsupported, "feed.wait (live_feed) is not available in this deployment")
	}
	if req.TimeoutMS < 0 {
		return Page{}, Errorf(CodeInvalidRequest, "timeout_ms must not be negative").WithDetails("field", "timeout_ms")
	}
	if req.TimeoutMS > s.limits.FeedWaitMaxMS { // a published limit (SUPPLEMENT §5.3)
		return Page{}, Errorf(CodeResourceLimit, "timeout_ms is above feed_wait_max_ms (%d)", s.limits.FeedWaitMaxMS).
			WithDetails("field", "timeout_ms", "limit", s.limits.FeedWaitMaxMS, "limit_name", "feed_wait_max_ms")
	}
	fs, pos, limit, err := s.feedRead(ctx, p, req.ConsumerID, req.Cursor, req.Limit)
	if err != nil {
		return Page{}, err
	}
	deadline := s.clock.Now().Add(time.Duration(req.TimeoutMS) * time.Millisecond)
	release, err := s.acquireWaitSlot(ctx, p.SpaceID, deadline)
	if err != nil {
		return Page{}, err
	}
	defer release()
	for {
		w, err := s.watcher.Watch(ctx, p.SpaceID) // subscribe before reading
		if err != nil {
			return Page{}, fmt.Errorf("feed.wait: subscribing: %w", err)
		}
		page, resubscribe, err := s.waitOnce(ctx, fs, w, &pos, limit, deadline)
		w.Close()
		if err != nil || !resubscribe {
			return page, err
		}
	}
}

// Re-reads while an announced item is above the visible head: the first after gapRecheckMin, then each
// interval doubled up to gapRecheckMax.
const (
	gapRecheckMin = 100 * time.Millisecond
	gapRecheckMax = 2 * time.Second
)

// waitOnce reads, then waits for announcements above the position read, until items arrive, the deadline
// passes, or the watch ends (resubscribe is then true).
//
// An announcement only wakes the waiter: what it returns is read from the durable feed, bounded by the
// visible head. An item can be announced while a lower visible_seq is still being committed (or was
// reserved by a writer that died); the head then stays below it, and handing out a cursor past the lower
// slot could skip it. So while an announced item is above the head, the waiter re-reads at growing
// intervals (gapRecheckMin … gapRecheckMax): the lower slot commits, or the head read voids it after the
// store's grace period, and the item is returned then.
func (s *Service) waitOnce(ctx context.Context, fs feedScope, w port.Watch, pos *uint64, limit int, deadline time.Time) (Page, bool, error) {
	var pending uint64 // highest announced visible_seq above the head
	recheck := gapRecheckMin
	for {
		page, next, err := s.readFrom(ctx, fs, *pos, limit)
		if err != nil {
			return Page{}, false, err
		}
		if len(page.Items) > 0 {
			return page, false, nil
		}
		*pos = next // nothing visible up to the head: the cursor moved past items determined invisible
		if pending <= *pos {
			pending, recheck = 0, gapRecheckMin
		}
		for {
			remaining := deadline.Sub(s.clock.Now())
			if remaining <= 0 {
				return page, false, nil
			}
			wait := remaining
			if pending > 0 {
				wait = min(wait, recheck)
			}
			pub, status, err := w.Next(ctx, wait)
			if err != nil {
				return Page{}, false, fmt.Errorf("feed.wait: waiting: %w", err)
			}
			if status == port.WatchTimeout {
				if pending > 0 && wait < remaining {
					recheck = min(2*recheck, gapRecheckMax)
					break // an announced item is still above the head: read again
				}
				return page, false, nil
			}
			if status == port.WatchEnded {
				return Page{}, true, nil
			}
			if pub.VisibleSeq > *pos {
				if pub.VisibleSeq != math.MaxUint64 { // a poller's "something may have committed" is no item
					pending = max(pending, pub.VisibleSeq)
				}
				break // something committed after what we read: read the durable feed again
			}
		}
	}
}
