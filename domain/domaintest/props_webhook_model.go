package domaintest

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/domain/port"
)

// whFactor is the jitter factor of the properties' retry policy: ±10% jitter with a random source fixed at
// 0.75, so every delay is 1.05 times its base and the model knows each attempt's earliest time exactly.
const whFactor = 1.05

// whLease is how long a claimed attempt keeps other workers off (the domain's attempt lease).
const whLease = 30 * time.Second

// whP15 is property P15 (SUPPLEMENT §15, RFC §12): for random interleavings of commits of every feed item
// type, subscription changes, credential revocations, clock advances, worker passes, receiver behaviours,
// restarts and duplicated, reordered, lost and concurrent wake-ups:
//
//   - every attempt, when it is made, goes to a subscription that is active (not stopped, not expired) and
//     whose credential is not revoked, for a feed item that the subscription announces: visible to its
//     consumer under that credential (the model's view, consumer filter, subscription filter and event
//     types), committed after the subscription started, and dispatched while the subscription announced
//     it; the event is that feed item exactly (event id = item_id) from the space's source_uri; it is
//     signed with the model's current secret and, within five minutes of a rotation, the previous one too;
//     it is never made before the schedule (1.05 × 0 s, 1 s, 5 s, 30 s, 5 min, or a later Retry-After) or
//     the lease of a crashed attempt allows, never a sixth time, never after a 2xx or a 410;
//   - after a final drain every owed (item, subscription) pair is delivered (a 2xx was answered) or has
//     exactly one failed (5 attempts, expiry or 410) or cancelled record with a reason, never both, and no
//     record exists for a pair that was never owed; nothing stays pending; attempt IDs are unique;
//   - content is never removed: every consumer reads exactly the model's visible items, in order;
//   - subscription.list reports every subscription with the model's state and expiry; a replayed upsert
//     returns the same result and sends no challenge.
//
// With real, the production sender posts to a loopback receiver that verifies each signature with the
// Standard Webhooks reference library and checks each CloudEvent (whReceiver).
func whP15(t *testing.T, nb NewBackend, cfg propConfig, real bool) {
	check := 0
	var stats whStats
	rapid.Check(t, func(rt *rapid.T) {
		check++
		clock := NewClock()
		fake := NewFakeWebhooks(clock.Now)
		var recv *whReceiver
		base := fmt.Sprintf("https://hooks.example.com/c%d", check)
		if real {
			recv = newWhReceiver(fake, clock.Now)
			defer recv.srv.Close()
			snd := realSender(t, clock.Now)
			defer snd.Close()
			fake.WithInner(snd)
			base = fmt.Sprintf("%s/c%d", recv.srv.URL, check)
		}
		e := newWhEnv(rt, t, nb, clock, fake, whPolicy(0.1, 0.75))
		m := newWhModel(rt, e, recv, base)
		fake.OnDeliver(m.before, m.after)
		steps := cfg.draw(rt, cfg.steps/2)
		if real {
			steps = max(steps/2, 4)
		}
		for _, sl := range m.slots {
			m.receiver(sl)
		}
		for range rapid.IntRange(1, 3).Draw(rt, "initial subscriptions") {
			m.upsert(m.slots[rapid.IntRange(0, len(m.slots)-1).Draw(rt, "slot")])
		}
		runWeighted(rt, steps, m.actions())
		m.drain()
		m.final(&stats)
	})
	t.Logf("%d checks: %d feed items, %d owed pairs (%d delivered, %d failed, %d cancelled), %d attempts (%d crashed), %d restarts",
		stats.checks, stats.items, stats.pairs, stats.delivered, stats.failed, stats.cancelled, stats.attempts, stats.crashed, stats.restarts)
}

// whStats counts what the checks of a property exercised.
type whStats struct {
	checks, items, pairs, delivered, failed, cancelled, attempts, crashed, restarts int
}

// whAction is an action of the model with its weight.
type whAction struct {
	name   string
	weight int
	run    func()
}

// runWeighted runs n actions drawn by rapid with the given weights.
func runWeighted(t *rapid.T, n int, actions []whAction) {
	var names []string
	byName := map[string]func(){}
	for _, a := range actions {
		for range a.weight {
			names = append(names, a.name)
		}
		byName[a.name] = a.run
	}
	gen := rapid.SampledFrom(names)
	for range n {
		byName[gen.Draw(t, "action")]()
	}
}

// whCon is a consumer of the model world.
type whCon struct {
	name   string
	id     string
	actor  string
	view   domain.View
	filter domain.Filter
	memory bool              // its actor may read the collection (grant and scope)
	ops    *domain.Principal // an all-scopes, unbound principal of its actor (reads and acks)
}

// whTok is a credential subscriptions are made with.
type whTok struct {
	actor, consumer string
	id              string
	p               *domain.Principal
}

// whSlot is one subscription identity (consumer, filter, URL) and the model of its subscription.
type whSlot struct {
	idx     int
	url     string
	con     *whCon
	binding string // key of its credential in whModel.toks
	types   []string
	filter  *domain.Filter

	subID     string
	exists    bool
	stopped   bool
	expires   time.Time
	ttl       int
	fromSeq   int
	secret    string
	prev      string
	prevUntil time.Time
	tokenID   string // the credential it was last upserted with
}

// whPair is the model of one owed (item, subscription) pair.
type whPair struct {
	slot      *whSlot
	item      domain.FeedItem
	calls     int // attempts since it was owed or last redelivered
	delivered bool
	gone      bool
	notBefore time.Time
}

type whUpsert struct {
	p   *domain.Principal
	req domain.UpsertSubscriptionRequest
	res domain.SubscriptionResult
	err error
}

// whModel is the model world of P15.
type whModel struct {
	t     *rapid.T
	e     *whEnv
	recv  *whReceiver
	space domain.SpaceResult
	obs   *Observer
	coll  string
	blob  string
	src   *domain.Principal
	rev   int64

	cons  map[string]*whCon
	toks  map[string]*whTok
	slots []*whSlot
	byURL map[string]*whSlot

	mu         sync.Mutex
	feed       []domain.FeedItem
	dispatched int
	revoked    map[string]bool
	pairs      map[string]*whPair
	violations []string
	refs       []port.DeliveryRef
	last       *whUpsert
	texts      int
	restarts   int
	attemptIDs map[string]string // attempt ID → delivery ID and start, as first seen
	eventOf    map[string]string // delivery ID → event ID, as first seen
}

func pairKey(s *whSlot, itemID string) string { return fmt.Sprint(s.idx) + "|" + itemID }

func newWhModel(t *rapid.T, e *whEnv, recv *whReceiver, base string) *whModel {
	m := &whModel{t: t, e: e, recv: recv, cons: map[string]*whCon{}, toks: map[string]*whTok{}, byURL: map[string]*whSlot{},
		revoked: map[string]bool{}, pairs: map[string]*whPair{}, attemptIDs: map[string]string{}, eventOf: map[string]string{}}
	c := e.c
	m.space = c.Space()
	sp := m.space.SpaceID
	pA, xA, yA, oA, sA := c.Actor(sp), c.Actor(sp), c.Actor(sp), c.Actor(sp), c.Actor(sp)
	m.coll = mustDo[domain.CollectionResult](t, "CreateCollection")(e.svc.CreateCollection(context.Background(), sp,
		domain.CreateCollectionRequest{RequestID: c.RID("coll"), SourceActorID: sA, Scope: "webhook property"})).CollectionID
	c.Grant(sp, xA, domain.PermMemoryRead, m.coll)
	c.Grant(sp, oA, domain.PermSpaceObserve, "")
	// Principals are authenticated after the grants: a principal carries the rights it was made with.
	auth := func(actor string) *domain.Principal { return c.Principal(c.tokenOf(sp, actor, "")) }
	pP, xP, yP, oP := auth(pA), auth(xA), auth(yA), auth(oA)
	m.src = auth(sA)
	content := []byte("memory item content")
	up := mustDo[domain.BlobPrepareResult](t, "PrepareBlob")(e.svc.PrepareBlob(context.Background(), m.src, domain.BlobPrepareRequest{
		RequestID: c.RID("prep"), ContentType: mpText, SizeBytes: int64(len(content)), SHA256: mpSum(content)}))
	mustDo[domain.UploadResult](t, "Upload")(e.svc.Upload(context.Background(), m.src, up.UploadID, mpText, int64(len(content)), strings.NewReader(string(content))))
	m.blob = mustDo[domain.BlobInfo](t, "CommitBlob")(e.svc.CommitBlob(context.Background(), m.src, domain.BlobCommitRequest{RequestID: c.RID("seal"), UploadID: up.UploadID})).BlobID

	con := func(name, actor string, ops *domain.Principal, view domain.View, filter *domain.Filter, memory bool) *whCon {
		var f domain.Filter
		if filter != nil {
			f = *filter
		}
		cc := &whCon{name: name, id: c.Consumer(sp, actor, view, filter), actor: actor, view: view, filter: f, memory: memory, ops: ops}
		m.cons[name] = cc
		return cc
	}
	cP := con("cP", pA, pP, domain.ViewInbox, nil, false)
	cX1 := con("cX1", xA, xP, domain.ViewInbox, nil, true)
	cX2 := con("cX2", xA, xP, domain.ViewInbox, &domain.Filter{ProducerIDs: []string{pA}}, true)
	cY := con("cY", yA, yP, domain.ViewInbox, nil, false)
	cO := con("cO", oA, oP, domain.ViewSpaceLog, nil, false)
	for name, b := range map[string]struct {
		actor string
		con   *whCon
	}{"X": {xA, nil}, "X2": {xA, cX2}, "Y": {yA, nil}, "O": {oA, nil}, "P": {pA, nil}} {
		m.toks[name] = m.mint(b.actor, b.con)
	}
	all := []string{domain.EventMessageCommitted, domain.EventMemoryRevisionPublished, domain.EventReceiptUpdated}
	for _, s := range []struct {
		con     *whCon
		binding string
		types   []string
		filter  *domain.Filter
	}{
		{cX1, "X", all, nil},
		{cX1, "X", []string{domain.EventMessageCommitted}, &domain.Filter{ProducerIDs: []string{yA}}},
		{cX2, "X2", []string{domain.EventMessageCommitted, domain.EventReceiptUpdated}, nil},
		{cY, "Y", all, nil},
		{cO, "O", all, nil},
		{cP, "P", []string{domain.EventReceiptUpdated, domain.EventMessageCommitted}, &domain.Filter{ItemTypes: []string{string(domain.ItemReceipt)}}},
	} {
		slot := &whSlot{idx: len(m.slots), url: fmt.Sprintf("%s/s%d", base, len(m.slots)), con: s.con, binding: s.binding, types: s.types, filter: s.filter}
		m.slots = append(m.slots, slot)
		m.byURL[slot.url] = slot
	}
	m.obs = c.Feed(sp)
	c.Grant(sp, m.obs.ActorID(), domain.PermMemoryRead, m.coll)
	return m
}

// tokenOf creates an all-scopes token bound to consumer ("" for none) and returns its secret.
func (c *Client) tokenOf(space, actor, consumer string) string {
	c.T.Helper()
	tok, _ := c.Token(space, actor, consumer)
	return tok
}

// mint creates a fresh all-scopes subscription credential of actor, bound to con when set.
func (m *whModel) mint(actor string, con *whCon) *whTok {
	bind := ""
	if con != nil {
		bind = con.id
	}
	tok, id := m.e.c.Token(m.space.SpaceID, actor, bind)
	return &whTok{actor: actor, consumer: bind, id: id, p: m.e.c.Principal(tok)}
}

func (m *whModel) violate(format string, args ...any) {
	m.violations = append(m.violations, fmt.Sprintf(format, args...))
}

// check fails the check on any violation recorded by the hooks or the receiver.
func (m *whModel) check(after string) {
	m.t.Helper()
	m.mu.Lock()
	v := m.violations
	m.violations = nil
	m.mu.Unlock()
	if m.recv != nil {
		v = append(v, m.recv.errs.Take()...)
	}
	if len(v) > 0 {
		m.t.Fatalf("after %s:\n%s", after, strings.Join(v, "\n"))
	}
}

// refreshFeed re-reads the whole space feed (the record of every commit) after a committing operation.
func (m *whModel) refreshFeed() {
	m.t.Helper()
	m.obs.c = m.e.c
	feed := m.obs.All()
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(feed) < len(m.feed) {
		m.t.Fatalf("the space feed shrank from %d to %d items", len(m.feed), len(feed))
	}
	for i, it := range m.feed {
		if !reflect.DeepEqual(mustJSON(it), mustJSON(feed[i])) {
			m.t.Fatalf("feed item %d changed:\nwas %s\nnow %s", i+1, mustJSON(it), mustJSON(feed[i]))
		}
	}
	m.feed = feed
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// visibleTo reports whether consumer con reads item fi (view, rights, consumer filter).
func (m *whModel) visibleTo(con *whCon, fi domain.FeedItem) bool {
	switch fi.ItemType {
	case domain.ItemMessage, domain.ItemReceipt:
		if con.view == domain.ViewInbox && !slices.Contains(fi.RecipientIDs, con.actor) {
			return false
		}
	case domain.ItemMemoryRevision:
		if !con.memory || fi.ResourceID != m.coll {
			return false
		}
	default:
		return false
	}
	return whFilterPasses(con.filter, fi)
}

func whFilterPasses(f domain.Filter, fi domain.FeedItem) bool {
	if len(f.ProducerIDs) > 0 && !slices.Contains(f.ProducerIDs, fi.ProducerID) {
		return false
	}
	if len(f.ItemTypes) > 0 && !slices.Contains(f.ItemTypes, string(fi.ItemType)) {
		return false
	}
	return true
}

// announces reports why slot does not announce fi at now ("" when it does), by the model.
func (m *whModel) announces(s *whSlot, fi domain.FeedItem, now time.Time) string {
	seq, _ := strconv.Atoi(fi.VisibleSeq)
	switch {
	case !s.exists:
		return "no subscription"
	case s.stopped:
		return "stopped"
	case !now.Before(s.expires):
		return "expired"
	case m.revoked[s.tokenID]:
		return "credential revoked"
	case seq <= s.fromSeq:
		return "committed before the subscription started"
	case !slices.Contains(s.types, domain.EventTypeOf(fi.ItemType)):
		return "type not subscribed"
	case !m.visibleTo(s.con, fi):
		return "not visible to the consumer"
	case s.filter != nil && !whFilterPasses(*s.filter, fi):
		return "filtered by the subscription"
	}
	return ""
}

// wantKeys are the signing keys the model expects for slot at now.
func (s *whSlot) wantKeys(now time.Time) port.WebhookKeys {
	k := port.WebhookKeys{Current: s.secret}
	if s.prev != "" && now.Before(s.prevUntil) {
		k.Previous, k.PreviousUntil = s.prev, s.prevUntil
	}
	return k
}

// before checks one delivery attempt when it is made (hook of FakeWebhooks; any goroutine).
func (m *whModel) before(c *WebhookCall) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.byURL[c.URL]
	if s == nil {
		m.violate("an attempt to %s, which no subscription names", c.URL)
		return
	}
	seq, err := strconv.Atoi(c.Item.VisibleSeq)
	i := slices.IndexFunc(m.feed, func(fi domain.FeedItem) bool { return fi.VisibleSeq == c.Item.VisibleSeq })
	if err != nil || i < 0 {
		m.violate("slot %d: an attempt announces visible_seq %q, not a committed feed item (feed has %d)", s.idx, c.Item.VisibleSeq, len(m.feed))
		return
	}
	fi := m.feed[i]
	if mustJSON(fi) != mustJSON(c.Item) {
		m.violate("slot %d: the attempt's event is not the feed item at %d:\nsent %s\nfeed %s", s.idx, seq, mustJSON(c.Item), mustJSON(fi))
	}
	if c.SourceURI != m.space.SourceURI {
		m.violate("slot %d: source %q, the space's source_uri is %q", s.idx, c.SourceURI, m.space.SourceURI)
	}
	if why := m.announces(s, fi, c.At); why != "" {
		m.violate("slot %d: an attempt of %s (%s, seq %d) at %s although the model says: %s", s.idx, fi.ItemID, fi.ItemType, seq, c.At.Format(time.TimeOnly), why)
	}
	if want := s.wantKeys(c.At); !sameKeys(c.Keys, want) {
		m.violate("slot %d: attempt signed with keys %s, the model expects %s", s.idx, redactKeys(c.Keys), redactKeys(want))
	}
	p := m.pairs[pairKey(s, fi.ItemID)]
	switch {
	case p == nil:
		m.violate("slot %d: an attempt of %s, which was never dispatched while the subscription announced it", s.idx, fi.ItemID)
		return
	case p.delivered:
		m.violate("slot %d: an attempt of %s after it was delivered", s.idx, fi.ItemID)
	case p.gone:
		m.violate("slot %d: an attempt of %s after the receiver answered 410", s.idx, fi.ItemID)
	case p.calls >= 5:
		m.violate("slot %d: attempt %d of %s: more than 5", s.idx, p.calls+1, fi.ItemID)
	case c.At.Before(p.notBefore):
		m.violate("slot %d: attempt %d of %s at %s, not due before %s", s.idx, p.calls+1, fi.ItemID, c.At.Format(time.StampMicro), p.notBefore.Format(time.StampMicro))
	}
	p.calls++
}

// after records the outcome of an attempt and when the next one may come.
func (m *whModel) after(c *WebhookCall) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.byURL[c.URL]
	if s == nil {
		return
	}
	p := m.pairs[pairKey(s, c.Item.ItemID)]
	if p == nil {
		return
	}
	if c.Crashed {
		p.notBefore = c.At.Add(whLease)
		return
	}
	res := c.Result
	if c.Err != nil {
		res = port.WebhookResult{}
	}
	switch {
	case res.Delivered:
		p.delivered = true
	case res.GiveUp:
		p.gone = true
	case p.calls < 5:
		next := c.At.Add(whDelay(p.calls, whFactor))
		if n, err := strconv.Atoi(res.RetryAfter); err == nil && c.At.Add(time.Duration(n)*time.Second).After(next) {
			next = c.At.Add(time.Duration(n) * time.Second)
		}
		p.notBefore = next
	}
}

func sameKeys(a, b port.WebhookKeys) bool {
	return a.Current == b.Current && a.Previous == b.Previous && a.PreviousUntil.Equal(b.PreviousUntil)
}

// redactKeys names the secrets of k by their index in whSecrets (never printing them).
func redactKeys(k port.WebhookKeys) string {
	name := func(s string) string {
		if s == "" {
			return "-"
		}
		if i := slices.Index(whSecrets, s); i >= 0 {
			return fmt.Sprintf("secret#%d", i)
		}
		return "unknown secret"
	}
	return fmt.Sprintf("{current %s, previous %s until %s}", name(k.Current), name(k.Previous), k.PreviousUntil.Format(time.TimeOnly))
}

// dispatch records the pairs a worker pass derives now: every item committed since the last pass, for
// every subscription that announces it at this moment.
func (m *whModel) dispatch() {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.e.clock.Now()
	for _, fi := range m.feed[m.dispatched:] {
		for _, s := range m.slots {
			if m.announces(s, fi, now) == "" {
				k := pairKey(s, fi.ItemID)
				if m.pairs[k] != nil {
					m.violate("slot %d: %s dispatched twice", s.idx, fi.ItemID)
				}
				m.pairs[k] = &whPair{slot: s, item: fi, notBefore: now}
			}
		}
	}
	m.dispatched = len(m.feed)
}

// work is one worker pass of the current service.
func (m *whModel) work() {
	m.t.Helper()
	m.dispatch()
	m.e.work()
	m.check("a worker pass")
}

// dispatchOnly derives the deliveries of what was committed without attempting any (as the AWS stream
// dispatcher does): they wait for wake-ups or the next worker pass.
func (m *whModel) dispatchOnly() {
	m.t.Helper()
	m.dispatch()
	if _, err := m.e.svc.DispatchPending(context.Background()); err != nil {
		m.t.Fatalf("DispatchPending: %v", err)
	}
	m.check("a dispatch pass")
}

// attempt runs AttemptDelivery for ref and remembers ref for stale wake-ups.
func (m *whModel) attempt(ctx context.Context, ref port.DeliveryRef) error {
	m.mu.Lock()
	m.refs = append(m.refs, ref)
	m.mu.Unlock()
	_, err := m.e.svc.AttemptDelivery(ctx, ref)
	return err
}

func (m *whModel) actions() []whAction {
	t := m.t
	drawSlot := func() *whSlot { return m.slots[rapid.IntRange(0, len(m.slots)-1).Draw(t, "slot")] }
	inbox := []string{"cP", "cX1", "cX2", "cY"}
	return []whAction{
		{"send", 6, m.send},
		{"publish memory", 2, m.publish},
		{"ack", 3, func() { m.ack(m.cons[rapid.SampledFrom(inbox).Draw(t, "consumer")]) }},
		{"upsert", 6, func() { m.upsert(drawSlot()) }},
		{"upsert replay", 1, m.replayUpsert},
		{"stop", 2, func() { m.stop(drawSlot()) }},
		{"revoke credential", 1, m.revoke},
		{"advance clock", 5, func() {
			d := rapid.SampledFrom([]time.Duration{100 * time.Millisecond, time.Second, whDelay(1, whFactor), 5 * time.Second,
				whDelay(3, whFactor), whLease, 2 * time.Minute, whDelay(4, whFactor), 10 * time.Minute}).Draw(t, "advance")
			m.e.clock.Advance(d)
		}},
		{"work", 4, m.work},
		{"dispatch", 3, m.dispatchOnly},
		{"wake", 3, m.wake},
		{"wake concurrently", 2, m.wakeConcurrently},
		{"stale wake", 1, m.staleWake},
		{"crash mid-attempt", 2, m.crashAttempt},
		{"restart", 2, func() {
			m.restarts++
			m.e.restart()
			m.obs.c = m.e.c
		}},
		{"receiver", 4, func() { m.receiver(drawSlot()) }},
		{"redeliver", 2, m.redeliver},
		{"list", 1, m.list},
	}
}

func (m *whModel) send() {
	t := m.t
	names := []string{"cP", "cX1", "cY"}
	from := m.cons[rapid.SampledFrom(names).Draw(t, "producer")]
	var to []string
	for _, n := range names {
		if c := m.cons[n]; c.actor != from.actor && rapid.Bool().Draw(t, "to "+n) {
			to = append(to, c.actor)
		}
	}
	if len(to) == 0 {
		to = []string{m.cons["cX1"].actor}
		if from.actor == to[0] {
			to = []string{m.cons["cY"].actor}
		}
	}
	m.texts++
	body, subject := fmt.Sprintf("body-text-%d-never-in-an-event", m.texts), fmt.Sprintf("subject-text-%d", m.texts)
	if m.recv != nil {
		m.recv.forbid(body, subject)
	}
	mustDo[domain.SendResult](t, "SendMessage")(m.e.svc.SendMessage(context.Background(), from.ops, domain.SendRequest{
		RequestID: m.e.c.RID("send"), RecipientIDs: to, Subject: subject, Body: &domain.MessageBody{Text: body}}))
	m.refreshFeed()
}

func (m *whModel) publish() {
	m.rev++
	mustDo[domain.MemoryPublishResult](m.t, "PublishMemory")(m.e.svc.PublishMemory(context.Background(), m.src, m.coll, domain.MemoryPublishRequest{
		RequestID: m.e.c.RID("mem"), ExpectedRevision: mpI64(m.rev - 1), Mode: domain.ModeDelta,
		Items: []domain.MemoryItemInput{mpIn(fmt.Sprintf("i%d", m.rev), m.blob, fmt.Sprintf("i%d.md", m.rev))}}))
	m.refreshFeed()
}

func (m *whModel) ack(c *whCon) {
	var visible []domain.FeedItem
	m.mu.Lock()
	for _, fi := range m.feed {
		if m.visibleTo(c, fi) {
			visible = append(visible, fi)
		}
	}
	m.mu.Unlock()
	if len(visible) == 0 {
		return
	}
	fi := rapid.SampledFrom(visible).Draw(m.t, "acked item")
	stage := rapid.SampledFrom([]domain.Stage{domain.StageReceived, domain.StageProcessed}).Draw(m.t, "stage")
	mustDo[domain.AckResult](m.t, "Ack")(m.e.svc.Ack(context.Background(), c.ops, domain.AckRequest{RequestID: m.e.c.RID("ack"),
		ConsumerID: c.id, Items: []domain.AckEntry{{ItemID: fi.ItemID, Stage: stage}}}))
	m.refreshFeed()
}

func (m *whModel) upsert(s *whSlot) {
	t := m.t
	secret := rapid.SampledFrom(whSecrets).Draw(t, "secret")
	var ttl *int
	if n := rapid.SampledFrom([]int{0, 60, 300, 3600}).Draw(t, "ttl"); n > 0 {
		ttl = &n
	}
	echo := rapid.IntRange(0, 9).Draw(t, "challenge answered") > 0
	if echo {
		m.e.fake.PassVerify(s.url)
	} else {
		m.e.fake.FailVerify(s.url, false, "challenge not echoed")
	}
	now := m.e.clock.Now()
	active := s.exists && !s.stopped && now.Before(s.expires)
	challenged := !active || secret != s.secret
	tok := m.toks[s.binding]
	req := domain.UpsertSubscriptionRequest{RequestID: m.e.c.RID("sub"), ConsumerID: s.con.id, EventTypes: s.types, Filter: s.filter,
		Delivery: domain.SubscriptionDelivery{Mode: domain.DeliveryModeWebhook, URL: s.url, Secret: secret}, TTLSeconds: ttl}
	verifies := m.e.fake.VerifyCount(s.url)
	res, err := m.e.svc.UpsertSubscription(context.Background(), tok.p, req)
	m.last = &whUpsert{p: tok.p, req: req, res: res, err: err}
	if got := m.e.fake.VerifyCount(s.url) - verifies; got != map[bool]int{true: 1}[challenged] {
		t.Fatalf("slot %d upsert (active %v, same secret %v): %d challenges, want %v", s.idx, active, secret == s.secret, got, challenged)
	}
	if challenged && !echo {
		WantCode(t, fmt.Sprintf("slot %d upsert with a failing challenge", s.idx), err, domain.CodeWebhookVerification)
		return
	}
	if err != nil {
		t.Fatalf("slot %d upsert: %v", s.idx, err)
	}
	n := 86400
	if ttl != nil {
		n = *ttl
	}
	if s.subID != "" && res.SubscriptionID != s.subID {
		t.Fatalf("slot %d: an upsert of the same identity answered subscription %s, before %s", s.idx, res.SubscriptionID, s.subID)
	}
	wantExp := now.Add(time.Duration(n) * time.Second)
	if res.State != domain.SubscriptionActive || !res.ExpiresAt.Equal(wantExp) ||
		!res.RefreshBefore.Equal(wantExp.Add(-time.Duration(n)*time.Second/4)) || res.Delivery.URL != s.url || res.ConsumerID != s.con.id {
		t.Fatalf("slot %d upsert: %+v, want active until %s", s.idx, res, wantExp)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if active {
		if secret != s.secret {
			s.prev, s.prevUntil = s.secret, now.Add(5*time.Minute)
		} else if !(s.prev != "" && now.Before(s.prevUntil)) {
			s.prev = ""
		}
	} else {
		s.prev = ""
		s.fromSeq = 0 // the head: the last item committed (values above it that are not visible were skipped)
		if len(m.feed) > 0 {
			s.fromSeq, _ = strconv.Atoi(m.feed[len(m.feed)-1].VisibleSeq)
		}
	}
	s.subID, s.exists, s.stopped, s.expires, s.ttl, s.secret, s.tokenID = res.SubscriptionID, true, false, wantExp, n, secret, tok.id
}

func (m *whModel) replayUpsert() {
	if m.last == nil {
		return
	}
	l := m.last
	verifies := len(m.e.fake.Calls())
	res, err := m.e.svc.UpsertSubscription(context.Background(), l.p, l.req)
	if got := len(m.e.fake.Calls()) - verifies; got != 0 {
		m.t.Fatalf("a replayed upsert made %d calls of the sender", got)
	}
	if (err == nil) != (l.err == nil) || (err != nil && CodeOf(err) != CodeOf(l.err)) || mustJSON(res) != mustJSON(l.res) {
		m.t.Fatalf("replayed upsert %s: %+v, %v; first answer %+v, %v", l.req.RequestID, res, err, l.res, l.err)
	}
}

func (m *whModel) stop(s *whSlot) {
	if s.subID == "" {
		return
	}
	for range rapid.IntRange(1, 2).Draw(m.t, "stops") {
		r := mustDo[domain.StopSubscriptionResult](m.t, "StopSubscription")(m.e.svc.StopSubscription(context.Background(), s.con.ops, s.subID,
			domain.StopSubscriptionRequest{RequestID: m.e.c.RID("stop")}))
		if r.State != domain.SubscriptionStopped || r.SubscriptionID != s.subID {
			m.t.Fatalf("stop %s: %+v", s.subID, r)
		}
	}
	m.mu.Lock()
	s.stopped = true
	m.mu.Unlock()
}

func (m *whModel) revoke() {
	names := make([]string, 0, len(m.toks))
	for n := range m.toks {
		names = append(names, n)
	}
	sort.Strings(names)
	name := rapid.SampledFrom(names).Draw(m.t, "credential")
	tok := m.toks[name]
	mustDo[domain.TokenResult](m.t, "RevokeToken")(m.e.svc.RevokeToken(context.Background(), m.space.SpaceID, tok.id))
	m.mu.Lock()
	m.revoked[tok.id] = true
	m.mu.Unlock()
	var con *whCon
	for _, c := range m.cons {
		if c.id == tok.consumer {
			con = c
		}
	}
	m.toks[name] = m.mint(tok.actor, con)
}

// wake delivers queued wake-ups late, some twice, some not at all, in a drawn order.
func (m *whModel) wake() {
	refs := m.e.queue.Take()
	if len(refs) == 0 {
		return
	}
	var order []port.DeliveryRef
	for _, r := range refs {
		switch rapid.IntRange(0, 3).Draw(m.t, "wake-up") {
		case 0: // lost
		case 1:
			order = append(order, r, r)
		default:
			order = append(order, r)
		}
	}
	perm := rapid.Permutation(order).Draw(m.t, "order")
	for _, r := range perm {
		if err := m.attempt(context.Background(), r); err != nil {
			m.t.Fatalf("AttemptDelivery %s: %v", r.DeliveryID, err)
		}
	}
	m.check("wake-ups")
}

// due returns the deliveries the service finds due (at most 20).
func (m *whModel) due() []port.DeliveryRef {
	due, err := m.e.svc.DueDeliveries(context.Background(), 20)
	if err != nil {
		m.t.Fatalf("DueDeliveries: %v", err)
	}
	return due
}

// wakeConcurrently attempts every queued or due delivery twice at once.
func (m *whModel) wakeConcurrently() {
	due := m.due()
	refs := append(m.e.queue.Take(), due...)
	var wg sync.WaitGroup
	errs := make(chan error, 2*len(refs))
	for _, r := range refs {
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := m.attempt(context.Background(), r); err != nil {
					errs <- fmt.Errorf("AttemptDelivery %s: %w", r.DeliveryID, err)
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		m.t.Fatalf("concurrent wake-ups: %v", err)
	}
	m.check("concurrent wake-ups")
}

// staleWake repeats wake-ups that were handled long ago.
func (m *whModel) staleWake() {
	if len(m.refs) == 0 {
		return
	}
	for range rapid.IntRange(1, 3).Draw(m.t, "stale wake-ups") {
		r := rapid.SampledFrom(m.refs).Draw(m.t, "stale ref")
		if err := m.attempt(context.Background(), r); err != nil {
			m.t.Fatalf("stale AttemptDelivery %s: %v", r.DeliveryID, err)
		}
	}
	m.check("stale wake-ups")
}

// crashAttempt makes an attempt whose worker dies after the claim, while the request is in flight.
func (m *whModel) crashAttempt() {
	due := m.due()
	if len(due) == 0 {
		return
	}
	r := rapid.SampledFrom(due).Draw(m.t, "crashed delivery")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m.e.fake.CrashNext(cancel)
	err := m.attempt(ctx, r)
	if pending := m.e.fake.CancelCrash(); !pending && err == nil {
		m.t.Fatalf("an attempt cut short by its context reported success")
	} else if pending && err != nil {
		m.t.Fatalf("AttemptDelivery without a crash: %v", err)
	}
	m.check("a crashed attempt")
}

// receiver changes how the receiver of slot answers.
func (m *whModel) receiver(s *whSlot) {
	answers := []WebhookAnswer{{Status: 200}, {Status: 204}, {Status: 503}, {Status: 503, RetryAfter: "2"},
		{Status: 429, RetryAfter: "40"}, {Status: 500}, {Status: 410}, {Status: 0}, {NotMade: true}, {Status: 302}}
	if rapid.Bool().Draw(m.t, "script") {
		var q []WebhookAnswer
		for range rapid.IntRange(1, 3).Draw(m.t, "scripted answers") {
			q = append(q, rapid.SampledFrom(answers).Draw(m.t, "answer"))
		}
		m.e.fake.Script(s.url, q...)
		return
	}
	m.e.fake.Default(s.url, rapid.SampledFrom(answers).Draw(m.t, "answer"))
}

// redeliver makes a failed or cancelled delivery pending again (admin plane).
func (m *whModel) redeliver() {
	recs := append(m.e.deliveries(m.space.SpaceID, domain.DeliveryFailed), m.e.deliveries(m.space.SpaceID, domain.DeliveryCancelled)...)
	if len(recs) == 0 {
		return
	}
	d := rapid.SampledFrom(recs).Draw(m.t, "redelivered")
	got, err := m.e.svc.Redeliver(context.Background(), m.space.SpaceID, d.DeliveryID)
	if err != nil || got.State != domain.DeliveryPending || got.Attempts != 0 {
		m.t.Fatalf("Redeliver %s: %+v, %v", d.DeliveryID, got, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.byURL[d.URL]
	if s == nil {
		m.t.Fatalf("a delivery record for %s, which no subscription names", d.URL)
	}
	p := m.pairs[pairKey(s, d.EventID)]
	if p == nil {
		m.t.Fatalf("a delivery record %s for a pair that was never owed (slot %d, %s)", d.DeliveryID, s.idx, d.EventID)
	}
	p.calls, p.gone, p.notBefore = 0, false, m.e.clock.Now()
}

// observe checks delivery records seen at any time: an attempt ID always names the same attempt (delivery
// and start) and a delivery's event ID never changes.
func (m *whModel) observe(recs []domain.Delivery) {
	m.t.Helper()
	for _, d := range recs {
		if ev, ok := m.eventOf[d.DeliveryID]; ok && ev != d.EventID {
			m.t.Fatalf("delivery %s announced %s, now %s", d.DeliveryID, ev, d.EventID)
		}
		m.eventOf[d.DeliveryID] = d.EventID
		seen := map[string]bool{}
		for _, a := range d.History {
			what := d.DeliveryID + " at " + a.StartedAt.Format(time.StampNano)
			if prev, ok := m.attemptIDs[a.AttemptID]; (ok && prev != what) || seen[a.AttemptID] || a.AttemptID == "" {
				m.t.Fatalf("attempt ID %q names %s and %s", a.AttemptID, prev, what)
			}
			seen[a.AttemptID] = true
			m.attemptIDs[a.AttemptID] = what
		}
	}
}

// list compares subscription.list of every consumer's actor with the model.
func (m *whModel) list() {
	for _, st := range []string{domain.DeliveryPending, domain.DeliveryFailed, domain.DeliveryCancelled} {
		m.observe(m.e.deliveries(m.space.SpaceID, st))
	}
	now := m.e.clock.Now()
	seen := map[string]bool{}
	for _, c := range m.cons {
		l := mustDo[domain.SubscriptionList](m.t, "ListSubscriptions")(m.e.svc.ListSubscriptions(context.Background(), c.ops))
		for _, r := range l.Subscriptions {
			seen[r.SubscriptionID] = true
			var s *whSlot
			for _, x := range m.slots {
				if x.subID == r.SubscriptionID {
					s = x
				}
			}
			if s == nil {
				m.t.Fatalf("subscription.list shows %s, which the model does not know", r.SubscriptionID)
			}
			want := domain.SubscriptionActive
			switch {
			case s.stopped:
				want = domain.SubscriptionStopped
			case !now.Before(s.expires):
				want = domain.SubscriptionExpired
			}
			if r.State != want || !r.ExpiresAt.Equal(s.expires) || r.Health == nil {
				m.t.Fatalf("subscription.list: slot %d is %s until %s (health %v), the model says %s until %s", s.idx, r.State, r.ExpiresAt, r.Health, want, s.expires)
			}
		}
	}
	for _, s := range m.slots {
		if s.subID != "" && !seen[s.subID] {
			m.t.Fatalf("subscription.list misses slot %d (%s)", s.idx, s.subID)
		}
	}
}

// drain lets the receivers recover and works every due attempt until nothing is left.
func (m *whModel) drain() {
	for _, s := range m.slots {
		if rapid.IntRange(0, 3).Draw(m.t, "receiver recovers") > 0 {
			m.e.fake.Default(s.url, WebhookAnswer{Status: 200})
		}
	}
	m.e.queue.Take()
	for range 300 {
		m.work()
		at, ok, err := m.e.svc.NextDue(context.Background())
		if err != nil {
			m.t.Fatalf("NextDue: %v", err)
		}
		if !ok {
			return
		}
		if d := at.Sub(m.e.clock.Now()); d > 0 {
			m.e.clock.Advance(d)
		}
	}
	m.t.Fatalf("deliveries still due after 300 worker passes")
}

// final checks the end state: every owed pair delivered or with exactly one terminal record, no other
// records, unique attempt IDs, and all content readable.
func (m *whModel) final(st *whStats) {
	t := m.t
	m.list()
	if p := m.e.deliveries(m.space.SpaceID, domain.DeliveryPending); len(p) != 0 {
		t.Fatalf("%d deliveries still pending after the drain: %+v", len(p), p[0])
	}
	terminal := map[string]domain.Delivery{}
	for _, state := range []string{domain.DeliveryFailed, domain.DeliveryCancelled} {
		recs := m.e.deliveries(m.space.SpaceID, state)
		m.observe(recs)
		for _, d := range recs {
			s := m.byURL[d.URL]
			if s == nil {
				t.Fatalf("a %s delivery to %s, which no subscription names", state, d.URL)
			}
			k := pairKey(s, d.EventID)
			p := m.pairs[k]
			if p == nil {
				t.Fatalf("a %s delivery %s for a pair that was never owed (slot %d, %s)", state, d.DeliveryID, s.idx, d.EventID)
			}
			if _, dup := terminal[k]; dup {
				t.Fatalf("two delivery records for slot %d, %s", s.idx, d.EventID)
			}
			terminal[k] = d
			if p.delivered {
				t.Fatalf("slot %d, %s was delivered and also has a %s record (%s)", s.idx, d.EventID, state, d.FailureReason)
			}
			if d.SubscriptionID != s.subID || d.ConsumerID != s.con.id || d.EventType != domain.EventTypeOf(p.item.ItemType) ||
				d.VisibleSeq != p.item.VisibleSeq || d.Attempts != p.calls || d.NextAttemptAt != nil || d.FailureReason == "" {
				t.Fatalf("%s record %+v does not match the model (slot %d, item %s, %d attempts)", state, d, s.idx, p.item.ItemID, p.calls)
			}
			reason := d.FailureReason
			switch {
			case state == domain.DeliveryFailed && strings.HasPrefix(reason, "attempts_exhausted"):
				if d.Attempts != 5 {
					t.Fatalf("failed after %d attempts: %s", d.Attempts, reason)
				}
			case state == domain.DeliveryFailed && strings.HasPrefix(reason, "subscription_expired"):
			case state == domain.DeliveryFailed && p.gone && reason == "status 410":
			case state == domain.DeliveryCancelled && slices.Contains([]string{"subscription_stopped", "subscription_expired",
				"credential_invalid", "unauthorized", "not_visible", "filtered", "not_subscribed", "subscription_gone"}, reason):
			default:
				t.Fatalf("a %s delivery with reason %q (slot %d, item %s, gone %v)", state, reason, s.idx, d.EventID, p.gone)
			}
		}
	}
	for k, p := range m.pairs {
		_, rec := terminal[k]
		if !p.delivered && !rec {
			t.Fatalf("slot %d, item %s (%s) was owed and ended neither delivered nor with a record: silently dropped", p.slot.idx, p.item.ItemID, p.item.ItemType)
		}
	}
	// Content is never removed: each consumer reads exactly what the model says is visible to it.
	for _, name := range []string{"cP", "cX1", "cX2", "cY", "cO"} {
		c := m.cons[name]
		items, _ := m.e.c.ReadAll(c.ops, c.id, nil, 50)
		var got, want []string
		for _, it := range items {
			got = append(got, it.ItemID)
		}
		for _, fi := range m.feed {
			if m.visibleTo(c, fi) {
				want = append(want, fi.ItemID)
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("consumer %s reads %v, the model says %v", name, got, want)
		}
	}
	if m.recv != nil {
		delivered := 0
		for _, ev := range m.recv.events.All() {
			if ev.Status >= 200 && ev.Status <= 299 {
				delivered++
			}
		}
		want := 0
		for _, p := range m.pairs {
			if p.delivered {
				want++
			}
		}
		if delivered != want {
			t.Fatalf("the receiver answered 2xx to %d events, the model counts %d delivered pairs", delivered, want)
		}
	}
	m.check("the final checks")
	st.checks++
	st.items += len(m.feed)
	st.pairs += len(m.pairs)
	st.restarts += m.restarts
	for _, p := range m.pairs {
		if p.delivered {
			st.delivered++
		}
	}
	for _, d := range terminal {
		if d.State == domain.DeliveryFailed {
			st.failed++
		} else {
			st.cancelled++
		}
	}
	for _, c := range m.e.fake.Calls() {
		if c.Kind == "deliver" {
			st.attempts++
			if c.Crashed {
				st.crashed++
			}
		}
	}
}
