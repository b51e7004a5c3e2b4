package domain

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/waypost/waypost/domain/port"
)

// sortedPartition is an ItemStore holding one partition of sorted keys; it answers Query only, and counts
// the queries. fail, when set, is returned by the query numbered failAt (from 1).
type sortedPartition struct {
	port.ItemStore
	sks     []string
	queries int
	failAt  int
	fail    error
}

func (p *sortedPartition) Query(_ context.Context, q port.Query) ([]port.Item, error) {
	p.queries++
	if p.queries == p.failAt {
		return nil, p.fail
	}
	var out []port.Item
	for _, sk := range p.sks {
		if sk > q.After && (q.UpTo == "" || sk <= q.UpTo) && len(out) < q.Limit {
			out = append(out, port.Item{Key: port.Key{PK: q.PK, SK: sk}})
		}
	}
	return out, nil
}

// TestPages: pages yields every item of the range once, in order, in pages of the limit, and asks no query
// past the last (short) page; the caller may stop early; a read error is yielded once and ends the pages.
func TestPages(t *testing.T) {
	for _, n := range []int{0, 1, 99, 100, 101, 250} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			st := &sortedPartition{}
			for i := range n {
				st.sks = append(st.sks, fmt.Sprintf("k%04d", i))
			}
			s := &Service{store: st}
			var got []string
			for items, err := range s.pages(context.Background(), port.Query{PK: "p"}) {
				if err != nil {
					t.Fatal(err)
				}
				if len(items) > 100 {
					t.Fatalf("a page of %d items, limit 100", len(items))
				}
				for _, it := range items {
					got = append(got, it.SK)
				}
			}
			if !slices.Equal(got, st.sks) {
				t.Fatalf("read %d items %v, want %d", len(got), got, n)
			}
			if want := n/100 + 1; st.queries != want {
				t.Fatalf("%d queries for %d items, want %d", st.queries, n, want)
			}
		})
	}
	t.Run("stop", func(t *testing.T) {
		st := &sortedPartition{sks: []string{"a", "b", "c", "d"}}
		s := &Service{store: st}
		for range s.pages(context.Background(), port.Query{PK: "p", Limit: 2}) {
			break
		}
		if st.queries != 1 {
			t.Fatalf("%d queries after stopping at the first page", st.queries)
		}
	})
	t.Run("error", func(t *testing.T) {
		boom := errors.New("boom")
		st := &sortedPartition{sks: []string{"a", "b", "c", "d"}, failAt: 2, fail: boom}
		s := &Service{store: st}
		var pages, errs int
		for _, err := range s.pages(context.Background(), port.Query{PK: "p", Limit: 2}) {
			if err != nil {
				errs++
				if !errors.Is(err, boom) {
					t.Fatalf("error %v, want it to wrap the store's", err)
				}
				continue
			}
			pages++
		}
		if pages != 1 || errs != 1 || st.queries != 2 {
			t.Fatalf("%d pages, %d errors, %d queries; want 1, 1, 2", pages, errs, st.queries)
		}
	})
}
