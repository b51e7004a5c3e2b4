package domain

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/waypost/waypost/domain/port"
)

// Per-space cap on concurrent feed.waits (issue 17). A wait held by a Lambda function (the MCP tool
// waypost_wait) occupies a function for up to feed_wait_max_ms, so one space could otherwise hold the
// account's concurrency with idle waits. With Config.WaitsPerSpace = n, a wait first takes one of n lease
// slots of its space in the item store (shared by every process of the deployment); when all n are held it
// answers RATE_LIMITED (retryable, Retry-After) without waiting. A slot is freed when the wait ends, and a
// slot whose holder died is taken over once its lease has expired (the wait's deadline plus
// waitLeaseSlack), so a crash never leaks a slot for long.

// waitLeaseSlack is how long after a wait's deadline its slot stays held if its holder never frees it.
const waitLeaseSlack = 30 * time.Second

const attrLease = "lease"

func pkWaitSlots(space string) string { return "WT#" + space }

func keyWaitSlot(space string, slot int) port.Key {
	return port.Key{PK: pkWaitSlots(space), SK: "slot#" + strconv.Itoa(slot)}
}

// waitLease is one held slot.
type waitLease struct {
	Lease     string    `json:"lease"`
	ExpiresAt time.Time `json:"expires_at"`
}

// acquireWaitSlot takes a free wait slot of the space until deadline (plus slack), and returns the function
// that frees it; with no cap it takes nothing.
func (s *Service) acquireWaitSlot(ctx context.Context, space string, deadline time.Time) (func(), error) {
	if s.waitsPerSpace <= 0 {
		return func() {}, nil
	}
	held, err := s.store.Query(ctx, port.Query{PK: pkWaitSlots(space), Limit: s.waitsPerSpace + 1})
	if err != nil {
		return nil, fmt.Errorf("feed.wait: reading wait slots: %w", err)
	}
	current := map[string]waitLease{}
	for _, it := range held {
		l, err := decodeItem[waitLease](it)
		if err != nil {
			return nil, err
		}
		current[it.SK] = l
	}
	now := s.clock.Now()
	mine := waitLease{Lease: s.ids.NewID("wl"), ExpiresAt: deadline.Add(waitLeaseSlack).UTC()}
	for slot := range s.waitsPerSpace {
		key := keyWaitSlot(space, slot)
		cond := port.NotExists()
		if l, ok := current[key.SK]; ok {
			if now.Before(l.ExpiresAt) {
				continue // held
			}
			cond = port.AttrEquals(attrLease, l.Lease) // its holder died: take it over
		}
		err := s.commitOps(ctx, []port.Op{port.Put(item(key, mine, attrLease, mine.Lease), cond)})
		if _, lost := port.FailedOp(err); lost {
			continue // another wait took it first
		}
		if err != nil {
			return nil, fmt.Errorf("feed.wait: taking a wait slot: %w", err)
		}
		return func() {
			// Freed even when the wait's context ended; a failure only leaves the slot to its lease.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if err := s.commitOps(rctx, []port.Op{port.Delete(key, port.AttrEquals(attrLease, mine.Lease))}); err != nil {
				s.log.Warn("feed.wait: freeing a wait slot failed; its lease frees it", "space_id", space, "error", err.Error())
			}
		}, nil
	}
	return nil, Errorf(CodeRateLimited, "this space already holds %d concurrent waits, the deployment's cap; wait again shortly or poll with inbox.read", s.waitsPerSpace).
		WithDetails("limit", s.waitsPerSpace)
}
