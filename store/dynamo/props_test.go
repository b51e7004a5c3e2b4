package dynamo_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/domain/domaintest"
	"github.com/waypost/waypost/store/dynamo"
	"github.com/waypost/waypost/store/dynamo/dynamotest"
	"github.com/waypost/waypost/store/s3blob"
	"github.com/waypost/waypost/store/s3blob/s3test"
)

// awsBackend returns a NewBackend of the AWS deployment's adapters: the DynamoDB store on a fresh minidyn
// server and table and the S3 blob store on a fresh versitygw bucket. It skips the test when no S3 emulator is around.
func awsBackend(t *testing.T) domaintest.NewBackend {
	t.Helper()
	e := s3test.Require(t)
	return func(t testing.TB) domaintest.Backend {
		blobs, err := s3blob.New(e.Client(), e.Bucket(t), s3blob.Options{})
		if err != nil {
			t.Fatalf("s3blob: %v", err)
		}
		// A minidyn server of its own: minidyn creates tables without locking its table map, so backends
		// made by parallel tests must not share one.
		return domaintest.Backend{Store: dynamotest.New(t).Store(t, nil, dynamo.Options{}), Blobs: blobs}
	}
}

// TestDomain runs every domain suite (domaintest.RunAll) on DynamoDB (minidyn) + S3 (versitygw). Every
// storage call is a round trip to an emulator here, so each check runs fewer random steps, and each property
// fewer rapid checks, than on the embedded store. minidyn answers a Query by scanning and interpreting every
// item of the table and copies the whole table for each TransactWriteItems, so a table shared by all the
// checks of a property would make its cost grow with the square of its checks: every check of the §15
// properties, of the failure matrix's P03 and P04 and of the webhook suite gets a fresh table (and bucket)
// of its own (Features.BackendPerCheck; the webhook suite always does), so the cost grows only linearly; the
// memory properties keep one table per property. The randomized coverage per run is lower than on the
// embedded store; run `go test -run 'TestDomain/(Properties|FailureMatrix)' -rapid.checks=100
// ./store/dynamo/` for a deeper pass. A restart is a new service over the same table.
func TestDomain(t *testing.T) {
	domaintest.RunAll(t, awsBackend(t), domaintest.Features{Steps: 12, MemorySteps: 8, WebhookSteps: 24,
		PropertyChecks: 10, MatrixChecks: 20, WebhookChecks: 20, BackendPerCheck: true})
}

// TestSmokeLoop is the domaintest smoke flow (send, read, ack, receipt, get) on DynamoDB + S3, with one
// body small enough to commit inline and one that goes through S3.
func TestSmokeLoop(t *testing.T) {
	f := domaintest.New(t, awsBackend(t), func(c *domain.Config) { c.InlineBodyMax = 256 })
	domaintest.SmokeLoop(t, f, "hello", strings.Repeat("large body ", 100))
}

// TestConcurrentSends has 16 goroutines send into one space through DynamoDB at once, half of the bodies
// through S3: every acknowledged send must be in the recipient's inbox exactly once, and visible_seq must be
// unique and gapless across the space.
func TestConcurrentSends(t *testing.T) {
	const workers, perWorker = 16, 4
	f := domaintest.New(t, awsBackend(t), func(c *domain.Config) { c.InlineBodyMax = 256 })
	c := f.With(t)
	sp := c.Space()
	rcpt := c.Party(sp.SpaceID)
	senders := make([]domaintest.Party, workers)
	for i := range senders {
		senders[i] = c.Party(sp.SpaceID)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		acked = map[string]domain.SendResult{} // message ID → result
		errs  []error
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range perWorker {
				text := fmt.Sprintf("w%d-%d", w, j)
				if j%2 == 1 {
					text += strings.Repeat(" padding", 64) // > InlineBodyMax: reserve, S3 body, commit
				}
				res, err := f.Svc.SendMessage(context.Background(), senders[w].P, domain.SendRequest{
					RequestID: fmt.Sprintf("req-%d-%d", w, j), RecipientIDs: []string{rcpt.ActorID},
					Subject: "s", Body: &domain.MessageBody{Text: text}})
				mu.Lock()
				if err != nil {
					errs = append(errs, fmt.Errorf("worker %d send %d: %w", w, j, err))
				} else if prev, dup := acked[res.MessageID]; dup {
					errs = append(errs, fmt.Errorf("message %s acknowledged twice (%+v, %+v)", res.MessageID, prev, res))
				} else {
					acked[res.MessageID] = res
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	seqs := map[string]string{}
	for id, r := range acked {
		if prev, dup := seqs[r.VisibleSeq]; dup {
			t.Fatalf("visible_seq %s given to %s and %s", r.VisibleSeq, prev, id)
		}
		seqs[r.VisibleSeq] = id
	}
	if len(acked) != workers*perWorker {
		t.Fatalf("%d sends acknowledged, want %d", len(acked), workers*perWorker)
	}
	// The whole space feed: gapless from 1 (Observer.All checks), exactly the acknowledged messages.
	feed := c.Feed(sp.SpaceID).All()
	if len(feed) != len(acked) {
		t.Fatalf("space feed has %d items, %d sends acknowledged", len(feed), len(acked))
	}
	for _, it := range feed {
		r, ok := acked[it.ResourceID]
		if !ok || r.VisibleSeq != it.VisibleSeq {
			t.Fatalf("feed item %s (seq %s) is not the acknowledged send %+v", it.ResourceID, it.VisibleSeq, r)
		}
	}
	// The recipient's inbox holds every acknowledged send once.
	inbox, _ := c.ReadAll(rcpt.P, rcpt.ConsumerID, nil, 50)
	seen := map[string]bool{}
	for _, it := range inbox {
		if seen[it.ResourceID] {
			t.Fatalf("message %s twice in the inbox", it.ResourceID)
		}
		seen[it.ResourceID] = true
		if _, ok := acked[it.ResourceID]; !ok {
			t.Fatalf("inbox holds %s, which no send acknowledged", it.ResourceID)
		}
	}
	if len(seen) != len(acked) {
		t.Fatalf("inbox holds %d messages, want %d", len(seen), len(acked))
	}
	for id := range acked {
		m, err := f.Svc.GetMessage(context.Background(), rcpt.P, id)
		if err != nil || !strings.HasPrefix(m.Body.Text, "w") {
			t.Fatalf("get %s: %+v, %v", id, m, err)
		}
	}
}
