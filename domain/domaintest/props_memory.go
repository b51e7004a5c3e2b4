package domaintest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/store/faulty"
)

// RunMemoryProperties runs the M1 properties of SUPPLEMENT §15 — P10 (memory CAS), P11 (snapshot/delta),
// P12 (memory read) and P13 (blob integrity) — as rapid model-based checks through the service's public
// operations against the adapter nb makes, followed by deterministic scenario tests of RFC §9, §10 and
// §16.3/§16.5. A failing rapid check prints the seed that reproduces it (-rapid.seed=N). Concurrency tests
// release their goroutines together and repeat many rounds; interleavings that scheduling alone would rarely
// produce (a write landing between an operation's read and its commit) are placed exactly with commit and
// blob-put hooks around the adapter. MaxSteps shortens the checks and rounds for slow adapters.
func RunMemoryProperties(t *testing.T, nb NewBackend, opts ...PropOption) {
	runProperties(t, nb, withOptions(propConfig{steps: 24, concurrency: 4}, opts), []property{
		{"P10_MemoryCAS", mpP10},
		{"P11_SnapshotDelta", mpP11},
		{"P12_MemoryRead", mpP12},
		{"P13_BlobIntegrity", mpP13},
		{"RFC16_3_ConcurrentCAS", mpRFC163},
		{"RFC16_5_PartialSource", mpRFC165},
		{"EmptySnapshot", mpEmptySnapshot},
		{"NoChange", mpNoChange},
		{"CASAtCommitPoint", mpCASAtCommit},
		{"IdempotencyBeforeCAS", mpIdempotencyBeforeCAS},
		{"RejectedWhole", mpRejectedWhole},
		{"ManifestBlob", mpManifest},
		{"ReadPinnedAcrossPublish", mpReadPinned},
		{"IncludeTombstones", mpIncludeTombstones},
		{"CursorRevisionMismatch", mpCursorMismatch},
		{"RevisionFeedVisibility", mpFeedVisibility},
		{"BlobUploadErrors", mpBlobUploadErrors},
		{"BlobSealSweepRace", mpSealSweepRace},
		{"BlobConcurrentPut", mpConcurrentPut},
		{"BlobAttachments", mpAttachments},
		{"BlobReReference", mpReReference},
		{"StatusOfM1Writes", mpStatus},
	})
}

// ---------------------------------------------------------------------------------------------------------
// Environment: a fixture whose adapters carry hooks, one space and a source actor.

// mpHooks runs a test action just before the next item-store commit or blob put, to place another operation
// exactly between a read and the write that depends on it. Each hook fires once.
type mpHooks struct {
	mu     sync.Mutex
	commit func()
	put    func()
}

func (h *mpHooks) beforeCommit(f func()) { h.mu.Lock(); h.commit = f; h.mu.Unlock() }
func (h *mpHooks) beforePut(f func())    { h.mu.Lock(); h.put = f; h.mu.Unlock() }

// run runs and removes the hook in slot, if any (store/faulty calls it before every commit or put).
func (h *mpHooks) run(slot *func()) {
	h.mu.Lock()
	f := *slot
	*slot = nil
	h.mu.Unlock()
	if f != nil {
		f()
	}
}

// mpEnv is the setup shared by the checks of one property or test.
type mpEnv struct {
	f      *Fixture
	ctx    context.Context
	hooks  *mpHooks
	space  string
	source Party // source actor of every collection the env creates; all scopes
}

func mpNewEnv(t *testing.T, nb NewBackend, cfg func(*domain.Config)) *mpEnv {
	t.Helper()
	hooks := &mpHooks{}
	var items *faulty.ItemStore
	var blobs *faulty.BlobStore
	f := New(t, Faulty(nb, &items, &blobs), cfg)
	items.SetBeforeCommit(func(port.Tx) { hooks.run(&hooks.commit) })
	blobs.SetBeforePut(func(string) { hooks.run(&hooks.put) })
	c := f.With(t)
	sp := c.Space().SpaceID
	return &mpEnv{f: f, ctx: context.Background(), hooks: hooks, space: sp, source: c.Party(sp)}
}

// mpLimits returns a config function that applies change to the default limits.
func mpLimits(change func(*domain.Limits)) func(*domain.Config) {
	return func(c *domain.Config) {
		l := domain.DefaultLimits()
		change(&l)
		c.Limits = &l
	}
}

// auth authenticates a token afresh (a separate Principal per goroutine: the service may refresh it).
func (e *mpEnv) auth(t TB, token string) *domain.Principal {
	t.Helper()
	return mustDo[*domain.Principal](t, "Authenticate")(e.f.Svc.Authenticate(e.ctx, token))
}

// party creates an actor with an inbox consumer and a token (all scopes when none are given).
func (e *mpEnv) party(t TB, scopes ...domain.Scope) Party {
	t.Helper()
	c := e.f.With(t)
	a := c.Actor(e.space)
	con := c.Consumer(e.space, a, domain.ViewInbox, nil)
	tok, id := c.Token(e.space, a, "", scopes...)
	return Party{ActorID: a, ConsumerID: con, Token: tok, TokenID: id, P: c.Principal(tok)}
}

// reader is a party holding a memory.read grant on coll (granted before its token is authenticated).
func (e *mpEnv) reader(t TB, coll string, scopes ...domain.Scope) Party {
	t.Helper()
	c := e.f.With(t)
	a := c.Actor(e.space)
	con := c.Consumer(e.space, a, domain.ViewInbox, nil)
	c.Grant(e.space, a, domain.PermMemoryRead, coll)
	tok, id := c.Token(e.space, a, "", scopes...)
	return Party{ActorID: a, ConsumerID: con, Token: tok, TokenID: id, P: c.Principal(tok)}
}

// collection creates an empty collection of the source actor.
func (e *mpEnv) collection(t TB) string {
	t.Helper()
	return e.collectionOf(t, e.source.ActorID)
}

func (e *mpEnv) collectionOf(t TB, source string) string {
	t.Helper()
	r := mustDo[domain.CollectionResult](t, "CreateCollection")(e.f.Svc.CreateCollection(e.ctx, e.space, domain.CreateCollectionRequest{
		RequestID: e.f.RID("coll"), SourceActorID: source, Scope: "memory property test"}))
	if r.CurrentRevision != 0 {
		t.Fatalf("a new collection is at revision %d, want 0", r.CurrentRevision)
	}
	return r.CollectionID
}

// ---------------------------------------------------------------------------------------------------------
// Blob helpers.

func mpSum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

const mpText = "text/plain; charset=utf-8"

func (e *mpEnv) prepare(t TB, p *domain.Principal, content []byte, ct string) domain.BlobPrepareResult {
	t.Helper()
	return mustDo[domain.BlobPrepareResult](t, "PrepareBlob")(e.f.Svc.PrepareBlob(e.ctx, p, domain.BlobPrepareRequest{
		RequestID: e.f.RID("prep"), ContentType: ct, SizeBytes: int64(len(content)), SHA256: mpSum(content)}))
}

func (e *mpEnv) upload(p *domain.Principal, uploadID, ct string, content []byte) (domain.UploadResult, error) {
	return e.f.Svc.Upload(e.ctx, p, uploadID, ct, int64(len(content)), bytes.NewReader(content))
}

func (e *mpEnv) commit(p *domain.Principal, rid, uploadID string) (domain.BlobInfo, error) {
	return e.f.Svc.CommitBlob(e.ctx, p, domain.BlobCommitRequest{RequestID: rid, UploadID: uploadID})
}

// unsealed prepares and uploads content without sealing it.
func (e *mpEnv) unsealed(t TB, p *domain.Principal, content string) domain.BlobPrepareResult {
	t.Helper()
	up := e.prepare(t, p, []byte(content), mpText)
	mustDo[domain.UploadResult](t, "Upload")(e.upload(p, up.UploadID, mpText, []byte(content)))
	return up
}

// sealed prepares, uploads and seals content.
func (e *mpEnv) sealed(t TB, p *domain.Principal, content string) domain.BlobInfo {
	t.Helper()
	up := e.unsealed(t, p, content)
	info := mustDo[domain.BlobInfo](t, "CommitBlob")(e.commit(p, e.f.RID("seal"), up.UploadID))
	if info.State != domain.BlobSealed || info.BlobID != up.BlobID {
		t.Fatalf("commit of %s: %+v, want sealed", up.BlobID, info)
	}
	return info
}

// pool seals n small blobs of the source.
func (e *mpEnv) pool(t TB, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = e.sealed(t, e.source.P, fmt.Sprintf("pool blob %d", i)).BlobID
	}
	return ids
}

// blobBytes reads a blob's bytes as p.
func (e *mpEnv) blobBytes(p *domain.Principal, id string) ([]byte, domain.BlobInfo, error) {
	rc, info, err := e.f.Svc.OpenBlob(e.ctx, p, id)
	if err != nil {
		return nil, info, err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	return b, info, err
}

// ---------------------------------------------------------------------------------------------------------
// Memory helpers.

func mpIn(id, blob, path string, md ...string) domain.MemoryItemInput {
	it := domain.MemoryItemInput{ItemID: id, BlobID: blob, Path: path}
	if len(md) > 0 && md[0] != "" {
		it.Metadata = json.RawMessage(md[0])
	}
	return it
}

func mpI64(n int64) *int64 { return &n }

func (e *mpEnv) req(expected int64, mode string, items []domain.MemoryItemInput, deletes ...string) domain.MemoryPublishRequest {
	return domain.MemoryPublishRequest{RequestID: e.f.RID("mem"), ExpectedRevision: mpI64(expected), Mode: mode, Items: items, DeleteIDs: deletes}
}

func (e *mpEnv) publish(p *domain.Principal, coll string, req domain.MemoryPublishRequest) (domain.MemoryPublishResult, error) {
	return e.f.Svc.PublishMemory(e.ctx, p, coll, req)
}

func (e *mpEnv) mustPublish(t TB, p *domain.Principal, coll string, req domain.MemoryPublishRequest) domain.MemoryPublishResult {
	t.Helper()
	return mustDo[domain.MemoryPublishResult](t, "PublishMemory "+req.RequestID)(e.publish(p, coll, req))
}

// wantChanged publishes and requires a new revision rev.
func (e *mpEnv) wantChanged(t TB, p *domain.Principal, coll string, req domain.MemoryPublishRequest, rev int64) domain.MemoryPublishResult {
	t.Helper()
	res := e.mustPublish(t, p, coll, req)
	if !res.Changed || res.Revision != rev || res.VisibleSeq == nil || res.SubmissionState != domain.StateCommitted {
		t.Fatalf("publish %s: %+v, want changed at revision %d", req.RequestID, res, rev)
	}
	return res
}

// wantErr publishes and requires an error with code want.
func (e *mpEnv) wantErr(t TB, p *domain.Principal, coll string, req domain.MemoryPublishRequest, want domain.Code) error {
	t.Helper()
	res, err := e.publish(p, coll, req)
	if CodeOf(err) != want {
		t.Fatalf("publish %s (%s, expected %v, %d items, deletes %v): got %+v, %v; want %s", req.RequestID, req.Mode,
			mpDeref(req.ExpectedRevision), len(req.Items), req.DeleteIDs, res, err, want)
	}
	return err
}

func mpDeref(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

func mpDerefS(p *string) any {
	if p == nil {
		return nil
	}
	return *p
}

// mpConflictAt reports whether err is REVISION_CONFLICT naming current revision cur.
func mpConflictAt(err error, cur int64) bool {
	if CodeOf(err) != domain.CodeRevisionConflict {
		return false
	}
	return fmt.Sprint(domain.AsError(err).Details["current_revision"]) == fmt.Sprint(cur)
}

// readAll reads a whole revision (nil: the head) page by page and returns the revision read and the entries.
// It checks what every paged read must satisfy: one revision on every page, at most limit entries per page,
// has_more exactly when next_cursor is set (and then a full page), and ascending item IDs.
func (e *mpEnv) readAll(t TB, p *domain.Principal, coll string, rev *int64, tombs bool, limit int) (int64, []domain.MemoryEntry) {
	t.Helper()
	var all []domain.MemoryEntry
	req := domain.MemoryReadRequest{Revision: rev, Limit: limit, IncludeTombstones: &tombs}
	pinned := int64(-1)
	for range 10000 {
		page := mustDo[domain.MemoryPage](t, "ReadMemory")(e.f.Svc.ReadMemory(e.ctx, p, coll, req))
		mpCheckPage(t, page, coll, pinned, limit)
		pinned = page.Revision
		all = append(all, page.Items...)
		if !page.HasMore {
			mpCheckOrder(t, all)
			return pinned, all
		}
		req.Cursor = page.NextCursor
	}
	t.Fatalf("memory.read: has_more after 10000 pages")
	return 0, nil
}

func mpCheckPage(t TB, page domain.MemoryPage, coll string, pinned int64, limit int) {
	t.Helper()
	if page.CollectionID != coll || (pinned >= 0 && page.Revision != pinned) {
		t.Fatalf("memory.read page of %s at revision %d, want collection %s, revision %d", page.CollectionID, page.Revision, coll, pinned)
	}
	if limit > 0 && len(page.Items) > limit {
		t.Fatalf("memory.read page has %d items, limit %d", len(page.Items), limit)
	}
	if page.HasMore != (page.NextCursor != nil) || (page.HasMore && limit > 0 && len(page.Items) != limit) {
		t.Fatalf("memory.read page: has_more %v, next_cursor %v, %d items (limit %d)", page.HasMore, page.NextCursor, len(page.Items), limit)
	}
}

func mpCheckOrder(t TB, entries []domain.MemoryEntry) {
	t.Helper()
	for i := 1; i < len(entries); i++ {
		if entries[i-1].ItemID >= entries[i].ItemID {
			t.Fatalf("memory.read entries not in ascending item_id order: %s then %s", entries[i-1].ItemID, entries[i].ItemID)
		}
	}
}

// mpRevItem is a memory_revision feed item with its data.
type mpRevItem struct {
	item domain.FeedItem
	data domain.MemoryRevisionItemData
}

// revisionFeed returns the memory_revision items of coll in r's inbox view, in feed order.
func (e *mpEnv) revisionFeed(t TB, r Party, coll string) []mpRevItem {
	t.Helper()
	c := e.f.With(t)
	items, _ := c.ReadAll(r.P, r.ConsumerID, nil, 200)
	var out []mpRevItem
	for _, it := range items {
		if it.ItemType != domain.ItemMemoryRevision {
			continue
		}
		var d domain.MemoryRevisionItemData
		if err := json.Unmarshal(it.Data, &d); err != nil {
			t.Fatalf("memory_revision item %s: %v", it.ItemID, err)
		}
		if d.CollectionID == coll {
			out = append(out, mpRevItem{item: it, data: d})
		}
	}
	return out
}

// mpRace runs f(0..n-1) in n goroutines released together and returns their results.
func mpRace[R any](n int, f func(i int) (R, error)) ([]R, []error) {
	res, errs := make([]R, n), make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			res[i], errs[i] = f(i)
		})
	}
	close(start)
	wg.Wait()
	return res, errs
}

func mpSameResult(a, b domain.MemoryPublishResult) bool {
	return a.CollectionID == b.CollectionID && a.Revision == b.Revision && a.Changed == b.Changed &&
		a.SubmissionState == b.SubmissionState && a.Upserted == b.Upserted && a.Deleted == b.Deleted &&
		a.CommittedAt.Equal(b.CommittedAt) && fmt.Sprint(mpDerefS(a.VisibleSeq)) == fmt.Sprint(mpDerefS(b.VisibleSeq))
}

func mpSameInfo(a, b domain.BlobInfo) bool {
	return a.BlobID == b.BlobID && a.State == b.State && a.SizeBytes == b.SizeBytes && a.SHA256 == b.SHA256 &&
		a.ContentType == b.ContentType && a.OwnerID == b.OwnerID && a.CreatedAt.Equal(b.CreatedAt) &&
		(a.SealedAt == nil) == (b.SealedAt == nil) && (a.SealedAt == nil || a.SealedAt.Equal(*b.SealedAt)) && a.DownloadURL == b.DownloadURL
}

// ---------------------------------------------------------------------------------------------------------
// The model of a collection (RFC §10.3–§10.5), independent of the service's code.

type mpVal struct{ blob, path, md string } // md is the JCS form of the item metadata

type mpEntry struct {
	mpVal
	rev   int64 // revision that last wrote the item
	tomb  bool
	delIn int64
}

type mpState map[string]mpEntry

type mpChange struct {
	id  string
	val mpVal
}

// mpApply computes the next state: upserts replace or restore listed items (an identical active item is
// not a change and keeps its revision); a snapshot tombstones every active item it does not list; a delta
// tombstones the active items in deletes (deleting a missing or deleted ID changes nothing); tombstones stay
// until an explicit upsert.
func mpApply(cur mpState, mode string, ups []mpChange, dels []string, next int64) (st mpState, upserted, deleted int) {
	st = maps.Clone(cur)
	if st == nil {
		st = mpState{}
	}
	listed := map[string]bool{}
	for _, u := range ups {
		listed[u.id] = true
		if e, ok := cur[u.id]; ok && !e.tomb && e.mpVal == u.val {
			continue
		}
		st[u.id] = mpEntry{mpVal: u.val, rev: next}
		upserted++
	}
	drop := func(id string) {
		if e, ok := cur[id]; ok && !e.tomb && !listed[id] {
			e.tomb, e.delIn = true, next
			st[id] = e
			deleted++
		}
	}
	if mode == domain.ModeSnapshot {
		for id := range cur {
			drop(id)
		}
	} else {
		for _, id := range dels {
			drop(id)
		}
	}
	return st, upserted, deleted
}

// mpDupActivePath reports whether two active items of st share a path (RFC §10.4: different items must not
// use the same path — it is their identity in the export).
func mpDupActivePath(st mpState) bool {
	seen := map[string]bool{}
	for _, e := range st {
		if e.tomb {
			continue
		}
		if seen[e.path] {
			return true
		}
		seen[e.path] = true
	}
	return false
}

func (st mpState) ids(tombs bool) []string {
	var out []string
	for id, e := range st {
		if tombs || !e.tomb {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

func (st mpState) String() string {
	var b strings.Builder
	for _, id := range st.ids(true) {
		e := st[id]
		fmt.Fprintf(&b, "[%s %s %s %s r%d", id, e.blob, e.path, e.md, e.rev)
		if e.tomb {
			fmt.Fprintf(&b, " deleted in %d", e.delIn)
		}
		b.WriteString("] ")
	}
	return b.String()
}

func mpEntries(es []domain.MemoryEntry) string {
	var b strings.Builder
	for _, e := range es {
		fmt.Fprintf(&b, "[%s %s %s %s r%d %s", e.ItemID, e.BlobID, e.Path, e.Metadata, e.Revision, e.State)
		if e.DeletedInRevision != nil {
			fmt.Fprintf(&b, " deleted in %d", *e.DeletedInRevision)
		}
		b.WriteString("] ")
	}
	return b.String()
}

// mpCheckEntries compares read entries with the model state (tombstones only when tombs).
func mpCheckEntries(t TB, what string, got []domain.MemoryEntry, want mpState, tombs bool) {
	t.Helper()
	ids := want.ids(tombs)
	ok := len(got) == len(ids)
	for i := 0; ok && i < len(ids); i++ {
		g, w := got[i], want[ids[i]]
		state := "active"
		if w.tomb {
			state = "tombstone"
		}
		ok = g.ItemID == ids[i] && g.BlobID == w.blob && g.Path == w.path && string(g.Metadata) == w.md && g.Revision == w.rev &&
			g.State == state && w.tomb == (g.DeletedInRevision != nil) && (!w.tomb || *g.DeletedInRevision == w.delIn)
	}
	if !ok {
		t.Fatalf("%s:\n got  %s\n want %s", what, mpEntries(got), want)
	}
}

// mpRevRec is what the model knows of one published revision.
type mpRevRec struct {
	seq, mode         string
	upserted, deleted int
}

// mpModel is the model of one collection: the state of every revision and its feed record.
type mpModel struct {
	states []mpState  // states[r] is revision r; states[0] is the empty collection
	revs   []mpRevRec // revs[r-1] describes revision r
}

func newMPModel() *mpModel { return &mpModel{states: []mpState{{}}} }

func (m *mpModel) head() int64  { return int64(len(m.states) - 1) }
func (m *mpModel) cur() mpState { return m.states[len(m.states)-1] }

func (m *mpModel) add(st mpState, rec mpRevRec) {
	m.states = append(m.states, st)
	m.revs = append(m.revs, rec)
}

// check compares the service with the model: the head read (with tombstones) as the source, every older
// revision as the grant holder r when history is set, the absence of any revision after the head, and r's
// feed of the collection (one memory_revision item per revision, in order, with the model's mode, counts and
// visible_seq).
func (e *mpEnv) check(t TB, m *mpModel, coll string, r Party, history bool) {
	t.Helper()
	head := m.head()
	rev, got := e.readAll(t, e.source.P, coll, nil, true, 500)
	if rev != head {
		t.Fatalf("memory.read of the head returned revision %d, model head %d", rev, head)
	}
	mpCheckEntries(t, fmt.Sprintf("state of revision %d", head), got, m.cur(), true)
	for old := int64(0); history && old < head; old++ {
		_, got := e.readAll(t, r.P, coll, mpI64(old), true, 500)
		mpCheckEntries(t, fmt.Sprintf("revision %d (head %d)", old, head), got, m.states[old], true)
	}
	if _, err := e.f.Svc.ReadMemory(e.ctx, e.source.P, coll, domain.MemoryReadRequest{Revision: mpI64(head + 1)}); CodeOf(err) != domain.CodeNotFound {
		t.Fatalf("memory.read of revision %d past the head %d: %v, want NOT_FOUND", head+1, head, err)
	}
	feed := e.revisionFeed(t, r, coll)
	if int64(len(feed)) != head {
		t.Fatalf("%d memory_revision feed items for %d revisions", len(feed), head)
	}
	for i, fi := range feed {
		want := m.revs[i]
		d := fi.data
		if d.Revision != int64(i+1) || fi.item.ResourceID != coll || fi.item.ResourceVersion != int64(i+1) || d.Mode != want.mode ||
			d.Upserted != want.upserted || d.Deleted != want.deleted || d.SourceActorID != e.source.ActorID || fi.item.VisibleSeq != want.seq {
			t.Fatalf("feed item %d of %s: %+v %+v, want revision %d %+v", i, coll, fi.item, d, i+1, want)
		}
	}
}

// ---------------------------------------------------------------------------------------------------------
// P10: memory CAS.

// mpP10 is property P10: of concurrent publishes of different requests on the same expected revision, exactly
// one succeeds when that revision is the head and none when it is not; every loser gets REVISION_CONFLICT
// with the current revision, and losers leave no revision, head change or feed item. A retry of any of them
// with the same request returns its first outcome.
func mpP10(t *testing.T, nb NewBackend, cfg propConfig) {
	e := mpNewEnv(t, nb, nil)
	pool := e.pool(t, 3)
	rapid.Check(t, func(rt *rapid.T) {
		coll := e.collection(rt)
		r := e.reader(rt, coll)
		m := newMPModel()
		rounds := rapid.IntRange(1, max(1, cfg.steps/6)).Draw(rt, "rounds")
		for round := range rounds {
			head := m.head()
			k := rapid.IntRange(2, max(2, cfg.concurrency)).Draw(rt, "publishers")
			expected := head
			switch rapid.IntRange(0, 5).Draw(rt, "base revision") {
			case 0:
				if head > 0 {
					expected = rapid.Int64Range(0, head-1).Draw(rt, "stale revision")
				}
			case 1:
				expected = head + 1
			}
			reqs := make([]domain.MemoryPublishRequest, k)
			ups := make([][]mpChange, k)
			dels := make([][]string, k)
			existing := m.cur().ids(true)
			for i := range k {
				id := fmt.Sprintf("r%d-%d", round, i)
				blob := rapid.SampledFrom(pool).Draw(rt, "blob")
				ups[i] = []mpChange{{id: id, val: mpVal{blob: blob, path: id + ".md", md: "{}"}}}
				if len(existing) > 0 && rapid.Bool().Draw(rt, "also delete") {
					dels[i] = []string{rapid.SampledFrom(existing).Draw(rt, "deleted")}
				}
				reqs[i] = e.req(expected, domain.ModeDelta, []domain.MemoryItemInput{mpIn(id, blob, id+".md")}, dels[i]...)
			}
			ps := make([]*domain.Principal, k)
			for i := range ps {
				ps[i] = e.auth(rt, e.source.Token)
			}
			results, errs := mpRace(k, func(i int) (domain.MemoryPublishResult, error) { return e.publish(ps[i], coll, reqs[i]) })
			winner := -1
			for i := range k {
				switch {
				case errs[i] == nil && winner >= 0:
					rt.Fatalf("two concurrent publishes on revision %d both succeeded: %+v and %+v", expected, results[winner], results[i])
				case errs[i] == nil:
					winner = i
				case CodeOf(errs[i]) != domain.CodeRevisionConflict:
					rt.Fatalf("concurrent publish on revision %d: %v, want success or REVISION_CONFLICT", expected, errs[i])
				}
			}
			newHead := head
			if expected == head {
				if winner < 0 {
					rt.Fatalf("none of %d publishes on the head revision %d succeeded: %v", k, head, errs)
				}
				res := results[winner]
				if !res.Changed || res.Revision != head+1 || res.VisibleSeq == nil || res.CollectionID != coll {
					rt.Fatalf("winning publish: %+v, want revision %d", res, head+1)
				}
				st, up, del := mpApply(m.cur(), domain.ModeDelta, ups[winner], dels[winner], head+1)
				if res.Upserted != up || res.Deleted != del {
					rt.Fatalf("winning publish counts %d/%d, model %d/%d", res.Upserted, res.Deleted, up, del)
				}
				m.add(st, mpRevRec{seq: *res.VisibleSeq, mode: domain.ModeDelta, upserted: up, deleted: del})
				newHead = head + 1
			} else if winner >= 0 {
				rt.Fatalf("a publish on revision %d succeeded while the head was %d: %+v", expected, head, results[winner])
			}
			for i := range k {
				if i != winner && !mpConflictAt(errs[i], newHead) {
					rt.Fatalf("losing publish: %v, want REVISION_CONFLICT with current_revision %d", errs[i], newHead)
				}
			}
			// A retry with the same request returns the first outcome, whatever happened since.
			for i := range k {
				res, err := e.publish(ps[i], coll, reqs[i])
				if i == winner {
					if err != nil || !mpSameResult(res, results[i]) {
						rt.Fatalf("retry of the winner: %+v %v, first %+v", res, err, results[i])
					}
				} else if !SameError(err, errs[i]) || !mpConflictAt(err, newHead) {
					rt.Fatalf("retry of a loser: %v, first %v", err, errs[i])
				}
			}
			e.check(rt, m, coll, r, false)
		}
	})
}

// ---------------------------------------------------------------------------------------------------------
// P11: snapshot and delta.

var (
	mpIDs   = []string{"a", "b", "c", "d", "e", "f"}
	mpPaths = []string{"a.md", "b.md", "c.md", "notes/x.md", "y/z/w.txt"}
	// mpMetadata pairs raw metadata as sent with its JCS form; equal forms must not count as a change.
	mpMetadata = []struct{ raw, canon string }{
		{"", "{}"}, {"{}", "{}"}, {`{"v":1}`, `{"v":1}`}, {`{ "v" : 1 }`, `{"v":1}`},
		{`{"v":2,"a":"x"}`, `{"a":"x","v":2}`}, {`{"a":"x", "v":2.0}`, `{"a":"x","v":2}`},
	}
	mpBadPaths = []string{"/abs", "a/../b", "a//b", `a\b`, "../up", "a/./b", "trailing/", "."}
)

// mpSent is one publish request of a P11 check and what it got.
type mpSent struct {
	req      domain.MemoryPublishRequest
	res      domain.MemoryPublishResult
	err      error
	recorded bool // a committed result or a failure the service keeps for the key
	// stateful marks a non-recorded failure that depends on the head state (limit, path collision): a
	// retry after the head moved is a REVISION_CONFLICT instead.
	stateful bool
}

// mpDraw draws the publish inputs of P11 and P12.
type mpDraw struct {
	t       *rapid.T
	blobs   []string
	ids     []string
	paths   []string // extra paths besides each ID's own "<id>.md"
	collide bool     // whether items may take paths other than their own
}

func (d mpDraw) item(id string) (domain.MemoryItemInput, mpChange) {
	path := id + ".md"
	if d.collide && rapid.IntRange(0, 3).Draw(d.t, "other path") == 0 {
		path = rapid.SampledFrom(d.paths).Draw(d.t, "path")
	}
	blob := rapid.SampledFrom(d.blobs).Draw(d.t, "blob")
	md := rapid.SampledFrom(mpMetadata).Draw(d.t, "metadata")
	return mpIn(id, blob, path, md.raw), mpChange{id: id, val: mpVal{blob: blob, path: path, md: md.canon}}
}

func (d mpDraw) change(mode string) ([]domain.MemoryItemInput, []mpChange, []string) {
	ids := rapid.SliceOfNDistinct(rapid.SampledFrom(d.ids), 0, 4, rapid.ID[string]).Draw(d.t, "item ids")
	var items []domain.MemoryItemInput
	var ups []mpChange
	for _, id := range ids {
		in, ch := d.item(id)
		items, ups = append(items, in), append(ups, ch)
	}
	var dels []string
	if mode == domain.ModeDelta {
		rest := slices.DeleteFunc(slices.Clone(d.ids), func(s string) bool { return slices.Contains(ids, s) })
		dels = rapid.SliceOfNDistinct(rapid.SampledFrom(append(rest, "zz")), 0, 3, rapid.ID[string]).Draw(d.t, "delete ids")
	}
	return items, ups, dels
}

// mpP11 is property P11: after any sequence of publishes — snapshots, deltas, no-change publishes, stale or
// future expected revisions, requests the rules reject whole, replays and reused request IDs — the state of
// every revision, the head and the feed equal the model's: a snapshot replaces and tombstones, a delta
// upserts, deleting a missing ID is a no-op, a no-change publish returns changed:false without a revision,
// a rejected request changes nothing, and a partial source never deletes what it did not name.
func mpP11(t *testing.T, nb NewBackend, cfg propConfig) {
	const entriesMax = 5 // six IDs: RESOURCE_LIMIT is reachable
	e := mpNewEnv(t, nb, mpLimits(func(l *domain.Limits) { l.CollectionEntriesMax = entriesMax }))
	pool := e.pool(t, 3)
	unsealed := e.unsealed(t, e.source.P, "never sealed").BlobID
	rapid.Check(t, func(rt *rapid.T) {
		coll := e.collection(rt)
		r := e.reader(rt, coll)
		m := newMPModel()
		d := mpDraw{t: rt, blobs: pool, ids: mpIDs, paths: mpPaths, collide: true}
		var sent []*mpSent
		send := func(req domain.MemoryPublishRequest) *mpSent {
			res, err := e.publish(e.auth(rt, e.source.Token), coll, req)
			s := &mpSent{req: req, res: res, err: err}
			sent = append(sent, s)
			return s
		}
		// publish runs a request the model evaluates: within-request rules, then CAS, then the state rules.
		publish := func(req domain.MemoryPublishRequest, ups []mpChange, dels []string) {
			head := m.head()
			expected := *req.ExpectedRevision
			s := send(req)
			dupPath := false
			seen := map[string]bool{}
			for _, u := range ups {
				dupPath = dupPath || seen[u.val.path]
				seen[u.val.path] = true
			}
			if dupPath {
				WantCode(rt, "publish with two items on one path", s.err, domain.CodeInvalidRequest)
				return
			}
			if expected != head {
				if !mpConflictAt(s.err, head) {
					rt.Fatalf("publish on revision %d with head %d: %+v %v, want REVISION_CONFLICT", expected, head, s.res, s.err)
				}
				s.recorded = true
				return
			}
			st, up, del := mpApply(m.cur(), req.Mode, ups, dels, head+1)
			var allowed []domain.Code
			if mpDupActivePath(st) {
				allowed = append(allowed, domain.CodeInvalidRequest)
			}
			if len(st) > entriesMax {
				allowed = append(allowed, domain.CodeResourceLimit)
			}
			if len(allowed) > 0 {
				if !slices.Contains(allowed, CodeOf(s.err)) {
					rt.Fatalf("publish %s %v: %+v %v, want one of %v (next state %s)", req.Mode, ups, s.res, s.err, allowed, st)
				}
				s.stateful = true
				return
			}
			if s.err != nil {
				rt.Fatalf("publish %s on %d: %v (state %s)", req.Mode, expected, s.err, m.cur())
			}
			s.recorded = true
			if up+del == 0 {
				if s.res.Changed || s.res.Revision != head || s.res.VisibleSeq != nil || s.res.Upserted != 0 || s.res.Deleted != 0 {
					rt.Fatalf("no-change publish: %+v, want changed:false at revision %d", s.res, head)
				}
				return
			}
			if !s.res.Changed || s.res.Revision != head+1 || s.res.VisibleSeq == nil || s.res.Upserted != up || s.res.Deleted != del {
				rt.Fatalf("publish %s: %+v, want revision %d with %d upserted, %d deleted", req.Mode, s.res, head+1, up, del)
			}
			m.add(st, mpRevRec{seq: *s.res.VisibleSeq, mode: req.Mode, upserted: up, deleted: del})
		}
		runActions(rt, cfg.draw(rt, 1), map[string]func(){
			"publish": func() {
				mode := rapid.SampledFrom([]string{domain.ModeSnapshot, domain.ModeDelta}).Draw(rt, "mode")
				items, ups, dels := d.change(mode)
				expected := m.head()
				if rapid.IntRange(0, 6).Draw(rt, "other expected revision") == 0 {
					expected = rapid.Int64Range(0, m.head()+2).Draw(rt, "expected")
				}
				publish(e.req(expected, mode, items, dels...), ups, dels)
			},
			"no change": func() {
				cur := m.cur()
				var items []domain.MemoryItemInput
				var ups []mpChange
				mode := rapid.SampledFrom([]string{domain.ModeSnapshot, domain.ModeDelta}).Draw(rt, "mode")
				var dels []string
				for _, id := range cur.ids(false) {
					if mode == domain.ModeDelta && !rapid.Bool().Draw(rt, "repeat "+id) {
						continue
					}
					v := cur[id].mpVal
					var raws []string
					for _, md := range mpMetadata {
						if md.canon == v.md {
							raws = append(raws, md.raw)
						}
					}
					items = append(items, mpIn(id, v.blob, v.path, rapid.SampledFrom(raws).Draw(rt, "same metadata")))
					ups = append(ups, mpChange{id: id, val: v})
				}
				if mode == domain.ModeDelta {
					for _, id := range append(cur.ids(true), "zz") {
						if (id == "zz" || cur[id].tomb) && rapid.Bool().Draw(rt, "delete again "+id) {
							dels = append(dels, id)
						}
					}
				}
				publish(e.req(m.head(), mode, rapid.Permutation(items).Draw(rt, "item order"), dels...), ups, dels)
			},
			"rejected": func() {
				head := m.head()
				item, _ := d.item(rapid.SampledFrom(mpIDs).Draw(rt, "id"))
				var req domain.MemoryPublishRequest
				want := domain.CodeInvalidRequest
				switch rapid.IntRange(0, 6).Draw(rt, "rule") {
				case 0: // the same item ID twice
					other := item
					other.Path = "twice/" + item.Path
					req = e.req(head, domain.ModeDelta, []domain.MemoryItemInput{item, other})
				case 1: // upsert and delete of one ID
					req = e.req(head, domain.ModeDelta, []domain.MemoryItemInput{item}, item.ItemID)
				case 2:
					item.Path = rapid.SampledFrom(mpBadPaths).Draw(rt, "bad path")
					req = e.req(head, rapid.SampledFrom([]string{domain.ModeSnapshot, domain.ModeDelta}).Draw(rt, "mode"), []domain.MemoryItemInput{item})
				case 3: // one unsealed blob rejects the whole batch
					req = e.req(head, domain.ModeDelta, []domain.MemoryItemInput{item, mpIn("g", unsealed, "g.md")})
					want = domain.CodeBlobNotSealed
				case 4:
					req = e.req(head, domain.ModeSnapshot, []domain.MemoryItemInput{item}, "zz")
				case 5:
					item.BlobID = "blob_does_not_exist"
					req = e.req(head, domain.ModeDelta, []domain.MemoryItemInput{item})
					want = domain.CodeNotFound
				case 6:
					item.Metadata = json.RawMessage(`["not","an","object"]`)
					req = e.req(head, domain.ModeDelta, []domain.MemoryItemInput{item})
				}
				WantCode(rt, "publish the rules reject", send(req).err, want)
			},
			"replay": func() {
				if len(sent) == 0 {
					return
				}
				s := rapid.SampledFrom(sent).Draw(rt, "replayed")
				res, err := e.publish(e.auth(rt, e.source.Token), coll, s.req)
				switch {
				case s.recorded && s.err == nil:
					if err != nil || !mpSameResult(res, s.res) {
						rt.Fatalf("replay of %s: %+v %v, first %+v", s.req.RequestID, res, err, s.res)
					}
				case s.recorded:
					if !SameError(err, s.err) || fmt.Sprint(domain.AsError(err).Details) != fmt.Sprint(domain.AsError(s.err).Details) {
						rt.Fatalf("replay of %s: %v, first %v", s.req.RequestID, err, s.err)
					}
				case s.stateful && *s.req.ExpectedRevision != m.head():
					if !mpConflictAt(err, m.head()) {
						rt.Fatalf("replay of %s after the head moved: %v, want REVISION_CONFLICT", s.req.RequestID, err)
					}
					s.res, s.err, s.recorded, s.stateful = res, err, true, false
				default:
					if CodeOf(err) != CodeOf(s.err) {
						rt.Fatalf("replay of %s: %v, first %v", s.req.RequestID, err, s.err)
					}
				}
			},
			"reuse request_id": func() {
				var recorded []*mpSent
				for _, s := range sent {
					if s.recorded {
						recorded = append(recorded, s)
					}
				}
				if len(recorded) == 0 {
					return
				}
				s := rapid.SampledFrom(recorded).Draw(rt, "reused")
				req := s.req
				req.DeleteIDs = nil
				req.Mode = domain.ModeDelta
				req.Items = append(slices.Clone(req.Items), mpIn("reuse", pool[0], "reuse.md"))
				_, err := e.publish(e.auth(rt, e.source.Token), coll, req)
				WantCode(rt, "a request ID reused with other content", err, domain.CodeIdempotencyConflict)
			},
		})
		e.check(rt, m, coll, r, true)
	})
}

// ---------------------------------------------------------------------------------------------------------
// P12: memory read.

// mpP12 is property P12: a paged memory.read of any revision (the head when none is given), with any page
// size and with or without tombstones, returns exactly the model's entries of that revision in item-ID order;
// every page stays on the revision of the first page although publishes move the head between pages; the
// cursor decides the revision when none is given, an explicit revision that differs from the cursor's is
// INVALID_CURSOR, and so is a modified cursor. Grant holders read what the source reads.
func mpP12(t *testing.T, nb NewBackend, cfg propConfig) {
	e := mpNewEnv(t, nb, nil)
	pool := e.pool(t, 2)
	ids := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	rapid.Check(t, func(rt *rapid.T) {
		coll := e.collection(rt)
		r := e.reader(rt, coll)
		m := newMPModel()
		d := mpDraw{t: rt, blobs: pool, ids: ids}
		publish := func() {
			mode := rapid.SampledFrom([]string{domain.ModeSnapshot, domain.ModeDelta}).Draw(rt, "mode")
			items, ups, dels := d.change(mode)
			st, up, del := mpApply(m.cur(), mode, ups, dels, m.head()+1)
			res := e.mustPublish(rt, e.source.P, coll, e.req(m.head(), mode, items, dels...))
			if up+del == 0 {
				return
			}
			if res.Revision != m.head()+1 {
				rt.Fatalf("publish: %+v, want revision %d", res, m.head()+1)
			}
			m.add(st, mpRevRec{seq: *res.VisibleSeq, mode: mode, upserted: up, deleted: del})
		}
		for range rapid.IntRange(0, max(1, cfg.steps/3)).Draw(rt, "revisions") {
			publish()
		}
		for range rapid.IntRange(1, 4).Draw(rt, "reads") {
			who := e.source.P
			if rapid.Bool().Draw(rt, "as grant holder") {
				who = r.P
			}
			var rev *int64
			if rapid.Bool().Draw(rt, "explicit revision") {
				rev = mpI64(rapid.Int64Range(0, m.head()).Draw(rt, "revision"))
			}
			limit := rapid.IntRange(1, 4).Draw(rt, "limit")
			tombs := rapid.Bool().Draw(rt, "include tombstones")
			req := domain.MemoryReadRequest{Revision: rev, Limit: limit, IncludeTombstones: &tombs}
			headAtStart := m.head()
			var got []domain.MemoryEntry
			pinned := int64(-1)
			for range 1000 {
				page, err := e.f.Svc.ReadMemory(e.ctx, who, coll, req)
				if err != nil {
					rt.Fatalf("memory.read %+v: %v", req, err)
				}
				mpCheckPage(rt, page, coll, pinned, limit)
				if pinned < 0 && page.Revision != mpDerefOr(rev, headAtStart) {
					rt.Fatalf("first page at revision %d, want %d", page.Revision, mpDerefOr(rev, headAtStart))
				}
				pinned = page.Revision
				got = append(got, page.Items...)
				if !page.HasMore {
					break
				}
				cursor := *page.NextCursor
				if rapid.IntRange(0, 2).Draw(rt, "publish between pages") == 0 {
					publish()
				}
				switch rapid.IntRange(0, 5).Draw(rt, "cursor probe") {
				case 0: // a different explicit revision
					other := rapid.Int64Range(0, m.head()+1).Filter(func(v int64) bool { return v != pinned }).Draw(rt, "other revision")
					_, err := e.f.Svc.ReadMemory(e.ctx, who, coll, domain.MemoryReadRequest{Revision: &other, Limit: limit, Cursor: &cursor, IncludeTombstones: &tombs})
					WantCode(rt, "cursor with another explicit revision", err, domain.CodeInvalidCursor)
				case 1: // a modified cursor
					bad := mpTamper(rapid.IntRange(0, len(cursor)-1).Draw(rt, "tampered byte"), cursor)
					_, err := e.f.Svc.ReadMemory(e.ctx, who, coll, domain.MemoryReadRequest{Limit: limit, Cursor: &bad, IncludeTombstones: &tombs})
					WantCode(rt, "modified cursor", err, domain.CodeInvalidCursor)
				case 2: // the other include_tombstones than the cursor's
					flipped := !tombs
					_, err := e.f.Svc.ReadMemory(e.ctx, who, coll, domain.MemoryReadRequest{Limit: limit, Cursor: &cursor, IncludeTombstones: &flipped})
					WantCode(rt, "cursor with the other include_tombstones", err, domain.CodeInvalidCursor)
				}
				// A later page may omit include_tombstones (the cursor's value holds) or repeat it.
				req = domain.MemoryReadRequest{Limit: limit, Cursor: &cursor}
				if rapid.Bool().Draw(rt, "repeat include_tombstones") {
					req.IncludeTombstones = &tombs
				}
				if rapid.Bool().Draw(rt, "repeat the revision") {
					req.Revision = mpI64(pinned)
				}
			}
			mpCheckOrder(rt, got)
			mpCheckEntries(rt, fmt.Sprintf("paged read of revision %d (limit %d, tombstones %v)", pinned, limit, tombs), got, m.states[pinned], tombs)
		}
	})
}

func mpDerefOr(p *int64, def int64) int64 {
	if p == nil {
		return def
	}
	return *p
}

// mpTamper changes the byte at i of s to another character of the cursor alphabet.
func mpTamper(i int, s string) string {
	b := []byte(s)
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b)
}

// ---------------------------------------------------------------------------------------------------------
// P13: blob integrity.

// mpUpload is the model of one prepared upload.
type mpUpload struct {
	up      domain.BlobPrepareResult
	content []byte
	ct      string
	stored  bool // bytes stored (create-only)
	sealed  bool
	swept   bool
	info    domain.BlobInfo // the seal result
	commits []string        // request IDs of successful commits
}

// mpP13 is property P13: through any sequence of prepares, PUTs (the right bytes, other bytes, a wrong size,
// unknown length, a wrong type), commits and their replays, clock moves and sweeps, every PUT and commit gets
// the model's outcome — already_uploaded for the same bytes again, UPLOAD_CONTENT_CONFLICT for other bytes
// once stored, CHECKSUM_MISMATCH before, INVALID_BLOB for size or type, UPLOAD_SEALED after the seal,
// UPLOAD_EXPIRED after expires_at — a sweep expires exactly the unsealed uploads past their time, and a
// sealed blob's bytes match its size and SHA-256 forever (also after its upload's expires_at).
func mpP13(t *testing.T, nb NewBackend, cfg propConfig) {
	e := mpNewEnv(t, nb, nil)
	ttl := time.Duration(e.f.Svc.Limits().UploadTTLSeconds) * time.Second
	types := []string{mpText, "application/octet-stream", "text/markdown; charset=utf-8"}
	rapid.Check(t, func(rt *rapid.T) {
		// Start from no pending upload, whatever earlier (also failed) checks left.
		e.f.Clock.Advance(ttl + time.Second)
		for {
			n, err := e.f.Svc.SweepUploads(e.ctx, 1000)
			if err != nil {
				rt.Fatalf("SweepUploads: %v", err)
			}
			if n == 0 {
				break
			}
		}
		p := e.source.P
		var ups []*mpUpload
		expired := func(u *mpUpload) bool { return u.swept || !e.f.Clock.Now().Before(u.up.ExpiresAt) }
		// gate is the outcome every PUT shares before looking at the bytes.
		gate := func(u *mpUpload) domain.Code {
			switch {
			case u.sealed:
				return domain.CodeUploadSealed
			case expired(u):
				return domain.CodeUploadExpired
			}
			return ""
		}
		pick := func() *mpUpload { return rapid.SampledFrom(ups).Draw(rt, "upload") }
		put := func(u *mpUpload, ct string, length int64, body []byte) (domain.UploadResult, error) {
			return e.f.Svc.Upload(e.ctx, p, u.up.UploadID, ct, length, bytes.NewReader(body))
		}
		actions := map[string]func(){
			"prepare": func() {
				content := rapid.SliceOfN(rapid.ByteRange('a', 'd'), 0, 48).Draw(rt, "content")
				ct := rapid.SampledFrom(types).Draw(rt, "content type")
				up := e.prepare(rt, p, content, ct)
				if up.State != domain.BlobPending || up.SizeBytes != int64(len(content)) || up.SHA256 != mpSum(content) ||
					!up.ExpiresAt.Equal(e.f.Clock.Now().Add(ttl)) || up.UploadMethod != "PUT" {
					rt.Fatalf("prepare: %+v", up)
				}
				ups = append(ups, &mpUpload{up: up, content: content, ct: ct})
			},
			"put the bytes": func() {
				if len(ups) == 0 {
					return
				}
				u := pick()
				res, err := put(u, u.ct, int64(len(u.content)), u.content)
				if want := gate(u); want != "" {
					WantCode(rt, "PUT", err, want)
					return
				}
				if err != nil || res.AlreadyUploaded != u.stored || res.BlobID != u.up.BlobID || res.SHA256 != mpSum(u.content) || res.SizeBytes != int64(len(u.content)) {
					rt.Fatalf("PUT of the prepared bytes (stored before: %v): %+v %v", u.stored, res, err)
				}
				u.stored = true
			},
			"put other bytes": func() {
				if len(ups) == 0 {
					return
				}
				u := pick()
				if len(u.content) == 0 {
					return
				}
				b := slices.Clone(u.content)
				b[rapid.IntRange(0, len(b)-1).Draw(rt, "changed byte")] ^= 0x20
				_, err := put(u, u.ct, int64(len(b)), b)
				want := gate(u)
				switch {
				case want != "":
				case u.stored:
					want = domain.CodeUploadContentConflict
				default:
					want = domain.CodeChecksumMismatch
				}
				WantCode(rt, "PUT of other bytes", err, want)
			},
			"put a wrong size": func() {
				if len(ups) == 0 {
					return
				}
				u := pick()
				body := append(slices.Clone(u.content), 'x')
				if len(u.content) > 0 && rapid.Bool().Draw(rt, "shorter") {
					body = u.content[:len(u.content)-1]
				}
				known := rapid.Bool().Draw(rt, "Content-Length known")
				length := int64(-1)
				if known {
					length = int64(len(body))
				}
				_, err := put(u, u.ct, length, body)
				want := gate(u)
				switch {
				case want != "":
				case known || !u.stored:
					want = domain.CodeInvalidBlob
				default:
					want = domain.CodeUploadContentConflict
				}
				WantCode(rt, "PUT of a wrong size", err, want)
			},
			"put a wrong type": func() {
				if len(ups) == 0 {
					return
				}
				u := pick()
				_, err := put(u, "image/png", int64(len(u.content)), u.content)
				want := gate(u)
				if want == "" {
					want = domain.CodeInvalidBlob
				}
				WantCode(rt, "PUT with another Content-Type", err, want)
			},
			"commit": func() {
				if len(ups) == 0 {
					return
				}
				u := pick()
				rid := e.f.RID("seal")
				info, err := e.commit(p, rid, u.up.UploadID)
				switch {
				case u.sealed:
					if err != nil || !mpSameInfo(info, u.info) {
						rt.Fatalf("commit of a sealed blob: %+v %v, sealed as %+v", info, err, u.info)
					}
					u.commits = append(u.commits, rid)
				case expired(u):
					WantCode(rt, "commit after expiry", err, domain.CodeUploadExpired)
				case !u.stored:
					WantCode(rt, "commit before any upload", err, domain.CodeInvalidBlob)
				default:
					if err != nil || info.State != domain.BlobSealed || info.BlobID != u.up.BlobID || info.SHA256 != mpSum(u.content) ||
						info.SizeBytes != int64(len(u.content)) || info.SealedAt == nil || info.DownloadURL == "" || info.ContentType != u.ct {
						rt.Fatalf("commit: %+v %v", info, err)
					}
					u.sealed, u.info, u.commits = true, info, append(u.commits, rid)
				}
			},
			"replay a commit": func() {
				var sealed []*mpUpload
				for _, u := range ups {
					if len(u.commits) > 0 {
						sealed = append(sealed, u)
					}
				}
				if len(sealed) == 0 {
					return
				}
				u := rapid.SampledFrom(sealed).Draw(rt, "sealed upload")
				info, err := e.commit(p, rapid.SampledFrom(u.commits).Draw(rt, "commit"), u.up.UploadID)
				if err != nil || !mpSameInfo(info, u.info) {
					rt.Fatalf("replayed commit: %+v %v, first %+v", info, err, u.info)
				}
			},
			"time passes": func() {
				e.f.Clock.Advance(rapid.SampledFrom([]time.Duration{time.Minute, ttl / 2, ttl - time.Second, ttl}).Draw(rt, "advance"))
			},
			"sweep": func() {
				want := 0
				for _, u := range ups {
					if !u.sealed && expired(u) && !u.swept {
						want++
					}
				}
				n, err := e.f.Svc.SweepUploads(e.ctx, 1000)
				if err != nil || n != want {
					rt.Fatalf("SweepUploads: %d %v, want %d expired", n, err, want)
				}
				for _, u := range ups {
					if !u.sealed && expired(u) {
						u.swept = true
					}
				}
			},
		}
		runActions(rt, cfg.draw(rt, 1), actions)
		for _, u := range ups {
			info, err := e.f.Svc.GetBlob(e.ctx, p, u.up.BlobID)
			want := domain.BlobPending
			switch {
			case u.sealed:
				want = domain.BlobSealed
			case u.swept:
				want = domain.BlobExpired
			}
			if err != nil || info.State != want {
				rt.Fatalf("blob.get %s: %+v %v, want state %s", u.up.BlobID, info, err, want)
			}
			b, oinfo, err := e.blobBytes(p, u.up.BlobID)
			if !u.sealed {
				WantCode(rt, "reading an unsealed blob", err, domain.CodeBlobNotSealed)
				continue
			}
			if err != nil || !bytes.Equal(b, u.content) || mpSum(b) != oinfo.SHA256 || int64(len(b)) != oinfo.SizeBytes || !mpSameInfo(info, u.info) {
				rt.Fatalf("sealed blob %s: %q %+v %v, want %q as %+v", u.up.BlobID, b, oinfo, err, u.content, u.info)
			}
		}
	})
}

// ---------------------------------------------------------------------------------------------------------
// RFC §16.3 and §16.5, and the memory scenarios of RFC §10.

// mpRFC163 is RFC §16.3: two different requests both based on revision 3 race to commit (goroutines
// released together, many rounds, each on a fresh collection at revision 3). At most one becomes revision 4;
// the other gets REVISION_CONFLICT with current_revision 4; there is never a revision 5 or a feed item for
// the loser, and the loser's retry with the same request_id returns the same conflict. A real merge is a new
// request on revision 4.
func mpRFC163(t *testing.T, nb NewBackend, cfg propConfig) {
	e := mpNewEnv(t, nb, nil)
	blobs := e.pool(t, 2)
	rounds := 40
	if cfg.steps < 24 {
		rounds = 15
	}
	for round := range rounds {
		coll := e.collection(t)
		r := e.reader(t, coll)
		for rev := int64(0); rev < 3; rev++ {
			e.wantChanged(t, e.source.P, coll, e.req(rev, domain.ModeDelta, []domain.MemoryItemInput{mpIn(fmt.Sprint("base", rev), blobs[0], fmt.Sprintf("base%d.md", rev))}), rev+1)
		}
		reqs := []domain.MemoryPublishRequest{
			e.req(3, domain.ModeDelta, []domain.MemoryItemInput{mpIn("x", blobs[0], "x.md")}),
			e.req(3, domain.ModeSnapshot, []domain.MemoryItemInput{mpIn("y", blobs[1], "y.md")}),
		}
		ps := []*domain.Principal{e.auth(t, e.source.Token), e.auth(t, e.source.Token)}
		res, errs := mpRace(2, func(i int) (domain.MemoryPublishResult, error) { return e.publish(ps[i], coll, reqs[i]) })
		winner, loser := 0, 1
		if errs[0] != nil {
			winner, loser = 1, 0
		}
		if errs[winner] != nil || res[winner].Revision != 4 || !res[winner].Changed {
			t.Fatalf("round %d: no request became revision 4: %+v %v / %+v %v", round, res[0], errs[0], res[1], errs[1])
		}
		if !mpConflictAt(errs[loser], 4) {
			t.Fatalf("round %d: the loser got %+v %v, want REVISION_CONFLICT with current_revision 4", round, res[loser], errs[loser])
		}
		if _, err := e.publish(e.auth(t, e.source.Token), coll, reqs[loser]); !SameError(err, errs[loser]) || !mpConflictAt(err, 4) {
			t.Fatalf("round %d: the loser's retry got %v, first %v", round, err, errs[loser])
		}
		if again, err := e.publish(e.auth(t, e.source.Token), coll, reqs[winner]); err != nil || !mpSameResult(again, res[winner]) {
			t.Fatalf("round %d: the winner's retry got %+v %v, first %+v", round, again, err, res[winner])
		}
		if rev, _ := e.readAll(t, e.source.P, coll, nil, true, 100); rev != 4 {
			t.Fatalf("round %d: head is %d after the race, want 4", round, rev)
		}
		if _, err := e.f.Svc.ReadMemory(e.ctx, r.P, coll, domain.MemoryReadRequest{Revision: mpI64(5)}); CodeOf(err) != domain.CodeNotFound {
			t.Fatalf("round %d: revision 5 exists: %v", round, err)
		}
		feed := e.revisionFeed(t, r, coll)
		if len(feed) != 4 || feed[3].data.Revision != 4 || feed[3].item.VisibleSeq != *res[winner].VisibleSeq || feed[3].data.Mode != reqs[winner].Mode {
			t.Fatalf("round %d: feed after the race: %+v, want 4 revisions, the last from the winner %+v", round, feed, res[winner])
		}
		if round == 0 { // the loser merges for real: a new request on revision 4
			merged := reqs[loser]
			merged.RequestID, merged.ExpectedRevision = e.f.RID("merge"), mpI64(4)
			e.wantChanged(t, e.source.P, coll, merged, 5)
		}
	}
}

// mpRFC165 is RFC §16.5: a collection holds a and b; a source that can read only a publishes a delta
// updating a, and b stays (also after a delta adding c). Only an explicit delete or a full snapshot removes b.
func mpRFC165(t *testing.T, nb NewBackend, _ propConfig) {
	e := mpNewEnv(t, nb, nil)
	bl := e.pool(t, 3)
	p := e.source.P
	for _, removal := range []string{"delete", "snapshot"} {
		coll := e.collection(t)
		e.wantChanged(t, p, coll, e.req(0, domain.ModeSnapshot, []domain.MemoryItemInput{mpIn("a", bl[0], "a.md"), mpIn("b", bl[1], "b.md")}), 1)
		e.wantChanged(t, p, coll, e.req(1, domain.ModeDelta, []domain.MemoryItemInput{mpIn("a", bl[2], "a.md", `{"edited":true}`)}), 2)
		e.wantChanged(t, p, coll, e.req(2, domain.ModeDelta, []domain.MemoryItemInput{mpIn("c", bl[0], "c.md")}), 3)
		want := mpState{
			"a": {mpVal: mpVal{bl[2], "a.md", `{"edited":true}`}, rev: 2},
			"b": {mpVal: mpVal{bl[1], "b.md", "{}"}, rev: 1},
			"c": {mpVal: mpVal{bl[0], "c.md", "{}"}, rev: 3},
		}
		_, got := e.readAll(t, p, coll, nil, true, 2)
		mpCheckEntries(t, "after deltas that do not name b", got, want, true)
		want3 := maps.Clone(want)
		var res domain.MemoryPublishResult
		if removal == "delete" {
			res = e.wantChanged(t, p, coll, e.req(3, domain.ModeDelta, nil, "b"), 4)
		} else {
			res = e.wantChanged(t, p, coll, e.req(3, domain.ModeSnapshot, []domain.MemoryItemInput{mpIn("a", bl[2], "a.md", `{"edited":true}`), mpIn("c", bl[0], "c.md")}), 4)
		}
		if res.Deleted != 1 || res.Upserted != 0 {
			t.Fatalf("%s of b: %+v, want 1 deleted, 0 upserted", removal, res)
		}
		b := want["b"]
		b.tomb, b.delIn = true, 4
		want["b"] = b
		_, got = e.readAll(t, p, coll, nil, true, 2)
		mpCheckEntries(t, "after the explicit "+removal+" of b", got, want, true)
		_, got = e.readAll(t, p, coll, mpI64(3), true, 2)
		mpCheckEntries(t, "revision 3 after the removal", got, want3, true)
	}
}

// mpEmptySnapshot: an empty snapshot clears the collection and tombstones everything, but only with the
// right expected revision; repeating it changes nothing; an explicit upsert restores an item.
func mpEmptySnapshot(t *testing.T, nb NewBackend, _ propConfig) {
	e := mpNewEnv(t, nb, nil)
	bl := e.pool(t, 1)
	p := e.source.P
	coll := e.collection(t)
	r := e.reader(t, coll)
	e.wantChanged(t, p, coll, e.req(0, domain.ModeDelta, []domain.MemoryItemInput{mpIn("a", bl[0], "a.md"), mpIn("b", bl[0], "b.md")}), 1)
	e.wantChanged(t, p, coll, e.req(1, domain.ModeDelta, []domain.MemoryItemInput{mpIn("c", bl[0], "c.md")}), 2)
	if err := e.wantErr(t, p, coll, e.req(1, domain.ModeSnapshot, nil), domain.CodeRevisionConflict); !mpConflictAt(err, 2) {
		t.Fatalf("empty snapshot on a stale revision: %v", err)
	}
	res := e.wantChanged(t, p, coll, e.req(2, domain.ModeSnapshot, nil), 3)
	if res.Deleted != 3 || res.Upserted != 0 {
		t.Fatalf("empty snapshot: %+v, want 3 deleted", res)
	}
	if _, active := e.readAll(t, p, coll, nil, false, 10); len(active) != 0 {
		t.Fatalf("after an empty snapshot: %s", mpEntries(active))
	}
	_, all := e.readAll(t, p, coll, nil, true, 10)
	want := mpState{
		"a": {mpVal: mpVal{bl[0], "a.md", "{}"}, rev: 1, tomb: true, delIn: 3},
		"b": {mpVal: mpVal{bl[0], "b.md", "{}"}, rev: 1, tomb: true, delIn: 3},
		"c": {mpVal: mpVal{bl[0], "c.md", "{}"}, rev: 2, tomb: true, delIn: 3},
	}
	mpCheckEntries(t, "tombstones after an empty snapshot", all, want, true)
	again := e.mustPublish(t, p, coll, e.req(3, domain.ModeSnapshot, nil))
	if again.Changed || again.Revision != 3 || again.VisibleSeq != nil {
		t.Fatalf("a second empty snapshot: %+v, want changed:false at 3", again)
	}
	e.wantChanged(t, p, coll, e.req(3, domain.ModeDelta, []domain.MemoryItemInput{mpIn("a", bl[0], "a.md")}), 4)
	want["a"] = mpEntry{mpVal: mpVal{bl[0], "a.md", "{}"}, rev: 4}
	_, all = e.readAll(t, p, coll, nil, true, 10)
	mpCheckEntries(t, "after restoring a", all, want, true)
	if feed := e.revisionFeed(t, r, coll); len(feed) != 4 || feed[2].data.Mode != domain.ModeSnapshot || feed[2].data.Deleted != 3 {
		t.Fatalf("feed: %+v", feed)
	}
}

// mpNoChange: a publish equal to the current state returns changed:false with the current revision, adds no
// revision and no feed item (at revision 0 it returns 0); metadata changes are changes; the no-change result
// is replayed for its key even after the head moved; and a no-change publish on a revision that is no longer
// the head is a REVISION_CONFLICT.
func mpNoChange(t *testing.T, nb NewBackend, _ propConfig) {
	e := mpNewEnv(t, nb, nil)
	bl := e.pool(t, 1)
	p := e.source.P
	coll := e.collection(t)
	r := e.reader(t, coll)
	for _, req := range []domain.MemoryPublishRequest{
		e.req(0, domain.ModeSnapshot, nil),
		e.req(0, domain.ModeDelta, nil, "missing"),
		e.req(0, domain.ModeDelta, nil),
	} {
		res := e.mustPublish(t, p, coll, req)
		if res.Changed || res.Revision != 0 || res.VisibleSeq != nil || res.SubmissionState != domain.StateCommitted {
			t.Fatalf("no-change publish on the empty collection: %+v, want changed:false at revision 0", res)
		}
	}
	if _, err := e.f.Svc.ReadMemory(e.ctx, p, coll, domain.MemoryReadRequest{Revision: mpI64(1)}); CodeOf(err) != domain.CodeNotFound {
		t.Fatalf("revision 1 after no-change publishes: %v", err)
	}
	e.wantChanged(t, p, coll, e.req(0, domain.ModeSnapshot, []domain.MemoryItemInput{mpIn("a", bl[0], "a.md", `{"v":1,"w":"x"}`)}), 1)
	same := e.req(1, domain.ModeSnapshot, []domain.MemoryItemInput{mpIn("a", bl[0], "a.md", `{ "w": "x", "v": 1.0 }`)})
	nc := e.mustPublish(t, p, coll, same)
	if nc.Changed || nc.Revision != 1 || nc.VisibleSeq != nil || nc.Upserted != 0 || nc.Deleted != 0 {
		t.Fatalf("equal snapshot: %+v, want changed:false at 1", nc)
	}
	e.wantChanged(t, p, coll, e.req(1, domain.ModeDelta, []domain.MemoryItemInput{mpIn("a", bl[0], "a.md", `{"v":2,"w":"x"}`)}), 2)
	if again, err := e.publish(p, coll, same); err != nil || !mpSameResult(again, nc) {
		t.Fatalf("replay of the no-change publish after the head moved: %+v %v, want %+v", again, err, nc)
	}
	if err := e.wantErr(t, p, coll, e.req(1, domain.ModeDelta, nil, "missing"), domain.CodeRevisionConflict); !mpConflictAt(err, 2) {
		t.Fatalf("no-change publish on an old revision: %v", err)
	}
	if feed := e.revisionFeed(t, r, coll); len(feed) != 2 {
		t.Fatalf("%d feed items, want 2 (no-change publishes have none)", len(feed))
	}
}

// mpCASAtCommit places a publish of another request exactly between a publish's read of the head and its
// commit: the compare-and-set must be part of the commit, for changes and for no-change results alike
// (RFC §10.5). The overtaken publish then gets REVISION_CONFLICT, and nothing of it appears.
func mpCASAtCommit(t *testing.T, nb NewBackend, _ propConfig) {
	e := mpNewEnv(t, nb, nil)
	bl := e.pool(t, 1)
	p := e.source.P
	coll := e.collection(t)
	r := e.reader(t, coll)
	e.wantChanged(t, p, coll, e.req(0, domain.ModeDelta, []domain.MemoryItemInput{mpIn("a", bl[0], "a.md")}), 1)
	for i, late := range []domain.MemoryPublishRequest{
		e.req(1, domain.ModeDelta, []domain.MemoryItemInput{mpIn("b", bl[0], "b.md")}), // a change
		e.req(2, domain.ModeDelta, nil, "missing"),                                     // a no-change
	} {
		head := int64(i + 1)
		fired := false
		e.hooks.beforeCommit(func() {
			fired = true
			e.wantChanged(t, e.auth(t, e.source.Token), coll, e.req(head, domain.ModeDelta, []domain.MemoryItemInput{mpIn(fmt.Sprint("w", i), bl[0], fmt.Sprintf("w%d.md", i))}), head+1)
		})
		_, err := e.publish(e.auth(t, e.source.Token), coll, late)
		if !fired {
			t.Fatal("the commit hook did not fire")
		}
		if !mpConflictAt(err, head+1) {
			t.Fatalf("publish overtaken between its read and its commit: %v, want REVISION_CONFLICT with current_revision %d", err, head+1)
		}
	}
	if rev, _ := e.readAll(t, p, coll, nil, true, 10); rev != 3 {
		t.Fatalf("head %d, want 3", rev)
	}
	if feed := e.revisionFeed(t, r, coll); len(feed) != 3 {
		t.Fatalf("%d feed items, want 3", len(feed))
	}
}

// mpIdempotencyBeforeCAS: the stored result of a request is checked before the CAS, so retrying a publish
// that succeeded returns its revision even after the head moved, and reusing its request ID with other
// content is IDEMPOTENCY_CONFLICT; a new request with the old expected revision is REVISION_CONFLICT.
func mpIdempotencyBeforeCAS(t *testing.T, nb NewBackend, _ propConfig) {
	e := mpNewEnv(t, nb, nil)
	bl := e.pool(t, 1)
	p := e.source.P
	coll := e.collection(t)
	first := e.req(0, domain.ModeDelta, []domain.MemoryItemInput{mpIn("a", bl[0], "a.md")})
	r1 := e.wantChanged(t, p, coll, first, 1)
	e.wantChanged(t, p, coll, e.req(1, domain.ModeDelta, []domain.MemoryItemInput{mpIn("b", bl[0], "b.md")}), 2)
	e.f.Clock.Advance(time.Hour)
	for range 2 {
		again, err := e.publish(e.auth(t, e.source.Token), coll, first)
		if err != nil || !mpSameResult(again, r1) {
			t.Fatalf("retry of a committed publish after the head moved: %+v %v, want %+v", again, err, r1)
		}
	}
	changed := first
	changed.Items = []domain.MemoryItemInput{mpIn("a", bl[0], "other.md")}
	e.wantErr(t, p, coll, changed, domain.CodeIdempotencyConflict)
	fresh := first
	fresh.RequestID = e.f.RID("fresh")
	if err := e.wantErr(t, p, coll, fresh, domain.CodeRevisionConflict); !mpConflictAt(err, 2) {
		t.Fatalf("a new request on revision 0: %v", err)
	}
}

// mpRejectedWhole: requests the rules reject change nothing at all (RFC §10.4): duplicate item IDs, an
// upsert and a delete of one ID, paths that are absolute, contain '..', '.', empty segments or backslashes,
// two items on one path (in the request, or with an active item already in the collection), an unsealed or
// unknown blob next to valid items, delete_ids in a snapshot, a missing or out-of-range expected_revision,
// an unknown mode, too many inline changes.
func mpRejectedWhole(t *testing.T, nb NewBackend, _ propConfig) {
	e := mpNewEnv(t, nb, nil)
	bl := e.pool(t, 2)
	p := e.source.P
	coll := e.collection(t)
	r := e.reader(t, coll)
	e.wantChanged(t, p, coll, e.req(0, domain.ModeDelta, []domain.MemoryItemInput{mpIn("a", bl[0], "a.md")}), 1)
	unsealed := e.unsealed(t, p, "not sealed").BlobID
	ok := mpIn("ok", bl[1], "ok.md")
	with := func(q domain.MemoryPublishRequest, change func(*domain.MemoryPublishRequest)) domain.MemoryPublishRequest {
		change(&q)
		return q
	}
	invalid := []domain.Code{domain.CodeInvalidRequest}
	cases := []struct {
		name string
		req  domain.MemoryPublishRequest
		want []domain.Code
	}{
		{"duplicate item IDs", e.req(1, domain.ModeDelta, []domain.MemoryItemInput{ok, mpIn("ok", bl[0], "ok2.md")}), invalid},
		{"upsert and delete of one ID", e.req(1, domain.ModeDelta, []domain.MemoryItemInput{ok}, "ok"), invalid},
		{"two items on one path", e.req(1, domain.ModeDelta, []domain.MemoryItemInput{ok, mpIn("ok2", bl[0], "ok.md")}), invalid},
		{"the path of another active item", e.req(1, domain.ModeDelta, []domain.MemoryItemInput{ok, mpIn("b", bl[0], "a.md")}), invalid},
		{"an unsealed blob", e.req(1, domain.ModeDelta, []domain.MemoryItemInput{ok, mpIn("u", unsealed, "u.md")}), []domain.Code{domain.CodeBlobNotSealed}},
		{"an unknown blob", e.req(1, domain.ModeDelta, []domain.MemoryItemInput{ok, mpIn("u", "blob_nope", "u.md")}), []domain.Code{domain.CodeNotFound}},
		{"delete_ids in a snapshot", e.req(1, domain.ModeSnapshot, []domain.MemoryItemInput{ok}, "a"), invalid},
		{"an unknown mode", e.req(1, "partial_snapshot", []domain.MemoryItemInput{ok}), invalid},
		{"a negative expected_revision", e.req(-1, domain.ModeDelta, []domain.MemoryItemInput{ok}), invalid},
		{"an expected_revision above 2^53-1", e.req(domain.MaxSafeInteger+1, domain.ModeDelta, []domain.MemoryItemInput{ok}), invalid},
		{"metadata that is not an object", e.req(1, domain.ModeDelta, []domain.MemoryItemInput{mpIn("ok", bl[1], "ok.md", `"text"`)}), invalid},
		{"a path over memory_path_bytes", e.req(1, domain.ModeDelta, []domain.MemoryItemInput{mpIn("ok", bl[1], strings.Repeat("p", 1025))}),
			[]domain.Code{domain.CodeInvalidRequest, domain.CodeResourceLimit}},
		{"a collection_id other than the path's", with(e.req(1, domain.ModeDelta, []domain.MemoryItemInput{ok}), func(q *domain.MemoryPublishRequest) { q.CollectionID = "another_collection" }), invalid},
		{"a missing expected_revision", with(e.req(1, domain.ModeDelta, []domain.MemoryItemInput{ok}), func(q *domain.MemoryPublishRequest) { q.ExpectedRevision = nil }), invalid},
		{"manifest_blob_id with inline items", with(e.req(1, domain.ModeDelta, []domain.MemoryItemInput{ok}), func(q *domain.MemoryPublishRequest) { q.ManifestBlobID = bl[0] }), invalid},
		{"more than memory_inline_changes_max changes", with(e.req(1, domain.ModeDelta, nil), func(q *domain.MemoryPublishRequest) {
			for i := range 300 {
				q.Items = append(q.Items, mpIn(fmt.Sprint("m", i), bl[0], fmt.Sprintf("m/%d.md", i)))
			}
			for i := range 201 {
				q.DeleteIDs = append(q.DeleteIDs, fmt.Sprint("d", i))
			}
		}), []domain.Code{domain.CodeResourceLimit}},
	}
	for _, bad := range mpBadPaths {
		cases = append(cases, struct {
			name string
			req  domain.MemoryPublishRequest
			want []domain.Code
		}{"path " + bad, e.req(1, domain.ModeDelta, []domain.MemoryItemInput{ok, mpIn("bad", bl[0], bad)}), invalid})
	}
	for _, c := range cases {
		if _, err := e.publish(p, coll, c.req); !slices.Contains(c.want, CodeOf(err)) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
	want := mpState{"a": {mpVal: mpVal{bl[0], "a.md", "{}"}, rev: 1}}
	rev, got := e.readAll(t, p, coll, nil, true, 10)
	if rev != 1 {
		t.Fatalf("head %d after rejected requests, want 1", rev)
	}
	mpCheckEntries(t, "state after rejected requests", got, want, true)
	if feed := e.revisionFeed(t, r, coll); len(feed) != 1 {
		t.Fatalf("%d feed items after rejected requests, want 1", len(feed))
	}
	// A path freed by a snapshot may be taken by another item.
	e.wantChanged(t, p, coll, e.req(1, domain.ModeSnapshot, []domain.MemoryItemInput{mpIn("b", bl[0], "a.md")}), 2)
}

// mpManifest: changes can come from a sealed manifest blob {"items": [...], "delete_ids": [...]} under the
// same rules as inline changes. A manifest that breaks them is INVALID_MANIFEST, recorded as a failed
// submission: a retry with the same key returns the same error, status reports it, and the key cannot be
// reused for other content. A manifest over memory_manifest_changes_max is RESOURCE_LIMIT. An unsealed
// manifest, or one naming an unsealed blob, publishes nothing.
func mpManifest(t *testing.T, nb NewBackend, _ propConfig) {
	e := mpNewEnv(t, nb, mpLimits(func(l *domain.Limits) { l.MemoryManifestChangesMax = 4 }))
	bl := e.pool(t, 2)
	p := e.source.P
	coll := e.collection(t)
	r := e.reader(t, coll)
	manifest := func(body string) string {
		up := e.prepare(t, p, []byte(body), "application/json")
		mustDo[domain.UploadResult](t, "Upload")(e.upload(p, up.UploadID, "application/json", []byte(body)))
		mustDo[domain.BlobInfo](t, "CommitBlob")(e.commit(p, e.f.RID("seal"), up.UploadID))
		return up.BlobID
	}
	withManifest := func(expected int64, mode, blob string) domain.MemoryPublishRequest {
		q := e.req(expected, mode, nil)
		q.ManifestBlobID = blob
		return q
	}
	good := manifest(fmt.Sprintf(`{"items":[{"item_id":"a","blob_id":%q,"path":"a.md","metadata":{"k":1}},{"item_id":"b","blob_id":%q,"path":"dir/b.md"}],"delete_ids":[]}`, bl[0], bl[1]))
	e.wantChanged(t, p, coll, withManifest(0, domain.ModeSnapshot, good), 1)
	want := mpState{
		"a": {mpVal: mpVal{bl[0], "a.md", `{"k":1}`}, rev: 1},
		"b": {mpVal: mpVal{bl[1], "dir/b.md", "{}"}, rev: 1},
	}
	_, got := e.readAll(t, p, coll, nil, true, 10)
	mpCheckEntries(t, "state after a manifest snapshot", got, want, true)
	e.wantChanged(t, p, coll, withManifest(1, domain.ModeDelta, manifest(`{"items":[],"delete_ids":["b","never-existed"]}`)), 2)

	item := func(id, path string) string {
		return fmt.Sprintf(`{"item_id":%q,"blob_id":%q,"path":%q}`, id, bl[0], path)
	}
	for _, c := range []struct{ name, mode, body string }{
		{"not JSON", domain.ModeDelta, `items: a`},
		{"not an object", domain.ModeDelta, `[1,2]`},
		{"an unknown member", domain.ModeDelta, `{"items":[],"delete_ids":[],"mode":"snapshot"}`},
		{"trailing data", domain.ModeDelta, `{"items":[],"delete_ids":[]} {}`},
		{"duplicate item IDs", domain.ModeDelta, `{"items":[` + item("x", "x.md") + `,` + item("x", "y.md") + `]}`},
		{"an upsert and a delete of one ID", domain.ModeDelta, `{"items":[` + item("x", "x.md") + `],"delete_ids":["x"]}`},
		{"an absolute path", domain.ModeDelta, `{"items":[` + item("x", "/x.md") + `]}`},
		{"a backslash", domain.ModeDelta, `{"items":[` + item("x", `x\\y.md`) + `]}`},
		{"two items on one path", domain.ModeDelta, `{"items":[` + item("x", "x.md") + `,` + item("y", "x.md") + `]}`},
		{"the path of another active item", domain.ModeDelta, `{"items":[` + item("x", "a.md") + `]}`},
		{"delete_ids in a snapshot", domain.ModeSnapshot, `{"items":[` + item("x", "x.md") + `],"delete_ids":["a"]}`},
		{"metadata that is not an object", domain.ModeDelta, `{"items":[{"item_id":"x","blob_id":"` + bl[0] + `","path":"x.md","metadata":7}]}`},
	} {
		req := withManifest(2, c.mode, manifest(c.body))
		_, err := e.publish(p, coll, req)
		if CodeOf(err) != domain.CodeInvalidManifest {
			t.Errorf("manifest with %s: %v, want INVALID_MANIFEST", c.name, err)
			continue
		}
		if _, again := e.publish(e.auth(t, e.source.Token), coll, req); !SameError(again, err) {
			t.Errorf("manifest with %s: retry got %v, first %v", c.name, again, err)
		}
		other := req
		other.ManifestBlobID = good
		if _, reuse := e.publish(p, coll, other); CodeOf(reuse) != domain.CodeIdempotencyConflict {
			t.Errorf("manifest with %s: the failed key reused for other content got %v, want IDEMPOTENCY_CONFLICT (the failure is recorded)", c.name, reuse)
		}
		st, serr := e.f.Svc.Status(e.ctx, p, domain.OpMemoryPublish, req.RequestID)
		if serr != nil || st.SubmissionState != domain.StateFailed || st.Error == nil || st.Error.Code != domain.CodeInvalidManifest {
			t.Errorf("manifest with %s: status %+v %v, want failed with INVALID_MANIFEST", c.name, st, serr)
		}
	}
	// A manifest over memory_manifest_changes_max is a published limit (SUPPLEMENT §5.3): RESOURCE_LIMIT,
	// checked before anything is recorded, so the request_id stays free.
	over := withManifest(2, domain.ModeDelta, manifest(`{"items":[`+item("x", "x.md")+`,`+item("y", "y.md")+`,`+item("z", "z.md")+`],"delete_ids":["a","b"]}`))
	e.wantErr(t, p, coll, over, domain.CodeResourceLimit)
	if _, err := e.f.Svc.Status(e.ctx, p, domain.OpMemoryPublish, over.RequestID); CodeOf(err) != domain.CodeNotFound {
		t.Errorf("a manifest over the limit left a submission: %v", err)
	}
	body := []byte(`{"items":[` + item("x", "x.md") + `]}`)
	up := e.prepare(t, p, body, "application/json")
	mustDo[domain.UploadResult](t, "Upload")(e.upload(p, up.UploadID, "application/json", body))
	e.wantErr(t, p, coll, withManifest(2, domain.ModeDelta, up.BlobID), domain.CodeBlobNotSealed)
	naming := manifest(fmt.Sprintf(`{"items":[{"item_id":"u","blob_id":%q,"path":"u.md"}]}`, e.unsealed(t, p, "unsealed item").BlobID))
	e.wantErr(t, p, coll, withManifest(2, domain.ModeDelta, naming), domain.CodeBlobNotSealed)
	if rev, _ := e.readAll(t, p, coll, nil, true, 10); rev != 2 {
		t.Fatalf("head %d after rejected manifests, want 2", rev)
	}
	if feed := e.revisionFeed(t, r, coll); len(feed) != 2 {
		t.Fatalf("%d feed items after rejected manifests, want 2", len(feed))
	}
}

// mpReadPinned: while another goroutine keeps publishing, paged reads of the head stay on the revision of
// their first page and return exactly that revision's state.
func mpReadPinned(t *testing.T, nb NewBackend, cfg propConfig) {
	e := mpNewEnv(t, nb, nil)
	bl := e.pool(t, 2)
	coll := e.collection(t)
	var items []domain.MemoryItemInput
	for i := range 12 {
		items = append(items, mpIn(fmt.Sprintf("i%02d", i), bl[0], fmt.Sprintf("i%02d.md", i)))
	}
	e.wantChanged(t, e.source.P, coll, e.req(0, domain.ModeSnapshot, items), 1)
	// states[r] maps the item IDs of revision r to their blobs, as the writer publishes them.
	var mu sync.Mutex
	states := map[int64]map[string]string{1: {}}
	for _, it := range items {
		states[1][it.ItemID] = it.BlobID
	}
	writes := int64(30)
	if cfg.steps < 24 {
		writes = 12
	}
	writer := e.auth(t, e.source.Token)
	var werr error
	var wg sync.WaitGroup
	done, firstRead := make(chan struct{}), make(chan struct{})
	wg.Go(func() {
		defer close(done)
		<-firstRead // at least one read sees revision 1, and one the last revision
		for rev := int64(1); rev <= writes; rev++ {
			id := fmt.Sprintf("i%02d", rev%12)
			mu.Lock()
			blob := bl[0]
			if states[rev][id] == bl[0] {
				blob = bl[1]
			}
			mu.Unlock()
			if _, err := e.publish(writer, coll, e.req(rev, domain.ModeDelta, []domain.MemoryItemInput{mpIn(id, blob, id+".md")})); err != nil {
				werr = err
				return
			}
			mu.Lock()
			next := maps.Clone(states[rev])
			next[id] = blob
			states[rev+1] = next
			mu.Unlock()
		}
	})
	type read struct {
		rev     int64
		entries []domain.MemoryEntry
	}
	var reads []read
	for finished := false; !finished; {
		select {
		case <-done:
			finished = true // one more read after the last write
		default:
		}
		rev, got := e.readAll(t, e.auth(t, e.source.Token), coll, nil, false, 5)
		reads = append(reads, read{rev, got})
		if len(reads) == 1 {
			close(firstRead)
		}
	}
	wg.Wait()
	if werr != nil {
		t.Fatalf("writer: %v", werr)
	}
	distinct := map[int64]bool{}
	for _, rd := range reads {
		distinct[rd.rev] = true
		want := states[rd.rev]
		if len(rd.entries) != len(want) {
			t.Fatalf("read of revision %d has %d items, want %d", rd.rev, len(rd.entries), len(want))
		}
		for _, en := range rd.entries {
			if want[en.ItemID] != en.BlobID {
				t.Fatalf("read of revision %d mixes states: item %s has blob %s, want %s", rd.rev, en.ItemID, en.BlobID, want[en.ItemID])
			}
		}
	}
	if len(distinct) < 2 {
		t.Errorf("%d paged reads saw only revisions %v: the publishes did not overlap the reads", len(reads), distinct)
	}
	t.Logf("%d paged reads saw %d distinct revisions", len(reads), len(distinct))
}

// mpIncludeTombstones: tombstones appear only with include_tombstones, carry deleted_in_revision, stay in
// later revisions, and leave the current state when the item is restored (old revisions keep them).
func mpIncludeTombstones(t *testing.T, nb NewBackend, _ propConfig) {
	e := mpNewEnv(t, nb, nil)
	bl := e.pool(t, 1)
	p := e.source.P
	coll := e.collection(t)
	e.wantChanged(t, p, coll, e.req(0, domain.ModeDelta, []domain.MemoryItemInput{mpIn("a", bl[0], "a.md"), mpIn("b", bl[0], "b.md"), mpIn("c", bl[0], "c.md")}), 1)
	e.wantChanged(t, p, coll, e.req(1, domain.ModeDelta, nil, "b"), 2)
	e.wantChanged(t, p, coll, e.req(2, domain.ModeDelta, []domain.MemoryItemInput{mpIn("d", bl[0], "d.md")}), 3)
	st := mpState{
		"a": {mpVal: mpVal{bl[0], "a.md", "{}"}, rev: 1},
		"b": {mpVal: mpVal{bl[0], "b.md", "{}"}, rev: 1, tomb: true, delIn: 2},
		"c": {mpVal: mpVal{bl[0], "c.md", "{}"}, rev: 1},
		"d": {mpVal: mpVal{bl[0], "d.md", "{}"}, rev: 3},
	}
	for _, limit := range []int{1, 2, 10} {
		_, got := e.readAll(t, p, coll, nil, false, limit)
		mpCheckEntries(t, "default read", got, st, false)
		_, got = e.readAll(t, p, coll, nil, true, limit)
		mpCheckEntries(t, "read with tombstones", got, st, true)
	}
	e.wantChanged(t, p, coll, e.req(3, domain.ModeDelta, []domain.MemoryItemInput{mpIn("b", bl[0], "b2.md")}), 4)
	old := maps.Clone(st)
	st["b"] = mpEntry{mpVal: mpVal{bl[0], "b2.md", "{}"}, rev: 4}
	_, got := e.readAll(t, p, coll, nil, true, 2)
	mpCheckEntries(t, "after restoring b", got, st, true)
	_, got = e.readAll(t, p, coll, mpI64(3), true, 2)
	mpCheckEntries(t, "revision 3 after restoring b", got, old, true)
}

// mpCursorMismatch: a cursor fixes the revision: without an explicit revision the next page stays on it
// after the head moved; the same explicit revision is accepted; another one is INVALID_CURSOR; so is a
// modified or foreign cursor, and a cursor of another collection is refused.
func mpCursorMismatch(t *testing.T, nb NewBackend, _ propConfig) {
	e := mpNewEnv(t, nb, nil)
	bl := e.pool(t, 1)
	p := e.source.P
	coll := e.collection(t)
	e.wantChanged(t, p, coll, e.req(0, domain.ModeDelta, []domain.MemoryItemInput{mpIn("a", bl[0], "a.md"), mpIn("b", bl[0], "b.md")}), 1)
	e.wantChanged(t, p, coll, e.req(1, domain.ModeDelta, []domain.MemoryItemInput{mpIn("c", bl[0], "c.md")}), 2)
	page := mustDo[domain.MemoryPage](t, "ReadMemory")(e.f.Svc.ReadMemory(e.ctx, p, coll, domain.MemoryReadRequest{Limit: 1}))
	if page.Revision != 2 || !page.HasMore || page.NextCursor == nil {
		t.Fatalf("first page: %+v", page)
	}
	e.wantChanged(t, p, coll, e.req(2, domain.ModeSnapshot, nil), 3)
	cur := page.NextCursor
	for _, rev := range []*int64{nil, mpI64(2)} {
		next := mustDo[domain.MemoryPage](t, "ReadMemory")(e.f.Svc.ReadMemory(e.ctx, p, coll, domain.MemoryReadRequest{Limit: 1, Cursor: cur, Revision: rev}))
		if next.Revision != 2 || len(next.Items) != 1 || next.Items[0].ItemID != "b" {
			t.Fatalf("second page with revision %v: %+v, want b of revision 2", mpDeref(rev), next)
		}
	}
	for _, rev := range []int64{0, 1, 3} {
		_, err := e.f.Svc.ReadMemory(e.ctx, p, coll, domain.MemoryReadRequest{Limit: 1, Cursor: cur, Revision: mpI64(rev)})
		WantCode(t, fmt.Sprintf("cursor of revision 2 with revision %d", rev), err, domain.CodeInvalidCursor)
	}
	bad := mpTamper(len(*cur)/3, *cur)
	_, err := e.f.Svc.ReadMemory(e.ctx, p, coll, domain.MemoryReadRequest{Limit: 1, Cursor: &bad})
	WantCode(t, "modified cursor", err, domain.CodeInvalidCursor)
	foreign := "wpc1." + *cur
	_, err = e.f.Svc.ReadMemory(e.ctx, p, coll, domain.MemoryReadRequest{Limit: 1, Cursor: &foreign})
	WantCode(t, "foreign cursor", err, domain.CodeInvalidCursor)
	other := e.collection(t)
	_, err = e.f.Svc.ReadMemory(e.ctx, p, other, domain.MemoryReadRequest{Limit: 1, Cursor: cur})
	if c := CodeOf(err); c != domain.CodeInvalidCursor && c != domain.CodeCursorScopeChanged {
		t.Fatalf("a cursor of another collection: %v", err)
	}
	if _, err := e.f.Svc.ReadMemory(e.ctx, p, coll, domain.MemoryReadRequest{Revision: mpI64(4)}); CodeOf(err) != domain.CodeNotFound {
		t.Fatalf("a revision past the head: %v, want NOT_FOUND", err)
	}
}

// mpFeedVisibility: a memory_revision feed item shows in inbox views only to actors that may read its
// collection (the memory.read grant on it, or being its source; RFC §4, §8) with a token holding the
// memory.read scope, and in a space_log view only with that right as well; a consumer filter on other
// collections hides it. memory.read follows the same rights; readers cannot publish.
func mpFeedVisibility(t *testing.T, nb NewBackend, _ propConfig) {
	e := mpNewEnv(t, nb, nil)
	bl := e.pool(t, 1)
	coll := e.collection(t)
	otherColl := e.collection(t)
	c := e.f.With(t)
	noMemoryScope := []domain.Scope{domain.ScopeMessageSend, domain.ScopeMessageRead, domain.ScopeReceiptWrite, domain.ScopeBlobRead}
	granted := e.reader(t, coll)
	grantedNoScope := e.reader(t, coll, noMemoryScope...)
	otherGrant := e.reader(t, otherColl)
	noGrant := e.party(t)
	filtered := e.reader(t, coll)
	filteredCon := c.Consumer(e.space, filtered.ActorID, domain.ViewInbox, &domain.Filter{CollectionIDs: []string{otherColl}})
	obs := c.Feed(e.space)
	res := e.wantChanged(t, e.source.P, coll, e.req(0, domain.ModeDelta, []domain.MemoryItemInput{mpIn("a", bl[0], "a.md")}), 1)
	sees := func(p Party, consumer string) bool {
		items, _ := c.ReadAll(e.auth(t, p.Token), consumer, nil, 50)
		for _, it := range items {
			if it.ItemType == domain.ItemMemoryRevision && it.ResourceID == coll {
				if it.VisibleSeq != *res.VisibleSeq {
					t.Fatalf("memory_revision item at %s, published at %s", it.VisibleSeq, *res.VisibleSeq)
				}
				return true
			}
		}
		return false
	}
	for _, tc := range []struct {
		name     string
		p        Party
		consumer string
		want     bool
	}{
		{"grant and scope", granted, granted.ConsumerID, true},
		{"grant without the memory.read scope", grantedNoScope, grantedNoScope.ConsumerID, false},
		{"a grant on another collection", otherGrant, otherGrant.ConsumerID, false},
		{"no grant", noGrant, noGrant.ConsumerID, false},
		{"the source without a grant (it may read its collection)", e.source, e.source.ConsumerID, true},
		{"a filter on other collections", filtered, filteredCon, false},
		{"the same actor without that filter", filtered, filtered.ConsumerID, true},
	} {
		if got := sees(tc.p, tc.consumer); got != tc.want {
			t.Errorf("%s: sees the memory_revision item: %v, want %v", tc.name, got, tc.want)
		}
	}
	// space_log does not expose memory by itself (RFC §4.4, §8.1): an observer needs memory.read too.
	observes := func() bool {
		for _, it := range obs.All() {
			if it.ItemType == domain.ItemMemoryRevision && it.ResourceID == coll {
				return true
			}
		}
		return false
	}
	if observes() {
		t.Error("a space observer without memory.read on the collection sees its memory_revision item")
	}
	c.Grant(e.space, obs.ActorID(), domain.PermMemoryRead, coll)
	if !observes() {
		t.Error("a space observer with memory.read on the collection does not see its memory_revision item")
	}
	// The grant alone is not enough: the token must carry the memory.read scope too.
	narrow := c.Actor(e.space)
	c.Grant(e.space, narrow, domain.PermSpaceObserve, "")
	c.Grant(e.space, narrow, domain.PermMemoryRead, coll)
	narrowLog := c.Consumer(e.space, narrow, domain.ViewSpaceLog, nil)
	narrowTok, _ := c.Token(e.space, narrow, "", domain.ScopeMessageRead, domain.ScopeSpaceObserve)
	if sees(Party{ActorID: narrow, Token: narrowTok}, narrowLog) {
		t.Error("a space observer with the memory.read grant but without the memory.read scope sees the memory_revision item")
	}
	if _, err := e.f.Svc.ReadMemory(e.ctx, granted.P, coll, domain.MemoryReadRequest{}); err != nil {
		t.Errorf("grant holder memory.read: %v", err)
	}
	if _, err := e.f.Svc.ReadMemory(e.ctx, grantedNoScope.P, coll, domain.MemoryReadRequest{}); CodeOf(err) != domain.CodeForbidden {
		t.Errorf("memory.read without the scope: %v, want FORBIDDEN", err)
	}
	_, errNoGrant := e.f.Svc.ReadMemory(e.ctx, noGrant.P, coll, domain.MemoryReadRequest{})
	_, errAbsent := e.f.Svc.ReadMemory(e.ctx, noGrant.P, "no_such_collection", domain.MemoryReadRequest{})
	if CodeOf(errNoGrant) != domain.CodeNotFound || CodeOf(errAbsent) != domain.CodeNotFound {
		t.Errorf("memory.read without a grant: %v; of an absent collection: %v; want NOT_FOUND for both", errNoGrant, errAbsent)
	}
	_, err := e.publish(granted.P, coll, e.req(1, domain.ModeDelta, []domain.MemoryItemInput{mpIn("z", bl[0], "z.md")}))
	if c := CodeOf(err); c != domain.CodeForbidden {
		t.Errorf("a reader publishes: %v, want FORBIDDEN", err)
	}
}

// ---------------------------------------------------------------------------------------------------------
// Blob scenarios (P13 and RFC §9).

// mpBlobUploadErrors walks uploads through every PUT and commit outcome of RFC §9, including the zero-byte
// blob with the real SHA-256 of no bytes, a replayed prepare, expiry and the sweep.
func mpBlobUploadErrors(t *testing.T, nb NewBackend, _ propConfig) {
	e := mpNewEnv(t, nb, nil)
	p := e.source.P
	ttl := time.Duration(e.f.Svc.Limits().UploadTTLSeconds) * time.Second
	content := []byte("hello, blob")
	req := domain.BlobPrepareRequest{RequestID: e.f.RID("prep"), ContentType: mpText, SizeBytes: int64(len(content)), SHA256: mpSum(content), Filename: "hello.txt"}
	up := mustDo[domain.BlobPrepareResult](t, "PrepareBlob")(e.f.Svc.PrepareBlob(e.ctx, p, req))
	if again, err := e.f.Svc.PrepareBlob(e.ctx, p, req); err != nil || again.UploadID != up.UploadID || again.BlobID != up.BlobID {
		t.Fatalf("replayed prepare: %+v %v, first %+v", again, err, up)
	}
	_, err := e.commit(p, e.f.RID("seal"), up.UploadID)
	WantCode(t, "commit before upload", err, domain.CodeInvalidBlob)
	wrong := slices.Clone(content)
	wrong[0] = 'H'
	_, err = e.upload(p, up.UploadID, mpText, wrong)
	WantCode(t, "PUT with a wrong checksum", err, domain.CodeChecksumMismatch)
	_, err = e.f.Svc.Upload(e.ctx, p, up.UploadID, mpText, int64(len(content))+1, bytes.NewReader(append(slices.Clone(content), '!')))
	WantCode(t, "PUT of a wrong size", err, domain.CodeInvalidBlob)
	_, err = e.f.Svc.Upload(e.ctx, p, up.UploadID, mpText, -1, bytes.NewReader(content[:3]))
	WantCode(t, "PUT of too few bytes with unknown length", err, domain.CodeInvalidBlob)
	_, err = e.upload(p, up.UploadID, "application/pdf", content)
	WantCode(t, "PUT with a wrong type", err, domain.CodeInvalidBlob)
	other := e.party(t)
	_, err = e.upload(other.P, up.UploadID, mpText, content)
	WantCode(t, "PUT by another actor", err, domain.CodeNotFound)
	if _, err := e.f.Svc.GetBlob(e.ctx, other.P, up.BlobID); CodeOf(err) != domain.CodeNotFound {
		t.Fatalf("another actor reads a pending blob: %v", err)
	}
	if res := mustDo[domain.UploadResult](t, "Upload")(e.upload(p, up.UploadID, "Text/Plain;  charset=utf-8", content)); res.AlreadyUploaded {
		t.Fatalf("first PUT: %+v", res)
	}
	if res := mustDo[domain.UploadResult](t, "Upload")(e.upload(p, up.UploadID, mpText, content)); !res.AlreadyUploaded {
		t.Fatalf("repeated PUT of the same bytes: %+v, want already_uploaded", res)
	}
	_, err = e.upload(p, up.UploadID, mpText, wrong)
	WantCode(t, "repeated PUT of other bytes", err, domain.CodeUploadContentConflict)
	rid := e.f.RID("seal")
	info := mustDo[domain.BlobInfo](t, "CommitBlob")(e.commit(p, rid, up.UploadID))
	if info.State != domain.BlobSealed || info.Filename != "hello.txt" || info.SHA256 != mpSum(content) {
		t.Fatalf("sealed: %+v", info)
	}
	_, err = e.upload(p, up.UploadID, mpText, content)
	WantCode(t, "PUT after seal", err, domain.CodeUploadSealed)
	_, err = e.upload(p, up.UploadID, mpText, wrong)
	WantCode(t, "PUT of other bytes after seal", err, domain.CodeUploadSealed)
	e.f.Clock.Advance(2 * ttl)
	if n, err := e.f.Svc.SweepUploads(e.ctx, 100); err != nil || n != 0 {
		t.Fatalf("sweep after the sealed upload's expires_at: %d %v", n, err)
	}
	if again, err := e.commit(p, rid, up.UploadID); err != nil || !mpSameInfo(again, info) {
		t.Fatalf("replayed commit after expires_at: %+v %v", again, err)
	}
	if b, _, err := e.blobBytes(p, up.BlobID); err != nil || !bytes.Equal(b, content) {
		t.Fatalf("sealed bytes after expires_at: %q %v", b, err)
	}

	empty := e.prepare(t, p, nil, "application/octet-stream")
	if empty.SHA256 != "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" {
		t.Fatalf("empty blob digest %s", empty.SHA256)
	}
	mustDo[domain.UploadResult](t, "Upload")(e.upload(p, empty.UploadID, "application/octet-stream", nil))
	ei := mustDo[domain.BlobInfo](t, "CommitBlob")(e.commit(p, e.f.RID("seal"), empty.UploadID))
	if b, _, err := e.blobBytes(p, ei.BlobID); err != nil || len(b) != 0 || ei.SizeBytes != 0 {
		t.Fatalf("empty blob: %q %+v %v", b, ei, err)
	}
	for _, bad := range []domain.BlobPrepareRequest{
		{ContentType: mpText, SizeBytes: 1, SHA256: strings.ToUpper(mpSum([]byte("x")))},
		{ContentType: mpText, SizeBytes: -1, SHA256: mpSum(nil)},
		{ContentType: "", SizeBytes: 0, SHA256: mpSum(nil)},
		{ContentType: mpText, SizeBytes: 0, SHA256: mpSum(nil), Filename: "../etc/passwd"},
	} {
		bad.RequestID = e.f.RID("prep")
		if _, err := e.f.Svc.PrepareBlob(e.ctx, p, bad); CodeOf(err) != domain.CodeInvalidRequest {
			t.Errorf("prepare %+v: %v, want INVALID_REQUEST", bad, err)
		}
	}
	if _, err := e.f.Svc.PrepareBlob(e.ctx, p, domain.BlobPrepareRequest{RequestID: e.f.RID("prep"), ContentType: mpText,
		SizeBytes: e.f.Svc.Limits().MaxBlobBytes + 1, SHA256: mpSum(nil)}); CodeOf(err) != domain.CodePayloadTooLarge {
		t.Errorf("prepare over max_blob_bytes: %v, want PAYLOAD_TOO_LARGE", err)
	}

	late := e.prepare(t, p, content, mpText)
	e.f.Clock.Advance(ttl)
	_, err = e.upload(p, late.UploadID, mpText, content)
	WantCode(t, "PUT at expires_at", err, domain.CodeUploadExpired)
	stored := e.prepare(t, p, content, mpText)
	mustDo[domain.UploadResult](t, "Upload")(e.upload(p, stored.UploadID, mpText, content))
	e.f.Clock.Advance(ttl)
	_, err = e.commit(p, e.f.RID("seal"), stored.UploadID)
	WantCode(t, "commit after expires_at", err, domain.CodeUploadExpired)
	if n, err := e.f.Svc.SweepUploads(e.ctx, 100); err != nil || n != 2 {
		t.Fatalf("sweep: %d %v, want the 2 expired uploads", n, err)
	}
	for _, id := range []string{late.BlobID, stored.BlobID} {
		if info, err := e.f.Svc.GetBlob(e.ctx, p, id); err != nil || info.State != domain.BlobExpired {
			t.Fatalf("swept blob: %+v %v", info, err)
		}
	}
	_, err = e.commit(p, e.f.RID("seal"), stored.UploadID)
	WantCode(t, "commit after the sweep", err, domain.CodeUploadExpired)
}

// mpSealSweepRace: sealing and the cleanup of an upload at its expiry race; exactly one state change wins.
// The winner is placed deterministically both ways with the commit hook, then the two run concurrently many
// times.
func mpSealSweepRace(t *testing.T, nb NewBackend, cfg propConfig) {
	e := mpNewEnv(t, nb, nil)
	p := e.source.P
	ttl := time.Duration(e.f.Svc.Limits().UploadTTLSeconds) * time.Second
	content := []byte("race")
	// wantOne checks the outcome: sealed and readable, or expired with the commit refused, never both; it
	// reports whether the seal won.
	wantOne := func(round int, up domain.BlobPrepareResult, commitErr error, swept int) bool {
		t.Helper()
		info, err := e.f.Svc.GetBlob(e.ctx, p, up.BlobID)
		if err != nil {
			t.Fatalf("round %d: blob.get: %v", round, err)
		}
		switch {
		case commitErr == nil && swept == 0 && info.State == domain.BlobSealed:
			if b, _, err := e.blobBytes(p, up.BlobID); err != nil || !bytes.Equal(b, content) {
				t.Fatalf("round %d: sealed blob unreadable: %q %v", round, b, err)
			}
			return true
		case CodeOf(commitErr) == domain.CodeUploadExpired && swept == 1 && info.State == domain.BlobExpired:
			if _, _, err := e.blobBytes(p, up.BlobID); CodeOf(err) != domain.CodeBlobNotSealed {
				t.Fatalf("round %d: an expired blob reads as %v", round, err)
			}
			return false
		}
		t.Fatalf("round %d: commit %v, sweep expired %d, state %s: not exactly one winner", round, commitErr, swept, info.State)
		return false
	}
	prepared := func() domain.BlobPrepareResult {
		up := e.prepare(t, p, content, mpText)
		mustDo[domain.UploadResult](t, "Upload")(e.upload(p, up.UploadID, mpText, content))
		return up
	}
	// The sweep lands between the commit's checks and its transaction: the sweep wins.
	up := prepared()
	e.f.Clock.Advance(ttl - time.Millisecond)
	swept := -1
	e.hooks.beforeCommit(func() {
		e.f.Clock.Advance(2 * time.Millisecond)
		n, err := e.f.Svc.SweepUploads(e.ctx, 10)
		if err != nil {
			t.Errorf("sweep: %v", err)
		}
		swept = n
	})
	_, err := e.commit(p, e.f.RID("seal"), up.UploadID)
	if swept < 0 {
		t.Fatal("the commit hook did not fire")
	}
	if wantOne(-1, up, err, swept) {
		t.Fatal("the commit won although the sweep marked the upload first")
	}
	// The commit lands between the sweep's read and its marking: the seal wins.
	up = prepared()
	e.f.Clock.Advance(ttl + time.Millisecond)
	commitErr := fmt.Errorf("the commit hook did not fire")
	e.hooks.beforeCommit(func() {
		e.f.Clock.Advance(-2 * time.Millisecond) // the commit still sees the upload as live
		_, commitErr = e.commit(p, e.f.RID("seal"), up.UploadID)
		e.f.Clock.Advance(2 * time.Millisecond)
	})
	n, err := e.f.Svc.SweepUploads(e.ctx, 10)
	if err != nil {
		t.Fatalf("sweep: %v", err)
	}
	if !wantOne(-2, up, commitErr, n) {
		t.Fatal("the sweep won although the seal committed first")
	}
	rounds := 60
	if cfg.steps < 24 {
		rounds = 20
	}
	wins := map[bool]int{}
	for round := range rounds {
		up := prepared()
		e.f.Clock.Advance(ttl - time.Millisecond)
		counts, errs := mpRace(2, func(i int) (int, error) {
			if i == 0 {
				_, err := e.commit(e.auth(t, e.source.Token), e.f.RID("seal"), up.UploadID)
				return 0, err
			}
			e.f.Clock.Advance(2 * time.Millisecond)
			return e.f.Svc.SweepUploads(e.ctx, 10)
		})
		if errs[1] != nil {
			t.Fatalf("round %d: sweep: %v", round, errs[1])
		}
		wins[wantOne(round, up, errs[0], counts[1])]++
	}
	t.Logf("seal won %d, sweep won %d of %d races", wins[true], wins[false], rounds)
}

// mpConcurrentPut: PUTs of one upload that overlap never let other bytes pass as already_uploaded. A PUT of
// other bytes that finds the right bytes stored by a PUT that overtook it is UPLOAD_CONTENT_CONFLICT; one of
// the same bytes is already_uploaded. Then many rounds of real concurrent PUTs: exactly one PUT of the right
// bytes stores them (already_uploaded false), every other right PUT is already_uploaded, every wrong PUT
// fails, and the sealed bytes are the prepared ones.
func mpConcurrentPut(t *testing.T, nb NewBackend, cfg propConfig) {
	e := mpNewEnv(t, nb, nil)
	p := e.source.P
	content := []byte("the right bytes")
	wrong := []byte("the wrong bytes")
	for _, late := range [][]byte{wrong, content} {
		up := e.prepare(t, p, content, mpText)
		fired := false
		e.hooks.beforePut(func() {
			fired = true
			if res, err := e.upload(p, up.UploadID, mpText, content); err != nil || res.AlreadyUploaded {
				t.Errorf("overtaking PUT: %+v %v", res, err)
			}
		})
		res, err := e.upload(p, up.UploadID, mpText, late)
		if !fired {
			t.Fatal("the put hook did not fire")
		}
		if bytes.Equal(late, content) {
			if err != nil || !res.AlreadyUploaded {
				t.Errorf("overtaken PUT of the same bytes: %+v %v, want already_uploaded", res, err)
			}
		} else if CodeOf(err) != domain.CodeUploadContentConflict {
			t.Errorf("overtaken PUT of other bytes: %+v %v, want UPLOAD_CONTENT_CONFLICT", res, err)
		}
	}
	rounds := 30
	if cfg.steps < 24 {
		rounds = 10
	}
	bodies := [][]byte{content, wrong, content, wrong}
	for round := range rounds {
		up := e.prepare(t, p, content, mpText)
		res, errs := mpRace(len(bodies), func(i int) (domain.UploadResult, error) {
			return e.upload(e.auth(t, e.source.Token), up.UploadID, mpText, bodies[i])
		})
		stored := 0
		for i := range bodies {
			if bytes.Equal(bodies[i], content) {
				switch {
				case errs[i] != nil:
					t.Fatalf("round %d: PUT of the right bytes: %v", round, errs[i])
				case !res[i].AlreadyUploaded:
					stored++
				}
			} else if c := CodeOf(errs[i]); c != domain.CodeChecksumMismatch && c != domain.CodeUploadContentConflict {
				t.Fatalf("round %d: PUT of other bytes: %+v %v", round, res[i], errs[i])
			}
		}
		if stored != 1 {
			t.Fatalf("round %d: %d PUTs stored the bytes, want exactly 1", round, stored)
		}
		mustDo[domain.BlobInfo](t, "CommitBlob")(e.commit(p, e.f.RID("seal"), up.UploadID))
		if b, _, err := e.blobBytes(p, up.BlobID); err != nil || !bytes.Equal(b, content) {
			t.Fatalf("round %d: sealed bytes %q %v", round, b, err)
		}
	}
}

// mpAttachments: a message with an unsealed attachment is BLOB_NOT_SEALED and publishes nothing; with the
// blob sealed it publishes, recipients holding blob.read read the blob, and anyone else gets NOT_FOUND, as
// for a blob that does not exist.
func mpAttachments(t *testing.T, nb NewBackend, _ propConfig) {
	e := mpNewEnv(t, nb, nil)
	c := e.f.With(t)
	a := e.source
	b := e.party(t)
	bNoRead := e.party(t, domain.ScopeMessageRead, domain.ScopeMessageSend)
	outsider := e.party(t)
	obs := c.Feed(e.space)
	before := len(obs.All())
	up := e.unsealed(t, a.P, "attached bytes")
	send := func(att string) (domain.SendResult, error) {
		return e.f.Svc.SendMessage(e.ctx, a.P, domain.SendRequest{RequestID: e.f.RID("send"), RecipientIDs: []string{b.ActorID, bNoRead.ActorID},
			Body: &domain.MessageBody{Text: "see attachment"}, AttachmentIDs: []string{att}})
	}
	_, err := send(up.BlobID)
	WantCode(t, "message with an unsealed attachment", err, domain.CodeBlobNotSealed)
	if got := len(obs.All()); got != before {
		t.Fatalf("a message with an unsealed attachment published %d feed items", got-before)
	}
	if items, _ := c.ReadAll(b.P, b.ConsumerID, nil, 50); len(items) != 0 {
		t.Fatalf("the recipient sees %d items after a rejected send", len(items))
	}
	_, _, err = e.f.Svc.OpenBlob(e.ctx, b.P, up.BlobID)
	WantCode(t, "recipient reads an unsealed, unreferenced blob", err, domain.CodeNotFound)
	info := mustDo[domain.BlobInfo](t, "CommitBlob")(e.commit(a.P, e.f.RID("seal"), up.UploadID))
	res, err := send(info.BlobID)
	if err != nil {
		t.Fatalf("message with a sealed attachment: %v", err)
	}
	msg := mustDo[domain.Message](t, "GetMessage")(e.f.Svc.GetMessage(e.ctx, b.P, res.MessageID))
	if !slices.Equal(msg.AttachmentIDs, []string{info.BlobID}) {
		t.Fatalf("message attachments %v", msg.AttachmentIDs)
	}
	if got, gi, err := e.blobBytes(b.P, info.BlobID); err != nil || string(got) != "attached bytes" || !mpSameInfo(gi, info) {
		t.Fatalf("recipient reads the attachment: %q %+v %v", got, gi, err)
	}
	_, absent := e.f.Svc.GetBlob(e.ctx, outsider.P, "blob_does_not_exist")
	for _, who := range []struct {
		name string
		p    *domain.Principal
	}{{"a recipient without blob.read", bNoRead.P}, {"a non-recipient", outsider.P}} {
		_, err := e.f.Svc.GetBlob(e.ctx, who.p, info.BlobID)
		_, _, oerr := e.f.Svc.OpenBlob(e.ctx, who.p, info.BlobID)
		if CodeOf(err) != domain.CodeNotFound || CodeOf(oerr) != domain.CodeNotFound || !SameError(err, absent) {
			t.Errorf("%s reads the attachment: %v / %v, want NOT_FOUND like an absent blob (%v)", who.name, err, oerr, absent)
		}
	}
}

// mpReReference: reading a blob does not allow referencing it again (RFC §9.2): a recipient who can read
// someone else's blob gets FORBIDDEN when attaching it or putting it in memory, an actor who cannot read it
// gets NOT_FOUND, and a blob.reference grant allows it.
func mpReReference(t *testing.T, nb NewBackend, _ propConfig) {
	e := mpNewEnv(t, nb, nil)
	c := e.f.With(t)
	a := e.source
	b := e.party(t)
	d := e.party(t)
	info := e.sealed(t, a.P, "owned by a")
	mustDo[domain.SendResult](t, "SendMessage")(e.f.Svc.SendMessage(e.ctx, a.P, domain.SendRequest{RequestID: e.f.RID("send"),
		RecipientIDs: []string{b.ActorID}, Body: &domain.MessageBody{Text: "attached"}, AttachmentIDs: []string{info.BlobID}}))
	if _, err := e.f.Svc.GetBlob(e.ctx, b.P, info.BlobID); err != nil {
		t.Fatalf("recipient reads the attachment: %v", err)
	}
	forward := func(p *domain.Principal) error {
		_, err := e.f.Svc.SendMessage(e.ctx, p, domain.SendRequest{RequestID: e.f.RID("send"), RecipientIDs: []string{d.ActorID},
			Body: &domain.MessageBody{Text: "forward"}, AttachmentIDs: []string{info.BlobID}})
		return err
	}
	WantCode(t, "a reader re-attaches someone else's blob", forward(b.P), domain.CodeForbidden)
	WantCode(t, "an actor who cannot read it attaches it", forward(d.P), domain.CodeNotFound)
	bColl := e.collectionOf(t, b.ActorID)
	_, err := e.publish(b.P, bColl, e.req(0, domain.ModeDelta, []domain.MemoryItemInput{mpIn("x", info.BlobID, "x.md")}))
	WantCode(t, "a reader puts someone else's blob in memory", err, domain.CodeForbidden)
	mustDo[domain.GrantResult](t, "CreateGrant")(e.f.Svc.CreateGrant(e.ctx, e.space, domain.CreateGrantRequest{RequestID: e.f.RID("grt"),
		ActorID: b.ActorID, Permission: domain.PermBlobReference, BlobID: info.BlobID}))
	bp := c.Principal(b.Token)
	if err := forward(bp); err != nil {
		t.Fatalf("forward with blob.reference: %v", err)
	}
	if got, _, err := e.blobBytes(d.P, info.BlobID); err != nil || string(got) != "owned by a" {
		t.Fatalf("the new recipient reads the forwarded blob: %q %v", got, err)
	}
	e.wantChanged(t, bp, bColl, e.req(0, domain.ModeDelta, []domain.MemoryItemInput{mpIn("x", info.BlobID, "x.md")}), 1)
}

// mpStatus: status reports the submissions of the M1 writes (blob.prepare, blob.commit, memory.publish) to
// their caller like those of message.send (RFC §11.2): committed with the stable result, or failed with the
// recorded error; an unknown request ID is NOT_FOUND.
func mpStatus(t *testing.T, nb NewBackend, _ propConfig) {
	e := mpNewEnv(t, nb, nil)
	p := e.source.P
	content := []byte("status")
	prep := domain.BlobPrepareRequest{RequestID: e.f.RID("prep"), ContentType: mpText, SizeBytes: int64(len(content)), SHA256: mpSum(content)}
	up := mustDo[domain.BlobPrepareResult](t, "PrepareBlob")(e.f.Svc.PrepareBlob(e.ctx, p, prep))
	mustDo[domain.UploadResult](t, "Upload")(e.upload(p, up.UploadID, mpText, content))
	crid := e.f.RID("seal")
	info := mustDo[domain.BlobInfo](t, "CommitBlob")(e.commit(p, crid, up.UploadID))
	coll := e.collection(t)
	mreq := e.req(0, domain.ModeDelta, []domain.MemoryItemInput{mpIn("a", info.BlobID, "a.md")})
	pub := e.wantChanged(t, p, coll, mreq, 1)
	stale := e.req(0, domain.ModeDelta, nil, "a")
	e.wantErr(t, p, coll, stale, domain.CodeRevisionConflict)
	for _, c := range []struct {
		op, rid string
		state   domain.SubmissionState
	}{
		{domain.OpBlobPrepare, prep.RequestID, domain.StateCommitted},
		{domain.OpBlobCommit, crid, domain.StateCommitted},
		{domain.OpMemoryPublish, mreq.RequestID, domain.StateCommitted},
		{domain.OpMemoryPublish, stale.RequestID, domain.StateFailed},
	} {
		st, err := e.f.Svc.Status(e.ctx, p, c.op, c.rid)
		if err != nil || st.SubmissionState != c.state {
			t.Errorf("status of %s %s: %+v %v, want %s", c.op, c.rid, st, err, c.state)
			continue
		}
		if c.state == domain.StateCommitted && len(st.Result) == 0 {
			t.Errorf("status of %s: no result", c.op)
		}
		if c.state == domain.StateFailed && (st.Error == nil || st.Error.Code != domain.CodeRevisionConflict) {
			t.Errorf("status of the conflicting publish: %+v", st)
		}
	}
	var got domain.MemoryPublishResult
	if st, err := e.f.Svc.Status(e.ctx, p, domain.OpMemoryPublish, mreq.RequestID); err != nil || json.Unmarshal(st.Result, &got) != nil || !mpSameResult(got, pub) {
		t.Errorf("status result %+v %v, publish result %+v", st, err, pub)
	}
	if _, err := e.f.Svc.Status(e.ctx, p, domain.OpMemoryPublish, "never-used"); CodeOf(err) != domain.CodeNotFound {
		t.Errorf("status of an unknown request ID: %v", err)
	}
}
