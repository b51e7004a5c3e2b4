package domaintest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/store/faulty"
)

// RunOperations runs the owner's operations (issue 16) against the adapter nb makes: stage statistics
// against a scripted scenario, verification of metadata against blobs, space deletion with interruptions
// and concurrent writers, and capacity quotas. Every check goes through the service's public operations; the adapter's own tables are
// never read.
func RunOperations(t *testing.T, nb NewBackend) {
	t.Run("Stats_ScriptedScenario", func(t *testing.T) { opStatsScenario(t, nb) })
	t.Run("Verify_MissingBlobListsItsReferences", func(t *testing.T) { opVerifyMissingBlob(t, nb) })
	t.Run("Verify_CorruptRecordsAndObjects", func(t *testing.T) { opVerifyCorrupt(t, nb) })
	t.Run("DeleteSpace_StopsAccessAndRemovesEverything", func(t *testing.T) { opDeleteSpace(t, nb) })
	t.Run("DeleteSpace_OutlivesUploadURLs", func(t *testing.T) { opDeleteOutlivesUploadURLs(t, nb) })
	t.Run("DeleteSpace_UnderConcurrentWrites", func(t *testing.T) { opDeleteUnderWrites(t, nb) })
	t.Run("Quotas_RefuseWithoutPublishing", func(t *testing.T) { opQuotas(t, nb) })
	t.Run("UpdateSpace_MergesOneMember", func(t *testing.T) { opUpdateSpaceMerges(t, nb) })
	t.Run("Send_RetryAnswersItsCommitAfterTheSpaceChanged", func(t *testing.T) { opSendRetryAfterChanges(t, nb) })
	t.Run("OAuth_RecordsAndRevocation", func(t *testing.T) { opOAuthRecords(t, nb) })
}

// opEnv is a fixture whose backend can fail chosen commits and puts and records every key it stored.
type opEnv struct {
	*Client
	store *faulty.ItemStore
	blobs *faulty.BlobStore
	rec   *Recorder
	ctx   context.Context
}

// opInlineMax is the InlineBodyMax of the operations suite: bodies over it go through the blob store.
const opInlineMax = 64

func newOpEnv(t *testing.T, nb NewBackend) *opEnv {
	e := &opEnv{rec: NewRecorder(), ctx: context.Background()}
	recorded := func(t testing.TB) Backend { return e.rec.Wrap(nb(t)) }
	f := New(t, Faulty(recorded, &e.store, &e.blobs), func(c *domain.Config) { c.InlineBodyMax = opInlineMax })
	e.Client = f.With(t)
	return e
}

// longText is a body that goes through the blob store.
func longText(tag string) string { return tag + ": " + strings.Repeat("long body ", 12) }

func (e *opEnv) sendReq(p *domain.Principal, req domain.SendRequest) domain.SendResult {
	e.T.Helper()
	if req.RequestID == "" {
		req.RequestID = e.RID("send")
	}
	return mustDo[domain.SendResult](e.T, "SendMessage")(e.Svc.SendMessage(e.ctx, p, req))
}

func (e *opEnv) collection(space, source string) string {
	e.T.Helper()
	return mustDo[domain.CollectionResult](e.T, "CreateCollection")(e.Svc.CreateCollection(e.ctx, space, domain.CreateCollectionRequest{
		RequestID: e.RID("col"), SourceActorID: source, Scope: "notes"})).CollectionID
}

func (e *opEnv) publish(p *domain.Principal, coll string, expected int64, items ...domain.MemoryItemInput) (domain.MemoryPublishResult, error) {
	return e.Svc.PublishMemory(e.ctx, p, coll, domain.MemoryPublishRequest{RequestID: e.RID("pub"), ExpectedRevision: &expected,
		Mode: domain.ModeDelta, Items: items})
}

// failedSends leaves one message.send reserved (its body object could not be written) and one prepared
// (its body object written, its commit failed); both calls fail with a storage error.
func (e *opEnv) failedSends(p *domain.Principal, to string) {
	e.T.Helper()
	e.blobs.FailPut(faulty.PutFault{Match: func(key string) bool { return strings.Contains(key, "/messages/") }})
	if _, err := e.Svc.SendMessage(e.ctx, p, domain.SendRequest{RequestID: e.RID("send"), RecipientIDs: []string{to},
		Body: &domain.MessageBody{Text: longText("reserved")}}); err == nil {
		e.T.Fatalf("a send whose body could not be stored succeeded")
	}
	e.store.FailCommit(faulty.CommitFault{Match: func(ops []port.Op) bool {
		return slices.ContainsFunc(ops, func(op port.Op) bool { return strings.HasPrefix(op.Item.PK, "FD#") })
	}})
	if _, err := e.Svc.SendMessage(e.ctx, p, domain.SendRequest{RequestID: e.RID("send"), RecipientIDs: []string{to},
		Body: &domain.MessageBody{Text: longText("prepared")}}); err == nil {
		e.T.Fatalf("a send whose commit failed succeeded")
	}
}

// opStatsScenario: every count of GetStats equals what a scripted scenario produced.
func opStatsScenario(t *testing.T, nb NewBackend) {
	e := newOpEnv(t, nb)
	sp := e.Space().SpaceID
	a, b := e.Party(sp), e.Party(sp)
	// Five committed messages to b: three inline, one through the blob store, one with an attachment.
	for i := range 3 {
		e.Send(a.P, fmt.Sprintf("short %d", i), b.ActorID)
	}
	e.sendReq(a.P, domain.SendRequest{RecipientIDs: []string{b.ActorID}, Body: &domain.MessageBody{Text: longText("m4")}})
	attached := e.TextBlob(a.P, "attached bytes", true, true)
	unreferenced := e.TextBlob(a.P, "unreferenced bytes", true, true)
	e.TextBlob(a.P, "never uploaded", false, false)
	e.TextBlob(a.P, "uploaded, not sealed", true, false)
	e.sendReq(a.P, domain.SendRequest{RecipientIDs: []string{b.ActorID}, Body: &domain.MessageBody{Text: "see attachment"},
		AttachmentIDs: []string{attached}})
	e.failedSends(a.P, b.ActorID)
	// Memory: one revision, then one publish that loses the revision check.
	coll := e.collection(sp, a.ActorID)
	if _, err := e.publish(a.P, coll, 0, domain.MemoryItemInput{ItemID: "doc", BlobID: attached, Path: "doc.txt"}); err != nil {
		t.Fatal(err)
	}
	_, err := e.publish(a.P, coll, 0, domain.MemoryItemInput{ItemID: "other", BlobID: attached, Path: "other.txt"})
	WantCode(t, "stale publish", err, domain.CodeRevisionConflict)
	// b reads two items and checkpoints there, acking the first received and the second processed; then it
	// acks the fourth received without moving the checkpoint.
	page := e.Read(b.P, b.ConsumerID, nil, 2)
	items := page.Items
	mustDo[domain.AckResult](t, "Ack")(e.Svc.Ack(e.ctx, b.P, domain.AckRequest{RequestID: e.RID("ack"), ConsumerID: b.ConsumerID,
		Items:            []domain.AckEntry{{ItemID: items[0].ItemID, Stage: domain.StageReceived}, {ItemID: items[1].ItemID, Stage: domain.StageProcessed}},
		CheckpointCursor: &page.NextCursor}))
	ackedAt := e.F.Clock.Now()
	all, _ := e.ReadAll(b.P, b.ConsumerID, nil, 50)
	if len(all) != 5 {
		t.Fatalf("b's feed has %d items, want 5", len(all))
	}
	mustDo[domain.AckResult](t, "Ack")(e.Svc.Ack(e.ctx, b.P, domain.AckRequest{RequestID: e.RID("ack"), ConsumerID: b.ConsumerID,
		Items: []domain.AckEntry{{ItemID: all[3].ItemID, Stage: domain.StageReceived}}}))
	e.F.Clock.Advance(90 * time.Second)

	st := mustDo[domain.SpaceStats](t, "GetStats")(e.Svc.GetStats(e.ctx, sp, domain.StatsOptions{}))
	aFeed, _ := e.ReadAll(a.P, a.ConsumerID, nil, 50) // a: three receipts and the memory revision
	if len(aFeed) != 4 {
		t.Fatalf("a's feed has %d items, want 4 (3 receipts, 1 revision): %+v", len(aFeed), aFeed)
	}
	last := aFeed[len(aFeed)-1].VisibleSeq
	for _, it := range aFeed {
		if len(it.VisibleSeq) > len(last) || (len(it.VisibleSeq) == len(last) && it.VisibleSeq > last) {
			last = it.VisibleSeq
		}
	}
	wantOps := map[string]domain.StageCounts{
		domain.OpMessageSend:      {Reserved: 1, Prepared: 1, Committed: 5},
		domain.OpBlobPrepare:      {Committed: 4},
		domain.OpBlobCommit:       {Committed: 2},
		domain.OpMemoryPublish:    {Committed: 1, Failed: 1},
		domain.OpInboxAck:         {Committed: 2},
		"admin.actor.create":      {Committed: 2},
		"admin.consumer.create":   {Committed: 2},
		"admin.token.create":      {Committed: 2},
		"admin.collection.create": {Committed: 1},
	}
	if !reflect.DeepEqual(st.SubmissionsByOperation, wantOps) {
		t.Errorf("submissions by operation:\n got %+v\nwant %+v", st.SubmissionsByOperation, wantOps)
	}
	if want := (domain.StageCounts{Reserved: 1, Prepared: 1, Committed: 21, Failed: 1}); st.Submissions != want {
		t.Errorf("submissions: got %+v, want %+v", st.Submissions, want)
	}
	if want := (domain.BlobStageCounts{Pending: 1, Uploaded: 1, Sealed: 1, SealedUnreferenced: 1}); st.Blobs != want {
		t.Errorf("blobs: got %+v, want %+v (unreferenced %s)", st.Blobs, want, unreferenced)
	}
	if want := (domain.MemoryStats{Collections: 1, Revisions: 1, Conflicts: 1}); st.Memory != want {
		t.Errorf("memory: got %+v, want %+v", st.Memory, want)
	}
	if !st.Complete || st.State != domain.SpaceActive || st.VisibleHead != last {
		t.Errorf("complete %v, state %s, visible head %s (want true, active, %s)", st.Complete, st.State, st.VisibleHead, last)
	}
	if len(st.Webhooks.Subscriptions) != 0 || len(st.Webhooks.Deliveries) != 0 {
		t.Errorf("webhooks: %+v, want none", st.Webhooks)
	}
	byConsumer := map[string]domain.ConsumerStats{}
	for _, c := range st.Consumers {
		byConsumer[c.ConsumerID] = c
	}
	cb, ca := byConsumer[b.ConsumerID], byConsumer[a.ConsumerID]
	if len(st.Consumers) != 2 {
		t.Fatalf("consumers: %+v", st.Consumers)
	}
	if cb.NotReceived != 2 || cb.ReceivedNotProcessed != 2 || cb.Processed != 1 || cb.Checkpoint == nil ||
		cb.Checkpoint.VisibleSeq != items[1].VisibleSeq || cb.Checkpoint.AgeSeconds == nil || *cb.Checkpoint.AgeSeconds != 90 ||
		!cb.Checkpoint.UpdatedAt.Equal(ackedAt) {
		t.Errorf("b's consumer: %+v checkpoint %+v; want not_received 2, received 2, processed 1, checkpoint at %s aged 90 s",
			cb, cb.Checkpoint, items[1].VisibleSeq)
	}
	if ca.NotReceived != 4 || ca.ReceivedNotProcessed != 0 || ca.Processed != 0 || ca.Checkpoint != nil {
		t.Errorf("a's consumer: %+v; want not_received 4, nothing acked, no checkpoint", ca)
	}
	// A budget smaller than the space says so.
	small := mustDo[domain.SpaceStats](t, "GetStats")(e.Svc.GetStats(e.ctx, sp, domain.StatsOptions{MaxScan: 5}))
	if small.Complete {
		t.Errorf("stats with a 5-record budget claim to be complete")
	}
}

// opVerifyMissingBlob: a clean space verifies; after one blob's object is removed, Verify lists exactly the
// blob and the resources that reference it (a message attaching it, each memory revision holding it).
func opVerifyMissingBlob(t *testing.T, nb NewBackend) {
	e := newOpEnv(t, nb)
	sp := e.Space().SpaceID
	a, b := e.Party(sp), e.Party(sp)
	doomed := e.TextBlob(a.P, "doomed bytes", true, true)
	kept := e.TextBlob(a.P, "kept bytes", true, true)
	e.TextBlob(a.P, `{"items":[],"delete_ids":[]}`, true, true) // a manifest: a sealed blob no message names
	withDoomed := e.sendReq(a.P, domain.SendRequest{RecipientIDs: []string{b.ActorID}, Body: &domain.MessageBody{Text: "x"}, AttachmentIDs: []string{doomed, kept}})
	e.sendReq(a.P, domain.SendRequest{RecipientIDs: []string{b.ActorID}, Body: &domain.MessageBody{Text: "y"}, AttachmentIDs: []string{kept}})
	e.sendReq(a.P, domain.SendRequest{RecipientIDs: []string{b.ActorID}, Body: &domain.MessageBody{Text: longText("body object")}})
	coll := e.collection(sp, a.ActorID)
	mustDo[domain.MemoryPublishResult](t, "publish")(e.publish(a.P, coll, 0, domain.MemoryItemInput{ItemID: "d1", BlobID: doomed, Path: "d1"},
		domain.MemoryItemInput{ItemID: "k1", BlobID: kept, Path: "k1"}))
	mustDo[domain.MemoryPublishResult](t, "publish")(e.publish(a.P, coll, 1, domain.MemoryItemInput{ItemID: "k2", BlobID: kept, Path: "k2"}))
	mustDo[domain.MemoryPublishResult](t, "publish")(e.publish(a.P, coll, 2, domain.MemoryItemInput{ItemID: "d1", BlobID: kept, Path: "d1"}))
	other := e.Space().SpaceID // another space, untouched
	o := e.Party(other)
	e.sendReq(o.P, domain.SendRequest{Body: &domain.MessageBody{Text: "elsewhere"}, AttachmentIDs: []string{e.TextBlob(o.P, "other bytes", true, true)}})

	var clean []domain.VerifyFinding
	rep, err := e.Svc.Verify(e.ctx, domain.VerifyOptions{}, func(f domain.VerifyFinding) { clean = append(clean, f) })
	if err != nil || len(clean) != 0 || rep.Unreadable != 0 {
		t.Fatalf("verify of a clean deployment: %v, findings %v", err, clean)
	}
	if rep.Spaces != 2 || rep.Messages != 4 || rep.MemoryRevisions != 3 || rep.Blobs != 4 {
		t.Errorf("verify report %+v: want 2 spaces, 4 messages, 3 revisions, 4 sealed blobs", rep)
	}
	if err := e.blobs.Inner().Delete(e.ctx, "spaces/"+sp+"/blobs/"+doomed); err != nil {
		t.Fatal(err)
	}
	for _, headOnly := range []bool{false, true} {
		var got []string
		rep, err := e.Svc.Verify(e.ctx, domain.VerifyOptions{HeadOnly: headOnly}, func(f domain.VerifyFinding) {
			got = append(got, fmt.Sprintf("%s %s %s %s %v", f.Kind, f.ID, f.Problem, f.BlobID, f.ItemIDs))
		})
		if err != nil {
			t.Fatal(err)
		}
		want := []string{
			fmt.Sprintf("blob %s %s  []", doomed, domain.ProblemMissingObject),
			fmt.Sprintf("message %s %s %s []", withDoomed.MessageID, domain.ProblemBlobUnreadable, doomed),
			fmt.Sprintf("memory_revision %s@1 %s %s [d1]", coll, domain.ProblemBlobUnreadable, doomed),
			fmt.Sprintf("memory_revision %s@2 %s %s [d1]", coll, domain.ProblemBlobUnreadable, doomed),
		}
		if !slices.Equal(got, want) || rep.Unreadable != int64(len(want)) {
			t.Errorf("head only %v: findings\n got %q\nwant %q", headOnly, got, want)
		}
	}
}

// opVerifyCorrupt: a message whose inline body no longer matches its digest, a body object replaced by
// other bytes, and a missing memory state are each reported.
func opVerifyCorrupt(t *testing.T, nb NewBackend) {
	e := newOpEnv(t, nb)
	sp := e.Space().SpaceID
	a, b := e.Party(sp), e.Party(sp)
	inline := e.Send(a.P, "inline body", b.ActorID)
	external := e.sendReq(a.P, domain.SendRequest{RecipientIDs: []string{b.ActorID}, Body: &domain.MessageBody{Text: longText("external")}})
	coll := e.collection(sp, a.ActorID)
	mustDo[domain.MemoryPublishResult](t, "publish")(e.publish(a.P, coll, 0, domain.MemoryItemInput{ItemID: "i", BlobID: e.TextBlob(a.P, "v", true, true), Path: "i"}))
	// Tamper below the service: rewrite the inline body, replace the body object, remove the state object.
	msgKey := port.Key{PK: "MS#" + sp + "#" + inline.MessageID, SK: "MSG"}
	it, found, err := e.store.Get(e.ctx, msgKey)
	if err != nil || !found {
		t.Fatalf("message record: %v %v", found, err)
	}
	it.Data = []byte(strings.Replace(string(it.Data), "inline body", "INLINE BODY", 1))
	if _, err := e.store.Commit(e.ctx, port.Tx{Build: func(uint64) ([]port.Op, error) { return []port.Op{port.Put(it, port.Exists())}, nil }}); err != nil {
		t.Fatal(err)
	}
	bodyKey := "spaces/" + sp + "/messages/" + external.MessageID + "/body.json"
	if err := e.blobs.Inner().Delete(e.ctx, bodyKey); err != nil {
		t.Fatal(err)
	}
	forged := `{"text":"forged"}`
	sum := sha256.Sum256([]byte(forged))
	if _, err := e.blobs.Inner().Put(e.ctx, bodyKey, int64(len(forged)), hex.EncodeToString(sum[:]), strings.NewReader(forged)); err != nil {
		t.Fatal(err)
	}
	var stateKey string
	for _, k := range e.rec.Objects() {
		if strings.Contains(k, "/collections/"+coll+"/states/") {
			stateKey = k
		}
	}
	if err := e.blobs.Inner().Delete(e.ctx, stateKey); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	if _, err := e.Svc.Verify(e.ctx, domain.VerifyOptions{SpaceIDs: []string{sp}}, func(f domain.VerifyFinding) { got[f.Kind+" "+f.ID] = f.Problem }); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"message " + inline.MessageID:    domain.ProblemDigestMismatch,
		"message " + external.MessageID:  domain.ProblemSizeMismatch,
		"memory_revision " + coll + "@1": domain.ProblemMissingObject,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("findings %v, want %v", got, want)
	}
}

// opDeleteSpace: deleting a space stops every token of it at once; its deletion survives interruptions at
// any batch; once deleted, every record and object the space ever stored is gone (checked key by key
// against what the backend recorded), the state reports exactly what was removed, and another space is
// untouched.
func opDeleteSpace(t *testing.T, nb NewBackend) {
	e := newOpEnv(t, nb)
	sp := e.Space().SpaceID
	a, b := e.Party(sp), e.Party(sp)
	keep := e.Space().SpaceID
	k := e.Party(keep)
	e.sendReq(k.P, domain.SendRequest{Body: &domain.MessageBody{Text: longText("kept")}, AttachmentIDs: []string{e.TextBlob(k.P, "kept bytes", true, true)}})
	// Content of every kind in the doomed space.
	att := e.TextBlob(a.P, "attachment", true, true)
	e.TextBlob(a.P, "pending", false, false)
	e.TextBlob(a.P, "uploaded", true, false)
	first := e.sendReq(a.P, domain.SendRequest{RecipientIDs: []string{b.ActorID}, Body: &domain.MessageBody{Text: longText("first")}, AttachmentIDs: []string{att}})
	e.sendReq(b.P, domain.SendRequest{RecipientIDs: []string{a.ActorID}, InReplyTo: &first.MessageID, Body: &domain.MessageBody{Text: "reply"}})
	for i := range 12 {
		e.Send(a.P, fmt.Sprintf("note %d", i), b.ActorID)
	}
	e.failedSends(a.P, b.ActorID)
	coll := e.collection(sp, a.ActorID)
	e.Grant(sp, b.ActorID, domain.PermMemoryRead, coll)
	b.P = e.Principal(b.Token) // the grant changed b's rights
	for rev := range int64(3) {
		mustDo[domain.MemoryPublishResult](t, "publish")(e.publish(a.P, coll, rev, domain.MemoryItemInput{ItemID: fmt.Sprint("i", rev), BlobID: att, Path: fmt.Sprint("p", rev)}))
	}
	page := e.Read(b.P, b.ConsumerID, nil, 5)
	mustDo[domain.AckResult](t, "Ack")(e.Svc.Ack(e.ctx, b.P, domain.AckRequest{RequestID: e.RID("ack"), ConsumerID: b.ConsumerID,
		Items: []domain.AckEntry{{ItemID: page.Items[0].ItemID, Stage: domain.StageProcessed}}, CheckpointCursor: &page.NextCursor}))
	spare, _ := e.Token(sp, b.ActorID, b.ConsumerID, domain.ScopeMessageRead)
	const messages = 14 // first, the reply and 12 notes (the failed sends never committed)

	// What the space holds now: every recorded key and object that is still present.
	ofSpace := map[port.Key]bool{}
	present := func() ([]port.Key, []string) { return e.present(sp, ofSpace) }
	keysBefore, objectsBefore := present()
	var objectBytes int64
	for _, obj := range objectsBefore {
		info, err := e.blobs.Inner().Head(e.ctx, obj)
		if err != nil {
			t.Fatal(err)
		}
		objectBytes += info.Size
	}

	res := mustDo[domain.SpaceResult](t, "DeleteSpace")(e.Svc.DeleteSpace(e.ctx, sp))
	if res.State != domain.SpaceDeleting {
		t.Fatalf("DeleteSpace answered state %q, want deleting", res.State)
	}
	// Access stops at once, for every token, before anything is removed.
	for _, tok := range []string{a.Token, b.Token, spare} {
		_, err := e.Svc.Authenticate(e.ctx, tok)
		WantCode(t, "token of a deleting space", err, domain.CodeUnauthenticated)
	}
	_, err := e.Svc.SendMessage(e.ctx, a.P, domain.SendRequest{RequestID: e.RID("late"), RecipientIDs: []string{b.ActorID}, Body: &domain.MessageBody{Text: "late"}})
	if c := CodeOf(err); c != domain.CodeUnauthenticated && c != domain.CodeNotFound {
		t.Fatalf("send with a principal authenticated before the deletion: %v, want UNAUTHENTICATED or NOT_FOUND", err)
	}
	_, err = e.Svc.CreateActor(e.ctx, sp, domain.CreateActorRequest{RequestID: e.RID("act")})
	WantCode(t, "create an actor in a deleting space", err, domain.CodeNotFound)
	_, err = e.Svc.UpdateSpace(e.ctx, sp, domain.UpdateSpaceRequest{RateLimits: &domain.RateLimits{RequestsPerSecond: 1, Burst: 1}})
	WantCode(t, "update a deleting space", err, domain.CodeNotFound)
	again := mustDo[domain.SpaceResult](t, "DeleteSpace again")(e.Svc.DeleteSpace(e.ctx, sp))
	if again.State != domain.SpaceDeleting {
		t.Fatalf("second DeleteSpace: state %q", again.State)
	}

	// Remove it one batch per run, with a failed commit now and then (an interrupted batch).
	runs, faults := 0, 0
	for {
		runs++
		if runs > 2000 {
			t.Fatalf("deletion not done after %d runs", runs)
		}
		var armed *faulty.Armed
		if runs%3 == 0 {
			armed = e.store.FailCommit(faulty.CommitFault{})
		}
		run, err := e.Svc.ContinueDeletions(e.ctx, domain.DeletionOptions{MaxBatches: 1})
		if armed != nil {
			faults += armed.Fired()
			armed.Disarm()
		}
		if err != nil {
			if !errors.Is(err, faulty.ErrInjected) {
				t.Fatalf("ContinueDeletions: %v", err)
			}
			continue
		}
		if slices.Contains(run.Completed, sp) {
			break
		}
		if run.Pending == 0 {
			t.Fatalf("no deletion pending, none completed: %+v", run)
		}
	}
	if faults == 0 {
		t.Errorf("no batch was interrupted")
	}
	got := mustDo[domain.SpaceResult](t, "GetSpace")(e.Svc.GetSpace(e.ctx, sp))
	if got.State != domain.SpaceDeleted || got.Deletion == nil || got.Deletion.CompletedAt == nil {
		t.Fatalf("after the deletion: %+v", got)
	}
	e.checkGone(sp, ofSpace)
	// The state reports exactly what was removed: every record and object present before (the space's
	// tombstone, the index entries of its uploads and its creation's idempotency record aside).
	var wantRecords int64
	for _, key := range keysBefore {
		if !keptAfterDeletion(sp, key) && !strings.HasPrefix(key.PK, "UX") {
			wantRecords++
		}
	}
	rm := got.Deletion.Removed
	if rm.Records != wantRecords || rm.Objects != int64(len(objectsBefore)) || rm.ObjectBytes != objectBytes {
		t.Errorf("removed %d records, %d objects, %d bytes; want %d, %d, %d", rm.Records, rm.Objects, rm.ObjectBytes,
			wantRecords, len(objectsBefore), objectBytes)
	}
	wantRes := map[string]int64{"messages": int64(messages), "actors": 3, "consumers": 2, "tokens": 3, "collections": 1,
		"memory_revisions": 3, "blobs": 3, "receipts": 1, "grants": 1}
	for kind, n := range wantRes {
		if rm.Resources[kind] != n {
			t.Errorf("removed %s: %d, want %d (all: %v)", kind, rm.Resources[kind], n, rm.Resources)
		}
	}
	_, err = e.Svc.GetStats(e.ctx, sp, domain.StatsOptions{})
	if err != nil {
		t.Errorf("stats of a deleted space: %v", err)
	}
	// The other space is untouched.
	if _, err := e.Svc.Authenticate(e.ctx, k.Token); err != nil {
		t.Errorf("a token of another space: %v", err)
	}
	var findings []domain.VerifyFinding
	rep, err := e.Svc.Verify(e.ctx, domain.VerifyOptions{}, func(f domain.VerifyFinding) { findings = append(findings, f) })
	if err != nil || len(findings) > 0 || rep.Spaces != 1 || rep.Messages != 1 || !slices.Equal(rep.SkippedSpaces, []string{sp}) {
		t.Errorf("verify after the deletion: %v, %+v, findings %v", err, rep, findings)
	}
}

// opDeleteOutlivesUploadURLs (blob stores that presign uploads): bytes a client puts through an upload URL
// handed out before the deletion, after the space's records were removed, are removed too — the deletion
// stays "deleting" until the last such URL expired.
func opDeleteOutlivesUploadURLs(t *testing.T, nb NewBackend) {
	f := New(t, nb, nil)
	if _, ok := f.Backend.Blobs.(port.BlobPresigner); !ok {
		t.Skip("the blob store hands out no upload URLs")
	}
	if d := time.Until(f.Clock.Now()); d < 0 {
		f.Clock.Advance(-d) // the store signs with the real clock: an expiry in its past is refused
	}
	c := f.With(t)
	ctx := context.Background()
	sp := c.Space().SpaceID
	a := c.Party(sp)
	text := "late bytes"
	sum := sha256.Sum256([]byte(text))
	prep := c.PrepareText(a.P, text)
	if !strings.HasPrefix(prep.UploadURL, "http") {
		t.Fatalf("no presigned upload URL: %s", prep.UploadURL)
	}
	mustDo[domain.SpaceResult](t, "DeleteSpace")(f.Svc.DeleteSpace(ctx, sp))
	run := mustDo[domain.DeletionRun](t, "ContinueDeletions")(f.Svc.ContinueDeletions(ctx, domain.DeletionOptions{}))
	if len(run.Completed) != 0 || run.Pending != 1 || !run.NextAt.Equal(prep.ExpiresAt) {
		t.Fatalf("deletion with a live upload URL: %+v, want pending until %s", run, prep.ExpiresAt)
	}
	// The client uses its URL now (here: the bytes land in the store the way the URL would put them).
	key := "spaces/" + sp + "/blobs/" + prep.BlobID
	if _, err := f.Backend.Blobs.Put(ctx, key, int64(len(text)), hex.EncodeToString(sum[:]), strings.NewReader(text)); err != nil {
		t.Fatal(err)
	}
	if got := mustDo[domain.SpaceResult](t, "GetSpace")(f.Svc.GetSpace(ctx, sp)); got.State != domain.SpaceDeleting || got.Deletion.WaitUntil == nil {
		t.Fatalf("while waiting: %+v", got)
	}
	f.Clock.Advance(prep.ExpiresAt.Sub(f.Clock.Now()) + time.Second)
	run = mustDo[domain.DeletionRun](t, "ContinueDeletions")(f.Svc.ContinueDeletions(ctx, domain.DeletionOptions{}))
	if !slices.Equal(run.Completed, []string{sp}) {
		t.Fatalf("after the URL expired: %+v", run)
	}
	if _, err := f.Backend.Blobs.Head(ctx, key); !errors.Is(err, port.ErrBlobNotFound) {
		t.Errorf("bytes put through the URL survived the deletion: %v", err)
	}
	got := mustDo[domain.SpaceResult](t, "GetSpace")(f.Svc.GetSpace(ctx, sp))
	if got.State != domain.SpaceDeleted || got.Deletion.Removed.Resources["blobs"] != 1 || got.Deletion.WaitUntil != nil {
		t.Errorf("deleted: %+v", got.Deletion)
	}
}

// present returns the recorded keys and objects of space sp that are still stored. ofSpace remembers the
// token digest records (TK#…) that belong to sp: their keys name no space.
func (e *opEnv) present(sp string, ofSpace map[port.Key]bool) (keys []port.Key, objects []string) {
	e.T.Helper()
	for _, key := range e.rec.Keys() {
		it, found, err := e.store.Inner().Get(e.ctx, key)
		if err != nil {
			e.T.Fatalf("%v", err)
		}
		if strings.HasPrefix(key.PK, "TK#") && found && strings.Contains(string(it.Data), `"space_id":"`+sp+`"`) {
			ofSpace[key] = true
		}
		if found && (ofSpace[key] || strings.Contains(key.PK+"|"+key.SK, sp)) {
			keys = append(keys, key)
		}
	}
	for _, obj := range e.rec.Objects() {
		if !strings.Contains(obj, "/"+sp+"/") {
			continue
		}
		if _, err := e.blobs.Inner().Head(e.ctx, obj); err == nil {
			objects = append(objects, obj)
		} else if !errors.Is(err, port.ErrBlobNotFound) {
			e.T.Fatalf("%v", err)
		}
	}
	return keys, objects
}

// keptAfterDeletion reports whether key is one a deleted space keeps: its tombstone, the deletion marker,
// its entry in the space index, the idempotency record of its creation.
func keptAfterDeletion(sp string, key port.Key) bool {
	switch key {
	case port.Key{PK: "SP#" + sp, SK: "META"}, port.Key{PK: "SP#" + sp, SK: "DELETING"}, port.Key{PK: "SX", SK: sp}:
		return true
	}
	return strings.HasPrefix(key.PK, "ID#_#")
}

// checkGone fails the test if a record or object of the deleted space sp is still stored.
func (e *opEnv) checkGone(sp string, ofSpace map[port.Key]bool) {
	e.T.Helper()
	keys, objects := e.present(sp, ofSpace)
	var left []port.Key
	for _, key := range keys {
		if !keptAfterDeletion(sp, key) {
			left = append(left, key)
		}
	}
	if len(left) > 0 || len(objects) > 0 {
		e.T.Fatalf("left after the deletion: records %v, objects %v", left, objects)
	}
}

// opDeleteUnderWrites: writers keep sending (bodies inline and in the blob store, attachments) and
// uploading with credentials authenticated before the deletion, while the space is deleted and removed:
// every send begun after the DELETE answered fails, and once deleted nothing of the space is left (bytes
// an upload stored late included).
func opDeleteUnderWrites(t *testing.T, nb NewBackend) {
	e := newOpEnv(t, nb)
	sp := e.Space().SpaceID
	a, b := e.Party(sp), e.Party(sp)
	att := e.TextBlob(a.P, "attached", true, true)
	var stop atomic.Bool
	var answered atomic.Int64 // sends begun after the DELETE answered that succeeded
	var deleted atomic.Bool
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				req := domain.SendRequest{RequestID: fmt.Sprintf("w%d-%d", w, i), RecipientIDs: []string{b.ActorID}, Body: &domain.MessageBody{Text: "x"}}
				switch i % 3 {
				case 1:
					req.Body.Text = longText("w")
				case 2:
					req.AttachmentIDs = []string{att}
				}
				after := deleted.Load()
				if w == 3 {
					// Bytes an upload stores late are removed with its upload record (checkGone); the outcome
					// of each call does not matter here.
					text := fmt.Sprintf("upload %d", i)
					sum := sha256.Sum256([]byte(text))
					prep, err := e.Svc.PrepareBlob(e.ctx, a.P, domain.BlobPrepareRequest{RequestID: req.RequestID, ContentType: "text/plain",
						SizeBytes: int64(len(text)), SHA256: hex.EncodeToString(sum[:])})
					if err == nil {
						_, _ = e.Svc.Upload(e.ctx, a.P, prep.UploadID, "text/plain", int64(len(text)), strings.NewReader(text))
					}
					continue
				}
				if _, err := e.Svc.SendMessage(e.ctx, a.P, req); err == nil && after {
					answered.Add(1)
				}
			}
		}()
	}
	time.Sleep(20 * time.Millisecond)
	mustDo[domain.SpaceResult](t, "DeleteSpace")(e.Svc.DeleteSpace(e.ctx, sp))
	deleted.Store(true)
	for range 50 {
		if _, err := e.Svc.ContinueDeletions(e.ctx, domain.DeletionOptions{MaxBatches: 2}); err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
	run := mustDo[domain.DeletionRun](t, "ContinueDeletions")(e.Svc.ContinueDeletions(e.ctx, domain.DeletionOptions{}))
	if got := mustDo[domain.SpaceResult](t, "GetSpace")(e.Svc.GetSpace(e.ctx, sp)); got.State != domain.SpaceDeleted {
		t.Fatalf("state %s after %+v", got.State, run)
	}
	if n := answered.Load(); n > 0 {
		t.Errorf("%d writes succeeded after the DELETE answered", n)
	}
	e.checkGone(sp, map[port.Key]bool{})
}

// opQuotas: a send, a memory revision or a blob seal that would pass a space's byte or item quota is
// refused with RESOURCE_LIMIT, publishes nothing and leaves the usage as it was; the same request succeeds
// once the owner raised the quota; acks are never refused; describe, GET space and stats show the quotas and
// the usage.
func opQuotas(t *testing.T, nb NewBackend) {
	e := newOpEnv(t, nb)
	sp := e.Space().SpaceID
	a, b := e.Party(sp), e.Party(sp)
	space := func() domain.SpaceResult { return mustDo[domain.SpaceResult](t, "GetSpace")(e.Svc.GetSpace(e.ctx, sp)) }
	setQuotas := func(bytes, items int64) domain.SpaceResult {
		return mustDo[domain.SpaceResult](t, "UpdateSpace")(e.Svc.UpdateSpace(e.ctx, sp, domain.UpdateSpaceRequest{
			Quotas: &domain.Quotas{MaxStoredBytes: bytes, MaxItems: items}}))
	}
	if got := space(); got.Quotas == nil || *got.Quotas != domain.DefaultQuotas() || got.Usage == nil || *got.Usage != (domain.QuotaUsage{}) {
		t.Fatalf("a new space: quotas %+v usage %+v, want the defaults and nothing used", got.Quotas, got.Usage)
	}
	e.Send(a.P, "first message", b.ActorID)
	u1 := *space().Usage
	if u1.Items != 1 || u1.StoredBytes < 200 {
		t.Fatalf("usage after one send: %+v", u1)
	}
	// Room for half a message more: the next one is refused.
	res := setQuotas(u1.StoredBytes+u1.StoredBytes/2, 100)
	if res.Quotas.MaxStoredBytes != u1.StoredBytes+u1.StoredBytes/2 || *res.Usage != u1 {
		t.Fatalf("PATCH quotas answered %+v %+v", res.Quotas, res.Usage)
	}
	p := mustDo[*domain.Principal](t, "Authenticate")(e.Svc.Authenticate(e.ctx, a.Token))
	if d := mustDo[domain.DescribeResult](t, "Describe")(e.Svc.Describe(e.ctx, p)); d.Limits.SpaceMaxStoredBytes != res.Quotas.MaxStoredBytes || d.Limits.SpaceMaxItems != 100 {
		t.Errorf("describe publishes space_max_stored_bytes %d, space_max_items %d", d.Limits.SpaceMaxStoredBytes, d.Limits.SpaceMaxItems)
	}
	req := domain.SendRequest{RequestID: "over", RecipientIDs: []string{b.ActorID}, Body: &domain.MessageBody{Text: "second message"}}
	_, err := e.Svc.SendMessage(e.ctx, p, req)
	WantCode(t, "a send over the byte quota", err, domain.CodeResourceLimit)
	if d := domain.AsError(err).Details; d["reason"] != "quota" || d["stored_bytes"] != u1.StoredBytes {
		t.Errorf("refusal details %v", d)
	}
	if u := *space().Usage; u != u1 {
		t.Errorf("usage after a refusal %+v, want %+v", u, u1)
	}
	if items, _ := e.ReadAll(b.P, b.ConsumerID, nil, 50); len(items) != 1 {
		t.Errorf("b's feed has %d items after a refused send, want 1", len(items))
	}
	// A body (in the blob store) larger than the room left is refused before it is written.
	objects := len(e.rec.Objects())
	_, err = e.Svc.SendMessage(e.ctx, p, domain.SendRequest{RequestID: "over-large", RecipientIDs: []string{b.ActorID},
		Body: &domain.MessageBody{Text: strings.Repeat("large body ", int(u1.StoredBytes))}})
	WantCode(t, "a large send over the byte quota", err, domain.CodeResourceLimit)
	if len(e.rec.Objects()) != objects {
		t.Errorf("a refused send stored its body")
	}
	// Raised, the same request succeeds (nothing was reserved).
	setQuotas(domain.DefaultSpaceMaxStoredBytes, 100)
	mustDo[domain.SendResult](t, "send after raising the quota")(e.Svc.SendMessage(e.ctx, p, req))
	u2 := *space().Usage
	if u2.Items != 2 || u2.StoredBytes <= u1.StoredBytes {
		t.Fatalf("usage after the second send %+v", u2)
	}

	// Items: at the limit, sends and memory revisions are refused.
	coll := e.collection(sp, a.ActorID)
	att := e.TextBlob(a.P, "kept", true, true)
	u3 := *space().Usage
	setQuotas(domain.DefaultSpaceMaxStoredBytes, u3.Items)
	_, err = e.Svc.SendMessage(e.ctx, p, domain.SendRequest{RequestID: "items", RecipientIDs: []string{b.ActorID}, Body: &domain.MessageBody{Text: "x"}})
	WantCode(t, "a send over the item quota", err, domain.CodeResourceLimit)
	_, err = e.publish(p, coll, 0, domain.MemoryItemInput{ItemID: "i", BlobID: att, Path: "i"})
	WantCode(t, "a memory revision over the item quota", err, domain.CodeResourceLimit)
	if u := *space().Usage; u != u3 {
		t.Errorf("usage after refusals %+v, want %+v", u, u3)
	}
	// Acks are never refused, and count their receipts' bytes.
	page := e.Read(b.P, b.ConsumerID, nil, 10)
	mustDo[domain.AckResult](t, "Ack over the quota")(e.Svc.Ack(e.ctx, b.P, domain.AckRequest{RequestID: e.RID("ack"), ConsumerID: b.ConsumerID,
		Items: []domain.AckEntry{{ItemID: page.Items[0].ItemID, Stage: domain.StageProcessed}}}))
	u4 := *space().Usage
	if u4.Items != u3.Items || u4.StoredBytes <= u3.StoredBytes {
		t.Errorf("usage after an ack %+v (before %+v)", u4, u3)
	}

	// Blobs: a blob that cannot fit is refused at prepare; one prepared before the quota was lowered is
	// refused at seal, and stays unsealed.
	setQuotas(u4.StoredBytes+10, 100)
	text := strings.Repeat("b", 64)
	sum := sha256.Sum256([]byte(text))
	_, err = e.Svc.PrepareBlob(e.ctx, p, domain.BlobPrepareRequest{RequestID: "big", ContentType: "text/plain", SizeBytes: 64, SHA256: hex.EncodeToString(sum[:])})
	WantCode(t, "a blob over the byte quota", err, domain.CodeResourceLimit)
	setQuotas(domain.DefaultSpaceMaxStoredBytes, 100)
	prep := mustDo[domain.BlobPrepareResult](t, "PrepareBlob")(e.Svc.PrepareBlob(e.ctx, p, domain.BlobPrepareRequest{RequestID: "fits",
		ContentType: "text/plain", SizeBytes: 64, SHA256: hex.EncodeToString(sum[:])}))
	mustDo[domain.UploadResult](t, "Upload")(e.Svc.Upload(e.ctx, p, prep.UploadID, "text/plain", 64, strings.NewReader(text)))
	setQuotas(u4.StoredBytes+10, 100)
	_, err = e.Svc.CommitBlob(e.ctx, p, domain.BlobCommitRequest{RequestID: "seal", UploadID: prep.UploadID})
	WantCode(t, "a seal over the byte quota", err, domain.CodeResourceLimit)
	if info := mustDo[domain.BlobInfo](t, "GetBlob")(e.Svc.GetBlob(e.ctx, p, prep.BlobID)); info.State != domain.BlobPending {
		t.Errorf("a refused seal left the blob %s", info.State)
	}
	if u := *space().Usage; u != u4 {
		t.Errorf("usage after a refused seal %+v, want %+v", u, u4)
	}
	setQuotas(domain.DefaultSpaceMaxStoredBytes, 100)
	mustDo[domain.BlobInfo](t, "CommitBlob")(e.Svc.CommitBlob(e.ctx, p, domain.BlobCommitRequest{RequestID: "seal", UploadID: prep.UploadID}))
	u5 := *space().Usage
	if u5.StoredBytes < u4.StoredBytes+64 || u5.Items != u4.Items {
		t.Errorf("usage after a seal %+v (before %+v)", u5, u4)
	}
	st := mustDo[domain.SpaceStats](t, "GetStats")(e.Svc.GetStats(e.ctx, sp, domain.StatsOptions{}))
	if st.Usage != u5 || st.Quotas.MaxItems != 100 {
		t.Errorf("stats usage %+v quotas %+v, want %+v", st.Usage, st.Quotas, u5)
	}
	// Bad quotas.
	for _, q := range []domain.Quotas{{MaxStoredBytes: -1}, {MaxStoredBytes: 1, MaxItems: -1}, {MaxStoredBytes: 1 << 51, MaxItems: 1}} {
		_, err := e.Svc.UpdateSpace(e.ctx, sp, domain.UpdateSpaceRequest{Quotas: &q})
		WantCode(t, fmt.Sprintf("quotas %+v", q), err, domain.CodeInvalidRequest)
	}
}

// opUpdateSpaceMerges: UpdateSpace is a merge patch (RFC 7396) down to the members of quotas and
// rate_limits: one member sets that member and keeps the other as it was, whether that was the default or
// the owner's earlier setting, and the change is what the space reads afterwards.
func opUpdateSpaceMerges(t *testing.T, nb NewBackend) {
	e := newOpEnv(t, nb)
	sp := e.Space().SpaceID
	get := func() domain.SpaceResult { return mustDo[domain.SpaceResult](t, "GetSpace")(e.Svc.GetSpace(e.ctx, sp)) }
	update := func(req domain.UpdateSpaceRequest) domain.SpaceResult {
		t.Helper()
		res := mustDo[domain.SpaceResult](t, "UpdateSpace")(e.Svc.UpdateSpace(e.ctx, sp, req))
		if g := get(); *g.Quotas != *res.Quotas || *g.RateLimits != *res.RateLimits {
			t.Fatalf("UpdateSpace answered %+v %+v, GetSpace reads %+v %+v", *res.Quotas, *res.RateLimits, *g.Quotas, *g.RateLimits)
		}
		return res
	}
	def := domain.DefaultQuotas()
	res := update(domain.UpdateSpaceRequest{Quotas: &domain.Quotas{MaxItems: 100}})
	if want := (domain.Quotas{MaxStoredBytes: def.MaxStoredBytes, MaxItems: 100}); *res.Quotas != want {
		t.Fatalf("quotas after max_items alone: %+v, want %+v", *res.Quotas, want)
	}
	res = update(domain.UpdateSpaceRequest{Quotas: &domain.Quotas{MaxStoredBytes: 5000}})
	if want := (domain.Quotas{MaxStoredBytes: 5000, MaxItems: 100}); *res.Quotas != want {
		t.Fatalf("quotas after max_stored_bytes alone: %+v, want %+v", *res.Quotas, want)
	}
	if *res.RateLimits != domain.DefaultRateLimits() {
		t.Fatalf("rate limits changed by a quotas patch: %+v", *res.RateLimits)
	}
	res = update(domain.UpdateSpaceRequest{RateLimits: &domain.RateLimits{Burst: 7}})
	if want := (domain.RateLimits{RequestsPerSecond: domain.DefaultRequestsPerSecond, Burst: 7}); *res.RateLimits != want {
		t.Fatalf("rate limits after burst alone: %+v, want %+v", *res.RateLimits, want)
	}
	if want := (domain.Quotas{MaxStoredBytes: 5000, MaxItems: 100}); *res.Quotas != want {
		t.Fatalf("quotas changed by a rate-limits patch: %+v, want %+v", *res.Quotas, want)
	}
}

// opSendRetryAfterChanges: a retried send answers what its first commit did, even when a new send with the
// same content would now be refused (the item quota is reached, the recipient revoked), and a reused
// request_id with other content is an IDEMPOTENCY_CONFLICT rather than the refusal a new send would get.
func opSendRetryAfterChanges(t *testing.T, nb NewBackend) {
	e := newOpEnv(t, nb)
	sp := e.Space().SpaceID
	a, b := e.Party(sp), e.Party(sp)
	p := mustDo[*domain.Principal](t, "Authenticate")(e.Svc.Authenticate(e.ctx, a.Token))
	req := domain.SendRequest{RequestID: "kept", RecipientIDs: []string{b.ActorID}, Body: &domain.MessageBody{Text: "once"}}
	first := mustDo[domain.SendResult](t, "the first send")(e.Svc.SendMessage(e.ctx, p, req))
	check := func(what string) {
		t.Helper()
		got, err := e.Svc.SendMessage(e.ctx, p, req)
		if err != nil {
			t.Fatalf("%s: a retried send answered %v, want its first result", what, err)
		}
		if got.MessageID != first.MessageID || got.VisibleSeq != first.VisibleSeq || !got.CommittedAt.Equal(first.CommittedAt) {
			t.Fatalf("%s: a retried send answered %+v, want %+v", what, got, first)
		}
	}
	check("unchanged")

	usage := func() domain.QuotaUsage {
		return *mustDo[domain.SpaceResult](t, "GetSpace")(e.Svc.GetSpace(e.ctx, sp)).Usage
	}
	u := usage()
	mustDo[domain.SpaceResult](t, "UpdateSpace")(e.Svc.UpdateSpace(e.ctx, sp, domain.UpdateSpaceRequest{
		Quotas: &domain.Quotas{MaxStoredBytes: domain.DefaultSpaceMaxStoredBytes, MaxItems: u.Items}}))
	_, err := e.Svc.SendMessage(e.ctx, p, domain.SendRequest{RequestID: "new", RecipientIDs: []string{b.ActorID}, Body: &domain.MessageBody{Text: "once"}})
	WantCode(t, "a new send at the item quota", err, domain.CodeResourceLimit)
	check("at the item quota")
	if got := usage(); got != u {
		t.Errorf("usage after retries %+v, want %+v", got, u)
	}
	mustDo[domain.SpaceResult](t, "UpdateSpace")(e.Svc.UpdateSpace(e.ctx, sp, domain.UpdateSpaceRequest{
		Quotas: &domain.Quotas{MaxStoredBytes: domain.DefaultSpaceMaxStoredBytes, MaxItems: domain.DefaultQuotas().MaxItems}}))

	mustDo[domain.ActorResult](t, "RevokeActor")(e.Svc.RevokeActor(e.ctx, sp, b.ActorID))
	_, err = e.Svc.SendMessage(e.ctx, p, domain.SendRequest{RequestID: "new", RecipientIDs: []string{b.ActorID}, Body: &domain.MessageBody{Text: "once"}})
	WantCode(t, "a new send to a revoked recipient", err, domain.CodeNotFound)
	check("after the recipient was revoked")
	other := req
	other.Body = &domain.MessageBody{Text: "other content"}
	_, err = e.Svc.SendMessage(e.ctx, p, other)
	WantCode(t, "the request_id reused with other content", err, domain.CodeIdempotencyConflict)
	if items, _ := e.ReadAll(b.P, b.ConsumerID, nil, 50); len(items) != 1 {
		t.Errorf("b's feed has %d items, want the one message", len(items))
	}
}
