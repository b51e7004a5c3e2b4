package domaintest

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/waypost/waypost/domain"
)

// The properties below drive the world (props_model.go): every operation's answer is compared with the
// reference model, and after every change the whole space feed is compared item by item (gapless
// visible_seq, types, producers, recipients, threads, data). What each property adds is its choice of
// operations and, where the model alone would leave it implicit, a direct check of the property's claim.

// consumerSnapshot is what a consumer's client can observe of its own state without changing it: its whole
// feed from a null cursor and its stored checkpoint. (Its receipts are receipt items of the space feed,
// which the world compares with the model, per consumer, after every change.)
type consumerSnapshot struct {
	items      []string
	checkpoint *string
}

func (w *mWorld) snapshot(c *mConsumer) consumerSnapshot {
	w.t.Helper()
	var s consumerSnapshot
	if c.accessErr(domain.ScopeMessageRead) != "" {
		return s
	}
	p := w.principal(c.actor)
	var cursor *string
	for first := true; ; first = false {
		page := w.c.Read(p, c.id, cursor, 200)
		if first {
			s.checkpoint = page.CheckpointCursor
		}
		for _, it := range page.Items {
			s.items = append(s.items, it.ItemID)
		}
		if !page.HasMore {
			return s
		}
		next := page.NextCursor
		cursor = &next
	}
}

// propP06 is property P06 (independent consumers, RFC §16.4): two consumers (of one actor or of two) that
// read the same messages, ack them and store checkpoints never change each other's pages, receipts or
// checkpoints: before and after every read or ack of one, everything the other can observe is the same,
// and acking an item processed by one leaves the other's stage for that item where it was.
func propP06(t *testing.T, nb NewBackend, cfg propConfig) {
	cfg.check(t, nb, func(rt *rapid.T, f *Fixture) {
		w := newWorld(rt, f)
		sp := w.newSpace(3, nil)
		producer, x := sp.actors[1], sp.actors[2]
		y := x
		if rapid.Bool().Draw(rt, "consumers of two actors") {
			y = sp.actors[3]
		}
		cons := []*mConsumer{sp.addConsumer(x, domain.ViewInbox, nil), sp.addConsumer(y, domain.ViewInbox, nil)}
		for range rapid.IntRange(1, 3).Draw(rt, "initial messages") {
			w.send(sendSpec{producer: producer, recipients: []*mActor{x, y}, subject: "initial"})
		}
		other := func(i int) *mConsumer { return cons[1-i] }
		pick := func() int { return rapid.IntRange(0, 1).Draw(rt, "consumer") }
		independent := func(i int, op func()) {
			before := w.snapshot(other(i))
			op()
			if after := w.snapshot(other(i)); !reflect.DeepEqual(before, after) {
				rt.Fatalf("an operation of consumer %s changed what consumer %s sees:\nbefore %+v\nafter  %+v", cons[i].id, other(i).id, before, after)
			}
		}
		runActions(rt, cfg.draw(rt, cfg.steps/2), map[string]func(){
			"send": func() {
				s := drawSend(rt, sp, []*mActor{producer}, []*mActor{x, y})
				if len(s.recipients) == 0 {
					s.recipients = []*mActor{x, y}
				}
				w.send(s)
			},
			"read": func() {
				i := pick()
				restart := rapid.Bool().Draw(rt, "restart")
				limit := rapid.IntRange(1, 4).Draw(rt, "limit")
				independent(i, func() { w.read(cons[i], restart, limit) })
			},
			"ack": func() {
				i := pick()
				if cons[i].cur == nil {
					w.read(cons[i], false, rapid.IntRange(1, 4).Draw(rt, "limit"))
				}
				entries, cp := drawAck(rt, cons[i]), drawCheckpoint(rt, cons[i])
				independent(i, func() { w.ack(cons[i], entries, cp) })
			},
			"ack replay": func() {
				if sp.lastAck == nil {
					return
				}
				i := slices.Index(cons, sp.lastAck.consumer)
				independent(i, func() { w.replayAck(sp) })
			},
		})
	})
}

// propP07 is property P07 (receipts): for random acks (repeated items, both stages, stale and repeated
// acks with new request IDs, replays with the same request ID, conflicting reuse of a request ID, acks of
// receipt items), the stage of (consumer, item) only moves none → received → processed, each ack answers
// the current stage and whether it changed, only a real advance publishes a receipt item (with the new
// stage and receipt_version, to the producer of the acked item only, on the acked item's thread), and
// acking a receipt item publishes nothing. The model compares every answer and the whole feed after each.
func propP07(t *testing.T, nb NewBackend, cfg propConfig) {
	cfg.check(t, nb, func(rt *rapid.T, f *Fixture) {
		w := newWorld(rt, f)
		sp := w.newSpace(3, nil)
		p1, p2, x := sp.actors[1], sp.actors[2], sp.actors[3]
		people := []*mActor{p1, p2, x}
		for _, a := range people {
			sp.addConsumer(a, domain.ViewInbox, nil)
		}
		sp.addConsumer(x, domain.ViewInbox, nil) // a second installation of x: its own receipts
		for range rapid.IntRange(1, 3).Draw(rt, "initial messages") {
			w.send(drawSend(rt, sp, people, people))
		}
		runActions(rt, cfg.draw(rt, cfg.steps/2), map[string]func(){
			"send": func() { w.send(drawSend(rt, sp, people, people)) },
			"read": func() {
				w.read(drawConsumer(rt, sp.consumers, "consumer"), rapid.Bool().Draw(rt, "restart"), rapid.IntRange(1, 5).Draw(rt, "limit"))
			},
			"ack": func() {
				c := drawConsumer(rt, sp.consumers, "consumer")
				var cp *mCursor
				if rapid.IntRange(0, 3).Draw(rt, "with checkpoint") == 0 {
					cp = c.cur
				}
				w.ack(c, drawAck(rt, c), cp)
			},
			"ack again": func() {
				// the same entries as the last ack, with a new request ID: a stale or repeated ack
				last := sp.lastAck
				if last == nil {
					return
				}
				var entries []ackEntry
				for _, e := range last.req.Items {
					entries = append(entries, ackEntry{item: sp.itemByID(e.ItemID), stage: e.Stage})
				}
				if rapid.Bool().Draw(rt, "downgrade") {
					for i := range entries {
						entries[i].stage = domain.StageReceived
					}
				}
				w.ack(last.consumer, entries, nil)
			},
			"ack replay":   func() { w.replayAck(sp) },
			"ack conflict": func() { w.conflictAck(sp) },
		})
	})
}

func (sp *mSpace) itemByID(id string) *mItem {
	for _, it := range sp.items {
		if it.itemID == id {
			return it
		}
	}
	sp.w.fatalf("no model item %s", id)
	return nil
}

// propP08 is property P08 (checkpoints): checkpoints are kept per (consumer, view_revision, rights); acks
// with checkpoint cursors drawn from the consumer's history only move the stored checkpoint forward, and an
// older valid checkpoint is a no-op success that answers the current checkpoint; reads report the stored
// checkpoint of the current view and rights, and resuming from it returns exactly the items after it.
// After a view change (UpdateConsumer) the old checkpoint cursor is CURSOR_SCOPE_CHANGED and the new view
// starts without a checkpoint; a grant change selects another checkpoint (and returning to the old rights
// finds the old one); a token rotation changes nothing.
func propP08(t *testing.T, nb NewBackend, cfg propConfig) {
	cfg.check(t, nb, func(rt *rapid.T, f *Fixture) {
		w := newWorld(rt, f)
		sp := w.newSpace(2, nil)
		p, x := sp.actors[1], sp.actors[2]
		w.grant(x, domain.PermSpaceObserve)
		sp.addConsumer(x, domain.ViewInbox, nil)
		sp.addConsumer(x, domain.ViewInbox, nil)
		for range rapid.IntRange(1, 4).Draw(rt, "initial messages") {
			w.send(sendSpec{producer: p, recipients: []*mActor{x}, subject: "initial"})
		}
		runActions(rt, cfg.draw(rt, cfg.steps/2), map[string]func(){
			"send": func() { w.send(drawSend(rt, sp, []*mActor{p, sp.actors[0]}, []*mActor{x, sp.actors[0]})) },
			"read": func() {
				w.read(drawConsumer(rt, sp.consumers, "consumer"), rapid.IntRange(0, 3).Draw(rt, "restart") == 0, rapid.IntRange(1, 4).Draw(rt, "limit"))
			},
			"checkpoint": func() {
				c := drawConsumer(rt, sp.consumers, "consumer")
				if len(c.history) == 0 {
					w.read(c, false, rapid.IntRange(1, 4).Draw(rt, "limit"))
				}
				var entries []ackEntry
				if rapid.IntRange(0, 2).Draw(rt, "with items") == 0 {
					entries = drawAck(rt, c)
				}
				cp := c.cur
				if len(c.history) > 0 && rapid.Bool().Draw(rt, "from history") {
					h := c.history[rapid.IntRange(0, len(c.history)-1).Draw(rt, "old checkpoint")]
					cp = &h
				}
				w.ack(c, entries, cp)
			},
			"older checkpoint": func() {
				// an older valid checkpoint: a no-op success answering the current checkpoint
				c := drawConsumer(rt, sp.consumers, "consumer")
				stored := sp.checkpoints[c.scope()]
				if stored == nil || c.accessErr(domain.ScopeReceiptWrite) != "" {
					return
				}
				older := func() []mCursor {
					var out []mCursor
					for _, h := range c.history {
						if h.scope == stored.scope && h.count < stored.count {
							out = append(out, h)
						}
					}
					return out
				}
				if len(older()) == 0 {
					w.read(c, true, 1) // a cursor after at most one item
				}
				if len(older()) == 0 {
					return
				}
				olderCursors := older()
				h := olderCursors[rapid.IntRange(0, len(olderCursors)-1).Draw(rt, "older")]
				w.ack(c, nil, &h)
				if got := sp.checkpoints[c.scope()]; got != stored {
					rt.Fatalf("an older checkpoint moved the stored one")
				}
			},
			"resume from checkpoint": func() {
				c := drawConsumer(rt, sp.consumers, "consumer")
				if cp := sp.checkpoints[c.scope()]; cp != nil && c.accessErr(domain.ScopeMessageRead) == "" {
					cur := *cp
					c.cur = &cur
					w.read(c, false, rapid.IntRange(1, 4).Draw(rt, "limit"))
				}
			},
			"change view": func() {
				c := drawConsumer(rt, sp.consumers, "consumer")
				old := sp.checkpoints[c.scope()]
				view := rapid.SampledFrom([]domain.View{"", domain.ViewInbox, domain.ViewSpaceLog}).Draw(rt, "view")
				if !w.updateConsumer(c, view, drawFilter(rt, sp)) {
					if sp.checkpoints[c.scope()] != old {
						rt.Fatalf("a view change that changed nothing lost the checkpoint")
					}
					return // nothing changed: the checkpoint and every cursor stay valid
				}
				if sp.checkpoints[c.scope()] != nil {
					rt.Fatalf("the model has a checkpoint for a new view revision")
				}
				if old != nil && c.accessErr(domain.ScopeMessageRead) == "" {
					c.cur = old // the old view's checkpoint cursor: CURSOR_SCOPE_CHANGED, then a fresh start
					w.read(c, false, 3)
					w.read(c, false, 3)
				}
			},
			"toggle grant": func() { w.toggleObserve(x) },
			"rotate token": func() { w.rotate(x) },
		})
	})
}

// tamper returns a modified copy of a cursor: a flipped byte, a truncation, another protocol's prefix, a
// swapped signature, or a signature taken from another cursor.
func tamper(t *rapid.T, s string, other string) string {
	switch rapid.IntRange(0, 5).Draw(t, "tamper") {
	case 0:
		b := []byte(s)
		i := rapid.IntRange(0, len(b)-1).Draw(t, "byte")
		b[i] ^= byte(rapid.IntRange(1, 255).Draw(t, "xor"))
		return string(b)
	case 1:
		return s[:rapid.IntRange(1, len(s)-1).Draw(t, "length")]
	case 2:
		return rapid.SampledFrom([]string{"wpc0.", "wpc2:", "v1.", "opaque_cursor_"}).Draw(t, "prefix") + s
	case 3:
		return s + rapid.SampledFrom([]string{"A", "=", ".", "%00"}).Draw(t, "suffix")
	case 4:
		payload, sig, _ := strings.Cut(s, ".")
		return sig + "." + payload
	default:
		payload, _, _ := strings.Cut(s, ".")
		_, sig, _ := strings.Cut(other, ".")
		if other == s || sig == "" {
			return payload + "." + payload
		}
		return payload + "." + sig
	}
}

// propP14 is property P14 (cursor integrity): a modified cursor (flipped byte, truncation, another protocol
// prefix, swapped or borrowed signature) is INVALID_CURSOR for reads and for ack checkpoints, and the ack
// changes nothing; a cursor of another consumer (same actor, other actor, other space) is
// CURSOR_SCOPE_CHANGED, as is one from before a view change or a grant change or from a token with other
// scopes; a token rotation keeps cursors valid.
func propP14(t *testing.T, nb NewBackend, cfg propConfig) {
	cfg.check(t, nb, func(rt *rapid.T, f *Fixture) {
		w := newWorld(rt, f)
		sp := w.newSpace(2, nil)
		sp2 := w.newSpace(1, nil)
		p, x := sp.actors[1], sp.actors[2]
		sp.addConsumer(x, domain.ViewInbox, nil)
		sp.addConsumer(x, domain.ViewInbox, nil)
		sp.addConsumer(p, domain.ViewInbox, nil)
		z := sp2.addConsumer(sp2.actors[1], domain.ViewInbox, nil)
		for range rapid.IntRange(0, 3).Draw(rt, "initial messages") {
			w.send(sendSpec{producer: p, recipients: []*mActor{x, p}, subject: "initial"})
		}
		all := append(slices.Clone(sp.consumers), z)
		anyCursor := func() (*mConsumer, mCursor, bool) {
			c := drawConsumer(rt, all, "cursor owner")
			if len(c.history) == 0 {
				return c, mCursor{}, false
			}
			return c, c.history[rapid.IntRange(0, len(c.history)-1).Draw(rt, "cursor")], true
		}
		runActions(rt, cfg.draw(rt, cfg.steps/2), map[string]func(){
			"send": func() { w.send(drawSend(rt, sp, []*mActor{p, x, sp.actors[0]}, []*mActor{p, x})) },
			"send other space": func() {
				w.send(sendSpec{producer: sp2.actors[0], recipients: []*mActor{sp2.actors[1]}, subject: "z"})
			},
			"read": func() {
				c := drawConsumer(rt, all, "consumer")
				w.read(c, rapid.IntRange(0, 4).Draw(rt, "restart") == 0, rapid.IntRange(1, 4).Draw(rt, "limit"))
			},
			"tampered": func() {
				owner, cur, ok := anyCursor()
				_, other, ok2 := anyCursor()
				if !ok || !ok2 || owner.accessErr(domain.ScopeMessageRead) != "" || owner.accessErr(domain.ScopeReceiptWrite) != "" {
					return
				}
				bad := tamper(rt, cur.s, other.s)
				if bad == cur.s {
					return
				}
				_, err := w.svc.ReadInbox(w.ctx, w.principal(owner.actor), domain.ReadRequest{ConsumerID: owner.id, Cursor: &bad, Limit: 5})
				WantCode(rt, fmt.Sprintf("read with a modified cursor %q (from %q)", bad, cur.s), err, domain.CodeInvalidCursor)
				var entries []domain.AckEntry
				for _, it := range owner.list() {
					entries = append(entries, domain.AckEntry{ItemID: it.itemID, Stage: domain.StageProcessed})
				}
				_, err = w.svc.Ack(w.ctx, w.principal(owner.actor), domain.AckRequest{RequestID: w.c.RID("ack"), ConsumerID: owner.id, Items: entries, CheckpointCursor: &bad})
				WantCode(rt, "ack with a modified checkpoint cursor", err, domain.CodeInvalidCursor)
				w.sync(owner.sp) // no receipt item was published
			},
			"foreign": func() {
				owner, cur, ok := anyCursor()
				user := drawConsumer(rt, all, "used by")
				if !ok || user == owner || user.accessErr(domain.ScopeMessageRead) != "" {
					return
				}
				c := cur
				user.cur = &c
				w.read(user, false, 3) // the model expects CURSOR_SCOPE_CHANGED: the scope names another consumer
				if user.accessErr(domain.ScopeReceiptWrite) == "" {
					w.ack(user, nil, &cur)
				}
			},
			"old cursor": func() {
				// a cursor of the same consumer from its history: valid while the scope is the same
				c := drawConsumer(rt, all, "consumer")
				if len(c.history) > 0 {
					h := c.history[rapid.IntRange(0, len(c.history)-1).Draw(rt, "cursor")]
					c.cur = &h
					w.read(c, false, 3)
				}
			},
			"change view": func() {
				c := drawConsumer(rt, sp.consumers, "consumer")
				if c.cur == nil {
					w.read(c, false, 2)
				}
				old := c.cur
				w.updateConsumer(c, rapid.SampledFrom([]domain.View{"", domain.ViewInbox, domain.ViewSpaceLog}).Draw(rt, "view"), drawFilter(rt, sp))
				w.reuse(c, old) // CURSOR_SCOPE_CHANGED: the view revision changed
			},
			"toggle grant": func() {
				a := rapid.SampledFrom([]*mActor{p, x}).Draw(rt, "actor")
				olds := w.cursorsOf(a)
				w.toggleObserve(a)
				for c, old := range olds {
					w.reuse(c, old) // CURSOR_SCOPE_CHANGED: the rights changed
				}
			},
			"rotate token": func() {
				a := rapid.SampledFrom([]*mActor{p, x}).Draw(rt, "actor")
				olds := w.cursorsOf(a)
				w.rotate(a)
				for c, old := range olds {
					w.reuse(c, old) // still valid: same consumer, view and rights
				}
			},
			"other scopes": func() {
				a := rapid.SampledFrom([]*mActor{p, x}).Draw(rt, "actor")
				scopes := []domain.Scope{domain.ScopeMessageRead, domain.ScopeReceiptWrite}
				for _, sc := range []domain.Scope{domain.ScopeMessageSend, domain.ScopeSpaceObserve, domain.ScopeBlobRead} {
					if rapid.Bool().Draw(rt, "scope "+string(sc)) {
						scopes = append(scopes, sc)
					}
				}
				olds := w.cursorsOf(a)
				w.issueToken(a, scopes)
				for c, old := range olds {
					w.reuse(c, old) // valid only if the new token has the same scopes
				}
			},
		})
	})
}

// cursorsOf reads every consumer of a once (so each has a cursor) and returns their cursors.
func (w *mWorld) cursorsOf(a *mActor) map[*mConsumer]*mCursor {
	out := map[*mConsumer]*mCursor{}
	for _, c := range a.sp.consumers {
		if c.actor == a {
			if c.cur == nil {
				w.read(c, false, 2)
			}
			if c.cur != nil {
				out[c] = c.cur
			}
		}
	}
	return out
}

// reuse reads as c with an earlier cursor and acks with it as checkpoint; the model says whether the
// cursor is still valid (CURSOR_SCOPE_CHANGED when the consumer, view revision or rights differ).
func (w *mWorld) reuse(c *mConsumer, old *mCursor) {
	w.t.Helper()
	if old == nil {
		return
	}
	w.ack(c, nil, old)
	cur := *old
	c.cur = &cur
	w.read(c, false, 3)
}

// propP16 is property P16 (visibility): in two spaces with random actors (random token scopes), consumers
// (inbox and space_log views, random filters over producer_ids, thread_ids and item_types, changed at
// random), space.observe grants given and revoked, messages (new threads, named threads, replies) and
// acks, every read from a null cursor, paged with a random limit, returns exactly the model's intersection
// of space, rights, view and filter in visible_seq order, each item once (see the visibility rules at the
// top of props_model.go); a consumer without the rights for its view is FORBIDDEN; message.get answers
// exactly for the producer, recipients with message.read and observers, and for anyone else (another space
// included) NOT_FOUND exactly as for an absent message.
func propP16(t *testing.T, nb NewBackend, cfg propConfig) {
	scopePool := []domain.Scope{domain.ScopeMessageSend, domain.ScopeMessageRead, domain.ScopeReceiptWrite, domain.ScopeSpaceObserve}
	cfg.check(t, nb, func(rt *rapid.T, f *Fixture) {
		w := newWorld(rt, f)
		for range 2 {
			n := rapid.IntRange(2, 3).Draw(rt, "actors")
			sp := w.newSpace(n, func(i int) []domain.Scope {
				if i == 0 { // one actor that may not read (message.get and inbox.read must refuse it)
					return []domain.Scope{domain.ScopeMessageSend, domain.ScopeReceiptWrite, domain.ScopeSpaceObserve}
				}
				sc := rapid.SliceOfDistinct(rapid.SampledFrom(scopePool), rapid.ID).Draw(rt, "scopes")
				if len(sc) == 0 || rapid.Bool().Draw(rt, "all scopes") {
					sc = domain.AllScopes()
				}
				return sc
			})
			for _, a := range sp.actors[1:] {
				if rapid.Bool().Draw(rt, "observe grant") {
					w.grant(a, domain.PermSpaceObserve)
				}
			}
			for range rapid.IntRange(2, 4).Draw(rt, "consumers") {
				view := rapid.SampledFrom([]domain.View{domain.ViewInbox, domain.ViewSpaceLog}).Draw(rt, "view")
				sp.addConsumer(drawActor(rt, sp.actors, "consumer actor"), view, drawFilter(rt, sp))
			}
			for range rapid.IntRange(1, 4).Draw(rt, "initial messages") {
				w.send(drawSend(rt, sp, sp.actors, sp.actors))
			}
		}
		space := func() *mSpace { return w.spaces[rapid.IntRange(0, len(w.spaces)-1).Draw(rt, "space")] }
		runActions(rt, cfg.draw(rt, cfg.steps/2), map[string]func(){
			"send": func() {
				sp := space()
				w.send(drawSend(rt, sp, sp.actors, sp.actors))
			},
			"ack": func() {
				c := drawConsumer(rt, space().consumers, "consumer")
				w.ack(c, drawAck(rt, c), nil)
			},
			"ack something": func() {
				var able []*mConsumer
				for _, sp := range w.spaces {
					for _, c := range sp.consumers {
						if c.accessErr(domain.ScopeReceiptWrite) == "" && slices.ContainsFunc(sp.items, c.inView) {
							able = append(able, c)
						}
					}
				}
				if len(able) > 0 {
					c := drawConsumer(rt, able, "acking consumer")
					w.ack(c, drawAck(rt, c), nil)
				}
			},
			"read all": func() {
				c := drawConsumer(rt, space().consumers, "consumer")
				c.cur = nil
				w.readToEnd(c, rapid.IntRange(1, 5).Draw(rt, "limit"))
			},
			"change consumer": func() {
				sp := space()
				w.updateConsumer(drawConsumer(rt, sp.consumers, "consumer"),
					rapid.SampledFrom([]domain.View{"", domain.ViewInbox, domain.ViewSpaceLog}).Draw(rt, "view"), drawFilter(rt, sp))
			},
			"toggle grant": func() {
				sp := space()
				w.toggleObserve(drawActor(rt, sp.actors, "actor"))
			},
			"get message": func() {
				// one message, as every actor of both spaces sees it
				var msgs []*mItem
				for _, sp := range w.spaces {
					for _, it := range sp.items {
						if it.typ == domain.ItemMessage {
							msgs = append(msgs, it)
						}
					}
				}
				if len(msgs) == 0 {
					return
				}
				msg := msgs[rapid.IntRange(0, len(msgs)-1).Draw(rt, "message")]
				for _, sp := range w.spaces {
					for _, a := range sp.actors {
						w.getMessage(a, msg)
					}
				}
			},
		})
		// Every consumer that may acks what it sees (receipts for the filters to sort), then every consumer
		// reads its whole feed.
		for _, sp := range w.spaces {
			for _, c := range sp.consumers {
				var entries []ackEntry
				for _, it := range sp.items {
					if it.typ == domain.ItemMessage && c.inView(it) {
						entries = append(entries, ackEntry{item: it, stage: domain.StageReceived})
					}
				}
				if len(entries) > 0 && len(entries) <= 50 {
					w.ack(c, entries, nil)
				}
			}
			for _, c := range sp.consumers {
				c.cur = nil
				w.readToEnd(c, rapid.IntRange(1, 7).Draw(rt, "final limit"))
			}
		}
	})
}

// getMessage reads a message as viewer and checks visibility and content against the model.
func (w *mWorld) getMessage(viewer *mActor, it *mItem) {
	w.t.Helper()
	p := w.principal(viewer)
	m, err := w.svc.GetMessage(w.ctx, p, it.msgID)
	if !viewer.canSee(it) {
		_, absent := w.svc.GetMessage(w.ctx, p, "msg_absent0000000000000")
		WantCode(w.t, "message.get of a message the principal may not see", err, domain.CodeNotFound)
		if !SameError(err, absent) {
			w.fatalf("message.get of an invisible message (%v) is distinguishable from an absent one (%v)", err, absent)
		}
		return
	}
	if err != nil {
		w.fatalf("message.get of a visible message: %v", err)
	}
	rc := slices.Clone(m.RecipientIDs)
	slices.Sort(rc)
	if m.MessageID != it.msgID || m.ProducerID != it.producer.id || m.ThreadID != it.thread || m.Subject != it.subject ||
		m.Body.Text != it.text || !slices.Equal(rc, it.recipients) || m.VisibleSeq != fmt.Sprint(it.seq) || m.SpaceID != it.producer.sp.id {
		w.fatalf("message.get: %+v, the model has %+v", m, *it)
	}
}
