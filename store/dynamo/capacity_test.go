package dynamo_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/domain/domaintest"
	"github.com/waypost/waypost/store/dynamo"
	"github.com/waypost/waypost/store/dynamo/dynamotest"
)

// meter computes the capacity DynamoDB would charge for each request from item sizes (minidyn reports no
// ConsumedCapacity): strongly consistent reads 1 RRU per 4 KB of the items returned (at least 1 per
// request); each TransactWriteItems action 2 WRU per 1 KB of the larger of the item before and after
// (Put, Update), of the stored item (Delete, ConditionCheck; an absent item counts as 1 KB). Before-images
// are read around the meter, uncounted.
type meter struct {
	dynamo.API
	raw   *dynamodb.Client
	mu    sync.Mutex
	read  float64
	write float64
	calls map[string]int
}

func (m *meter) reset() (r, w float64, calls map[string]int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, w, calls = m.read, m.write, m.calls
	m.read, m.write, m.calls = 0, 0, map[string]int{}
	return r, w, calls
}

func (m *meter) add(op string, r, w float64) {
	m.mu.Lock()
	m.read += r
	m.write += w
	if m.calls == nil {
		m.calls = map[string]int{}
	}
	m.calls[op]++
	m.mu.Unlock()
}

func (m *meter) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	out, err := m.API.GetItem(ctx, in, o...)
	if err == nil {
		m.add("GetItem", dynamo.ReadUnits(dynamo.ItemSize(out.Item)), 0)
	}
	return out, err
}

// BatchGetItem charges each key as its GetItem would be: DynamoDB reads every key of a batch as one
// GetItem (the item's size rounded up to 4 KB, one unit for a key that is absent).
func (m *meter) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	out, err := m.API.BatchGetItem(ctx, in, o...)
	if err == nil {
		var units float64
		for table, ka := range in.RequestItems {
			returned := out.Responses[table]
			units += float64(len(ka.Keys) - len(returned) - len(out.UnprocessedKeys[table].Keys))
			for _, it := range returned {
				units += dynamo.ReadUnits(dynamo.ItemSize(it))
			}
		}
		m.add("BatchGetItem", units, 0)
	}
	return out, err
}

func (m *meter) Query(ctx context.Context, in *dynamodb.QueryInput, o ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	out, err := m.API.Query(ctx, in, o...)
	if err == nil {
		size := 0
		for _, it := range out.Items {
			size += dynamo.ItemSize(it)
		}
		m.add("Query", dynamo.ReadUnits(size), 0)
	}
	return out, err
}

func (m *meter) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	var units float64
	for _, a := range in.TransactItems {
		var key map[string]types.AttributeValue
		var table *string
		switch {
		case a.Put != nil:
			key = map[string]types.AttributeValue{dynamo.AttrPK: a.Put.Item[dynamo.AttrPK], dynamo.AttrSK: a.Put.Item[dynamo.AttrSK]}
			table = a.Put.TableName
		case a.Update != nil:
			key, table = a.Update.Key, a.Update.TableName
		case a.Delete != nil:
			key, table = a.Delete.Key, a.Delete.TableName
		case a.ConditionCheck != nil:
			key, table = a.ConditionCheck.Key, a.ConditionCheck.TableName
		}
		before, err := m.raw.GetItem(ctx, &dynamodb.GetItemInput{TableName: table, Key: key, ConsistentRead: aws.Bool(true)})
		if err != nil {
			return nil, err
		}
		size := dynamo.ItemSize(before.Item)
		switch {
		case a.Put != nil:
			size = max(size, dynamo.ItemSize(a.Put.Item))
		case a.Update != nil:
			size += 24 // the counter attribute may grow by its name and a few digits
		}
		units += dynamo.TxWriteUnits(size)
	}
	out, err := m.API.TransactWriteItems(ctx, in, o...)
	if err == nil {
		m.add("TransactWriteItems", 0, units)
	}
	return out, err
}

// UpdateItem and PutItem (reservations, the watermark, void slots) are standard writes: 1 WRU per 1 KB of
// the larger of the item before and after, charged also when the condition fails.
func (m *meter) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	before, err := m.raw.GetItem(ctx, &dynamodb.GetItemInput{TableName: in.TableName, Key: in.Key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, err
	}
	out, err := m.API.UpdateItem(ctx, in, o...)
	if after, gerr := m.raw.GetItem(ctx, &dynamodb.GetItemInput{TableName: in.TableName, Key: in.Key, ConsistentRead: aws.Bool(true)}); gerr == nil {
		m.add("UpdateItem", 0, dynamo.WriteUnits(max(dynamo.ItemSize(before.Item), dynamo.ItemSize(after.Item))))
	}
	return out, err
}

func (m *meter) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	key := map[string]types.AttributeValue{dynamo.AttrPK: in.Item[dynamo.AttrPK], dynamo.AttrSK: in.Item[dynamo.AttrSK]}
	before, err := m.raw.GetItem(ctx, &dynamodb.GetItemInput{TableName: in.TableName, Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, err
	}
	out, err := m.API.PutItem(ctx, in, o...)
	m.add("PutItem", 0, dynamo.WriteUnits(max(dynamo.ItemSize(before.Item), dynamo.ItemSize(in.Item))))
	return out, err
}

type capacityRow struct {
	what        string
	read, write float64
	calls       map[string]int
}

// requests lists the calls of a row in a fixed order.
func requests(calls map[string]int) string {
	var parts []string
	for _, op := range []string{"GetItem", "BatchGetItem", "Query", "UpdateItem", "PutItem", "TransactWriteItems"} {
		if n := calls[op]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, op))
		}
	}
	return strings.Join(parts, ", ")
}

// TestCapacity measures what the domain operations cost on DynamoDB (computed from item sizes, see meter),
// with the Lambda deployment's inline body limit, logs the table docs/dynamodb.md reproduces, and holds the
// targets: a single-recipient send within 12 WRU, a 50-item inbox page within 15 RRU. Each row includes the
// authentication of the request, as every HTTP request pays it.
func TestCapacity(t *testing.T) {
	srv := dynamotest.New(t)
	m := &meter{API: srv.Client, raw: srv.Client}
	st := srv.Store(t, m, dynamo.Options{})
	f := domaintest.New(t, func(t testing.TB) domaintest.Backend {
		return domaintest.Backend{Store: st, Blobs: domaintest.TempBlobs(t)}
	}, func(c *domain.Config) { c.InlineBodyMax = 4096 }) // functions/config.DefaultInlineBodyMax
	c := f.With(t)
	sp := c.Space()
	a := c.Party(sp.SpaceID)
	rcpts := make([]domaintest.Party, 32)
	for i := range rcpts {
		rcpts[i] = c.Party(sp.SpaceID)
	}
	ctx := context.Background()
	body := &domain.MessageBody{Text: strings.Repeat("A typical short message body. ", 8)} // 240 bytes
	send := func(rid string, to ...string) domain.SendResult {
		p, err := f.Svc.Authenticate(ctx, a.Token)
		if err != nil {
			t.Fatal(err)
		}
		r, err := f.Svc.SendMessage(ctx, p, domain.SendRequest{RequestID: rid, RecipientIDs: to, Subject: "Weekly report is ready", Body: body})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	var rows []capacityRow
	measure := func(what string, fn func()) capacityRow {
		m.reset()
		fn()
		r, w, calls := m.reset()
		row := capacityRow{what, r, w, calls}
		rows = append(rows, row)
		return row
	}

	send("warm-up", rcpts[0].ActorID)
	one := measure("send, 1 recipient", func() { send("one", rcpts[0].ActorID) })
	ids := make([]string, len(rcpts))
	for i, p := range rcpts {
		ids[i] = p.ActorID
	}
	measure("send, 32 recipients", func() { send("many", ids...) })
	measure("send replayed (same request_id)", func() { send("one", rcpts[0].ActorID) })
	for i := range 48 { // rcpts[0] now has 50 messages (warm-up, one, many, and these)
		send(fmt.Sprintf("fill-%d", i), rcpts[0].ActorID)
	}
	var page domain.Page
	reader := rcpts[0]
	pageRow := measure("inbox page of 50", func() {
		p, err := f.Svc.Authenticate(ctx, reader.Token)
		if err != nil {
			t.Fatal(err)
		}
		page, err = f.Svc.ReadInbox(ctx, p, domain.ReadRequest{ConsumerID: reader.ConsumerID, Limit: 50})
		if err != nil {
			t.Fatal(err)
		}
	})
	if len(page.Items) != 50 {
		t.Fatalf("page of %d items, want 50", len(page.Items))
	}
	ack := func(rid string, n int) {
		p, err := f.Svc.Authenticate(ctx, reader.Token)
		if err != nil {
			t.Fatal(err)
		}
		entries := make([]domain.AckEntry, n)
		for i := range entries {
			entries[i] = domain.AckEntry{ItemID: page.Items[i].ItemID, Stage: domain.StageReceived}
		}
		if _, err := f.Svc.Ack(ctx, p, domain.AckRequest{RequestID: rid, ConsumerID: reader.ConsumerID, Items: entries, CheckpointCursor: &page.NextCursor}); err != nil {
			t.Fatal(err)
		}
	}
	measure("ack 1 item + checkpoint", func() { ack("ack-1", 1) })
	n := min(32, f.Svc.Limits().AckItemsMax)
	measure(fmt.Sprintf("ack %d items + checkpoint", n), func() { ack("ack-n", n) })

	var b strings.Builder
	fmt.Fprintf(&b, "\n| operation | RRU | WRU | requests |\n| --- | ---: | ---: | --- |\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %g | %g | %s |\n", r.what, r.read, r.write, requests(r.calls))
	}
	// One message's life: sent to one recipient, read in a page of 50, acked in a batch of n.
	perMsgR := one.read + pageRow.read/50 + rows[len(rows)-1].read/float64(n)
	perMsgW := one.write + pageRow.write/50 + rows[len(rows)-1].write/float64(n)
	fmt.Fprintf(&b, "\nper message (send to 1, read in a page of 50, ack in a batch of %d): %.2f RRU, %.2f WRU → $%.2f per million messages (RRU $0.25/M, WRU $1.25/M)\n",
		n, perMsgR, perMsgW, perMsgR*0.25+perMsgW*1.25)
	t.Log(b.String())

	if one.write > 12 {
		t.Errorf("single-recipient send costs %g WRU, target ≤ 12", one.write)
	}
	if pageRow.read > 15 {
		t.Errorf("50-item inbox page costs %g RRU, target ≤ 15", pageRow.read)
	}
	if math.IsNaN(perMsgR) {
		t.Fatal("no figures")
	}
}
