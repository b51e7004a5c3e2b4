package dynamo_test

import (
	"context"
	"fmt"
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

	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/store/dynamo"
	"github.com/waypost/waypost/store/dynamo/dynamotest"
)

// benchLatency is the round trip the benchmark gives every emulator request.
var benchLatency = dynamotest.Latency{Read: 5 * time.Millisecond, Write: 5 * time.Millisecond, Transact: 15 * time.Millisecond}

// countingAPI counts the TransactWriteItems calls the store makes (retries included), its writes of the
// watermark item, its queries (the probes above the watermark) and its point reads (GetItem and BatchGetItem
// requests).
type countingAPI struct {
	dynamo.API
	tx, head, query, gets, batches atomic.Int64
}

func (c *countingAPI) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	c.gets.Add(1)
	return c.API.GetItem(ctx, in, o...)
}

func (c *countingAPI) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	c.batches.Add(1)
	return c.API.BatchGetItem(ctx, in, o...)
}

func (c *countingAPI) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if pk, ok := in.Key[dynamo.AttrPK].(*types.AttributeValueMemberS); ok && strings.HasPrefix(pk.Value, "SH#") {
		c.head.Add(1)
	}
	return c.API.UpdateItem(ctx, in, o...)
}

func (c *countingAPI) Query(ctx context.Context, in *dynamodb.QueryInput, o ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	c.query.Add(1)
	return c.API.Query(ctx, in, o...)
}

func (c *countingAPI) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	c.tx.Add(1)
	return c.API.TransactWriteItems(ctx, in, o...)
}

// BenchmarkSpaceWriters measures how many commits per second one space takes from concurrent writers on
// DynamoDB: writers=1, 16 and 64 goroutines commit, through Store.Commit's real path (reservation, one
// TransactWriteItems with the slot guarded, watermark), transactions of three puts each as a message send
// writes them: the feed item (the sequence slot), the recipient's inbox entry and the message record. Every
// emulator request is delayed as a DynamoDB round trip would be (5 ms per read or non-transactional write,
// 15 ms per TransactWriteItems; a sleep, not CPU). Metrics: commits/s, attempts/commit
// (TransactWriteItems calls per successful commit) and p99-ms (commit latency); also head-writes/commit
// (conditional writes of the watermark item, successful or not: its write units per commit) and
// probes/commit (queries of the slots above the watermark).
//
// minidyn copies the whole table for every TransactWriteItems (its rollback snapshot) and scans it for every
// Query, so a table that grows by thousands of items would make the emulator, not the store, the
// bottleneck. A janitor therefore deletes, through an undelayed endpoint, what the store never reads again:
// the items of values at or below the watermark, and the inbox and message items of slots above it.
func BenchmarkSpaceWriters(b *testing.B) {
	srv := dynamotest.StartWithLatency(benchLatency)
	b.Cleanup(srv.Close)
	for _, writers := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			benchWriters(b, srv, writers)
		})
	}
}

func benchWriters(b *testing.B, srv *dynamotest.Server, writers int) {
	table := srv.Table(b)
	api := &countingAPI{API: srv.Client}
	st, err := dynamo.New(api, table, dynamo.Options{})
	if err != nil {
		b.Fatal(err)
	}
	seq := port.Sequence{Counter: port.Key{PK: "SP#bench", SK: "SEQ"}, Slots: "FD#bench", Head: port.Key{PK: "SH#bench", SK: "HEAD"}}
	payload := make([]byte, 480) // a typical feed item, inbox copy and message record: about 0.5 KB each
	for i := range payload {
		payload[i] = 'a' + byte(i%26)
	}
	stop := startJanitor(srv.RawClient, table, seq)
	defer stop()

	var next atomic.Int64
	lat := make([][]time.Duration, writers)
	errs := make(chan error, writers)
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				t0 := time.Now()
				_, err := st.Commit(context.Background(), port.Tx{Seq: &seq, Count: 1, Max: 1 << 53, Build: func(v uint64) ([]port.Op, error) {
					return []port.Op{
						port.Put(port.Item{Key: seq.Slot(v), Data: payload}, port.NotExists()),
						port.Put(port.Item{Key: port.Key{PK: "IN#bench#rcpt", SK: port.SlotSK(v)}, Data: payload}, port.NotExists()),
						port.Put(port.Item{Key: port.Key{PK: "MS#bench#" + port.SlotSK(v), SK: "MSG"}, Data: payload}, port.NotExists()),
					}, nil
				}})
				if err != nil {
					errs <- err
					return
				}
				lat[w] = append(lat[w], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	p99 := all[min(len(all)-1, len(all)*99/100)]
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "commits/s")
	b.ReportMetric(float64(api.tx.Load())/float64(b.N), "attempts/commit")
	b.ReportMetric(float64(p99.Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(api.head.Load())/float64(b.N), "head-writes/commit")
	b.ReportMetric(float64(api.query.Load())/float64(b.N), "probes/commit")
}

// startJanitor deletes, every 10 ms, the benchmark items of values at or below the watermark, and the inbox
// and message items of the slots filled above it (the store only reads slots, and only above the
// watermark; see BenchmarkSpaceWriters). It returns a function that stops it.
func startJanitor(client *dynamodb.Client, table string, seq port.Sequence) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		var cleared uint64
		sideCleared := map[uint64]bool{} // values above the watermark whose inbox and message items are gone
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			out, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: keyOf(seq.Head), ConsistentRead: aws.Bool(true)})
			if err != nil || out.Item == nil {
				continue
			}
			n, ok := out.Item[dynamo.AttrHead].(*types.AttributeValueMemberN)
			if !ok {
				continue
			}
			h, _ := strconv.ParseUint(n.Value, 10, 64)
			var reqs []types.WriteRequest
			flush := func() {
				if len(reqs) > 0 {
					_, _ = client.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{table: reqs}})
					reqs = reqs[:0]
				}
			}
			del := func(keys ...port.Key) {
				for _, k := range keys {
					reqs = append(reqs, types.WriteRequest{DeleteRequest: &types.DeleteRequest{Key: keyOf(k)}})
					if len(reqs) == 25 {
						flush()
					}
				}
			}
			side := func(v uint64) []port.Key {
				return []port.Key{{PK: "IN#bench#rcpt", SK: port.SlotSK(v)}, {PK: "MS#bench#" + port.SlotSK(v), SK: "MSG"}}
			}
			for ; cleared < h; cleared++ {
				v := cleared + 1
				if !sideCleared[v] {
					del(side(v)...)
				}
				delete(sideCleared, v)
				del(seq.Slot(v))
			}
			// Slots filled above the watermark wait for a lower one still committing; their inbox and
			// message items are never read.
			above, err := client.Query(ctx, &dynamodb.QueryInput{TableName: aws.String(table),
				KeyConditionExpression:    aws.String("#pk = :pk AND #sk > :h"),
				ExpressionAttributeNames:  map[string]string{"#pk": dynamo.AttrPK, "#sk": dynamo.AttrSK},
				ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: seq.Slots}, ":h": &types.AttributeValueMemberS{Value: port.SlotSK(h)}},
				ProjectionExpression:      aws.String("#sk"), ConsistentRead: aws.Bool(true)})
			if err == nil {
				for _, it := range above.Items {
					sk, _ := it[dynamo.AttrSK].(*types.AttributeValueMemberS)
					if sk == nil {
						continue
					}
					if v, err := strconv.ParseUint(sk.Value, 10, 64); err == nil && !sideCleared[v] {
						del(side(v)...)
						sideCleared[v] = true
					}
				}
			}
			flush()
		}
	}()
	return func() { cancel(); <-done }
}

func keyOf(k port.Key) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{dynamo.AttrPK: &types.AttributeValueMemberS{Value: k.PK}, dynamo.AttrSK: &types.AttributeValueMemberS{Value: k.SK}}
}
