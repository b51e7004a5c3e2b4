package dynamo_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/domain/domaintest"
	"github.com/waypost/waypost/store/dynamo"
	"github.com/waypost/waypost/store/dynamo/dynamotest"
)

// TestManyKeysReadInFewRoundTrips: on DynamoDB every point read is a round trip, so the operations that
// check many keys read them together. An inbox.ack of a 32-item page (ack_items_max on DynamoDB, whose
// transactions hold 100 actions: three per receipt), served by a process that did not read the page
// (another Lambda instance: nothing cached), reads the acked feed items and their receipts in one
// BatchGetItem each, instead of a GetItem per item and receipt; a message.send to 32 recipients
// (max_recipients) reads the recipients in one; a memory.publish of 120 items with a blob each checks the
// blobs in two (100 keys a request), and memory.export reads their records in two.
func TestManyKeysReadInFewRoundTrips(t *testing.T) {
	rc := &countingAPI{}
	f := domaintest.New(t, func(t testing.TB) domaintest.Backend {
		srv := dynamotest.New(t)
		rc.API = srv.Client
		return domaintest.Backend{Store: srv.Store(t, rc, dynamo.Options{}), Blobs: domaintest.TempBlobs(t)}
	}, nil)
	c := f.With(t)
	sp := c.Space()
	sender, reader := c.Party(sp.SpaceID), c.Party(sp.SpaceID)
	for i := range 32 {
		c.Send(sender.P, fmt.Sprintf("m%d", i), reader.ActorID)
	}
	page := c.Read(reader.P, reader.ConsumerID, nil, 32)
	if len(page.Items) != 32 {
		t.Fatalf("read %d items, want 32", len(page.Items))
	}
	req := domain.AckRequest{RequestID: "ack-page", ConsumerID: reader.ConsumerID, CheckpointCursor: &page.NextCursor}
	for _, it := range page.Items {
		req.Items = append(req.Items, domain.AckEntry{ItemID: it.ItemID, Stage: domain.StageReceived})
	}
	other := f.OtherProcess()
	p := domaintest.Must[*domain.Principal](t)(other.Authenticate(context.Background(), reader.Token))
	// wants fails t unless what do does makes `batches` BatchGetItem requests and at most maxGets GetItem.
	wants := func(what string, batches, maxGets int64, do func()) {
		t.Helper()
		rc.gets.Store(0)
		rc.batches.Store(0)
		do()
		g, b := rc.gets.Load(), rc.batches.Load()
		t.Logf("%s: %d GetItem and %d BatchGetItem requests", what, g, b)
		if b != batches || g > maxGets {
			t.Fatalf("%s: %d GetItem and %d BatchGetItem requests; want %d batches, at most %d other reads", what, g, b, batches, maxGets)
		}
	}
	wants("inbox.ack of 32 items (the items and receipts)", 2, 8, func() {
		res, err := other.Ack(context.Background(), p, req)
		if err != nil {
			t.Fatalf("ack: %v", err)
		}
		for _, r := range res.Receipts {
			if !r.Changed || r.Stage != domain.StageReceived {
				t.Fatalf("receipt %+v", r)
			}
		}
	})

	var to []string
	for range 32 {
		to = append(to, c.Actor(sp.SpaceID))
	}
	wants("message.send to 32 recipients", 1, 8, func() { c.Send(sender.P, "to many", to...) })

	coll := domaintest.Must[domain.CollectionResult](t)(f.Svc.CreateCollection(context.Background(), sp.SpaceID,
		domain.CreateCollectionRequest{RequestID: "coll", SourceActorID: sender.ActorID, Scope: "notes"}))
	var items []domain.MemoryItemInput
	for i := range 120 {
		blob := c.TextBlob(sender.P, fmt.Sprintf("note %d", i), true, true)
		items = append(items, domain.MemoryItemInput{ItemID: fmt.Sprintf("n%03d", i), BlobID: blob, Path: fmt.Sprintf("notes/%03d.txt", i)})
	}
	zero := int64(0)
	wants("memory.publish of 120 items (their blobs)", 2, 12, func() {
		domaintest.Must[domain.MemoryPublishResult](t)(f.Svc.PublishMemory(context.Background(), sender.P, coll.CollectionID,
			domain.MemoryPublishRequest{RequestID: "pub", ExpectedRevision: &zero, Mode: "snapshot", Items: items}))
	})
	wants("memory.export of 120 items (their blobs)", 2, 12, func() {
		ex := domaintest.Must[domain.MemoryExport](t)(f.Svc.ExportMemory(context.Background(), sender.P, coll.CollectionID, nil))
		if len(ex.Items) != 120 {
			t.Fatalf("memory.export of %d items, want 120", len(ex.Items))
		}
	})
}
