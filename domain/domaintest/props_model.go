package domaintest

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"pgregory.net/rapid"

	"github.com/waypost/waypost/domain"
)

// The reference model of the mailbox: what a correct Waypost returns for a sequence of operations. The
// world drives the service and the model side by side and compares every answer.
//
// Visibility (the filter semantics the domain implements, domain/inbox.go `visible`), for a consumer of
// actor A with rights R (token scopes + active grants):
//
//   - inbox view: a message whose recipient_ids contain A; a receipt whose recipient is A (a receipt's only
//     recipient is the producer of the acked item); a memory revision only with the memory.read scope and a
//     memory.read grant on its collection.
//   - space_log view: every message and receipt of the space, only with the space.observe scope AND a
//     space.observe grant (otherwise reading is FORBIDDEN); memory revisions as for inbox.
//   - reading needs the message.read scope, acking receipt.write; the consumer must belong to A (else
//     NOT_FOUND, like an absent consumer).
//   - filter: every non-empty list restricts (AND across fields, OR within one): producer_ids matches the
//     item's producer_id (for a receipt, the actor that acked); item_types matches item_type; thread_ids
//     matches thread_id (a receipt carries the thread of the acked item; memory revisions are exempt);
//     collection_ids only restricts memory revisions. An empty or absent list adds no restriction; a
//     filter can only narrow the view.
//   - ack targets any item of the view, whether or not it matches the filter; anything else is NOT_FOUND.
//
// Cursors bind consumer, view revision and the actor's rights; the model calls that triple the cursor's
// scope. Within one scope the visible list only grows at its end (new items get higher visible_seq), so a
// cursor is modelled by how many items of that list precede its position.
type mWorld struct {
	t      *rapid.T
	c      *Client
	svc    *domain.Service
	ctx    context.Context
	spaces []*mSpace
}

type mSpace struct {
	w           *mWorld
	id          string
	defaultRcpt string
	actors      []*mActor // chosen at random by actions
	items       []*mItem  // in visible_seq order (a store may skip values: gaps are allowed)
	consumers   []*mConsumer
	checkpoints map[string]*mCursor // scope → stored checkpoint
	receipts    map[string]*mReceipt
	observer    *mConsumer // reads the whole space after every change (not chosen by actions)
	threads     []string   // fixed thread IDs senders may name
	lastAck     *ackCall
}

type mActor struct {
	sp      *mSpace
	id      string
	token   string
	tokenID string
	scopes  []domain.Scope
	grants  map[string]domain.Permission // active grant ID → permission
}

type mConsumer struct {
	sp      *mSpace
	id      string
	actor   *mActor
	view    domain.View
	filter  domain.Filter
	rev     int64
	cur     *mCursor  // reading position (nil: from the start)
	history []mCursor // every cursor obtained, oldest first
}

type mCursor struct {
	s     string
	scope string
	count int // items of the scope's list before the position
}

type mItem struct {
	seq        int // its visible_seq: from the commit's result, or learned from the first read (0 until then)
	typ        domain.ItemType
	producer   *mActor
	recipients []string // sorted
	thread     string
	itemID     string // learned from the first read
	// message
	msgID     string
	subject   string
	text      string
	inReplyTo *string
	// receipt
	acked    *mItem
	consumer *mConsumer
	stage    domain.Stage
	version  int64
}

type mReceipt struct {
	stage   domain.Stage
	version int64
}

type ackCall struct {
	consumer *mConsumer
	scope    string
	req      domain.AckRequest
	res      domain.AckResult
}

func newWorld(t *rapid.T, f *Fixture) *mWorld {
	c := f.With(t)
	return &mWorld{t: t, c: c, svc: f.Svc, ctx: c.Ctx}
}

func (w *mWorld) fatalf(format string, args ...any) {
	w.t.Helper()
	w.t.Fatalf(format, args...)
}

// newSpace creates a space with its default recipient (all scopes), n more actors with the given scopes
// (nil: all) and an observer.
func (w *mWorld) newSpace(n int, scopes func(i int) []domain.Scope) *mSpace {
	res := w.c.Space()
	sp := &mSpace{w: w, id: res.SpaceID, defaultRcpt: res.DefaultRecipientID, checkpoints: map[string]*mCursor{},
		receipts: map[string]*mReceipt{}, threads: []string{"thread-a", "thread-b", "thread-c"}}
	def := &mActor{sp: sp, id: res.DefaultRecipientID, grants: map[string]domain.Permission{}}
	w.issueToken(def, domain.AllScopes())
	sp.actors = append(sp.actors, def)
	for i := range n {
		var sc []domain.Scope
		if scopes != nil {
			sc = scopes(i)
		}
		sp.addActor(sc)
	}
	obs := &mActor{sp: sp, id: w.c.Actor(sp.id), grants: map[string]domain.Permission{}}
	w.issueToken(obs, domain.AllScopes())
	w.grant(obs, domain.PermSpaceObserve)
	sp.observer = sp.addConsumerFor(obs, domain.ViewSpaceLog, nil, false)
	w.spaces = append(w.spaces, sp)
	return sp
}

// addActor creates an actor with a token carrying scopes (all when nil).
func (sp *mSpace) addActor(scopes []domain.Scope) *mActor {
	a := &mActor{sp: sp, id: sp.w.c.Actor(sp.id), grants: map[string]domain.Permission{}}
	if scopes == nil {
		scopes = domain.AllScopes()
	}
	sp.w.issueToken(a, scopes)
	sp.actors = append(sp.actors, a)
	return a
}

// addConsumer creates a consumer of a with a view and filter.
func (sp *mSpace) addConsumer(a *mActor, view domain.View, filter *domain.Filter) *mConsumer {
	return sp.addConsumerFor(a, view, filter, true)
}

func (sp *mSpace) addConsumerFor(a *mActor, view domain.View, filter *domain.Filter, listed bool) *mConsumer {
	w := sp.w
	res, err := w.svc.CreateConsumer(w.ctx, sp.id, domain.CreateConsumerRequest{RequestID: w.c.RID("con"), ActorID: a.id, View: view, Filter: filter})
	if err != nil {
		w.fatalf("CreateConsumer: %v", err)
	}
	var f domain.Filter
	if filter != nil {
		f = *filter
	}
	c := &mConsumer{sp: sp, id: res.ConsumerID, actor: a, view: view, filter: f.Normalize(), rev: 1}
	if res.ViewRevision != 1 || !reflect.DeepEqual(res.Filter, c.filter) || res.View != view {
		w.fatalf("CreateConsumer returned %+v, want view %s filter %+v revision 1", res, view, c.filter)
	}
	if listed {
		sp.consumers = append(sp.consumers, c)
	}
	return c
}

// issueToken gives a a new token with scopes (replacing its current one in the model).
func (w *mWorld) issueToken(a *mActor, scopes []domain.Scope) {
	res, err := w.svc.CreateToken(w.ctx, a.sp.id, domain.CreateTokenRequest{RequestID: w.c.RID("tok"), ActorID: a.id, Scopes: scopes})
	if err != nil {
		w.fatalf("CreateToken: %v", err)
	}
	a.token, a.tokenID = res.Token, res.TokenID
	a.scopes = slices.Clone(scopes)
	slices.Sort(a.scopes)
	a.scopes = slices.Compact(a.scopes)
}

func (w *mWorld) grant(a *mActor, perm domain.Permission) {
	res, err := w.svc.CreateGrant(w.ctx, a.sp.id, domain.CreateGrantRequest{RequestID: w.c.RID("grt"), ActorID: a.id, Permission: perm})
	if err != nil {
		w.fatalf("CreateGrant: %v", err)
	}
	a.grants[res.GrantID] = perm
}

// toggleObserve grants space.observe to a, or revokes the grant it holds.
func (w *mWorld) toggleObserve(a *mActor) {
	for id, p := range a.grants {
		if p == domain.PermSpaceObserve {
			if _, err := w.svc.RevokeGrant(w.ctx, a.sp.id, id); err != nil {
				w.fatalf("RevokeGrant: %v", err)
			}
			delete(a.grants, id)
			return
		}
	}
	w.grant(a, domain.PermSpaceObserve)
}

// rotate rotates a's token: the old secret stops working, rights and cursors stay.
func (w *mWorld) rotate(a *mActor) {
	res, err := w.svc.RotateToken(w.ctx, a.sp.id, a.tokenID)
	if err != nil {
		w.fatalf("RotateToken: %v", err)
	}
	if _, err := w.svc.Authenticate(w.ctx, a.token); CodeOf(err) != domain.CodeUnauthenticated {
		w.fatalf("the rotated-out secret still authenticates: %v", err)
	}
	a.token = res.Token
}

func (a *mActor) has(sc domain.Scope) bool { return slices.Contains(a.scopes, sc) }

func (a *mActor) hasGrant(p domain.Permission) bool {
	for _, g := range a.grants {
		if g == p {
			return true
		}
	}
	return false
}

func (a *mActor) canObserve() bool {
	return a.has(domain.ScopeSpaceObserve) && a.hasGrant(domain.PermSpaceObserve)
}

// rights identifies a's effective rights: scopes and active grants (never the token ID).
func (a *mActor) rights() string {
	var parts []string
	for _, s := range a.scopes {
		parts = append(parts, "s:"+string(s))
	}
	for _, g := range a.grants {
		parts = append(parts, "g:"+string(g))
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

// principal authenticates a's token, as the transport does before each operation.
func (w *mWorld) principal(a *mActor) *domain.Principal {
	w.t.Helper()
	p, err := w.svc.Authenticate(w.ctx, a.token)
	if err != nil {
		w.fatalf("Authenticate %s: %v", a.id, err)
	}
	return p
}

func (c *mConsumer) scope() string {
	return c.id + "|" + strconv.FormatInt(c.rev, 10) + "|" + c.actor.rights()
}

// accessErr is the error code the model expects for using the consumer with a scope, or "".
func (c *mConsumer) accessErr(need domain.Scope) domain.Code {
	if !c.actor.has(need) {
		return domain.CodeForbidden
	}
	if c.view == domain.ViewSpaceLog && !c.actor.canObserve() {
		return domain.CodeForbidden
	}
	return ""
}

// inView reports whether it is in the consumer's view for its actor's current rights (filter not applied).
func (c *mConsumer) inView(it *mItem) bool {
	if c.view == domain.ViewSpaceLog {
		return c.actor.canObserve()
	}
	return slices.Contains(it.recipients, c.actor.id)
}

func (c *mConsumer) matches(it *mItem) bool {
	f := c.filter
	if len(f.ProducerIDs) > 0 && !slices.Contains(f.ProducerIDs, it.producer.id) {
		return false
	}
	if len(f.ItemTypes) > 0 && !slices.Contains(f.ItemTypes, string(it.typ)) {
		return false
	}
	if len(f.ThreadIDs) > 0 && !slices.Contains(f.ThreadIDs, it.thread) {
		return false
	}
	return true
}

// seqBefore is the highest visible_seq of the items committed before it (of all items when it is nil).
func (sp *mSpace) seqBefore(it *mItem) int {
	n := 0
	for _, x := range sp.items {
		if x == it {
			break
		}
		n = max(n, x.seq)
	}
	return n
}

// list is what the consumer reads: its view, filtered, in visible_seq order.
func (c *mConsumer) list() []*mItem {
	var out []*mItem
	for _, it := range c.sp.items {
		if c.inView(it) && c.matches(it) {
			out = append(out, it)
		}
	}
	return out
}

// checkItem compares a returned feed item with the model's and learns its item ID.
func (w *mWorld) checkItem(what string, got domain.FeedItem, want *mItem) {
	w.t.Helper()
	sp := want.producer.sp
	bad := func(field string, g, x any) {
		w.t.Helper()
		w.fatalf("%s: item at visible_seq %s: %s is %v, model says %v", what, got.VisibleSeq, field, g, x)
	}
	g, err := strconv.Atoi(got.VisibleSeq)
	if err != nil {
		bad("visible_seq", got.VisibleSeq, "a decimal number")
	}
	if want.seq == 0 { // learned now: it must lie above every item committed before it
		if before := sp.seqBefore(want); g <= before {
			bad("visible_seq (the model's item there is "+string(want.typ)+", committed after one at "+strconv.Itoa(before)+")", got.VisibleSeq, "more")
		}
		want.seq = g
	}
	if g != want.seq {
		bad("visible_seq (the model's item there is "+string(want.typ)+")", got.VisibleSeq, want.seq)
	}
	if got.SpaceID != sp.id {
		bad("space_id", got.SpaceID, sp.id)
	}
	if got.ItemType != want.typ {
		bad("item_type", got.ItemType, want.typ)
	}
	if got.ProducerID != want.producer.id {
		bad("producer_id", got.ProducerID, want.producer.id)
	}
	rc := slices.Clone(got.RecipientIDs)
	slices.Sort(rc)
	if !slices.Equal(rc, want.recipients) {
		bad("recipient_ids", got.RecipientIDs, want.recipients)
	}
	if got.ThreadID == nil || *got.ThreadID != want.thread {
		bad("thread_id", got.ThreadID, want.thread)
	}
	if want.itemID == "" {
		want.itemID = got.ItemID
	} else if got.ItemID != want.itemID {
		bad("item_id", got.ItemID, want.itemID)
	}
	switch want.typ {
	case domain.ItemMessage:
		var d domain.MessageItemData
		if err := json.Unmarshal(got.Data, &d); err != nil {
			bad("data", string(got.Data), err)
		}
		if got.ResourceID != want.msgID || d.MessageID != want.msgID || d.Subject != want.subject ||
			!reflect.DeepEqual(d.InReplyTo, want.inReplyTo) || got.ResourceVersion != 1 || d.AttachmentCount != 0 {
			bad("message resource/data", fmt.Sprintf("%s v%d %s", got.ResourceID, got.ResourceVersion, got.Data),
				fmt.Sprintf("%s %q in_reply_to %v", want.msgID, want.subject, want.inReplyTo))
		}
	case domain.ItemReceipt:
		var d domain.ReceiptItemData
		if err := json.Unmarshal(got.Data, &d); err != nil {
			bad("data", string(got.Data), err)
		}
		if d.ConsumerID != want.consumer.id || d.AckedItemID != want.acked.itemID || d.ResourceID != want.acked.msgID ||
			d.Stage != want.stage || d.ReceiptVersion != want.version || got.ResourceVersion != want.version {
			bad("receipt data", fmt.Sprintf("v%d %s", got.ResourceVersion, got.Data),
				fmt.Sprintf("consumer %s acked %s (%s) stage %s version %d", want.consumer.id, want.acked.itemID, want.acked.msgID, want.stage, want.version))
		}
	}
}

// read reads one page as c, from its current cursor (or from the start when restart), and checks it
// against the model. It returns the page's items and has_more (nil, false on an expected error).
func (w *mWorld) read(c *mConsumer, restart bool, limit int) ([]domain.FeedItem, bool) {
	w.t.Helper()
	from := c.cur
	if restart {
		from = nil
	}
	var cursor *string
	if from != nil {
		cursor = &from.s
	}
	page, err := w.svc.ReadInbox(w.ctx, w.principal(c.actor), domain.ReadRequest{ConsumerID: c.id, Cursor: cursor, Limit: limit})
	if code := c.accessErr(domain.ScopeMessageRead); code != "" {
		WantCode(w.t, "ReadInbox without the rights", err, code)
		return nil, false
	}
	if from != nil && from.scope != c.scope() {
		WantCode(w.t, "ReadInbox with a cursor of an older scope", err, domain.CodeCursorScopeChanged)
		c.cur = nil
		return nil, false
	}
	if err != nil {
		w.fatalf("ReadInbox %s: %v", c.id, err)
	}
	start := 0
	if from != nil {
		start = from.count
	}
	rest := c.list()[start:]
	if len(page.Items) > limit {
		w.fatalf("ReadInbox returned %d items, limit %d", len(page.Items), limit)
	}
	if len(page.Items) > len(rest) {
		w.fatalf("ReadInbox %s returned %d items after position %d, the model has %d: %s", c.id, len(page.Items), start, len(rest), mDescribe(page.Items))
	}
	for i, got := range page.Items {
		w.checkItem("ReadInbox "+c.id, got, rest[i])
	}
	if !page.HasMore && len(page.Items) < len(rest) {
		w.fatalf("ReadInbox %s: has_more false after %d of %d remaining items", c.id, len(page.Items), len(rest))
	}
	cur := mCursor{s: page.NextCursor, scope: c.scope(), count: start + len(page.Items)}
	c.cur = &cur
	c.history = append(c.history, cur)
	w.checkCheckpoint("ReadInbox", c, page.CheckpointCursor)
	return page.Items, page.HasMore
}

// readToEnd reads c from its cursor until has_more is false; it returns whether reading succeeded.
func (w *mWorld) readToEnd(c *mConsumer, limit int) bool {
	w.t.Helper()
	for range 10000 {
		_, more := w.read(c, false, limit)
		if c.cur == nil {
			return false
		}
		if !more {
			if c.cur.count != len(c.list()) {
				w.fatalf("reading %s to the end stopped after %d of the model's %d items", c.id, c.cur.count, len(c.list()))
			}
			return true
		}
	}
	w.fatalf("reading %s: has_more still true after 10000 pages", c.id)
	return false
}

func (w *mWorld) checkCheckpoint(what string, c *mConsumer, got *string) {
	w.t.Helper()
	want := c.sp.checkpoints[c.scope()]
	switch {
	case want == nil && got != nil:
		w.fatalf("%s %s: checkpoint_cursor %q, the model has none for this view and rights", what, c.id, *got)
	case want != nil && got == nil:
		w.fatalf("%s %s: checkpoint_cursor missing, the model has one at position %d", what, c.id, want.count)
	case want != nil && *got != want.s:
		w.fatalf("%s %s: checkpoint_cursor %q, the model has %q (position %d)", what, c.id, *got, want.s, want.count)
	}
}

// sync reads the observer to the end: the space feed must be exactly the model's items, in order.
func (w *mWorld) sync(sp *mSpace) {
	w.t.Helper()
	if !w.readToEnd(sp.observer, 200) {
		w.fatalf("the observer cannot read")
	}
}

func mDescribe(items []domain.FeedItem) string {
	var b strings.Builder
	for _, it := range items {
		fmt.Fprintf(&b, "[%s %s %s by %s to %v] ", it.VisibleSeq, it.ItemType, it.ResourceID, it.ProducerID, it.RecipientIDs)
	}
	return b.String()
}

// sendSpec is a message to send in the model.
type sendSpec struct {
	producer   *mActor
	recipients []*mActor // empty: the default recipient
	dup        bool      // repeat recipients (they are de-duplicated)
	thread     string    // explicit thread_id, or ""
	replyTo    *mItem    // in_reply_to, or nil
	subject    string
	long       bool // the body goes through the blob store
}

// send sends a message and checks the outcome against the model.
func (w *mWorld) send(s sendSpec) *mItem {
	w.t.Helper()
	sp := s.producer.sp
	text := "body " + s.subject
	if s.long {
		text = longBody(text)
	}
	req := domain.SendRequest{RequestID: w.c.RID("send"), Subject: s.subject, Body: &domain.MessageBody{Text: text}}
	var rcpt []string
	for _, r := range s.recipients {
		req.RecipientIDs = append(req.RecipientIDs, r.id)
		rcpt = append(rcpt, r.id)
		if s.dup {
			req.RecipientIDs = append(req.RecipientIDs, r.id)
		}
	}
	if len(rcpt) == 0 {
		rcpt = []string{sp.defaultRcpt}
	}
	slices.Sort(rcpt)
	rcpt = slices.Compact(rcpt)
	if s.thread != "" {
		req.ThreadID = &s.thread
	}
	if s.replyTo != nil {
		id := s.replyTo.msgID
		req.InReplyTo = &id
	}
	res, err := w.svc.SendMessage(w.ctx, w.principal(s.producer), req)
	switch {
	case !s.producer.has(domain.ScopeMessageSend):
		WantCode(w.t, "SendMessage without message.send", err, domain.CodeForbidden)
		return nil
	case s.replyTo != nil && len(s.recipients) == 0:
		WantCode(w.t, "a reply without recipients", err, domain.CodeInvalidRequest)
		return nil
	case s.replyTo != nil && !s.producer.canSee(s.replyTo):
		WantCode(w.t, "a reply to a message the producer cannot see", err, domain.CodeNotFound)
		return nil
	case s.replyTo != nil && s.thread != "" && s.thread != s.replyTo.thread:
		WantCode(w.t, "a reply naming another thread", err, domain.CodeInvalidRequest)
		return nil
	case s.replyTo == nil && s.thread != "" && !s.producer.mayJoin(s.thread):
		WantCode(w.t, "joining a thread with no message the producer can see", err, domain.CodeForbidden)
		return nil
	}
	if err != nil {
		w.fatalf("SendMessage: %v", err)
	}
	thread := s.thread
	if s.replyTo != nil {
		thread = s.replyTo.thread
	}
	if thread != "" && res.ThreadID != thread {
		w.fatalf("SendMessage: thread_id %s, want %s", res.ThreadID, thread)
	}
	seq, err := strconv.Atoi(res.VisibleSeq)
	it := &mItem{seq: seq, typ: domain.ItemMessage, producer: s.producer, recipients: rcpt,
		thread: res.ThreadID, msgID: res.MessageID, subject: s.subject, text: text}
	if s.replyTo != nil {
		id := s.replyTo.msgID
		it.inReplyTo = &id
	}
	if res.SubmissionState != domain.StateCommitted || res.ResourceID != res.MessageID || err != nil || seq <= sp.seqBefore(nil) {
		w.fatalf("SendMessage: result %+v, want committed at a visible_seq above %d", res, sp.seqBefore(nil))
	}
	sp.items = append(sp.items, it)
	w.sync(sp)
	return it
}

// mayJoin reports whether a may send into thread by thread_id (RFC §6): the thread has no message yet, or
// a can see one of its messages.
func (a *mActor) mayJoin(thread string) bool {
	exists := false
	for _, it := range a.sp.items {
		if it.typ == domain.ItemMessage && it.thread == thread {
			if a.canSee(it) {
				return true
			}
			exists = true
		}
	}
	return !exists
}

// canSee reports whether message it is visible to a through message.get (producer, recipient with
// message.read, or observer).
func (a *mActor) canSee(it *mItem) bool {
	return it.producer.sp == a.sp && (it.producer == a || a.canObserve() || a.has(domain.ScopeMessageRead) && slices.Contains(it.recipients, a.id))
}

// ackEntry is one entry of an ack in the model.
type ackEntry struct {
	item  *mItem
	stage domain.Stage
}

// ack sends an ack as c and checks the outcome against the model. cp is the checkpoint cursor to store
// (nil: none). It returns whether the ack succeeded.
func (w *mWorld) ack(c *mConsumer, entries []ackEntry, cp *mCursor) bool {
	w.t.Helper()
	sp := c.sp
	req := domain.AckRequest{RequestID: w.c.RID("ack"), ConsumerID: c.id, Items: []domain.AckEntry{}}
	for _, e := range entries {
		req.Items = append(req.Items, domain.AckEntry{ItemID: e.item.itemID, Stage: e.stage})
	}
	if cp != nil {
		s := cp.s
		req.CheckpointCursor = &s
	}
	res, err := w.svc.Ack(w.ctx, w.principal(c.actor), req)
	fail := func(what string, code domain.Code) bool {
		w.t.Helper()
		WantCode(w.t, "Ack "+what, err, code)
		w.sync(sp)
		return false
	}
	if code := c.accessErr(domain.ScopeReceiptWrite); code != "" {
		return fail("without the rights", code)
	}
	if cp != nil && cp.scope != c.scope() {
		return fail("with a checkpoint of an older scope", domain.CodeCursorScopeChanged)
	}
	for _, e := range entries {
		if !c.inView(e.item) {
			return fail("of an item outside the view", domain.CodeNotFound)
		}
	}
	if err != nil {
		w.fatalf("Ack: %v", err)
	}
	// Receipts: the strongest stage asked for each item, in first-seen order; only a real advance changes
	// the stage and publishes a receipt item (not for acking a receipt item), to the acked item's producer.
	var order []*mItem
	want := map[*mItem]domain.Stage{}
	for _, e := range entries {
		if _, ok := want[e.item]; !ok {
			order = append(order, e.item)
		}
		if mStageRank(e.stage) > mStageRank(want[e.item]) {
			want[e.item] = e.stage
		}
	}
	if len(res.Receipts) != len(order) {
		w.fatalf("Ack: %d receipts, want %d", len(res.Receipts), len(order))
	}
	for i, it := range order {
		key := c.id + "|" + it.itemID
		rec := sp.receipts[key]
		if rec == nil {
			rec = &mReceipt{}
			sp.receipts[key] = rec
		}
		changed := mStageRank(want[it]) > mStageRank(rec.stage)
		if changed {
			rec.stage, rec.version = want[it], rec.version+1
			if it.typ != domain.ItemReceipt {
				sp.items = append(sp.items, &mItem{typ: domain.ItemReceipt, producer: c.actor,
					recipients: []string{it.producer.id}, thread: it.thread, acked: it, consumer: c, stage: rec.stage, version: rec.version})
			}
		}
		got := res.Receipts[i]
		if got.ItemID != it.itemID || got.Stage != rec.stage || got.Changed != changed {
			w.fatalf("Ack: receipt %d is %+v, the model says item %s stage %s changed %v", i, got, it.itemID, rec.stage, changed)
		}
	}
	// Checkpoint: per scope, only forward; an older one is a no-op returning the current checkpoint.
	scope := c.scope()
	stored := sp.checkpoints[scope]
	if cp != nil {
		switch {
		case stored == nil || cp.count > stored.count:
			stored = cp
		case cp.count == stored.count && res.CheckpointCursor != nil && *res.CheckpointCursor == cp.s:
			stored = cp // same number of items: the service may keep either position
		}
		sp.checkpoints[scope] = stored
	}
	w.checkCheckpoint("Ack", c, res.CheckpointCursor)
	sp.lastAck = &ackCall{consumer: c, scope: scope, req: req, res: res}
	w.sync(sp)
	return true
}

func mStageRank(s domain.Stage) int {
	switch s {
	case domain.StageReceived:
		return 1
	case domain.StageProcessed:
		return 2
	}
	return 0
}

// replayAck repeats the last successful ack with the same request ID: the same result, nothing changes.
func (w *mWorld) replayAck(sp *mSpace) {
	w.t.Helper()
	last := sp.lastAck
	if last == nil || last.scope != last.consumer.scope() || last.consumer.accessErr(domain.ScopeReceiptWrite) != "" {
		return
	}
	res, err := w.svc.Ack(w.ctx, w.principal(last.consumer.actor), last.req)
	if err != nil {
		w.fatalf("replayed Ack: %v", err)
	}
	if !reflect.DeepEqual(res, last.res) {
		w.fatalf("replayed Ack: %+v, first answer %+v", res, last.res)
	}
	w.sync(sp)
}

// conflictAck reuses the last ack's request ID with different content: IDEMPOTENCY_CONFLICT, no change.
func (w *mWorld) conflictAck(sp *mSpace) {
	w.t.Helper()
	last := sp.lastAck
	if last == nil || last.scope != last.consumer.scope() || last.consumer.accessErr(domain.ScopeReceiptWrite) != "" {
		return
	}
	req := last.req
	req.Items = append(slices.Clone(req.Items), domain.AckEntry{ItemID: "it_zz_0000", Stage: domain.StageProcessed})
	_, err := w.svc.Ack(w.ctx, w.principal(last.consumer.actor), req)
	WantCode(w.t, "Ack reusing a request_id with other items", err, domain.CodeIdempotencyConflict)
	w.sync(sp)
}

// updateConsumer changes c's view and filter: a new view revision, unless neither changes (then nothing
// happens and every cursor stays valid). It reports whether the view revision changed.
func (w *mWorld) updateConsumer(c *mConsumer, view domain.View, filter *domain.Filter) bool {
	w.t.Helper()
	res, err := w.svc.UpdateConsumer(w.ctx, c.sp.id, c.id, domain.UpdateConsumerRequest{View: view, Filter: filter})
	if err != nil {
		w.fatalf("UpdateConsumer: %v", err)
	}
	oldView, oldFilter := c.view, c.filter
	if view != "" {
		c.view = view
	}
	if filter != nil {
		c.filter = filter.Normalize()
	}
	changed := c.view != oldView || !reflect.DeepEqual(c.filter, oldFilter)
	if changed {
		c.rev++
	}
	if res.ViewRevision != c.rev || res.View != c.view || !reflect.DeepEqual(res.Filter, c.filter) {
		w.fatalf("UpdateConsumer: %+v, want view %s filter %+v revision %d", res, c.view, c.filter, c.rev)
	}
	return changed
}

// Generators shared by the world-based properties.

func drawActor(t *rapid.T, actors []*mActor, label string) *mActor {
	return actors[rapid.IntRange(0, len(actors)-1).Draw(t, label)]
}

func drawConsumer(t *rapid.T, cs []*mConsumer, label string) *mConsumer {
	return cs[rapid.IntRange(0, len(cs)-1).Draw(t, label)]
}

// drawSend draws a message from one of producers to a subset of recipients.
func drawSend(t *rapid.T, sp *mSpace, producers, recipients []*mActor) sendSpec {
	s := sendSpec{producer: drawActor(t, producers, "producer"), subject: fmt.Sprintf("s%d", rapid.IntRange(0, 999).Draw(t, "subject")),
		long: rapid.IntRange(0, 2).Draw(t, "blob body") == 0}
	for i, r := range recipients {
		if rapid.Bool().Draw(t, fmt.Sprintf("to recipient %d", i)) {
			s.recipients = append(s.recipients, r)
		}
	}
	s.dup = rapid.Bool().Draw(t, "dup")
	var msgs []*mItem
	for _, it := range sp.items {
		if it.typ == domain.ItemMessage {
			msgs = append(msgs, it)
		}
	}
	switch rapid.IntRange(0, 3).Draw(t, "thread mode") {
	case 1:
		s.thread = rapid.SampledFrom(sp.threads).Draw(t, "thread")
	case 2:
		if len(msgs) > 0 {
			s.replyTo = msgs[rapid.IntRange(0, len(msgs)-1).Draw(t, "reply to")]
			if len(s.recipients) == 0 && rapid.IntRange(0, 9).Draw(t, "reply without recipients") > 0 {
				s.recipients = []*mActor{s.replyTo.producer}
			}
		}
	}
	return s
}

// drawAck draws entries for an ack by c: mostly items of its view (any of them, filter or not), sometimes a
// repeated item with another stage, rarely an item outside the view.
func drawAck(t *rapid.T, c *mConsumer) []ackEntry {
	var in, out []*mItem
	for _, it := range c.sp.items {
		if c.inView(it) {
			in = append(in, it)
		} else {
			out = append(out, it)
		}
	}
	stage := rapid.SampledFrom([]domain.Stage{domain.StageReceived, domain.StageProcessed})
	var entries []ackEntry
	for range rapid.IntRange(0, 3).Draw(t, "ack entries") {
		if len(in) == 0 {
			break
		}
		it := in[rapid.IntRange(0, len(in)-1).Draw(t, "ack item")]
		entries = append(entries, ackEntry{item: it, stage: stage.Draw(t, "stage")})
	}
	if len(out) > 0 && rapid.IntRange(0, 9).Draw(t, "ack outside view") == 0 {
		entries = append(entries, ackEntry{item: out[rapid.IntRange(0, len(out)-1).Draw(t, "outside item")], stage: stage.Draw(t, "stage")})
	}
	return entries
}

// drawCheckpoint draws a checkpoint cursor for c: none, its current cursor or one from its history.
func drawCheckpoint(t *rapid.T, c *mConsumer) *mCursor {
	switch rapid.IntRange(0, 3).Draw(t, "checkpoint") {
	case 1, 2:
		return c.cur
	case 3:
		if len(c.history) > 0 {
			h := c.history[rapid.IntRange(0, len(c.history)-1).Draw(t, "old checkpoint")]
			return &h
		}
	}
	return nil
}

// drawFilter draws a filter over the space's actors, threads and item types (nil: no filter). Each list is
// left empty (no restriction) or restricted to a drawn non-empty subset, sometimes with duplicates.
func drawFilter(t *rapid.T, sp *mSpace) *domain.Filter {
	if rapid.IntRange(0, 3).Draw(t, "no filter") == 0 {
		return nil
	}
	subset := func(label string, pool []string) []string {
		if rapid.Bool().Draw(t, "unrestricted "+label) {
			return nil
		}
		out := []string{pool[rapid.IntRange(0, len(pool)-1).Draw(t, label)]}
		for _, v := range pool {
			if rapid.IntRange(0, 2).Draw(t, "also "+label) == 0 {
				out = append(out, v)
			}
		}
		return out
	}
	var producers []string
	for _, a := range sp.actors {
		producers = append(producers, a.id)
	}
	types := []string{string(domain.ItemMessage), string(domain.ItemReceipt), string(domain.ItemMemoryRevision)}
	return &domain.Filter{ProducerIDs: subset("producers", producers), ThreadIDs: subset("threads", sp.threads), ItemTypes: subset("types", types)}
}
