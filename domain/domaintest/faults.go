package domaintest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/store/faulty"
)

// RunFailureMatrix runs the failure matrix of SUPPLEMENT §7.4 against a storage adapter, one named subtest
// per row (and per way of reaching the row's fault point), plus the properties P03 (atomic publish at every
// fault point) and P04 (referential integrity, no partial publish) of SUPPLEMENT §15.
//
// message.send has two paths (domain.Config.InlineBodyMax): a small body is committed inside the publish
// transaction, so reservation and commit are one transaction; a larger body takes the full RFC §7.2 path —
// reserve, write the body object, commit. Each row runs on every path where its fault point exists; on the
// inline path rows 2 and 3 instead check that the point does not exist (no body write, no separate
// reservation).
//
// Faults are injected by wrappers around the adapter's port.ItemStore and port.BlobStore: an operation of
// message.send is failed before it reaches storage, applied and then reported as failed (the response is
// lost), refused with a condition failure, or preceded by a hook (a revocation, a grant change, a concurrent
// retry). After the fault each subtest checks the submission state through Service.Status and what readers
// can see, then retries with the same request_id and checks the outcome and the "must never happen" column.
// The clock moves between the fault and the retry, so a retry that re-commits instead of replaying shows
// another committed_at.
//
// nb is called once per row subtest and once per property (once per check with BackendPerCheck), and must return an empty backend; a property
// gives each of its checks a new space (and a new service) on its backend. Property failures print the rapid
// seed that reproduces them. Of opts only BackendPerCheck applies: the property checks of P03 and P04 then
// run each on a fresh backend.
func RunFailureMatrix(t *testing.T, nb NewBackend, opts ...PropOption) {
	cfg := withOptions(propConfig{}, opts)
	t.Run("1_before_reservation_stored", func(t *testing.T) { t.Parallel(); mxPerPath(t, nb, mxRow1) })
	t.Run("2_after_reserve_before_body", func(t *testing.T) { t.Parallel(); mxPerPath(t, nb, mxRow2) })
	t.Run("3_after_body_before_commit", func(t *testing.T) { t.Parallel(); mxPerPath(t, nb, mxRow3) })
	t.Run("4_commit_transaction_fails", func(t *testing.T) { t.Parallel(); mxPerPath(t, nb, mxRow4) })
	t.Run("5_after_commit_response_lost", func(t *testing.T) { t.Parallel(); mxPerPath(t, nb, mxRow5) })
	t.Run("6_credential_revoked_between_reserve_and_commit", func(t *testing.T) { t.Parallel(); mxPerPath(t, nb, mxRow6) })
	t.Run("7_blob_stored_seal_metadata_lost", func(t *testing.T) { t.Parallel(); mxRow7(t, nb) })
	t.Run("8_process_killed_mid_load_embedded", func(t *testing.T) {
		// Row 8 needs a real process killed (SIGKILL) under load and a restart on the same data directory; an
		// in-process test cannot lose its own process. It is covered with child processes by
		// store/pebble TestKilledMidLoad (the store) and e2e TestKillDuringConcurrentSends (the server).
		t.Skip("process kill needs a real process: see store/pebble TestKilledMidLoad and e2e TestKillDuringConcurrentSends")
	})
	t.Run("P03_atomic_publish_at_every_fault_point", func(t *testing.T) { t.Parallel(); mxP03(t, nb, cfg) })
	t.Run("P04_referential_integrity", func(t *testing.T) { t.Parallel(); mxP04(t, nb, cfg) })
}

// ---------------------------------------------------------------------------------------------------------
// Body paths

// mxInlineMax is the Config.InlineBodyMax of every environment of the matrix: bodies up to it are committed
// inline, larger ones go through the blob store.
const mxInlineMax = 256

// mxPath is one way a message body travels.
type mxPath struct {
	name   string
	inline bool
}

var mxPaths = []mxPath{{name: "blob_body", inline: false}, {name: "inline_body", inline: true}}

// text returns a body text of the path (well under or well over mxInlineMax in its JSON form).
func (p mxPath) text(s string) string {
	if p.inline {
		return s
	}
	return s + " " + strings.Repeat("long body to be written as an object first. ", 10)
}

// mxPerPath runs row once per body path.
func mxPerPath(t *testing.T, nb NewBackend, row func(t *testing.T, nb NewBackend, p mxPath)) {
	for _, p := range mxPaths {
		t.Run(p.name, func(t *testing.T) { row(t, nb, p) })
	}
}

// ---------------------------------------------------------------------------------------------------------
// Fault injection

// mxPhase is a storage write of message.send where a fault can be injected, in the order of RFC §7.2.
type mxPhase int

const (
	mxOther   mxPhase = iota // any other write
	mxReserve                // the transaction that stores the reservation alone (state reserved; blob path)
	mxBody                   // a blob put: the message body of a send (blob path), the content of an upload
	mxCommit                 // the transaction that allocates visible_seq and publishes (on the inline path it also stores the submission)
	mxSeal                   // the blob.commit transaction that seals an uploaded blob
)

func (p mxPhase) String() string { return [...]string{"other", "reserve", "body", "commit", "seal"}[p] }

// mxMode says what an injected fault does to the write.
type mxMode int

const (
	mxProceed    mxMode = iota // run the hook, then apply the write normally
	mxFailBefore               // fail with a transient error; nothing reaches storage
	mxFailAfter                // apply the write, then fail with a transient error (response lost)
	mxCondition                // refuse the transaction with a condition failure on op condOp(ops)
)

// mxFault is one armed, one-shot fault.
type mxFault struct {
	at   mxPhase
	mode mxMode
	// hook, when set, runs once right before the write would reach storage (after the fault fired, so the
	// hook's own writes are not faulted).
	hook func()
	// condOp picks the failing op for mxCondition.
	condOp func(ops []port.Op) int
}

// errMxInjected is the transient error of an injected fault.
var errMxInjected = fmt.Errorf("failure matrix: injected fault: %w", port.ErrUnavailable)

// mxInjector holds the armed fault and counts the writes it sees.
type mxInjector struct {
	mu     sync.Mutex
	armed  *mxFault
	fired  bool
	seen   map[mxPhase]int // writes per phase since the last arm or reset
	writes int             // all commits and blob puts since the last arm or reset
}

// arm sets f as the next fault and resets the counters.
func (in *mxInjector) arm(f mxFault) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.armed, in.fired, in.seen, in.writes = &f, false, map[mxPhase]int{}, 0
}

// reset disarms any fault and resets the counters.
func (in *mxInjector) reset() {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.armed, in.fired, in.seen, in.writes = nil, false, map[mxPhase]int{}, 0
}

// disarm removes the armed fault if it did not fire and reports whether it fired.
func (in *mxInjector) disarm() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.armed = nil
	return in.fired
}

// counts returns the writes seen at p and in total since the last arm or reset.
func (in *mxInjector) counts(p mxPhase) (atPhase, total int) {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.seen[p], in.writes
}

// take records a write at p and returns the armed fault if it is for p (disarming it).
func (in *mxInjector) take(p mxPhase) *mxFault {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.seen == nil {
		in.seen = map[mxPhase]int{}
	}
	in.seen[p]++
	in.writes++
	if in.armed == nil || in.armed.at != p {
		return nil
	}
	f := in.armed
	in.armed, in.fired = nil, true
	return f
}

// putBack re-arms a response-loss fault whose write failed on its own: nothing was applied, so there was no
// response to lose, and the fault waits for the next attempt.
func (in *mxInjector) putBack(f *mxFault) {
	in.mu.Lock()
	defer in.mu.Unlock()
	f.hook = nil // it ran already
	in.armed, in.fired = f, false
}

// commit injects the armed fault into the matching transaction (store/faulty's commit interception).
// inner is the wrapped store, read to classify counter transactions.
func (in *mxInjector) commit(inner port.ItemStore) func(ctx context.Context, tx port.Tx, next faulty.CommitStep) (uint64, error) {
	return func(ctx context.Context, tx port.Tx, next faulty.CommitStep) (uint64, error) {
		ph, ops := mxClassify(ctx, inner, tx)
		f := in.take(ph)
		if f == nil {
			return next(ctx, tx)
		}
		if f.hook != nil {
			f.hook()
		}
		switch f.mode {
		case mxFailBefore:
			return 0, fmt.Errorf("%s transaction: %w", ph, errMxInjected)
		case mxFailAfter:
			if _, err := next(ctx, tx); err != nil {
				in.putBack(f)
				return 0, err
			}
			return 0, fmt.Errorf("%s transaction applied, response lost: %w", ph, errMxInjected)
		case mxCondition:
			i := f.condOp(ops)
			return 0, &port.ConditionFailedError{Index: i, Key: ops[i].Item.Key}
		default:
			return next(ctx, tx)
		}
	}
}

// classify finds the phase of a transaction from its first op, which for message.send is the submission
// record (a domain.Submission whose state says which step of RFC §7.2 this is). Build is a pure function of
// its argument (port.Tx), so calling it here to look at the ops is harmless; for a counter transaction it is
// called with the value the allocation would return now.
func mxClassify(ctx context.Context, inner port.ItemStore, tx port.Tx) (mxPhase, []port.Op) {
	if tx.Build == nil {
		return mxOther, nil
	}
	var first uint64
	ctr := tx.Counter
	if tx.Seq != nil {
		ctr = &tx.Seq.Counter
	}
	if ctr != nil {
		first = 1
		if it, found, err := inner.Get(ctx, *ctr); err == nil && found {
			if n, err := strconv.ParseUint(it.Attr(port.CounterAttr), 10, 64); err == nil {
				first = n + 1
			}
		}
	}
	ops, err := tx.Build(first)
	if err != nil || len(ops) == 0 || ops[0].Kind != port.OpPut {
		return mxOther, ops
	}
	var sub domain.Submission
	if json.Unmarshal(ops[0].Item.Data, &sub) != nil {
		return mxOther, ops
	}
	if sub.Operation == domain.OpBlobCommit && tx.Count == 0 && sub.State == domain.StateCommitted { // a seal takes no value
		return mxSeal, ops
	}
	if sub.Operation != domain.OpMessageSend {
		return mxOther, ops
	}
	switch {
	case ctr == nil && sub.State == domain.StateReserved:
		return mxReserve, ops
	case ctr != nil && sub.State == domain.StateCommitted:
		return mxCommit, ops
	}
	return mxOther, ops
}

// put injects the armed fault into a blob put: every Put is mxBody (a message body or an upload's content).
func (in *mxInjector) put(ctx context.Context, key string, size int64, sha256 string, r io.Reader, next faulty.PutStep) (port.BlobInfo, error) {
	f := in.take(mxBody)
	if f == nil {
		return next(ctx, key, size, sha256, r)
	}
	if f.hook != nil {
		f.hook()
	}
	switch f.mode {
	case mxFailBefore:
		return port.BlobInfo{}, fmt.Errorf("body put: %w", errMxInjected)
	case mxFailAfter:
		if _, err := next(ctx, key, size, sha256, r); err != nil {
			in.putBack(f)
			return port.BlobInfo{}, err
		}
		return port.BlobInfo{}, fmt.Errorf("body put stored, response lost: %w", errMxInjected)
	default:
		return next(ctx, key, size, sha256, r)
	}
}

// mxCondOnRecord picks the put of the message record: a condition failure there ("the message already
// exists") is not one the domain expects, so it must neither be taken for success nor become permanent.
func mxCondOnRecord(ops []port.Op) int {
	for i, op := range ops {
		var m domain.Message
		if op.Kind == port.OpPut && json.Unmarshal(op.Item.Data, &m) == nil && m.MessageID != "" && m.EnvelopeVersion != 0 {
			return i
		}
	}
	panic("failure matrix: the send commit has no message record")
}

// mxStateBefore is the submission state just before the write at ph ("" for none).
func mxStateBefore(ph mxPhase, inline bool) domain.SubmissionState {
	switch {
	case ph == mxBody:
		return domain.StateReserved
	case ph == mxCommit && !inline:
		return domain.StatePrepared
	default:
		return ""
	}
}

// mxStateAfter is the submission state just after the write at ph.
func mxStateAfter(ph mxPhase) domain.SubmissionState {
	switch ph {
	case mxReserve:
		return domain.StateReserved
	case mxBody:
		return domain.StatePrepared
	default:
		return domain.StateCommitted
	}
}

// ---------------------------------------------------------------------------------------------------------
// Environment

// mxEnv is one space prepared for the matrix: two senders, two recipients and an observer with a space_log
// consumer, on a backend wrapped by the fault injector.
type mxEnv struct {
	t        testing.TB
	f        *Fixture
	inj      *mxInjector
	ctx      context.Context
	space    string
	senders  []Party
	rcpts    []Party
	observer Party
}

// mxBackend is a backend wrapped by a fault injector.
type mxBackend struct {
	b   Backend
	inj *mxInjector
}

// mxWrap makes a backend with nb and wraps it.
func mxWrap(t testing.TB, nb NewBackend) mxBackend {
	inj := &mxInjector{}
	var items *faulty.ItemStore
	var blobs *faulty.BlobStore
	b := Faulty(nb, &items, &blobs)(t)
	items.SetInterceptCommit(inj.commit(items.Inner()))
	blobs.SetInterceptPut(inj.put)
	return mxBackend{b: b, inj: inj}
}

// mxBackends returns the backend of each check of a matrix property: one for all checks (each check makes a
// new space on it) or, with BackendPerCheck, a fresh one per check, released when the check ends.
func mxBackends(t *testing.T, nb NewBackend, cfg propConfig) func(rt *rapid.T) mxBackend {
	if cfg.perCheck {
		return func(rt *rapid.T) mxBackend { return mxWrap(mxRapidTB{TB: t, rt: rt}, nb) }
	}
	mb := mxWrap(t, nb)
	return func(*rapid.T) mxBackend { return mb }
}

// mxSpaces numbers the spaces the matrix creates, so that environments sharing one backend never share the
// request ID of a space creation.
var mxSpaces atomic.Int64

// mxNewEnv makes an environment on a fresh backend.
func mxNewEnv(t testing.TB, nb NewBackend, cfg func(*domain.Config)) *mxEnv {
	t.Helper()
	return mxNewEnvOn(t, mxWrap(t, nb), cfg)
}

// mxNewEnvOn makes an environment in a new space of mb, with a service of its own.
func mxNewEnvOn(t testing.TB, mb mxBackend, cfg func(*domain.Config)) *mxEnv {
	t.Helper()
	mb.inj.reset()
	f := New(t, func(testing.TB) Backend { return mb.b }, func(c *domain.Config) {
		c.InlineBodyMax = mxInlineMax
		if cfg != nil {
			cfg(c)
		}
	})
	e := &mxEnv{t: t, f: f, inj: mb.inj, ctx: context.Background()}
	e.space = Must[domain.SpaceResult](t)(f.Svc.CreateSpace(e.ctx, domain.CreateSpaceRequest{
		RequestID: fmt.Sprintf("matrix-space-%d", mxSpaces.Add(1))})).SpaceID
	sp := e.space
	e.senders = []Party{f.Party(sp), f.Party(sp)}
	e.rcpts = []Party{f.Party(sp), f.Party(sp)}
	obs := f.Actor(sp)
	Must[domain.GrantResult](t)(f.Svc.CreateGrant(e.ctx, sp, domain.CreateGrantRequest{
		RequestID: f.RID("grant"), ActorID: obs, Permission: domain.PermSpaceObserve}))
	con := f.Consumer(sp, obs, domain.ViewSpaceLog, nil)
	tok, id := f.Token(sp, obs, "")
	e.observer = Party{ActorID: obs, ConsumerID: con, Token: tok, TokenID: id, P: f.Principal(tok)}
	mb.inj.reset()
	return e
}

// request builds a send request to the given recipients.
func (e *mxEnv) request(rid, text string, to ...Party) domain.SendRequest {
	ids := make([]string, len(to))
	for i, p := range to {
		ids[i] = p.ActorID
	}
	return domain.SendRequest{RequestID: rid, RecipientIDs: ids, Subject: "matrix " + rid, Body: &domain.MessageBody{Text: text}}
}

func (e *mxEnv) send(p *domain.Principal, req domain.SendRequest) (domain.SendResult, error) {
	return e.f.Svc.SendMessage(e.ctx, p, req)
}

// mustSend sends and fails the test on error.
func (e *mxEnv) mustSend(p *domain.Principal, req domain.SendRequest, what string) domain.SendResult {
	e.t.Helper()
	res, err := e.send(p, req)
	if err != nil {
		e.t.Fatalf("%s: %v", what, err)
	}
	return res
}

// grantChange gives actor a grant, which moves its authorization generation without taking anything away.
func (e *mxEnv) grantChange(actor string) {
	e.t.Helper()
	Must[domain.GrantResult](e.t)(e.f.Svc.CreateGrant(e.ctx, e.space, domain.CreateGrantRequest{
		RequestID: e.f.RID("grant"), ActorID: actor, Permission: domain.PermSpaceObserve}))
}

// state returns the state of submission rid as its producer sees it ("" for NOT_FOUND) and its status.
func (e *mxEnv) state(p *domain.Principal, rid string) (domain.SubmissionState, domain.StatusResult) {
	e.t.Helper()
	st, err := e.f.Svc.Status(e.ctx, p, domain.OpMessageSend, rid)
	if mxCodeOf(err) == domain.CodeNotFound {
		return "", st
	}
	if err != nil {
		e.t.Fatalf("status of %s: %v", rid, err)
	}
	if st.ResourceID == "" {
		e.t.Fatalf("status of %s: %s without resource_id", rid, st.SubmissionState)
	}
	return st.SubmissionState, st
}

// wantState checks the state of submission rid ("" for NOT_FOUND) and returns its status.
func (e *mxEnv) wantState(p *domain.Principal, rid string, want domain.SubmissionState) domain.StatusResult {
	e.t.Helper()
	got, st := e.state(p, rid)
	if got != want {
		e.t.Fatalf("status of %s: %q, want %q", rid, got, want)
	}
	return st
}

// mxCodeOf is domain.CodeOf that also accepts nil (no code).
func mxCodeOf(err error) domain.Code {
	if err == nil {
		return ""
	}
	return domain.CodeOf(err)
}

// mxWantCode checks that err carries the public code want.
func mxWantCode(t testing.TB, err error, want domain.Code, what string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: succeeded, want %s", what, want)
	}
	if got := domain.CodeOf(err); got != want {
		t.Fatalf("%s: %s (%v), want %s", what, got, err, want)
	}
}

// mxSnapshot is what readers see of the space's messages: the space feed (the observer's space_log
// consumer, in order) and every party's inbox.
type mxSnapshot struct {
	feed  []domain.FeedItem
	inbox map[string][]domain.FeedItem // actor → inbox items
}

func (e *mxEnv) snapshot() mxSnapshot {
	e.t.Helper()
	s := mxSnapshot{inbox: map[string][]domain.FeedItem{}}
	s.feed, _ = e.f.ReadAll(e.observer.P, e.observer.ConsumerID, nil, 200)
	for _, p := range append(slices.Clone(e.senders), e.rcpts...) {
		s.inbox[p.ActorID], _ = e.f.ReadAll(p.P, p.ConsumerID, nil, 200)
	}
	return s
}

// feedLen is the number of items in the space feed.
func (e *mxEnv) feedLen() int {
	e.t.Helper()
	items, _ := e.f.ReadAll(e.observer.P, e.observer.ConsumerID, nil, 200)
	return len(items)
}

func mxCount(items []domain.FeedItem, resourceID string) int {
	n := 0
	for _, it := range items {
		if it.ResourceID == resourceID {
			n++
		}
	}
	return n
}

// record reads message msgID as the observer, who may read every message of the space. A record whose body
// cannot be read fails the test.
func (e *mxEnv) record(msgID string) (domain.Message, bool) {
	e.t.Helper()
	m, err := e.f.Svc.GetMessage(e.ctx, e.observer.P, msgID)
	if mxCodeOf(err) == domain.CodeNotFound {
		return m, false
	}
	if err != nil {
		e.t.Fatalf("message.get %s: %v", msgID, err)
	}
	return m, true
}

// wantUnpublished checks that the space feed holds exactly feedLen items, that no inbox holds more than the
// feed, and, when msgID is known, that nothing of it is visible: no record, no feed item, no inbox entry.
// Any part present is half a commit (or a commit that must not have happened).
func (e *mxEnv) wantUnpublished(msgID string, feedLen int, what string) {
	e.t.Helper()
	s := e.snapshot()
	if len(s.feed) != feedLen {
		e.t.Fatalf("%s: %d space feed items, want %d", what, len(s.feed), feedLen)
	}
	inbox := 0
	for _, items := range s.inbox {
		if len(items) > feedLen {
			e.t.Fatalf("%s: an inbox has %d items, the space feed %d", what, len(items), feedLen)
		}
		inbox += mxCount(items, msgID)
	}
	if msgID == "" {
		return
	}
	if _, rec := e.record(msgID); rec || mxCount(s.feed, msgID) != 0 || inbox != 0 {
		e.t.Fatalf("%s: message %s must be invisible, found record=%v feed items=%d inbox entries=%d",
			what, msgID, rec, mxCount(s.feed, msgID), inbox)
	}
}

// wantPublishedOnce checks that submission req of producer is committed with result want, and that the
// message is published exactly once: its record (body, visible_seq, committed_at, thread), one space feed
// item, one inbox entry for each recipient and none for anybody else.
func (e *mxEnv) wantPublishedOnce(producer Party, req domain.SendRequest, want domain.SendResult) {
	e.t.Helper()
	e.wantPublishedOnceIn(e.snapshot(), producer, req, want)
}

func (e *mxEnv) wantPublishedOnceIn(s mxSnapshot, producer Party, req domain.SendRequest, want domain.SendResult) {
	e.t.Helper()
	rid, id := req.RequestID, want.MessageID
	if want.SubmissionState != domain.StateCommitted || want.ResourceID == "" || want.ResourceID != want.MessageID || want.VisibleSeq == "" {
		e.t.Fatalf("%s: result %+v is not a committed message", rid, want)
	}
	st := e.wantState(producer.P, rid, domain.StateCommitted)
	var stored domain.SendResult
	if err := json.Unmarshal(st.Result, &stored); err != nil {
		e.t.Fatalf("%s: stored result: %v", rid, err)
	}
	if st.ResourceID != id || !mxSameResult(stored, want) {
		e.t.Fatalf("%s: status has resource %s result %+v, the caller got %+v", rid, st.ResourceID, stored, want)
	}
	m, ok := e.record(id)
	if !ok {
		e.t.Fatalf("%s: committed but message %s is not readable", rid, id)
	}
	if m.Body.Text != req.Body.Text || m.VisibleSeq != want.VisibleSeq || !m.CommittedAt.Equal(want.CommittedAt) ||
		m.ThreadID != want.ThreadID || m.ProducerID != producer.ActorID {
		e.t.Fatalf("%s: message %+v does not match result %+v / request text %q", rid, m, want, req.Body.Text)
	}
	if !slices.Equal(m.AttachmentIDs, req.AttachmentIDs) && len(m.AttachmentIDs)+len(req.AttachmentIDs) != 0 {
		e.t.Fatalf("%s: message references attachments %v, the request %v", rid, m.AttachmentIDs, req.AttachmentIDs)
	}
	if n := mxCount(s.feed, id); n != 1 {
		e.t.Fatalf("%s: %d space feed items for message %s, want exactly 1", rid, n, id)
	}
	for _, it := range s.feed {
		if it.ResourceID != id {
			continue
		}
		var d domain.MessageItemData
		if err := json.Unmarshal(it.Data, &d); err != nil || d.AttachmentCount != len(req.AttachmentIDs) {
			e.t.Fatalf("%s: feed item data %s, want attachment_count %d", rid, it.Data, len(req.AttachmentIDs))
		}
		if it.VisibleSeq != want.VisibleSeq || !it.CommittedAt.Equal(want.CommittedAt) {
			e.t.Fatalf("%s: feed item %+v does not match result %+v", rid, it, want)
		}
	}
	for actor, items := range s.inbox {
		want := 0
		if slices.Contains(req.RecipientIDs, actor) {
			want = 1
		}
		if n := mxCount(items, id); n != want {
			e.t.Fatalf("%s: %d inbox entries of %s for message %s, want %d", rid, n, actor, id, want)
		}
	}
}

// mxSameResult compares the stable parts of two send results.
func mxSameResult(a, b domain.SendResult) bool {
	return a.SubmissionState == b.SubmissionState && a.ResourceID == b.ResourceID && a.MessageID == b.MessageID &&
		a.ThreadID == b.ThreadID && a.CommittedAt.Equal(b.CommittedAt) && a.VisibleSeq == b.VisibleSeq
}

// fired checks that the armed fault fired during the last call.
func (e *mxEnv) fired(what string) {
	e.t.Helper()
	if !e.inj.disarm() {
		e.t.Fatalf("%s: the injected fault never fired (the send did not reach its fault point)", what)
	}
}

// wantPath checks that the last send took path p: a body write on the blob path, none inline.
func (e *mxEnv) wantPath(p mxPath) {
	e.t.Helper()
	puts, _ := e.inj.counts(mxBody)
	if p.inline && puts != 0 {
		e.t.Fatalf("inline body: %d body writes, want 0", puts)
	}
	if !p.inline && puts == 0 {
		e.t.Fatalf("blob body: no body write")
	}
}

// later moves the clock so that a retry that commits again instead of replaying shows another committed_at.
func (e *mxEnv) later() { e.f.Clock.Advance(time.Minute) }

// revokeAtCommit is a fault that revokes a's token when the send reaches its commit.
func (e *mxEnv) revokeAtCommit(a Party) mxFault {
	return mxFault{at: mxCommit, mode: mxProceed, hook: func() {
		Must[domain.TokenResult](e.t)(e.f.Svc.RevokeToken(e.ctx, e.space, a.TokenID))
	}}
}

// retryRevoked retries req of producer a later, after a's credential was revoked: its token no longer
// authenticates, the principal authenticated before the revocation is refused too, and nothing of req is
// published (resourceID: the resource the submission fixed, if any).
func (e *mxEnv) retryRevoked(a Party, req domain.SendRequest, resourceID string) {
	e.t.Helper()
	e.later()
	_, err := e.f.Svc.Authenticate(e.ctx, a.Token)
	mxWantCode(e.t, err, domain.CodeUnauthenticated, "retry with the revoked credential")
	_, err = e.send(a.P, req)
	mxWantCode(e.t, err, domain.CodeUnauthenticated, "retry with the principal authenticated before the revocation")
	e.wantUnpublished(resourceID, 0, "retry under the old authorization")
}

// sendFaulted sends req as p with fault f armed: the send must reach the fault point (fault names it) and
// fail with the code want.
func (e *mxEnv) sendFaulted(p *domain.Principal, req domain.SendRequest, f mxFault, fault string, want domain.Code, what string) {
	e.t.Helper()
	e.inj.arm(f)
	_, err := e.send(p, req)
	e.fired(fault)
	mxWantCode(e.t, err, want, what)
}

// retryCompletes retries req of producer a later: the retry publishes the message once, under the resource
// ID resourceID the failed attempt fixed ("" when it fixed none).
func (e *mxEnv) retryCompletes(a Party, req domain.SendRequest, resourceID string) domain.SendResult {
	e.t.Helper()
	e.later()
	res := e.mustSend(a.P, req, "retry")
	if resourceID != "" && res.ResourceID != resourceID {
		e.t.Fatalf("retry got resource %s, the failed attempt fixed %s: a second resource ID", res.ResourceID, resourceID)
	}
	e.wantPublishedOnce(a, req, res)
	return res
}

// ---------------------------------------------------------------------------------------------------------
// Rows

// mxRow1: the transaction that would store the reservation fails (the reserve transaction on the blob path,
// the one publish transaction inline). Nothing is stored — Status NOT_FOUND, no body written, no sequence
// number used — and the retry is processed normally.
func mxRow1(t *testing.T, nb NewBackend, p mxPath) {
	e := mxNewEnv(t, nb, nil)
	a, r := e.senders[0], e.rcpts[0]
	req := e.request("row1", p.text("before the reservation"), r)
	at := mxReserve
	if p.inline {
		at = mxCommit
	}
	e.sendFaulted(a.P, req, mxFault{at: at, mode: mxFailBefore}, "reservation", domain.CodeStorageUnavailable, "send with the reservation failing")
	if n, _ := e.inj.counts(mxBody); n != 0 {
		t.Fatalf("%d body writes after a failed reservation, want 0", n)
	}
	e.wantState(a.P, req.RequestID, "")
	e.wantUnpublished("", 0, "failed reservation")
	e.later()
	e.inj.reset()
	res := e.mustSend(a.P, req, "retry")
	e.wantPath(p)
	e.wantPublishedOnce(a, req, res)
	if res.VisibleSeq != "1" {
		t.Fatalf("retry got visible_seq %s, want 1: the failed attempt used a sequence number", res.VisibleSeq)
	}
}

// mxRow2: the reservation is stored, the body is not (the body put fails, or the reservation's response is
// lost). State reserved; the retry completes under the reserved resource ID, published once. Inline, the
// point does not exist: the send writes no body and stores no reservation of its own.
func mxRow2(t *testing.T, nb NewBackend, p mxPath) {
	mxBlobPathRow(t, nb, p, "row2", "after reserve", domain.StateReserved, []mxNamedFault{
		{"body_put_fails", mxFault{at: mxBody, mode: mxFailBefore}},
		{"reservation_stored_response_lost", mxFault{at: mxReserve, mode: mxFailAfter}},
	}, nil)
}

// mxNamedFault is a fault of a row and the name of its subtest.
type mxNamedFault struct {
	name string
	f    mxFault
}

// mxBlobPathRow runs a row whose fault points exist on the blob path only (rows 2 and 3; inline, it checks
// that there are none): for each fault, the send fails with STORAGE_UNAVAILABLE and leaves the submission in
// state want, unpublished; check (when not nil) checks what else the row says of that state; the retry
// completes the send under the resource ID the failed attempt fixed, published once.
func mxBlobPathRow(t *testing.T, nb NewBackend, p mxPath, rid, text string, want domain.SubmissionState, faults []mxNamedFault,
	check func(e *mxEnv, st domain.StatusResult)) {
	if p.inline {
		mxNoSeparatePoints(t, nb, p)
		return
	}
	for _, c := range faults {
		t.Run(c.name, func(t *testing.T) {
			e := mxNewEnv(t, nb, nil)
			a := e.senders[0]
			req := e.request(rid, p.text(text), e.rcpts...)
			e.sendFaulted(a.P, req, c.f, c.name, domain.CodeStorageUnavailable, "send with the fault")
			st := e.wantState(a.P, req.RequestID, want)
			if st.ResourceID == "" {
				t.Fatalf("state %s without a resource ID: the failed attempt must have fixed one", want)
			}
			e.wantUnpublished(st.ResourceID, 0, "after the fault")
			if check != nil {
				check(e, st)
			}
			e.retryCompletes(a, req, st.ResourceID)
		})
	}
}

// mxNoSeparatePoints checks that an inline send has no reserve-only transaction and no body write, so rows 2
// and 3 have no fault point on the inline path (a fault armed there never fires).
func mxNoSeparatePoints(t *testing.T, nb NewBackend, p mxPath) {
	for _, at := range []mxPhase{mxReserve, mxBody} {
		e := mxNewEnv(t, nb, nil)
		a := e.senders[0]
		req := e.request("inline-"+at.String(), p.text("inline"), e.rcpts[0])
		e.inj.arm(mxFault{at: at, mode: mxFailBefore})
		res := e.mustSend(a.P, req, "inline send with a fault armed at "+at.String())
		if e.inj.disarm() {
			t.Fatalf("inline send reached a %s write", at)
		}
		e.wantPath(p)
		e.wantPublishedOnce(a, req, res)
	}
}

// mxRow3: the body is written and the commit has not happened (the commit transaction fails, or the body put's
// response is lost). State prepared; the body must not be visible without its feed item; the retry
// completes under the same resource ID.
func mxRow3(t *testing.T, nb NewBackend, p mxPath) {
	mxBlobPathRow(t, nb, p, "row3", "after the body", domain.StatePrepared, []mxNamedFault{
		{"commit_transaction_fails", mxFault{at: mxCommit, mode: mxFailBefore}},
		{"body_stored_response_lost", mxFault{at: mxBody, mode: mxFailAfter}},
	}, func(e *mxEnv, st domain.StatusResult) {
		if n, _ := e.inj.counts(mxBody); n != 1 {
			e.t.Fatalf("%d body writes, want 1 before the fault point", n)
		}
		if _, err := e.f.Svc.GetMessage(e.ctx, e.rcpts[0].P, st.ResourceID); mxCodeOf(err) != domain.CodeNotFound {
			e.t.Fatalf("recipient reads the uncommitted message: %v, want NOT_FOUND", err)
		}
	})
}

// mxRow4: the commit transaction itself fails: for storage, with a condition the domain recovers from (the
// authorization generation moved, or a concurrent retry committed first), with an unexpected condition, and
// with a permanent business error (visible_seq exhausted). The state stays where it was (prepared on the blob
// path, nothing inline) or becomes failed for the permanent error; never half a commit; the retry gets the
// same outcome class.
func mxRow4(t *testing.T, nb NewBackend, p mxPath) {
	before := mxStateBefore(mxCommit, p.inline)

	t.Run("storage_unavailable", func(t *testing.T) {
		e := mxNewEnv(t, nb, nil)
		a := e.senders[0]
		req := e.request("row4", p.text("storage fails at commit"), e.rcpts...)
		e.sendFaulted(a.P, req, mxFault{at: mxCommit, mode: mxFailBefore}, "commit", domain.CodeStorageUnavailable, "send with the commit failing")
		st := e.wantState(a.P, req.RequestID, before)
		e.wantUnpublished(st.ResourceID, 0, "failed commit")
		e.retryCompletes(a, req, st.ResourceID)
	})

	t.Run("condition_generation_changed_rechecked", func(t *testing.T) {
		// A grant change between reserve and commit moves the authorization generation: the commit's
		// generation check fails in storage, the domain re-reads the credential (still valid) and commits.
		e := mxNewEnv(t, nb, nil)
		a := e.senders[0]
		req := e.request("row4g", p.text("generation moved"), e.rcpts[0])
		e.inj.arm(mxFault{at: mxCommit, mode: mxProceed, hook: func() { e.grantChange(a.ActorID) }})
		res, err := e.send(a.P, req)
		e.fired("commit")
		if err != nil {
			t.Fatalf("send across a grant change: %v", err)
		}
		if n, _ := e.inj.counts(mxCommit); n != 2 {
			t.Fatalf("%d commit attempts, want 2 (one refused by the generation check, one after the re-check)", n)
		}
		e.wantPublishedOnce(a, req, res)
		e.later()
		if again := e.mustSend(a.P, req, "retry"); !mxSameResult(again, res) {
			t.Fatalf("retry got %+v, want %+v", again, res)
		}
		e.wantPublishedOnce(a, req, res)
	})

	t.Run("condition_concurrent_retry_committed_first", func(t *testing.T) {
		// A concurrent retry of the same request commits between this attempt's last read and its commit:
		// this attempt's commit fails its condition on the submission and must return the winner's result.
		e := mxNewEnv(t, nb, nil)
		a := e.senders[0]
		req := e.request("row4c", p.text("concurrent retry"), e.rcpts...)
		var winner domain.SendResult
		e.inj.arm(mxFault{at: mxCommit, mode: mxProceed, hook: func() {
			e.later()
			winner = e.mustSend(a.P, req, "concurrent retry")
		}})
		res, err := e.send(a.P, req)
		e.fired("commit")
		if err != nil {
			t.Fatalf("send that lost the race: %v", err)
		}
		if !mxSameResult(res, winner) {
			t.Fatalf("the loser got %+v, the winner %+v: two outcomes for one request", res, winner)
		}
		if n, _ := e.inj.counts(mxCommit); n != 2 {
			t.Fatalf("%d commit attempts, want 2 (the winner's and the refused one)", n)
		}
		e.wantPublishedOnce(a, req, res)
	})

	t.Run("condition_unexpected", func(t *testing.T) {
		// A condition failure the domain does not expect (the message record exists) must not be turned
		// into success, a permanent failure or a partial commit.
		e := mxNewEnv(t, nb, nil)
		a := e.senders[0]
		req := e.request("row4u", p.text("unexpected condition"), e.rcpts[1])
		e.inj.arm(mxFault{at: mxCommit, mode: mxCondition, condOp: mxCondOnRecord})
		_, err := e.send(a.P, req)
		e.fired("commit")
		if err == nil {
			t.Fatal("send succeeded although its commit was refused")
		}
		if c := domain.CodeOf(err); !c.Retryable() {
			t.Fatalf("an unexpected condition failure became %s (%v), which is not retryable", c, err)
		}
		st := e.wantState(a.P, req.RequestID, before)
		e.wantUnpublished(st.ResourceID, 0, "refused commit")
		e.retryCompletes(a, req, st.ResourceID)
	})

	t.Run("permanent_visible_seq_exhausted", func(t *testing.T) {
		// visible_seq_max reached: the commit can never succeed. The submission stays where it was or is
		// failed with RESOURCE_LIMIT, nothing is published, and the retry returns the same error.
		e := mxNewEnv(t, nb, func(c *domain.Config) {
			l := domain.DefaultLimits()
			l.VisibleSeqMax = 1
			c.Limits = &l
		})
		a := e.senders[0]
		first := e.request("row4p-1", p.text("takes the last number"), e.rcpts[0])
		res1 := e.mustSend(a.P, first, "first send")
		req := e.request("row4p-2", p.text("no number left"), e.rcpts[0])
		_, err := e.send(a.P, req)
		mxWantCode(t, err, domain.CodeResourceLimit, "send past visible_seq_max")
		got, st := e.state(a.P, req.RequestID)
		if got != before && got != domain.StateFailed {
			t.Fatalf("status after a permanent commit failure: %q, want %q or failed", got, before)
		}
		if got == domain.StateFailed && (st.Error == nil || st.Error.Code != domain.CodeResourceLimit) {
			t.Fatalf("failed submission records %+v, want RESOURCE_LIMIT", st.Error)
		}
		e.wantUnpublished(st.ResourceID, 1, "commit past visible_seq_max")
		e.later()
		_, err = e.send(a.P, req)
		mxWantCode(t, err, domain.CodeResourceLimit, "retry past visible_seq_max")
		e.wantUnpublished(st.ResourceID, 1, "retry past visible_seq_max")
		e.wantPublishedOnce(a, first, res1)
	})
}

// mxRow5: the commit is applied and its response lost. Status says committed; every retry returns the same
// resource_id, committed_at and visible_seq, with no second feed item.
func mxRow5(t *testing.T, nb NewBackend, p mxPath) {
	e := mxNewEnv(t, nb, nil)
	a := e.senders[0]
	req := e.request("row5", p.text("response lost"), e.rcpts...)
	e.sendFaulted(a.P, req, mxFault{at: mxCommit, mode: mxFailAfter}, "commit", domain.CodeStorageUnavailable, "send whose commit response is lost")
	e.wantPath(p)
	st := e.wantState(a.P, req.RequestID, domain.StateCommitted)
	var stored domain.SendResult
	if err := json.Unmarshal(st.Result, &stored); err != nil {
		t.Fatalf("stored result: %v", err)
	}
	e.wantPublishedOnce(a, req, stored)
	e.later()
	for i := range 2 {
		if res := e.mustSend(a.P, req, "retry"); !mxSameResult(res, stored) {
			t.Fatalf("retry %d got %+v, the commit stored %+v", i, res, stored)
		}
	}
	e.wantPublishedOnce(a, req, stored)
	// The next message gets the next number: nothing was committed twice.
	if next := e.mustSend(a.P, e.request("row5-next", p.text("next"), e.rcpts[0]), "next send"); next.VisibleSeq != "2" {
		t.Fatalf("next message got visible_seq %s, want 2", next.VisibleSeq)
	}
}

// mxRow6: the credential is revoked (or the actor, or the retry comes with a credential that lacks
// message.send) between reserve and commit. Nothing commits under the old authorization; the retry gets
// UNAUTHENTICATED or FORBIDDEN; the submission is not turned into a permanent failure, so a valid credential
// of the same producer later completes it.
func mxRow6(t *testing.T, nb NewBackend, p mxPath) {
	before := mxStateBefore(mxCommit, p.inline)

	t.Run("token_revoked", func(t *testing.T) {
		e := mxNewEnv(t, nb, nil)
		a := e.senders[0]
		tok2, _ := e.f.Token(e.space, a.ActorID, "") // a second credential of the same producer
		req := e.request("row6t", p.text("revoked token"), e.rcpts[0])
		e.sendFaulted(a.P, req, e.revokeAtCommit(a), "commit", domain.CodeUnauthenticated, "send whose token is revoked before commit")
		p2 := e.f.Principal(tok2)
		st := e.wantState(p2, req.RequestID, before)
		e.wantUnpublished(st.ResourceID, 0, "revoked before commit")
		e.retryRevoked(a, req, st.ResourceID)
		e.wantState(p2, req.RequestID, before)
		// With a valid credential of the same producer the original key is checked first and completes.
		res := e.mustSend(p2, req, "retry with a valid credential")
		if st.ResourceID != "" && res.ResourceID != st.ResourceID {
			t.Fatalf("retry with a valid credential got resource %s, want %s", res.ResourceID, st.ResourceID)
		}
		e.wantPublishedOnce(Party{ActorID: a.ActorID, P: p2}, req, res)
	})

	t.Run("actor_revoked", func(t *testing.T) {
		e := mxNewEnv(t, nb, nil)
		a := e.senders[0]
		req := e.request("row6a", p.text("revoked actor"), e.rcpts...)
		var atCommit domain.SubmissionState
		var st domain.StatusResult
		e.sendFaulted(a.P, req, mxFault{at: mxCommit, mode: mxProceed, hook: func() {
			atCommit, st = e.state(a.P, req.RequestID)
			Must[domain.ActorResult](e.t)(e.f.Svc.RevokeActor(e.ctx, e.space, a.ActorID))
		}}, "commit", domain.CodeUnauthenticated, "send whose actor is revoked before commit")
		if atCommit != before {
			t.Fatalf("state right before the commit: %q, want %q", atCommit, before)
		}
		e.wantUnpublished(st.ResourceID, 0, "actor revoked before commit")
		e.retryRevoked(a, req, st.ResourceID)
	})

	t.Run("retry_without_send_scope", func(t *testing.T) {
		// Scopes are fixed per token, so FORBIDDEN is the retry by the same producer with a credential that
		// lacks message.send after the sending credential was revoked.
		e := mxNewEnv(t, nb, nil)
		a := e.senders[0]
		readOnly, _ := e.f.Token(e.space, a.ActorID, "", domain.ScopeMessageRead)
		req := e.request("row6f", p.text("scope missing"), e.rcpts[1])
		e.sendFaulted(a.P, req, e.revokeAtCommit(a), "commit", domain.CodeUnauthenticated, "send whose token is revoked before commit")
		e.later()
		pr := e.f.Principal(readOnly)
		_, err := e.send(pr, req)
		mxWantCode(t, err, domain.CodeForbidden, "retry with a credential without message.send")
		st := e.wantState(pr, req.RequestID, before)
		e.wantUnpublished(st.ResourceID, 0, "retry without message.send")
	})

	t.Run("blob_reference_grant_revoked", func(t *testing.T) {
		// The producer attaches another actor's sealed blob under a blob.reference grant that is revoked
		// between reserve and commit. The re-check at commit must cover the attachment, not only the
		// credential and its scopes: nothing may publish the reference, now or on a retry.
		e := mxNewEnv(t, nb, nil)
		a, owner, r := e.senders[0], e.senders[1], e.rcpts[0]
		b := e.upload(owner, "shared by grant", true)
		g := Must[domain.GrantResult](t)(e.f.Svc.CreateGrant(e.ctx, e.space, domain.CreateGrantRequest{
			RequestID: e.f.RID("grant"), ActorID: a.ActorID, Permission: domain.PermBlobReference, BlobID: b.id}))
		pa := e.f.Principal(a.Token) // holds the grant
		req := e.request("row6b", p.text("attachment by grant"), r)
		req.AttachmentIDs = []string{b.id}
		e.inj.arm(mxFault{at: mxCommit, mode: mxProceed, hook: func() {
			Must[domain.GrantResult](e.t)(e.f.Svc.RevokeGrant(e.ctx, e.space, g.GrantID))
		}})
		_, err := e.send(pa, req)
		e.fired("commit")
		refused := func(err error, what string) {
			t.Helper()
			if c := mxCodeOf(err); c != domain.CodeForbidden && c != domain.CodeNotFound {
				t.Fatalf("%s: %v, want FORBIDDEN or NOT_FOUND", what, err)
			}
		}
		refused(err, "send whose blob.reference grant is revoked before commit")
		st := e.wantState(pa, req.RequestID, before)
		e.wantUnpublished(st.ResourceID, 0, "grant revoked before commit")
		e.later()
		refused(e.sendErr(e.f.Principal(a.Token), req), "retry with the current credential")
		refused(e.sendErr(pa, req), "retry with the principal authenticated before the revocation")
		e.wantUnpublished(st.ResourceID, 0, "retries without the grant")
		if _, ok := e.readBlob(r.P, b.id); ok {
			t.Fatalf("the recipient reads %s through a reference committed without the grant", b.id)
		}
	})
}

// sendErr sends and returns only the error.
func (e *mxEnv) sendErr(p *domain.Principal, req domain.SendRequest) error {
	_, err := e.send(p, req)
	return err
}

// ---------------------------------------------------------------------------------------------------------
// Properties

// mxRapidTB lets fixture code written for testing.TB run inside a rapid property: failures, logs and
// cleanups go to the property's *rapid.T (so rapid prints the seed and shrinks); temporary directories come
// from the enclosing test.
type mxRapidTB struct {
	testing.TB
	rt *rapid.T
}

func (r mxRapidTB) Helper()                           { r.rt.Helper() }
func (r mxRapidTB) Log(args ...any)                   { r.rt.Log(args...) }
func (r mxRapidTB) Logf(format string, args ...any)   { r.rt.Logf(format, args...) }
func (r mxRapidTB) Error(args ...any)                 { r.rt.Error(args...) }
func (r mxRapidTB) Errorf(format string, args ...any) { r.rt.Errorf(format, args...) }
func (r mxRapidTB) Fatal(args ...any)                 { r.rt.Fatal(args...) }
func (r mxRapidTB) Fatalf(format string, args ...any) { r.rt.Fatalf(format, args...) }
func (r mxRapidTB) Fail()                             { r.rt.Fail() }
func (r mxRapidTB) FailNow()                          { r.rt.FailNow() }
func (r mxRapidTB) Failed() bool                      { return r.rt.Failed() }
func (r mxRapidTB) Skip(args ...any)                  { r.rt.Skip(args...) }
func (r mxRapidTB) Skipf(format string, args ...any)  { r.rt.Skipf(format, args...) }
func (r mxRapidTB) SkipNow()                          { r.rt.SkipNow() }
func (r mxRapidTB) Cleanup(f func())                  { r.rt.Cleanup(f) }
func (r mxRapidTB) Context() context.Context          { return r.rt.Context() }

// mxPlan is one fault a P03 step may inject. A failing plan that fires leaves the submission in the state
// just before its write (mxFailBefore, mxCondition) or just after it (mxFailAfter); a proceeding plan must
// not make the send fail.
type mxPlan struct {
	name string
	at   mxPhase
	mode mxMode
	none bool
	// hook, for mxProceed: a grant change of the producer, or a concurrent retry of the same request.
	hook string
}

func (p mxPlan) String() string { return p.name }

// mxPlans are the fault points of rows 1–5 of the failure matrix.
var mxPlans = []mxPlan{
	{name: "none", none: true},
	{name: "reserve_fails", at: mxReserve, mode: mxFailBefore},
	{name: "reserve_response_lost", at: mxReserve, mode: mxFailAfter},
	{name: "body_fails", at: mxBody, mode: mxFailBefore},
	{name: "body_response_lost", at: mxBody, mode: mxFailAfter},
	{name: "commit_fails", at: mxCommit, mode: mxFailBefore},
	{name: "commit_condition_unexpected", at: mxCommit, mode: mxCondition},
	{name: "commit_response_lost", at: mxCommit, mode: mxFailAfter},
	{name: "commit_generation_changed", at: mxCommit, mode: mxProceed, hook: "grant"},
	{name: "commit_concurrent_retry", at: mxCommit, mode: mxProceed, hook: "retry"},
}

func mxStateRank(s domain.SubmissionState) int {
	switch s {
	case domain.StateReserved:
		return 1
	case domain.StatePrepared:
		return 2
	case domain.StateCommitted:
		return 3
	default:
		return 0
	}
}

// mxP03 is property P03: for random requests (inline and blob bodies, one or two recipients, two producers)
// sent and retried in random order with a random fault of rows 1–5 armed for every attempt, the business
// record, submission result, feed item and inbox entries appear together or not at all after every step,
// the state only moves forward and is the one the fault point implies; after fault-free retries every
// request is committed exactly once (one message, one feed item, one inbox entry per recipient) with one
// stable result.
func mxP03(t *testing.T, nb NewBackend, cfg propConfig) {
	backend := mxBackends(t, nb, cfg)
	rapid.Check(t, func(rt *rapid.T) {
		e := mxNewEnvOn(mxRapidTB{TB: t, rt: rt}, backend(rt), nil)
		type model struct {
			req    domain.SendRequest
			from   Party
			inline bool
			msgID  string
			result *domain.SendResult
		}
		n := rapid.IntRange(1, 4).Draw(rt, "requests")
		reqs := make([]*model, n)
		for i := range reqs {
			from := e.senders[rapid.IntRange(0, len(e.senders)-1).Draw(rt, fmt.Sprintf("sender_%d", i))]
			idx := rapid.SliceOfNDistinct(rapid.IntRange(0, len(e.rcpts)-1), 1, len(e.rcpts), rapid.ID[int]).Draw(rt, fmt.Sprintf("recipients_%d", i))
			to := make([]Party, len(idx))
			for j, k := range idx {
				to[j] = e.rcpts[k]
			}
			path := mxPaths[rapid.IntRange(0, len(mxPaths)-1).Draw(rt, fmt.Sprintf("path_%d", i))]
			reqs[i] = &model{req: e.request(fmt.Sprintf("p03-%d", i), path.text(fmt.Sprintf("text %d", i)), to...), from: from, inline: path.inline}
		}
		// accept records a result and checks it against every earlier one for the same request.
		accept := func(m *model, res domain.SendResult, what string) {
			if m.msgID != "" && res.ResourceID != m.msgID {
				rt.Fatalf("%s of %s: resource %s, the reservation fixed %s", what, m.req.RequestID, res.ResourceID, m.msgID)
			}
			if m.result != nil && !mxSameResult(res, *m.result) {
				rt.Fatalf("%s of %s: %+v, earlier %+v", what, m.req.RequestID, res, *m.result)
			}
			m.msgID, m.result = res.ResourceID, &res
		}
		// consistent checks all-or-nothing for every request against its submission state.
		consistent := func(step string) {
			s := e.snapshot()
			committed := 0
			for _, m := range reqs {
				got, st := e.state(m.from.P, m.req.RequestID)
				if got == "" {
					if m.msgID != "" {
						rt.Fatalf("%s: %s had resource %s, now NOT_FOUND", step, m.req.RequestID, m.msgID)
					}
					continue
				}
				if m.msgID != "" && st.ResourceID != m.msgID {
					rt.Fatalf("%s: %s resource changed %s → %s", step, m.req.RequestID, m.msgID, st.ResourceID)
				}
				m.msgID = st.ResourceID
				if got != domain.StateCommitted {
					if _, rec := e.record(m.msgID); rec || mxCount(s.feed, m.msgID) != 0 {
						rt.Fatalf("%s: %s is %s but its message is visible (record=%v, feed items=%d)",
							step, m.req.RequestID, got, rec, mxCount(s.feed, m.msgID))
					}
					for actor, items := range s.inbox {
						if mxCount(items, m.msgID) != 0 {
							rt.Fatalf("%s: %s is %s but %s has it in the inbox", step, m.req.RequestID, got, actor)
						}
					}
					continue
				}
				committed++
				var stored domain.SendResult
				if err := json.Unmarshal(st.Result, &stored); err != nil {
					rt.Fatalf("%s: stored result of %s: %v", step, m.req.RequestID, err)
				}
				accept(m, stored, step+" (status)")
				e.wantPublishedOnceIn(s, m.from, m.req, stored)
			}
			if len(s.feed) != committed {
				rt.Fatalf("%s: %d feed items for %d committed requests", step, len(s.feed), committed)
			}
		}

		steps := rapid.IntRange(1, 12).Draw(rt, "steps")
		for i := range steps {
			m := reqs[rapid.IntRange(0, n-1).Draw(rt, "request")]
			pl := rapid.SampledFrom(mxPlans).Draw(rt, "fault")
			e.f.Clock.Advance(time.Duration(rapid.IntRange(1, 90).Draw(rt, "advance_s")) * time.Second)
			before, _ := e.state(m.from.P, m.req.RequestID)
			var nested []domain.SendResult
			switch {
			case pl.none:
				e.inj.reset()
			case pl.hook == "grant":
				from := m.from.ActorID
				e.inj.arm(mxFault{at: pl.at, mode: pl.mode, hook: func() { e.grantChange(from) }})
			case pl.hook == "retry":
				e.inj.arm(mxFault{at: pl.at, mode: pl.mode, hook: func() {
					nested = append(nested, e.mustSend(m.from.P, m.req, "concurrent retry"))
				}})
			default:
				e.inj.arm(mxFault{at: pl.at, mode: pl.mode, condOp: mxCondOnRecord})
			}
			res, err := e.send(m.from.P, m.req)
			fired := e.inj.disarm()
			step := fmt.Sprintf("step %d (%s of %s, inline=%v, fired=%v)", i, pl.name, m.req.RequestID, m.inline, fired)
			for _, r := range nested {
				accept(m, r, step+" nested retry")
			}
			switch {
			case err == nil:
				if fired && pl.mode != mxProceed {
					rt.Fatalf("%s: succeeded although the fault fired", step)
				}
				accept(m, res, step)
			case !fired:
				rt.Fatalf("%s: failed without a fault: %v", step, err)
			case pl.mode == mxProceed:
				rt.Fatalf("%s: failed: %v", step, err)
			case !domain.CodeOf(err).Retryable():
				rt.Fatalf("%s: a transient fault became %s (%v), which is not retryable", step, domain.CodeOf(err), err)
			default:
				// The state just before (or after) the faulted write, or where an earlier attempt left it.
				want := mxStateBefore(pl.at, m.inline)
				if pl.mode == mxFailAfter {
					want = mxStateAfter(pl.at)
				}
				if mxStateRank(before) > mxStateRank(want) {
					want = before
				}
				if got, _ := e.state(m.from.P, m.req.RequestID); got != want {
					rt.Fatalf("%s: state %q after the fault, want %q", step, got, want)
				}
			}
			if after, _ := e.state(m.from.P, m.req.RequestID); mxStateRank(after) < mxStateRank(before) {
				rt.Fatalf("%s: state went back from %q to %q", step, before, after)
			}
			consistent(step)
		}

		e.inj.reset()
		e.f.Clock.Advance(time.Hour)
		for _, m := range reqs {
			res, err := e.send(m.from.P, m.req)
			if err != nil {
				rt.Fatalf("final retry of %s: %v", m.req.RequestID, err)
			}
			accept(m, res, "final retry")
		}
		consistent("after the final retries")
		s := e.snapshot()
		var last uint64
		for _, it := range s.feed {
			seq, err := strconv.ParseUint(it.VisibleSeq, 10, 64)
			if err != nil || seq <= last {
				rt.Fatalf("feed visible_seq %q after %d: not strictly increasing", it.VisibleSeq, last)
			}
			last = seq
		}
		if len(s.feed) != n {
			rt.Fatalf("%d feed items for %d requests", len(s.feed), n)
		}
	})
}

// ---------------------------------------------------------------------------------------------------------
// Blobs (row 7, P04)

// mxBlob is an uploaded blob.
type mxBlob struct {
	id, upload string
	content    string
	owner      Party
}

// prepare prepares an upload of content as owner.
func (e *mxEnv) prepare(owner Party, content string) mxBlob {
	e.t.Helper()
	sum := sha256.Sum256([]byte(content))
	prep := Must[domain.BlobPrepareResult](e.t)(e.f.Svc.PrepareBlob(e.ctx, owner.P, domain.BlobPrepareRequest{
		RequestID: e.f.RID("prep"), ContentType: "text/plain", SizeBytes: int64(len(content)), SHA256: hex.EncodeToString(sum[:])}))
	return mxBlob{id: prep.BlobID, upload: prep.UploadID, content: content, owner: owner}
}

// put uploads content (PUT /v0/uploads/{id}/content) for b.
func (e *mxEnv) put(b mxBlob, content string) (domain.UploadResult, error) {
	return e.f.Svc.Upload(e.ctx, b.owner.P, b.upload, "text/plain", int64(len(content)), strings.NewReader(content))
}

// upload prepares and uploads content as owner; with seal it also seals the blob (blob.commit).
func (e *mxEnv) upload(owner Party, content string, seal bool) mxBlob {
	e.t.Helper()
	b := e.prepare(owner, content)
	Must[domain.UploadResult](e.t)(e.put(b, content))
	if seal {
		e.seal(b, e.f.RID("seal"))
	}
	return b
}

// seal commits (seals) b with request ID rid.
func (e *mxEnv) seal(b mxBlob, rid string) domain.BlobInfo {
	e.t.Helper()
	info := Must[domain.BlobInfo](e.t)(e.f.Svc.CommitBlob(e.ctx, b.owner.P, domain.BlobCommitRequest{RequestID: rid, UploadID: b.upload}))
	if info.State != domain.BlobSealed || info.BlobID != b.id {
		e.t.Fatalf("blob.commit of %s: %+v, want it sealed", b.id, info)
	}
	return info
}

// sealFaulted calls blob.commit of b as request rid with a seal fault in mode armed: it must reach the fault
// and fail with STORAGE_UNAVAILABLE.
func (e *mxEnv) sealFaulted(b mxBlob, rid string, mode mxMode, what string) {
	e.t.Helper()
	e.inj.arm(mxFault{at: mxSeal, mode: mode})
	_, err := e.f.Svc.CommitBlob(e.ctx, b.owner.P, domain.BlobCommitRequest{RequestID: rid, UploadID: b.upload})
	e.fired("seal")
	mxWantCode(e.t, err, domain.CodeStorageUnavailable, what)
}

// blobState returns the state of b as its owner sees it.
func (e *mxEnv) blobState(b mxBlob) domain.BlobState {
	e.t.Helper()
	return Must[domain.BlobInfo](e.t)(e.f.Svc.GetBlob(e.ctx, b.owner.P, b.id)).State
}

// readBlob reads blob id as p: its bytes, or false when p may not read it (NOT_FOUND).
func (e *mxEnv) readBlob(p *domain.Principal, id string) (string, bool) {
	e.t.Helper()
	rc, _, err := e.f.Svc.OpenBlob(e.ctx, p, id)
	if mxCodeOf(err) == domain.CodeNotFound {
		return "", false
	}
	if err != nil {
		e.t.Fatalf("blob.get %s: %v", id, err)
	}
	defer func() { _ = rc.Close() }()
	b, err := io.ReadAll(rc)
	if err != nil {
		e.t.Fatalf("reading blob %s: %v", id, err)
	}
	return string(b), true
}

// mxRow7: the object of an upload is stored but the blob is not sealed — the PUT's response was lost, or
// blob.commit's transaction failed. The upload stays unsealed with the object in place; a repeated PUT of
// the same bytes answers already_uploaded: true, a PUT of other bytes is refused (the stored object is never
// overwritten) and blob.commit with the same request_id seals it. A seal whose response was lost replays.
func mxRow7(t *testing.T, nb NewBackend) {
	const content = "the bytes of an attachment"
	// recover checks the retries from "object stored, upload unsealed".
	recover := func(e *mxEnv, b mxBlob, rid string) {
		e.t.Helper()
		if st := e.blobState(b); st != domain.BlobPending {
			e.t.Fatalf("blob state after the fault: %s, want %s", st, domain.BlobPending)
		}
		res, err := e.put(b, content)
		if err != nil || !res.AlreadyUploaded || res.BlobID != b.id {
			e.t.Fatalf("repeated PUT of the same bytes: %+v, %v; want already_uploaded", res, err)
		}
		_, err = e.put(b, strings.ToUpper(content))
		mxWantCode(e.t, err, domain.CodeUploadContentConflict, "PUT of other bytes over the stored object")
		e.later()
		info := e.seal(b, rid)
		if got, ok := e.readBlob(b.owner.P, b.id); !ok || got != content {
			e.t.Fatalf("sealed blob reads %q (readable=%v), want the first upload %q: the object was overwritten", got, ok, content)
		}
		if again := e.seal(b, rid); again.SealedAt == nil || info.SealedAt == nil || !again.SealedAt.Equal(*info.SealedAt) {
			e.t.Fatalf("repeated blob.commit: %+v, first %+v", again, info)
		}
		_, err = e.put(b, content)
		mxWantCode(e.t, err, domain.CodeUploadSealed, "PUT after seal")
	}

	t.Run("upload_stored_response_lost", func(t *testing.T) {
		e := mxNewEnv(t, nb, nil)
		b := e.prepare(e.senders[0], content)
		e.inj.arm(mxFault{at: mxBody, mode: mxFailAfter})
		_, err := e.put(b, content)
		e.fired("upload")
		mxWantCode(t, err, domain.CodeStorageUnavailable, "PUT whose response is lost")
		recover(e, b, e.f.RID("seal"))
	})

	t.Run("seal_transaction_fails", func(t *testing.T) {
		e := mxNewEnv(t, nb, nil)
		b := e.upload(e.senders[0], content, false)
		rid := e.f.RID("seal")
		e.sealFaulted(b, rid, mxFailBefore, "blob.commit whose transaction fails")
		recover(e, b, rid)
	})

	t.Run("seal_applied_response_lost", func(t *testing.T) {
		e := mxNewEnv(t, nb, nil)
		b := e.upload(e.senders[0], content, false)
		rid := e.f.RID("seal")
		e.sealFaulted(b, rid, mxFailAfter, "blob.commit whose response is lost")
		if st := e.blobState(b); st != domain.BlobSealed {
			t.Fatalf("blob state after a lost seal response: %s, want sealed", st)
		}
		e.later()
		info := e.seal(b, rid)
		if again := e.seal(b, rid); !again.SealedAt.Equal(*info.SealedAt) {
			t.Fatalf("repeated blob.commit: sealed_at %v, then %v", info.SealedAt, again.SealedAt)
		}
		_, err := e.put(b, content)
		mxWantCode(t, err, domain.CodeUploadSealed, "PUT after seal")
		if got, ok := e.readBlob(b.owner.P, b.id); !ok || got != content {
			t.Fatalf("sealed blob reads %q (readable=%v), want %q", got, ok, content)
		}
	})
}

// mxP04 is property P04: a message references only sealed blobs its producer may reference, and publishes
// them atomically. A send naming an absent, foreign or unsealed blob is refused before anything is written
// (its request ID stays unused); a send of sealed blobs publishes the message and the recipients' right to
// read them in its one commit, so a failed commit leaves neither.
func mxP04(t *testing.T, nb NewBackend, cfg propConfig) {
	t.Run("refused_before_any_write", func(t *testing.T) {
		mxPerPath(t, nb, func(t *testing.T, nb NewBackend, p mxPath) {
			e := mxNewEnv(t, nb, nil)
			a, r := e.senders[0], e.rcpts[0]
			sealed := e.upload(a, "sealed", true)
			pending := e.upload(a, "uploaded, not sealed", false)
			prepared := e.prepare(a, "not uploaded")
			foreign := e.upload(e.senders[1], "someone else's", true)
			prior := e.mustSend(a.P, e.request("p04-prior", p.text("an existing message"), r), "prior send")
			for i, c := range []struct {
				ids  []string
				code domain.Code
			}{
				{[]string{"blob_missing"}, domain.CodeNotFound},
				{[]string{prior.MessageID}, domain.CodeNotFound},
				{[]string{pending.id}, domain.CodeBlobNotSealed},
				{[]string{prepared.id}, domain.CodeBlobNotSealed},
				{[]string{sealed.id, pending.id}, domain.CodeBlobNotSealed},
				{[]string{sealed.id, "blob_missing"}, domain.CodeNotFound},
				{[]string{foreign.id}, domain.CodeNotFound},
			} {
				req := e.request(fmt.Sprintf("p04-%d", i), p.text("with attachments"), e.rcpts...)
				req.AttachmentIDs = c.ids
				e.inj.reset()
				_, err := e.send(a.P, req)
				mxWantCode(t, err, c.code, fmt.Sprintf("send with attachments %v", c.ids))
				if _, writes := e.inj.counts(mxOther); writes != 0 {
					t.Fatalf("attachments %v: %d storage writes, want none", c.ids, writes)
				}
				e.wantState(a.P, req.RequestID, "")
				e.wantUnpublished("", 1+i, "refused attachments")
				if _, ok := e.readBlob(r.P, sealed.id); ok {
					t.Fatalf("attachments %v: the recipient reads %s although nothing references it", c.ids, sealed.id)
				}
				// The request ID was not used up: the same ID without attachments is a new request.
				req.AttachmentIDs = nil
				e.wantPublishedOnce(a, req, e.mustSend(a.P, req, "same request_id without attachments"))
			}
		})
	})

	t.Run("sealed_attachment_published_atomically", func(t *testing.T) {
		mxPerPath(t, nb, func(t *testing.T, nb NewBackend, p mxPath) {
			e := mxNewEnv(t, nb, nil)
			a, r, bystander := e.senders[0], e.rcpts[0], e.rcpts[1]
			b1, b2 := e.upload(a, "first attachment", true), e.upload(a, "second attachment", true)
			req := e.request("p04-atomic", p.text("two attachments"), r)
			req.AttachmentIDs = []string{b2.id, b1.id}
			e.inj.arm(mxFault{at: mxCommit, mode: mxFailBefore})
			_, err := e.send(a.P, req)
			e.fired("commit")
			mxWantCode(t, err, domain.CodeStorageUnavailable, "send whose commit fails")
			st := e.wantState(a.P, req.RequestID, mxStateBefore(mxCommit, p.inline))
			e.wantUnpublished(st.ResourceID, 0, "failed commit")
			for _, b := range []mxBlob{b1, b2} {
				if _, ok := e.readBlob(r.P, b.id); ok {
					t.Fatalf("the recipient reads %s before the message referencing it is published", b.id)
				}
			}
			e.later()
			res := e.mustSend(a.P, req, "retry")
			e.wantPublishedOnce(a, req, res)
			for _, b := range []mxBlob{b1, b2} {
				if got, ok := e.readBlob(r.P, b.id); !ok || got != b.content {
					t.Fatalf("recipient reads %s: %q (readable=%v), want %q", b.id, got, ok, b.content)
				}
				if _, ok := e.readBlob(bystander.P, b.id); ok {
					t.Fatalf("a non-recipient reads attachment %s", b.id)
				}
			}
		})
	})

	t.Run("duplicate_attachment_ids", func(t *testing.T) {
		// Naming one blob twice is either refused before anything is written or published once; it must
		// not become an internal error that leaves the reservation stuck.
		mxPerPath(t, nb, func(t *testing.T, nb NewBackend, p mxPath) {
			e := mxNewEnv(t, nb, nil)
			a, r := e.senders[0], e.rcpts[0]
			b := e.upload(a, "attached twice", true)
			req := e.request("p04-dup", p.text("same blob twice"), r)
			req.AttachmentIDs = []string{b.id, b.id}
			e.inj.reset()
			res, err := e.send(a.P, req)
			if err != nil {
				mxWantCode(t, err, domain.CodeInvalidRequest, "send naming one attachment twice")
				if _, writes := e.inj.counts(mxOther); writes != 0 {
					t.Fatalf("refused duplicate attachments: %d storage writes, want none", writes)
				}
				e.wantState(a.P, req.RequestID, "")
				e.wantUnpublished("", 0, "refused duplicate attachments")
				return
			}
			e.wantPublishedOnce(a, req, res)
			if got, ok := e.readBlob(r.P, b.id); !ok || got != b.content {
				t.Fatalf("recipient reads %s: %q (readable=%v)", b.id, got, ok)
			}
		})
	})

	t.Run("random", func(t *testing.T) { t.Parallel(); mxP04Random(t, nb, cfg) })
}

// mxP04Random sends random messages from two producers, each holding a sealed and an unsealed blob, naming
// random attachments (own, foreign, unsealed, absent) with a random commit fault. A send is refused, writing
// nothing, exactly when some attachment is not a sealed blob of its producer; otherwise, after retries, it is
// published once and exactly its recipients can read its attachments.
func mxP04Random(t *testing.T, nb NewBackend, cfg propConfig) {
	backend := mxBackends(t, nb, cfg)
	rapid.Check(t, func(rt *rapid.T) {
		e := mxNewEnvOn(mxRapidTB{TB: t, rt: rt}, backend(rt), nil)
		type entry struct {
			blob   mxBlob
			owner  int
			sealed bool
		}
		var pool []entry
		for i, s := range e.senders {
			pool = append(pool, entry{e.upload(s, fmt.Sprintf("sealed %d", i), true), i, true},
				entry{e.upload(s, fmt.Sprintf("unsealed %d", i), false), i, false})
		}
		pool = append(pool, entry{blob: mxBlob{id: "blob_absent"}, owner: -1})
		type sent struct {
			req  domain.SendRequest
			from Party
			res  domain.SendResult
		}
		var ok []sent
		faults := []mxPlan{{name: "none", none: true}, {name: "commit_fails", at: mxCommit, mode: mxFailBefore},
			{name: "commit_response_lost", at: mxCommit, mode: mxFailAfter}}
		steps := rapid.IntRange(1, 8).Draw(rt, "steps")
		for i := range steps {
			fi := rapid.IntRange(0, len(e.senders)-1).Draw(rt, "sender")
			from := e.senders[fi]
			path := mxPaths[rapid.IntRange(0, len(mxPaths)-1).Draw(rt, "path")]
			req := e.request(fmt.Sprintf("p04r-%d", i), path.text(fmt.Sprintf("text %d", i)), e.rcpts[rapid.IntRange(0, len(e.rcpts)-1).Draw(rt, "recipient")])
			picks := rapid.SliceOfNDistinct(rapid.IntRange(0, len(pool)-1), 0, 3, rapid.ID[int]).Draw(rt, "attachments")
			want := domain.Code("")
			for _, k := range picks {
				req.AttachmentIDs = append(req.AttachmentIDs, pool[k].blob.id)
				if want != "" {
					continue
				}
				switch en := pool[k]; {
				case en.owner != fi:
					want = domain.CodeNotFound // absent, or another producer's blob it cannot read
				case !en.sealed:
					want = domain.CodeBlobNotSealed
				}
			}
			pl := rapid.SampledFrom(faults).Draw(rt, "fault")
			if pl.none {
				e.inj.reset()
			} else {
				e.inj.arm(mxFault{at: pl.at, mode: pl.mode})
			}
			before := e.feedLen()
			res, err := e.send(from.P, req)
			fired := e.inj.disarm()
			_, writes := e.inj.counts(mxOther)
			step := fmt.Sprintf("step %d (%s, attachments %v)", i, pl.name, req.AttachmentIDs)
			if want != "" {
				if mxCodeOf(err) != want || writes != 0 || fired {
					rt.Fatalf("%s: %v with %d writes (commit reached: %v); want %s and no write", step, err, writes, fired, want)
				}
				if got := e.feedLen(); got != before {
					rt.Fatalf("%s: feed grew from %d to %d", step, before, got)
				}
				e.wantState(from.P, req.RequestID, "")
				continue
			}
			switch {
			case pl.none && err != nil:
				rt.Fatalf("%s: %v", step, err)
			case !pl.none && (!fired || mxCodeOf(err) != domain.CodeStorageUnavailable):
				rt.Fatalf("%s: fired=%v err=%v, want STORAGE_UNAVAILABLE from the commit", step, fired, err)
			case !pl.none:
				if pl.mode == mxFailBefore && e.feedLen() != before {
					rt.Fatalf("%s: the failed commit published something", step)
				}
				e.later()
				res = e.mustSend(from.P, req, "retry")
			}
			ok = append(ok, sent{req: req, from: from, res: res})
		}
		s := e.snapshot()
		if len(s.feed) != len(ok) {
			rt.Fatalf("%d feed items for %d published messages", len(s.feed), len(ok))
		}
		readable := map[[2]string]bool{} // (recipient, blob) → some message to the recipient references it
		for _, m := range ok {
			e.wantPublishedOnceIn(s, m.from, m.req, m.res)
			for _, id := range m.req.AttachmentIDs {
				for _, r := range m.req.RecipientIDs {
					readable[[2]string{r, id}] = true
				}
			}
		}
		for _, r := range e.rcpts {
			for _, en := range pool[:len(pool)-1] {
				got, can := e.readBlob(r.P, en.blob.id)
				if can != readable[[2]string{r.ActorID, en.blob.id}] || (can && got != en.blob.content) {
					rt.Fatalf("recipient %s reads %s: %v (%q); want readable=%v", r.ActorID, en.blob.id, can, got, readable[[2]string{r.ActorID, en.blob.id}])
				}
			}
		}
	})
}
