package dynamo_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"pgregory.net/rapid"

	"github.com/waypost/waypost/channel"
	"github.com/waypost/waypost/channel/livefeed"
	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/domain/domaintest"
	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/internal/platform"
	"github.com/waypost/waypost/store/dynamo"
	"github.com/waypost/waypost/store/dynamo/dynamotest"
	"github.com/waypost/waypost/store/fsblob"
)

// seqModelChecks is the default number of rapid checks of TestSequenceModel (each runs a few dozen
// concurrent operations against a fresh table).
const seqModelChecks = 30

// TestSequenceModel is the model-based test of visible_seq on DynamoDB (issue 12): writers send messages
// concurrently into one space while readers page through the space feed and feed.wait on it, ack what they
// read (receipts take several values at once), and a prober reads the head directly. Faults are injected
// per writer process: transaction conflicts (retried), transactions that fail for good (the writer voids
// its slot), slot conditions failing as if a reader had voided the slot (the writer reserves again), a
// condition failure on the submission, responses lost after the transaction applied, transactions stalled
// past the grace period (readers void the slot: the late writer races the voider), and writers killed
// between their reservation and their commit (their slot stays unresolved until readers void it; the
// writer restarts and retries the same request_id). The clock runs fast, so grace periods pass during a
// check. Invariants:
//
//   - every committed item is read exactly once by every reader, in increasing visible_seq order (pages
//     and feed.wait concatenated, then read to the end);
//   - no head ever passes an item that commits later: the items at or below any head the prober got are
//     exactly the items there at the end;
//   - a void slot never becomes visible: the feed holds exactly the committed sends and receipts, and every
//     other value's slot reads as absent;
//   - idempotent replays (message.send and inbox.ack with the same request_id, after success or after a
//     failure) return the first result, and each request commits exactly one item.
func TestSequenceModel(t *testing.T) {
	domaintest.LimitRapidChecks(t, seqModelChecks)
	srv := dynamotest.New(t)
	dir := t.TempDir()
	var checks atomic.Int64
	var total seqStats
	defer func() {
		t.Logf("over all checks: %d messages, %d receipts, %d values skipped (voided), %d head probes; faults injected: %v",
			total.messages, total.receipts, total.skipped, total.probes, total.faults)
	}()
	rapid.Check(t, func(rt *rapid.T) {
		blobs, err := fsblob.New(filepath.Join(dir, strconv.FormatInt(checks.Add(1), 10)))
		if err != nil {
			rt.Fatal(err)
		}
		m := newSeqModel(t, rt, srv, blobs)
		m.run()
		st := m.verify()
		total.add(st)
		_ = os.RemoveAll(filepath.Join(dir, strconv.FormatInt(checks.Load(), 10)))
	})
}

// Faults a writer's next commit can meet.
type seqFault string

const (
	faultNone     seqFault = "none"
	faultConflict seqFault = "conflict"   // two TransactionConflict cancellations, then through
	faultFail     seqFault = "fail"       // a permanent error: the send fails, the writer voids its slot
	faultSlotCond seqFault = "slot-void"  // the slot's condition fails (as if voided): reserve again
	faultOp0Cond  seqFault = "sub-exists" // the submission's condition fails: the domain retries
	faultLost     seqFault = "lost"       // the transaction applies, every answer is a server error
	faultStall    seqFault = "stall"      // the transaction is held past the grace period
	faultKill     seqFault = "kill"       // the process dies right after its reservation
)

var allFaults = []seqFault{faultNone, faultNone, faultConflict, faultFail, faultSlotCond, faultOp0Cond, faultLost, faultStall, faultKill}

var errKilled = errors.New("injected: process killed")

// proc is one writer process: its fault for the next sequence transaction, and whether it died.
type proc struct {
	mu        sync.Mutex
	fault     seqFault
	conflicts int
	lostToken string
	dead      bool
}

func (p *proc) arm(f seqFault) {
	p.mu.Lock()
	p.fault = f
	p.mu.Unlock()
}

func (p *proc) isDead() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dead
}

// procAPI is the DynamoDB client of one process, injecting its faults.
type procAPI struct {
	dynamo.API
	p     *proc
	stall time.Duration
}

func seqSlotIndex(in *dynamodb.TransactWriteItemsInput) int {
	for i, a := range in.TransactItems {
		if a.Put != nil {
			if pk, ok := a.Put.Item[dynamo.AttrPK].(*types.AttributeValueMemberS); ok && strings.HasPrefix(pk.Value, "FD#") {
				return i
			}
		}
	}
	return -1
}

func cancelAt(n, at int, code string) error {
	codes := make([]string, n)
	for i := range codes {
		codes[i] = "None"
	}
	if at >= 0 {
		codes[at] = code
	}
	return cancelled(codes...)
}

func (a *procAPI) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	p := a.p
	p.mu.Lock()
	if p.dead {
		p.mu.Unlock()
		return nil, errKilled
	}
	tok := aws.ToString(in.ClientRequestToken)
	if p.lostToken != "" && p.lostToken == tok {
		p.mu.Unlock()
		return nil, apiError("InternalServerError") // every retry of the lost request is answered so
	}
	slot := seqSlotIndex(in)
	f := faultNone
	if slot >= 0 {
		f, p.fault = p.fault, faultNone
		if f == faultConflict {
			p.conflicts = 2
		}
	}
	if p.conflicts > 0 {
		p.conflicts--
		p.mu.Unlock()
		return nil, cancelAt(len(in.TransactItems), slot, "TransactionConflict")
	}
	if f == faultLost {
		p.lostToken = tok
	}
	p.mu.Unlock()
	switch f {
	case faultFail:
		return nil, apiError("ValidationException")
	case faultSlotCond:
		return nil, cancelAt(len(in.TransactItems), slot, "ConditionalCheckFailed")
	case faultOp0Cond:
		return nil, cancelAt(len(in.TransactItems), 0, "ConditionalCheckFailed")
	case faultLost:
		if _, err := a.API.TransactWriteItems(ctx, in, o...); err != nil {
			return nil, err
		}
		return nil, apiError("InternalServerError")
	case faultStall:
		time.Sleep(a.stall)
	}
	return a.API.TransactWriteItems(ctx, in, o...)
}

func (a *procAPI) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if a.p.isDead() {
		return nil, errKilled
	}
	out, err := a.API.UpdateItem(ctx, in, o...)
	if err == nil && strings.HasPrefix(aws.ToString(in.UpdateExpression), "ADD") { // a reservation
		a.p.mu.Lock()
		if a.p.fault == faultKill {
			a.p.fault, a.p.dead = faultNone, true
		}
		a.p.mu.Unlock()
	}
	return out, err
}

func (a *procAPI) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if a.p.isDead() {
		return nil, errKilled
	}
	return a.API.PutItem(ctx, in, o...)
}

func (a *procAPI) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	if a.p.isDead() {
		return nil, errKilled
	}
	return a.API.GetItem(ctx, in, o...)
}

func (a *procAPI) Query(ctx context.Context, in *dynamodb.QueryInput, o ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	if a.p.isDead() {
		return nil, errKilled
	}
	return a.API.Query(ctx, in, o...)
}

// hubsFor is one in-process channel hub per space (the live feed every service announces to).
type hubsFor struct {
	mu sync.Mutex
	m  map[string]*channel.Hub
}

func (h *hubsFor) HubFor(space string) *channel.Hub {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil {
		h.m = map[string]*channel.Hub{}
	}
	if h.m[space] == nil {
		h.m[space] = channel.NewHub(channel.Limits{})
	}
	return h.m[space]
}

type seqWriterOp struct {
	text   string
	long   bool
	fault  seqFault
	replay bool
}

type seqReaderOp struct {
	kind  string // page, wait, ack
	limit int
	wait  int // ms
	stage domain.Stage
}

type seqModel struct {
	t      *rapid.T
	srv    *dynamotest.Server
	table  string
	blobs  port.BlobStore
	clock  *domaintest.Clock
	feed   *livefeed.Feed
	space  string
	rcpt   string
	stall  time.Duration
	grace  time.Duration
	writer []seqWriter
	reader []seqReader

	mu       sync.Mutex
	failures []string
	sends    map[string]domain.SendResult // request ID → first result
	acks     map[string]domain.AckResult  // request ID → first result
	receipts int                          // receipt items the first results of acks committed
	snaps    []headSnap
	final    []domain.FeedItem // the whole space feed at the end
}

type seqWriter struct {
	p   *domain.Principal
	ops []seqWriterOp
}

type seqReader struct {
	p        *domain.Principal
	consumer string
	ops      []seqReaderOp
	got      []domain.FeedItem
	cursor   *string
}

type headSnap struct {
	head uint64
	seqs []uint64
}

func (m *seqModel) failf(format string, args ...any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failures = append(m.failures, fmt.Sprintf(format, args...))
}

// newSeqModel draws a model on a fresh table; tt is the enclosing test (the table and fixture need a
// testing.TB), t the check.
func newSeqModel(tt *testing.T, t *rapid.T, srv *dynamotest.Server, blobs port.BlobStore) *seqModel {
	m := &seqModel{t: t, srv: srv, table: srv.Table(tt), blobs: blobs, clock: domaintest.NewClock(),
		feed: livefeed.New(&hubsFor{}, nil), grace: dynamo.DefaultVoidGrace, stall: 120 * time.Millisecond,
		sends: map[string]domain.SendResult{}, acks: map[string]domain.AckResult{}}
	f := domaintest.New(tt, func(testing.TB) domaintest.Backend { return domaintest.Backend{Store: m.store(&proc{}), Blobs: blobs} },
		func(c *domain.Config) { m.configure(c) })
	c := f.With(t)
	m.space = c.Space().SpaceID
	m.rcpt = c.Party(m.space).ActorID
	for i := range rapid.IntRange(2, 4).Draw(t, "writers") {
		w := seqWriter{p: c.Party(m.space).P}
		for j := range rapid.IntRange(1, 4).Draw(t, fmt.Sprintf("w%d sends", i)) {
			w.ops = append(w.ops, seqWriterOp{
				text:   fmt.Sprintf("w%d-%d", i, j),
				long:   rapid.IntRange(0, 3).Draw(t, "long body") == 0,
				fault:  rapid.SampledFrom(allFaults).Draw(t, "fault"),
				replay: rapid.Bool().Draw(t, "replay"),
			})
		}
		m.writer = append(m.writer, w)
	}
	for i := range rapid.IntRange(1, 3).Draw(t, "readers") {
		obs := c.Feed(m.space) // a space_log consumer of an actor with space.observe
		r := seqReader{p: c.Principal(obs.Token()), consumer: obs.ConsumerID()}
		for range rapid.IntRange(1, 6).Draw(t, fmt.Sprintf("r%d steps", i)) {
			op := seqReaderOp{kind: rapid.SampledFrom([]string{"page", "page", "wait", "ack", "ack"}).Draw(t, "read"),
				limit: rapid.IntRange(1, 4).Draw(t, "limit"), wait: rapid.IntRange(0, 3).Draw(t, "wait s") * 1000,
				stage: rapid.SampledFrom([]domain.Stage{domain.StageReceived, domain.StageProcessed}).Draw(t, "stage")}
			r.ops = append(r.ops, op)
		}
		m.reader = append(m.reader, r)
	}
	return m
}

func (m *seqModel) configure(c *domain.Config) {
	c.Clock = m.clock
	c.InlineBodyMax = 256
	c.Watcher, c.Notifier = m.feed, m.feed
}

func (m *seqModel) store(p *proc) *dynamo.Store {
	st, err := dynamo.New(&procAPI{API: m.srv.Client, p: p, stall: m.stall}, m.table, dynamo.Options{
		Now: m.clock.Now, VoidGrace: m.grace, BaseBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond})
	if err != nil {
		panic(err) // only for a nil client or an empty table name
	}
	return st
}

// service is one process: a domain service over its own store (own gap observations, own faults).
func (m *seqModel) service(p *proc) *domain.Service {
	c := domain.Config{Store: m.store(p), Blobs: m.blobs, IDs: platform.IDs{},
		CursorKey: []byte("0123456789abcdef0123456789abcdef-test-key")}
	m.configure(&c)
	svc, err := domain.New(c)
	if err != nil {
		panic(err) // only for a missing port or a short cursor key
	}
	return svc
}

// runClock runs the model's clock at 250× real time (a 10 s grace period passes in 40 ms) until the
// returned function stops it.
func (m *seqModel) runClock() (stop func()) {
	stopClock := make(chan struct{})
	clockDone := make(chan struct{})
	go func() {
		defer close(clockDone)
		for {
			select {
			case <-stopClock:
				return
			case <-time.After(2 * time.Millisecond):
				m.clock.Advance(500 * time.Millisecond)
			}
		}
	}()
	return func() { close(stopClock); <-clockDone }
}

func (m *seqModel) run() {
	defer m.runClock()()

	stopProbe := make(chan struct{})
	probeDone := make(chan struct{})
	go m.probe(stopProbe, probeDone)

	var wg sync.WaitGroup
	for i := range m.writer {
		wg.Add(1)
		go func() { defer wg.Done(); m.write(i) }()
	}
	for i := range m.reader {
		wg.Add(1)
		go func() { defer wg.Done(); m.read(i) }()
	}
	wg.Wait()
	close(stopProbe)
	<-probeDone
	if len(m.failures) > 0 {
		m.t.Fatalf("%s", strings.Join(m.failures, "\n"))
	}
	m.drain()
}

// write runs one writer's sends: each until it commits (a failed attempt is retried with the same
// request_id, by a restarted process when the writer was killed), then possibly replayed.
func (m *seqModel) write(i int) {
	w := m.writer[i]
	p := &proc{}
	svc := m.service(p)
	for j, op := range w.ops {
		text := op.text
		if op.long {
			text = strings.Repeat(op.text+" ", 40) // above the inline limit: reserve, body to the blob store, commit
		}
		req := domain.SendRequest{RequestID: fmt.Sprintf("w%d-r%d", i, j), RecipientIDs: []string{m.rcpt}, Subject: "s",
			Body: &domain.MessageBody{Text: text}}
		p.arm(op.fault)
		var first *domain.SendResult
		for attempt := 0; first == nil; attempt++ {
			if attempt == 20 {
				m.failf("writer %d: request %s did not commit in 20 attempts", i, req.RequestID)
				return
			}
			res, err := svc.SendMessage(context.Background(), w.p, req)
			if err != nil {
				if p.isDead() { // restart: a new process, same request_id
					p = &proc{}
					svc = m.service(p)
				}
				continue
			}
			first = &res
		}
		m.mu.Lock()
		m.sends[req.RequestID] = *first
		m.mu.Unlock()
		if op.replay {
			again, err := svc.SendMessage(context.Background(), w.p, req)
			if err != nil || !sameSend(again, *first) {
				m.failf("writer %d: replay of %s: %+v, %v; first result %+v", i, req.RequestID, again, err, *first)
			}
		}
	}
}

func sameSend(a, b domain.SendResult) bool {
	return a.SubmissionState == b.SubmissionState && a.MessageID == b.MessageID && a.ThreadID == b.ThreadID &&
		a.CommittedAt.Equal(b.CommittedAt) && a.VisibleSeq == b.VisibleSeq
}

// read runs one reader's steps: pages, feed.wait and acks of what it read last.
func (m *seqModel) read(i int) {
	r := &m.reader[i]
	svc := m.service(&proc{})
	var last []domain.FeedItem
	for j, op := range r.ops {
		ctx := context.Background()
		var page domain.Page
		var err error
		switch op.kind {
		case "page":
			page, err = svc.ReadInbox(ctx, r.p, domain.ReadRequest{ConsumerID: r.consumer, Cursor: r.cursor, Limit: op.limit})
		case "wait":
			page, err = svc.WaitFeed(ctx, r.p, domain.WaitRequest{ConsumerID: r.consumer, Cursor: r.cursor, TimeoutMS: op.wait, Limit: op.limit})
		case "ack":
			if len(last) == 0 {
				continue
			}
			m.ack(svc, r, fmt.Sprintf("r%d-a%d", i, j), last, op.stage)
			continue
		}
		if err != nil {
			m.failf("reader %d step %d (%s): %v", i, j, op.kind, err)
			return
		}
		if !m.take(i, page) {
			return
		}
		if len(page.Items) > 0 {
			last = page.Items
		}
	}
}

// take appends a page to reader i's items, checking the order, and moves its cursor.
func (m *seqModel) take(i int, page domain.Page) bool {
	r := &m.reader[i]
	for _, it := range page.Items {
		seq, err := strconv.ParseUint(it.VisibleSeq, 10, 64)
		if err != nil {
			m.failf("reader %d: visible_seq %q", i, it.VisibleSeq)
			return false
		}
		if n := len(r.got); n > 0 {
			prev, _ := strconv.ParseUint(r.got[n-1].VisibleSeq, 10, 64)
			if seq <= prev {
				m.failf("reader %d: item %s at %d after %d: not increasing (read twice or out of order)", i, it.ItemID, seq, prev)
				return false
			}
		}
		r.got = append(r.got, it)
	}
	c := page.NextCursor
	r.cursor = &c
	return true
}

// ack acks items (with a checkpoint at the reader's cursor), then replays the request.
func (m *seqModel) ack(svc *domain.Service, r *seqReader, rid string, items []domain.FeedItem, stage domain.Stage) {
	req := domain.AckRequest{RequestID: rid, ConsumerID: r.consumer, CheckpointCursor: r.cursor}
	for _, it := range items {
		req.Items = append(req.Items, domain.AckEntry{ItemID: it.ItemID, Stage: stage})
	}
	res, err := svc.Ack(context.Background(), r.p, req)
	if err != nil {
		m.failf("ack %s: %v", rid, err)
		return
	}
	emitted := 0
	for i, rc := range res.Receipts {
		if rc.Changed && items[i].ItemType != domain.ItemReceipt {
			emitted++
		}
	}
	again, err := svc.Ack(context.Background(), r.p, req)
	a, _ := json.Marshal(res)
	b, _ := json.Marshal(again)
	if err != nil || string(a) != string(b) {
		m.failf("replay of ack %s: %s, %v; first result %s", rid, b, err, a)
	}
	m.mu.Lock()
	m.acks[rid] = res
	m.receipts += emitted
	m.mu.Unlock()
}

// probe reads the head directly (its own store, so its own gap observations) and what is at or below it.
func (m *seqModel) probe(stop, done chan struct{}) {
	defer close(done)
	st := m.store(&proc{})
	seq := port.Sequence{Counter: port.Key{PK: "SP#" + m.space, SK: "SEQ"}, Slots: "FD#" + m.space, Head: port.Key{PK: "SH#" + m.space, SK: "HEAD"}}
	for {
		select {
		case <-stop:
			return
		case <-time.After(3 * time.Millisecond):
		}
		h, err := st.Head(context.Background(), seq)
		if err != nil {
			m.failf("probe: head: %v", err)
			return
		}
		items, err := st.Query(context.Background(), port.Query{PK: seq.Slots, UpTo: port.SlotSK(h), Limit: 1000})
		if err != nil {
			m.failf("probe: %v", err)
			return
		}
		var seqs []uint64
		for _, it := range items {
			v, _ := strconv.ParseUint(it.SK, 10, 64)
			seqs = append(seqs, v)
		}
		m.mu.Lock()
		m.snaps = append(m.snaps, headSnap{head: h, seqs: seqs})
		m.mu.Unlock()
	}
}

// drain waits (the clock still running, so abandoned slots get voided) until the space feed holds every
// committed item, then reads each reader to the end.
func (m *seqModel) drain() {
	defer m.runClock()()
	svc := m.service(&proc{})
	obs := m.reader[0]
	deadline := time.Now().Add(30 * time.Second)
	for {
		var all []domain.FeedItem
		var cur *string
		for {
			page, err := svc.ReadInbox(context.Background(), obs.p, domain.ReadRequest{ConsumerID: obs.consumer, Cursor: cur, Limit: 100})
			if err != nil {
				m.t.Fatalf("drain: %v", err)
			}
			all = append(all, page.Items...)
			c := page.NextCursor
			cur = &c
			if !page.HasMore {
				break
			}
		}
		if m.complete(all) {
			m.final = all
			break
		}
		if time.Now().After(deadline) {
			m.t.Fatalf("the space feed never held every committed item: %d items, %d sends, %d receipts", len(all), len(m.sends), m.receipts)
		}
		time.Sleep(5 * time.Millisecond)
	}
	for i := range m.reader {
		r := &m.reader[i]
		for len(r.got) < len(m.final) {
			if time.Now().After(deadline) {
				m.t.Fatalf("reader %d read %d of %d items", i, len(r.got), len(m.final))
			}
			page, err := svc.ReadInbox(context.Background(), r.p, domain.ReadRequest{ConsumerID: r.consumer, Cursor: r.cursor, Limit: 50})
			if err != nil {
				m.t.Fatalf("reader %d: %v", i, err)
			}
			if !m.take(i, page) {
				m.t.Fatalf("%s", strings.Join(m.failures, "\n"))
			}
		}
	}
}

// complete reports whether feed holds one item per committed send and as many receipts as the acks made.
func (m *seqModel) complete(feed []domain.FeedItem) bool {
	msgs, receipts := 0, 0
	for _, it := range feed {
		switch it.ItemType {
		case domain.ItemMessage:
			msgs++
		case domain.ItemReceipt:
			receipts++
		}
	}
	return msgs >= len(m.sends) && receipts >= m.receipts
}

// seqStats sums what the checks exercised, so that a run shows its faults were met.
type seqStats struct {
	messages, receipts, skipped, probes int
	faults                              map[seqFault]int
}

func (s *seqStats) add(o seqStats) {
	s.messages += o.messages
	s.receipts += o.receipts
	s.skipped += o.skipped
	s.probes += o.probes
	if s.faults == nil {
		s.faults = map[seqFault]int{}
	}
	for f, n := range o.faults {
		s.faults[f] += n
	}
}

func (m *seqModel) verify() seqStats {
	t := m.t
	final := m.final
	// The feed is exactly the committed items.
	byMsg := map[string]domain.FeedItem{}
	receipts := 0
	var top uint64
	inFeed := map[uint64]bool{}
	for _, it := range final {
		v, _ := strconv.ParseUint(it.VisibleSeq, 10, 64)
		inFeed[v] = true
		top = max(top, v)
		switch it.ItemType {
		case domain.ItemMessage:
			if _, dup := byMsg[it.ResourceID]; dup {
				t.Fatalf("message %s twice in the feed", it.ResourceID)
			}
			byMsg[it.ResourceID] = it
		case domain.ItemReceipt:
			receipts++
		default:
			t.Fatalf("feed item of type %s", it.ItemType)
		}
	}
	if len(byMsg) != len(m.sends) || receipts != m.receipts {
		t.Fatalf("feed: %d messages and %d receipts; %d sends and acks making %d receipts committed", len(byMsg), receipts, len(m.sends), m.receipts)
	}
	for rid, res := range m.sends {
		it, ok := byMsg[res.MessageID]
		if !ok || it.VisibleSeq != res.VisibleSeq || !it.CommittedAt.Equal(res.CommittedAt) {
			t.Fatalf("send %s: result %+v, feed item %+v", rid, res, it)
		}
	}
	// Every reader read the whole feed, once, in order.
	for i, r := range m.reader {
		if len(r.got) != len(final) {
			t.Fatalf("reader %d read %d items, the feed has %d", i, len(r.got), len(final))
		}
		for j := range final {
			if r.got[j].ItemID != final[j].ItemID || r.got[j].VisibleSeq != final[j].VisibleSeq {
				t.Fatalf("reader %d item %d: %s at %s, the feed has %s at %s", i, j, r.got[j].ItemID, r.got[j].VisibleSeq, final[j].ItemID, final[j].VisibleSeq)
			}
		}
	}
	// No head passed an item that committed later.
	for _, s := range m.snaps {
		var want []uint64
		for _, it := range final {
			if v, _ := strconv.ParseUint(it.VisibleSeq, 10, 64); v <= s.head {
				want = append(want, v)
			}
		}
		if !slices.Equal(want, s.seqs) {
			t.Fatalf("a head of %d was returned when the items at or below it were %v; they are %v now", s.head, s.seqs, want)
		}
	}
	// Values not in the feed are void or unused: their slots read as absent.
	st := m.store(&proc{})
	for v := uint64(1); v <= top; v++ {
		if inFeed[v] {
			continue
		}
		if _, found, err := st.Get(context.Background(), port.Key{PK: "FD#" + m.space, SK: port.SlotSK(v)}); err != nil || found {
			t.Fatalf("slot %d, not in the feed, reads as present (%v)", v, err)
		}
	}
	stats := seqStats{messages: len(byMsg), receipts: receipts, skipped: int(top) - len(final), probes: len(m.snaps), faults: map[seqFault]int{}}
	for _, w := range m.writer {
		for _, op := range w.ops {
			stats.faults[op.fault]++
		}
	}
	return stats
}
