package domaintest_test

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/domain/domaintest"
	"github.com/waypost/waypost/domain/port"
)

// feedReads counts how requests whose context is marked (counted) read feed slots: GetMany calls that ask
// for any, and range queries of the feed partition.
type feedReads struct {
	port.ItemStore
	gets, queries *atomic.Int64
}

type countedKey struct{}

func counted(ctx context.Context) context.Context { return context.WithValue(ctx, countedKey{}, true) }

func (s feedReads) GetMany(ctx context.Context, keys []port.Key) ([]port.Item, []bool, error) {
	if ctx.Value(countedKey{}) != nil && slices.ContainsFunc(keys, func(k port.Key) bool { return strings.HasPrefix(k.PK, "FD#") }) {
		s.gets.Add(1)
	}
	return s.ItemStore.GetMany(ctx, keys)
}

func (s feedReads) Query(ctx context.Context, q port.Query) ([]port.Item, error) {
	if ctx.Value(countedKey{}) != nil && strings.HasPrefix(q.PK, "FD#") {
		s.queries.Add(1)
	}
	return s.ItemStore.Query(ctx, q)
}

// TestInboxReadAhead: with Config.ReadAhead, an inbox.read page that has more starts reading the next page in
// the background, so that the consumer's next read takes its items from the feed cache instead of the
// store; whatever the read-ahead did, every page reads as without it. Service.Close waits for read-aheads,
// and reads go on working after it, without read-ahead.
func TestInboxReadAhead(t *testing.T) {
	pages := map[bool][]domain.Page{}
	for _, ahead := range []bool{false, true} {
		var gets, queries atomic.Int64
		f := domaintest.New(t, func(t testing.TB) domaintest.Backend {
			b := domaintest.MemBackend(t)
			b.Store = feedReads{b.Store, &gets, &queries}
			return b
		}, func(c *domain.Config) { c.ReadAhead = ahead })
		sp := f.Space()
		a, b := f.Party(sp.SpaceID), f.Party(sp.SpaceID)
		for range 12 {
			f.Send(a.P, "hello", b.ActorID)
		}
		first := f.Read(b.P, b.ConsumerID, nil, 5)
		if !first.HasMore || len(first.Items) != 5 {
			t.Fatalf("first page: %d items, has_more %v", len(first.Items), first.HasMore)
		}
		// The second read waits for the read-ahead of its page if that still runs; only its own reads count.
		second, err := f.Svc.ReadInbox(counted(context.Background()), b.P, domain.ReadRequest{ConsumerID: b.ConsumerID, Cursor: &first.NextCursor, Limit: 5})
		if err != nil {
			t.Fatal(err)
		}
		read := gets.Load() + queries.Load()
		f.Svc.Close() // waits for the read-ahead of the third page, if any
		switch {
		case ahead && read != 0:
			t.Errorf("with read-ahead the second page read feed slots from the store %d times, want 0 (from the feed cache)", read)
		case !ahead && read == 0:
			t.Errorf("without read-ahead the second page read no feed slot from the store")
		}
		third := f.Read(b.P, b.ConsumerID, &second.NextCursor, 5) // after Close: no read-ahead, still read
		if len(second.Items) != 5 || len(third.Items) != 2 || third.HasMore {
			t.Fatalf("pages of %d and %d items (has_more %v), want 5 and 2", len(second.Items), len(third.Items), third.HasMore)
		}
		pages[ahead] = []domain.Page{first, second, third}
	}
	for i := range pages[true] {
		on, off := pages[true][i], pages[false][i]
		if len(on.Items) != len(off.Items) || on.HasMore != off.HasMore {
			t.Fatalf("page %d with read-ahead %+v, without %+v", i, on, off)
		}
		for k := range on.Items {
			x, y := on.Items[k], off.Items[k]
			x.ItemID, y.ItemID, x.SpaceID, y.SpaceID, x.ResourceID, y.ResourceID, x.ProducerID, y.ProducerID = "", "", "", "", "", "", "", ""
			x.RecipientIDs, y.RecipientIDs, x.ThreadID, y.ThreadID, x.Data, y.Data = nil, nil, nil, nil, nil, nil
			if !reflect.DeepEqual(x, y) {
				t.Fatalf("page %d item %d with read-ahead %+v, without %+v", i, k, on.Items[k], off.Items[k])
			}
		}
	}
}
