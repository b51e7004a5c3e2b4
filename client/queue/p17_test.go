package queue

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"pgregory.net/rapid"

	"github.com/waypost/waypost/client"
	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/server/servertest"
)

const adminSecret = servertest.AdminSecret

// errCrash is what an injected crash returns: the simulated process dies at that point.
var errCrash = errors.New("injected crash")

// startServer runs a real in-process Waypost server and returns its base URL.
func startServer(t *testing.T) string {
	t.Helper()
	_, url := servertest.Start(t)
	return url
}

// world is a fresh space with a producer A and a consumer B.
type world struct {
	admin            *client.Admin
	spaceID          string
	actorA, actorB   string
	consumerB        string
	tokenA, tokenB   string
	producer         *client.Client
	unreliableClient *http.Client
	faults           *faultRT
}

var worldSeq atomic.Int64

func newWorld(t interface{ Fatalf(string, ...any) }, baseURL string) *world {
	ctx := context.Background()
	w := &world{admin: client.NewAdmin(baseURL, adminSecret)}
	n := worldSeq.Add(1)
	rid := func(s string) string { return fmt.Sprintf("w%d-%s", n, s) }
	must := func(err error, what string) {
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	sp, err := w.admin.CreateSpace(ctx, domain.CreateSpaceRequest{RequestID: rid("space")})
	must(err, "create space")
	w.spaceID = sp.SpaceID
	a, err := w.admin.CreateActor(ctx, sp.SpaceID, domain.CreateActorRequest{RequestID: rid("a"), DisplayName: "agent A"})
	must(err, "create actor A")
	b, err := w.admin.CreateActor(ctx, sp.SpaceID, domain.CreateActorRequest{RequestID: rid("b"), DisplayName: "client B"})
	must(err, "create actor B")
	w.actorA, w.actorB = a.ActorID, b.ActorID
	cb, err := w.admin.CreateConsumer(ctx, sp.SpaceID, domain.CreateConsumerRequest{RequestID: rid("cb"), ActorID: b.ActorID, View: domain.ViewInbox})
	must(err, "create consumer B")
	w.consumerB = cb.ConsumerID
	ta, err := w.admin.CreateToken(ctx, sp.SpaceID, domain.CreateTokenRequest{RequestID: rid("ta"), ActorID: a.ActorID,
		Scopes: []domain.Scope{domain.ScopeMessageSend}})
	must(err, "create token A")
	tb, err := w.admin.CreateToken(ctx, sp.SpaceID, domain.CreateTokenRequest{RequestID: rid("tb"), ActorID: b.ActorID,
		ConsumerID: cb.ConsumerID, Scopes: []domain.Scope{domain.ScopeMessageRead, domain.ScopeReceiptWrite}})
	must(err, "create token B")
	w.tokenA, w.tokenB = ta.Token, tb.Token
	w.producer = client.New(baseURL, w.tokenA)
	w.faults = &faultRT{base: http.DefaultTransport}
	w.unreliableClient = &http.Client{Transport: w.faults}
	return w
}

// faultRT fails the next acknowledgement either before it reaches the service or after the service
// applied it (the response is lost), when armed.
type faultRT struct {
	base  http.RoundTripper
	mu    sync.Mutex
	armed string // "", "before" or "after"
	fired bool
}

func (f *faultRT) arm(mode string) {
	f.mu.Lock()
	f.armed, f.fired = mode, false
	f.mu.Unlock()
}

func (f *faultRT) RoundTrip(r *http.Request) (*http.Response, error) {
	f.mu.Lock()
	mode := ""
	if r.URL.Path == "/v0/inbox/ack" && f.armed != "" {
		mode, f.armed, f.fired = f.armed, "", true
	}
	f.mu.Unlock()
	switch mode {
	case "before":
		return nil, errCrash
	case "after":
		resp, err := f.base.RoundTrip(r)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		return nil, errCrash
	}
	return f.base.RoundTrip(r)
}

// crash points: "" is none, "rt:*" are transport faults, the rest are the queue's step boundaries.
var (
	fetchCrashes = []string{"", "fetch.persist", "fetch.persisted", "rt:before", "rt:after", "received.acked"}
	markCrashes  = []string{"", "mark.persist", "mark.persisted", "rt:before", "rt:after", "processed.acked", "received.acked"}
)

// app is the simulated client process: a queue over an unreliable connection, restarted after every crash
// from the same file, plus the model of what the application has seen.
type app struct {
	w     *world
	path  string
	q     *Queue
	armed string
	fired bool

	sent        map[string]bool // message IDs A sent to B
	delivered   map[string]int  // item_id → times handed to the application
	redeliver   map[string]int  // item_id → MarkProcessed calls that crashed before their local commit
	processed   map[string]bool // item_id → processed locally (durably)
	resourceOf  map[string]string
	crashes     int
	viewChanges int
}

func (a *app) open(t *rapid.T) {
	api := client.New(a.w.producer.BaseURL(), a.w.tokenB, client.WithHTTPClient(a.w.unreliableClient))
	q, err := Open(a.path, api, a.w.consumerB, WithAckBatch(3))
	if err != nil {
		t.Fatalf("reopening the queue: %v", err)
	}
	q.crash = func(point string) error {
		if a.armed == point {
			a.armed, a.fired = "", true
			return errCrash
		}
		return nil
	}
	a.q = q
}

// arm prepares a crash at point (or none).
func (a *app) arm(point string) {
	a.fired = false
	a.armed = ""
	a.w.faults.arm("")
	switch {
	case point == "":
	case point == "rt:before" || point == "rt:after":
		a.w.faults.arm(point[3:])
	default:
		a.armed = point
	}
}

// settle ends an operation: when a crash fired, the process dies and restarts from the same file.
// It reports whether a crash fired.
func (a *app) settle(t *rapid.T, op string, err error) bool {
	a.w.faults.mu.Lock()
	rtFired := a.w.faults.fired
	a.w.faults.armed, a.w.faults.fired = "", false
	a.w.faults.mu.Unlock()
	fired := a.fired || rtFired
	a.armed, a.fired = "", false
	if !fired {
		if err != nil {
			t.Fatalf("%s failed without an injected fault: %v", op, err)
		}
		return false
	}
	if err == nil {
		t.Fatalf("%s: an injected crash fired but the operation reported success", op)
	}
	if !errors.Is(err, errCrash) {
		t.Fatalf("%s: unexpected error after injected crash: %v", op, err)
	}
	a.crashes++
	if cerr := a.q.Close(); cerr != nil {
		t.Fatalf("closing after crash: %v", cerr)
	}
	a.open(t)
	return true
}

func (a *app) send(t *rapid.T, n int) {
	for range n {
		res, err := a.w.producer.Send(context.Background(), domain.SendRequest{RequestID: client.NewRequestID(),
			RecipientIDs: []string{a.w.actorB}, Subject: "p17", Body: &domain.MessageBody{Text: "payload"}})
		if err != nil {
			t.Fatalf("A send: %v", err)
		}
		a.sent[res.MessageID] = true
	}
}

func (a *app) fetch(t *rapid.T, limit int, crashAt string) {
	a.arm(crashAt)
	res, err := a.q.Fetch(context.Background(), limit)
	a.settle(t, "Fetch", err)
	for _, it := range res.New {
		if a.processed[it.ItemID] {
			t.Fatalf("Fetch returned processed item %s as new", it.ItemID)
		}
		a.resourceOf[it.ItemID] = it.ResourceID
	}
}

// process hands the first k pending items to the application, then marks them processed.
func (a *app) process(t *rapid.T, k int, crashAt string) {
	pending, err := a.q.Pending()
	if err != nil {
		t.Fatalf("Pending: %v", err)
	}
	k = min(k, len(pending))
	if k == 0 {
		return
	}
	var ids []string
	for _, it := range pending[:k] {
		a.delivered[it.ItemID]++
		a.resourceOf[it.ItemID] = it.ResourceID
		if a.delivered[it.ItemID] > 1+a.redeliver[it.ItemID] {
			t.Fatalf("item %s delivered %d times with only %d crashed MarkProcessed calls: reprocessed", it.ItemID,
				a.delivered[it.ItemID], a.redeliver[it.ItemID])
		}
		ids = append(ids, it.ItemID)
	}
	a.arm(crashAt)
	err = a.q.MarkProcessed(context.Background(), ids)
	crashed := a.settle(t, "MarkProcessed", err)
	if crashed && crashAt == "mark.persist" {
		for _, id := range ids {
			a.redeliver[id]++ // the local commit rolled back: the item is still pending
		}
		return
	}
	for _, id := range ids {
		a.processed[id] = true
	}
}

func (a *app) checkInvariants(t *rapid.T) {
	pending, err := a.q.Pending()
	if err != nil {
		t.Fatalf("Pending: %v", err)
	}
	seen := map[string]bool{}
	for _, it := range pending {
		if seen[it.ItemID] {
			t.Fatalf("item %s pending twice", it.ItemID)
		}
		seen[it.ItemID] = true
		if a.processed[it.ItemID] {
			t.Fatalf("item %s is pending again after it was processed", it.ItemID)
		}
		if it.ItemType != domain.ItemMessage || !a.sent[it.ResourceID] {
			t.Fatalf("pending item %s is not a message A sent: %+v", it.ItemID, it)
		}
	}
}

// drain runs the application without faults until the queue is empty and the service has nothing more.
func (a *app) drain(t *rapid.T) {
	for round := 0; ; round++ {
		if round > 1000 {
			t.Fatalf("the queue does not drain")
		}
		res, err := a.q.Fetch(context.Background(), 7)
		if err != nil {
			t.Fatalf("drain Fetch: %v", err)
		}
		pending, err := a.q.Pending()
		if err != nil {
			t.Fatalf("drain Pending: %v", err)
		}
		if len(pending) == 0 && !res.HasMore && len(res.New) == 0 {
			return
		}
		a.process(t, len(pending), "")
	}
}

// TestP17ClientDurableQueue is property P17: a client that persists a page before checkpointing loses
// nothing and re-processes nothing across crashes at any point. A simulated client process fetches and
// processes while A keeps sending; it crashes before or after its local commits and before or after its
// acknowledgements reach the service (response lost), and restarts from the same queue file. The
// consumer's view also changes now and then, which makes the service reject the cursor and the queue
// resynchronize from the start, so de-duplication by item_id is exercised. At the end every message A
// sent was handed to the application, each exactly once plus one more time per MarkProcessed that crashed
// before its local commit; the service has `processed` for every item and the final checkpoint.
func TestP17ClientDurableQueue(t *testing.T) {
	baseURL := startServer(t)
	dir := t.TempDir()
	var runs atomic.Int64
	rapid.Check(t, func(t *rapid.T) {
		w := newWorld(t, baseURL)
		a := &app{w: w, path: filepath.Join(dir, fmt.Sprintf("run-%d", runs.Add(1)), "b.queue"),
			sent: map[string]bool{}, delivered: map[string]int{}, redeliver: map[string]int{},
			processed: map[string]bool{}, resourceOf: map[string]string{}}
		a.open(t)
		defer func() { _ = a.q.Close() }()

		t.Repeat(map[string]func(*rapid.T){
			"send": func(t *rapid.T) { a.send(t, rapid.IntRange(1, 4).Draw(t, "messages")) },
			"fetch": func(t *rapid.T) {
				a.fetch(t, rapid.IntRange(1, 5).Draw(t, "limit"), rapid.SampledFrom(fetchCrashes).Draw(t, "crash"))
			},
			"process": func(t *rapid.T) {
				a.process(t, rapid.IntRange(1, 6).Draw(t, "take"), rapid.SampledFrom(markCrashes).Draw(t, "crash"))
			},
			"restart": func(t *rapid.T) {
				if err := a.q.Close(); err != nil {
					t.Fatalf("Close: %v", err)
				}
				a.open(t)
			},
			"view change": func(t *rapid.T) {
				// Bumps view_revision: the stored cursor and any owed checkpoint become CURSOR_SCOPE_CHANGED. The
				// filter alternates between none and every item type, two filters that hide nothing (a PATCH
				// that changes nothing would keep the view revision).
				filter := &domain.Filter{}
				if a.viewChanges%2 == 0 {
					filter.ItemTypes = []string{string(domain.ItemMessage), string(domain.ItemMemoryRevision), string(domain.ItemReceipt)}
				}
				_, err := w.admin.UpdateConsumer(context.Background(), w.spaceID, w.consumerB, domain.UpdateConsumerRequest{Filter: filter})
				if err != nil {
					t.Fatalf("UpdateConsumer: %v", err)
				}
				a.viewChanges++
			},
			"": a.checkInvariants,
		})

		a.drain(t)
		a.checkInvariants(t)

		// Nothing lost: every message A sent was processed, through exactly one item.
		byResource := map[string]string{}
		for id := range a.processed {
			r := a.resourceOf[id]
			if other, dup := byResource[r]; dup {
				t.Fatalf("message %s processed through two items %s and %s", r, other, id)
			}
			byResource[r] = id
		}
		for m := range a.sent {
			if _, ok := byResource[m]; !ok {
				t.Fatalf("message %s was never processed (lost); processed %d of %d", m, len(byResource), len(a.sent))
			}
		}
		if len(byResource) != len(a.sent) {
			t.Fatalf("processed %d messages, A sent %d", len(byResource), len(a.sent))
		}
		// Nothing re-processed: exactly one delivery, plus one per MarkProcessed that crashed before its commit.
		for id := range a.processed {
			if want := 1 + a.redeliver[id]; a.delivered[id] != want {
				t.Fatalf("item %s delivered %d times, want %d", id, a.delivered[id], want)
			}
		}
		// The service got everything: no acknowledgement still owed, every item already processed there,
		// and the stored checkpoint is the queue's cursor.
		st, err := a.q.State()
		if err != nil {
			t.Fatalf("State: %v", err)
		}
		if st.OwedReceived != 0 || st.OwedProcessed != 0 || st.OwedCheckpoint || st.Pending != 0 {
			t.Fatalf("queue not settled after drain: %+v", st)
		}
		b := client.New(baseURL, w.tokenB)
		var entries []domain.AckEntry
		ids := make([]string, 0, len(a.processed))
		for id := range a.processed {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		for _, id := range ids {
			entries = append(entries, domain.AckEntry{ItemID: id, Stage: domain.StageProcessed})
		}
		for len(entries) > 0 {
			n := min(len(entries), 100)
			res, err := b.Ack(context.Background(), domain.AckRequest{RequestID: client.NewRequestID(), ConsumerID: w.consumerB, Items: entries[:n]})
			if err != nil {
				t.Fatalf("verification ack: %v", err)
			}
			for _, r := range res.Receipts {
				if r.Changed || r.Stage != domain.StageProcessed {
					t.Fatalf("the service did not have processed for %s: %+v", r.ItemID, r)
				}
			}
			entries = entries[n:]
		}
		page, err := b.ReadInbox(context.Background(), domain.ReadRequest{ConsumerID: w.consumerB, Limit: 1})
		if err != nil {
			t.Fatalf("verification read: %v", err)
		}
		if st.Cursor == nil || page.CheckpointCursor == nil || *page.CheckpointCursor != *st.Cursor {
			t.Fatalf("service checkpoint %v, queue cursor %v", page.CheckpointCursor, st.Cursor)
		}
		t.Logf("sent %d, crashes %d, view changes %d", len(a.sent), a.crashes, a.viewChanges)
	})
}
