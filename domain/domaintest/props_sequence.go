package domaintest

import (
	"context"
	"fmt"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/store/faulty"
)

// propP05 is property P05 (sequence). Each check first plays the RFC §16.2 counterexample: A is reserved
// (its body write fails, so it stays reserved), B is published, the consumer reads B, A's retry with the
// same request_id completes — A must get a visible_seq above B's and the consumer's next read from its
// cursor must return A. Then writers commit concurrently while two readers (an inbox consumer and a
// space_log consumer) page through their feeds with random limits: every writer's visible_seqs increase in
// commit order, the space feed is gapless (1, 2, …), and each reader's pages, concatenated, are its visible
// part of the final feed in order, each item exactly once — so no cursor ever passed an item that appeared
// later with a lower number.
func propP05(t *testing.T, nb NewBackend, cfg propConfig) {
	var blobs *faulty.BlobStore
	cfg.check(t, Faulty(nb, nil, &blobs), func(rt *rapid.T, f *Fixture) {
		c := f.With(rt)
		ctx := context.Background()
		sp := c.Space().SpaceID
		r, r2 := c.Party(sp), c.Party(sp)
		writers := make([]Party, rapid.IntRange(2, 3).Draw(rt, "writers"))
		for i := range writers {
			writers[i] = c.Party(sp)
		}
		obs := c.Feed(sp)

		// RFC §16.2: reserve A, publish B, the consumer reads B, A completes, the consumer reads A.
		// A's body goes through the blob store (an inline body has no reserved state to stop in).
		reqA := domain.SendRequest{RequestID: c.RID("A"), RecipientIDs: []string{r.ActorID}, Subject: "A", Body: &domain.MessageBody{Text: longBody("A")}}
		blobs.FailPut(faulty.PutFault{})
		_, err := c.Svc.SendMessage(ctx, writers[0].P, reqA)
		WantCode(rt, "A's first attempt (body write fails)", err, domain.CodeStorageUnavailable)
		st, err := c.Svc.Status(ctx, writers[0].P, domain.OpMessageSend, reqA.RequestID)
		if err != nil || st.SubmissionState != domain.StateReserved || len(st.Result) != 0 {
			rt.Fatalf("status of A after its failed attempt: %+v %v, want reserved without a result", st, err)
		}
		var seqB []int
		for range rapid.IntRange(1, 3).Draw(rt, "B messages") {
			from := writers[rapid.IntRange(0, len(writers)-1).Draw(rt, "B producer")]
			res := c.Send(from.P, drawBody(rt, "B"), r.ActorID)
			seqB = append(seqB, mustAtoi(rt, res.VisibleSeq))
		}
		limit := rapid.IntRange(1, 4).Draw(rt, "16.2 limit")
		itemsB, cursor := c.ReadAll(r.P, r.ConsumerID, nil, limit)
		if len(itemsB) != len(seqB) {
			rt.Fatalf("the consumer reads %d items before A completes, want the %d B messages", len(itemsB), len(seqB))
		}
		f.Clock.Advance(time.Second)
		resA, err := c.Svc.SendMessage(ctx, writers[0].P, reqA)
		if err != nil {
			rt.Fatalf("A's retry: %v", err)
		}
		if seqA := mustAtoi(rt, resA.VisibleSeq); seqA <= slices.Max(seqB) {
			rt.Fatalf("A got visible_seq %d, not above B's %v: visible_seq was not assigned at the final commit", seqA, seqB)
		}
		itemsA, _ := c.ReadAll(r.P, r.ConsumerID, &cursor, limit)
		if len(itemsA) != 1 || itemsA[0].ResourceID != resA.MessageID {
			rt.Fatalf("after A completes the consumer's next read returns %s, want A (%s)", mDescribe(itemsA), resA.MessageID)
		}

		// Concurrent writers and readers.
		type sent struct {
			res domain.SendResult
			to  []string
		}
		perWriter := max(2, cfg.steps/(2*len(writers)))
		counts := make([]int, len(writers))
		targets := make([][][]string, len(writers))
		texts := make([][]string, len(writers))
		for i := range writers {
			counts[i] = rapid.IntRange(1, perWriter).Draw(rt, "messages")
			for range counts[i] {
				to := rapid.SampledFrom([][]string{{r.ActorID}, {r2.ActorID}, {r.ActorID, r2.ActorID}}).Draw(rt, "to")
				targets[i] = append(targets[i], to)
				texts[i] = append(texts[i], drawBody(rt, "w"))
			}
		}
		limits := []int{rapid.IntRange(1, 5).Draw(rt, "inbox limit"), rapid.IntRange(1, 5).Draw(rt, "space_log limit")}
		obsP := c.Principal(obs.token)
		rP := c.Principal(r.Token)
		writerPs := make([]*domain.Principal, len(writers))
		for i, w := range writers {
			writerPs[i] = c.Principal(w.Token)
		}
		var done atomic.Bool
		results := make([][]sent, len(writers))
		werrs := make([]error, len(writers))
		var wwg, rwg sync.WaitGroup
		start := make(chan struct{})
		for i := range writers {
			wwg.Go(func() {
				defer recovered(&werrs[i])
				<-start
				for j, to := range targets[i] {
					req := domain.SendRequest{RequestID: "w" + strconv.Itoa(i) + "-" + strconv.Itoa(j), RecipientIDs: to, Subject: "w", Body: &domain.MessageBody{Text: texts[i][j]}}
					res, err := c.Svc.SendMessage(ctx, writerPs[i], req)
					if err != nil {
						werrs[i] = err
						return
					}
					results[i] = append(results[i], sent{res: res, to: to})
				}
			})
		}
		type reader struct {
			p        *domain.Principal
			consumer string
			limit    int
			got      []domain.FeedItem
			err      error
			pages    int
		}
		readers := []*reader{{p: rP, consumer: r.ConsumerID, limit: limits[0]}, {p: obsP, consumer: obs.consumer, limit: limits[1]}}
		for _, rd := range readers {
			rwg.Go(func() {
				defer recovered(&rd.err)
				<-start
				var cur *string
				for rd.pages < 100000 {
					finished := done.Load()
					page, err := c.Svc.ReadInbox(ctx, rd.p, domain.ReadRequest{ConsumerID: rd.consumer, Cursor: cur, Limit: rd.limit})
					if err != nil {
						rd.err = err
						return
					}
					rd.pages++
					rd.got = append(rd.got, page.Items...)
					next := page.NextCursor
					cur = &next
					if !page.HasMore {
						if finished {
							return
						}
						time.Sleep(time.Millisecond)
					}
				}
			})
		}
		close(start)
		wwg.Wait()
		done.Store(true)
		rwg.Wait()
		for i, err := range werrs {
			if err != nil {
				rt.Fatalf("writer %d: %v", i, err)
			}
		}
		feed := obs.All() // gapless, 1..n
		bySeq := map[string]domain.FeedItem{}
		for _, it := range feed {
			bySeq[it.VisibleSeq] = it
		}
		total := len(seqB) + 1
		for i, rs := range results {
			last := 0
			for _, s := range rs {
				seq := mustAtoi(rt, s.res.VisibleSeq)
				if seq <= last {
					rt.Fatalf("writer %d: visible_seq %d after %d", i, seq, last)
				}
				last = seq
				if it, ok := bySeq[s.res.VisibleSeq]; !ok || it.ResourceID != s.res.MessageID || !it.CommittedAt.Equal(s.res.CommittedAt) {
					rt.Fatalf("writer %d: result %+v is not the feed item at its visible_seq (%+v)", i, s.res, it)
				}
				total++
			}
		}
		if len(feed) != total {
			rt.Fatalf("the feed has %d items for %d sends", len(feed), total)
		}
		for k, rd := range readers {
			if rd.err != nil {
				rt.Fatalf("reader %d: %v", k, rd.err)
			}
			var want []domain.FeedItem
			for _, it := range feed {
				if rd.consumer == obs.consumer || slices.Contains(it.RecipientIDs, r.ActorID) {
					want = append(want, it)
				}
			}
			if !sameItemIDs(rd.got, want) {
				rt.Fatalf("reader %d (limit %d, %d pages) got %s\nwant %s", k, rd.limit, rd.pages, mDescribe(rd.got), mDescribe(want))
			}
		}
	})
}

// recovered turns a panic of a goroutine started by a property into an error the property reports, so
// that rapid still prints the seed (a panic outside the property's goroutine would end the test binary).
func recovered(err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
	}
}

func mustAtoi(t TB, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("visible_seq %q is not a decimal number", s)
	}
	return n
}

func sameItemIDs(a, b []domain.FeedItem) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].ItemID != b[i].ItemID || a[i].VisibleSeq != b[i].VisibleSeq {
			return false
		}
	}
	return true
}
