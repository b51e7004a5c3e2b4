package domaintest_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/domain/domaintest"
	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/store/faulty"
)

// TestThreadCreationRace: actors that cannot see each other's messages race to start the same
// client-chosen thread_id; exactly one wins and every other is FORBIDDEN with nothing published (the thread
// record's condition is re-checked inside the commit), on the blob-stored (InlineBodyMax 0) and the inline
// body paths.
func TestThreadCreationRace(t *testing.T) {
	for _, inline := range []int{0, 16 << 10} {
		t.Run(fmt.Sprintf("InlineBodyMax %d", inline), func(t *testing.T) {
			var store *faulty.ItemStore
			f := domaintest.New(t, domaintest.Faulty(domaintest.MemBackend, &store, nil), func(c *domain.Config) { c.InlineBodyMax = inline })
			c := f.With(t)
			sp := c.Space().SpaceID
			to := c.Party(sp)
			const n = 8
			senders := make([]domaintest.Party, n)
			for i := range senders {
				senders[i] = c.Party(sp)
			}
			// Every sender's first publish transaction waits until all of them have read the thread as new,
			// so that only the commit's conditions can decide between them.
			var arrived sync.WaitGroup
			arrived.Add(n)
			var first atomic.Int32
			store.SetBeforeCommit(func(tx port.Tx) {
				if tx.Seq != nil && first.Add(1) <= n { // the publish transaction
					arrived.Done()
					arrived.Wait()
				}
			})
			text := "hello"
			errs := make([]error, n)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range senders {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					thread := "race"
					_, errs[i] = c.Svc.SendMessage(context.Background(), senders[i].P, domain.SendRequest{RequestID: "r",
						RecipientIDs: []string{to.ActorID}, ThreadID: &thread, Body: &domain.MessageBody{Text: text}})
				}()
			}
			close(start)
			wg.Wait()
			won := 0
			for i, err := range errs {
				switch domain.CodeOf(err) {
				case "":
					won++
				case domain.CodeForbidden:
				default:
					t.Fatalf("sender %d: %v", i, err)
				}
			}
			items, _ := c.ReadAll(to.P, to.ConsumerID, nil, 50)
			if won != 1 || len(items) != 1 {
				t.Fatalf("%d senders started thread \"race\", %d messages published; want exactly one", won, len(items))
			}
		})
	}
}
