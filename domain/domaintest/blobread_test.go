package domaintest_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/domain/domaintest"
)

// TestBlobReadableThroughOlderRevisionsAndBySource: a reader of a collection can fetch the blob of an item
// replaced in a later revision, and the collection's source actor can fetch blobs that a writer with a
// grant put into it.
func TestBlobReadableThroughOlderRevisionsAndBySource(t *testing.T) {
	ctx := context.Background()
	f := domaintest.New(t, domaintest.MemBackend, nil)
	sp := f.Space()
	source, writer, reader, stranger := f.Party(sp.SpaceID), f.Party(sp.SpaceID), f.Party(sp.SpaceID), f.Party(sp.SpaceID)
	coll, err := f.Svc.CreateCollection(ctx, sp.SpaceID, domain.CreateCollectionRequest{RequestID: "c", SourceActorID: source.ActorID, Scope: "notes"})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range []struct {
		actor string
		perm  domain.Permission
	}{{writer.ActorID, domain.PermMemoryWrite}, {reader.ActorID, domain.PermMemoryRead}} {
		if _, err := f.Svc.CreateGrant(ctx, sp.SpaceID, domain.CreateGrantRequest{RequestID: f.RID("g"), ActorID: g.actor, Permission: g.perm, CollectionID: coll.CollectionID}); err != nil {
			t.Fatal(err)
		}
	}
	writerP, readerP := f.Principal(writer.Token), f.Principal(reader.Token)
	v1, v2 := f.TextBlob(writerP, "version one", true, true), f.TextBlob(writerP, "version two", true, true)
	for rev, blob := range []string{v1, v2} {
		exp := int64(rev)
		if _, err := f.Svc.PublishMemory(ctx, writerP, coll.CollectionID, domain.MemoryPublishRequest{RequestID: f.RID("pub"), ExpectedRevision: &exp,
			Mode: domain.ModeDelta, Items: []domain.MemoryItemInput{{ItemID: "doc", BlobID: blob, Path: "doc.md"}}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		who  *domain.Principal
		blob string
		want domain.Code
	}{
		{readerP, v1, ""}, {readerP, v2, ""}, // revision 1's blob stays readable after revision 2 replaced it
		{f.Principal(source.Token), v1, ""}, {f.Principal(source.Token), v2, ""},
		{f.Principal(stranger.Token), v2, domain.CodeNotFound},
	} {
		rc, _, err := f.Svc.OpenBlob(ctx, c.who, c.blob)
		if domain.CodeOf(err) != c.want {
			t.Fatalf("%s reading %s: %v, want %q", c.who.ActorID, c.blob, err, c.want)
		}
		if rc != nil {
			rc.Close()
		}
	}
}

// TestAckReplayAfterViewChange: a replayed ack returns its stored result even though its checkpoint cursor
// now belongs to an older view revision; a new ack with that cursor gets CURSOR_SCOPE_CHANGED.
func TestAckReplayAfterViewChange(t *testing.T) {
	ctx := context.Background()
	f := domaintest.New(t, domaintest.MemBackend, nil)
	sp := f.Space()
	a, b := f.Party(sp.SpaceID), f.Party(sp.SpaceID)
	f.Send(a.P, "hi", b.ActorID)
	items, cur := f.ReadAll(b.P, b.ConsumerID, nil, 10)
	req := domain.AckRequest{RequestID: "ack-1", ConsumerID: b.ConsumerID, Items: []domain.AckEntry{{ItemID: items[0].ItemID, Stage: domain.StageReceived}}, CheckpointCursor: &cur}
	first, err := f.Svc.Ack(ctx, b.P, req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Svc.UpdateConsumer(ctx, sp.SpaceID, b.ConsumerID, domain.UpdateConsumerRequest{Filter: &domain.Filter{ProducerIDs: []string{a.ActorID}}}); err != nil {
		t.Fatal(err)
	}
	p := f.Principal(b.Token)
	again, err := f.Svc.Ack(ctx, p, req)
	if err != nil || len(again.Receipts) != 1 || again.Receipts[0] != first.Receipts[0] {
		t.Fatalf("replay: %+v %v, want %+v", again, err, first)
	}
	req.RequestID = "ack-2"
	if _, err := f.Svc.Ack(ctx, p, req); domain.CodeOf(err) != domain.CodeCursorScopeChanged {
		t.Fatalf("new ack with an old-view cursor: %v", err)
	}
}

// TestAckResultAsReplayed: the result of an ack that commits is the one a replay of the same request returns
// (decoded from the stored result): receipts changed and unchanged, a repeated item, with and without a
// checkpoint, with none stored yet.
func TestAckResultAsReplayed(t *testing.T) {
	f := domaintest.New(t, domaintest.MemBackend, nil)
	sp := f.Space()
	a, b := f.Party(sp.SpaceID), f.Party(sp.SpaceID)
	for _, text := range []string{"one", "two"} {
		f.Send(a.P, text, b.ActorID)
	}
	items, cur := f.ReadAll(b.P, b.ConsumerID, nil, 10)
	ctx := context.Background()
	for i, req := range []domain.AckRequest{
		{RequestID: "ack-none", ConsumerID: b.ConsumerID, Items: []domain.AckEntry{}},
		{RequestID: "ack-first", ConsumerID: b.ConsumerID, Items: []domain.AckEntry{{ItemID: items[0].ItemID, Stage: domain.StageReceived}}},
		{RequestID: "ack-both", ConsumerID: b.ConsumerID, CheckpointCursor: &cur, Items: []domain.AckEntry{
			{ItemID: items[0].ItemID, Stage: domain.StageReceived}, {ItemID: items[1].ItemID, Stage: domain.StageReceived},
			{ItemID: items[1].ItemID, Stage: domain.StageProcessed}}},
	} {
		first, err := f.Svc.Ack(ctx, b.P, req)
		if err != nil {
			t.Fatalf("ack %d: %v", i, err)
		}
		again, err := f.Svc.Ack(ctx, b.P, req)
		if err != nil {
			t.Fatalf("replay of ack %d: %v", i, err)
		}
		if !reflect.DeepEqual(first, again) {
			t.Fatalf("ack %d returned %+v, its replay %+v", i, first, again)
		}
		if i == 2 && (first.CheckpointCursor == nil || len(first.Receipts) != 2 || first.Receipts[0].Changed || !first.Receipts[1].Changed) {
			t.Fatalf("ack %d: %+v", i, first)
		}
	}
}

// TestReadAfterFilterChange: a read right after a consumer's filter changed, and right after it changed
// back, applies the filter the consumer has then (decoded consumer records are kept by their bytes, so a
// change is never served from an older record).
func TestReadAfterFilterChange(t *testing.T) {
	ctx := context.Background()
	f := domaintest.New(t, domaintest.MemBackend, nil)
	sp := f.Space()
	a, c, b := f.Party(sp.SpaceID), f.Party(sp.SpaceID), f.Party(sp.SpaceID)
	f.Send(a.P, "from a", b.ActorID)
	f.Send(c.P, "from c", b.ActorID)
	producers := func() []string {
		items, _ := f.ReadAll(f.Principal(b.Token), b.ConsumerID, nil, 10)
		var out []string
		for _, it := range items {
			out = append(out, it.ProducerID)
		}
		return out
	}
	if got := producers(); len(got) != 2 {
		t.Fatalf("without a filter: producers %v, want both", got)
	}
	for _, only := range []string{a.ActorID, c.ActorID, a.ActorID} {
		if _, err := f.Svc.UpdateConsumer(ctx, sp.SpaceID, b.ConsumerID, domain.UpdateConsumerRequest{Filter: &domain.Filter{ProducerIDs: []string{only}}}); err != nil {
			t.Fatal(err)
		}
		if got := producers(); len(got) != 1 || got[0] != only {
			t.Fatalf("filter on %s: producers %v", only, got)
		}
	}
}
