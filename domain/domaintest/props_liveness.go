package domaintest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/store/faulty"
)

// propP18 is property P18 (liveness). While the store fails a random share of reads and commits with
// port.ErrUnavailable — some commits before applying, some after (the response is lost) — and blob puts
// fail too, clients send, ack and page through their feeds, retrying each write a few times with the same
// request_id and keeping their cursor when a read fails. Every failure must be retryable
// (STORAGE_UNAVAILABLE or SUBMISSION_PENDING), never a permanent error. Then the faults stop and every
// client retries what is unresolved with the same request IDs and reads until has_more is false:
//
//   - every send is committed exactly once, with the result its retries reported;
//   - every reader has received exactly the committed items visible to it (inbox: addressed to its actor;
//     space_log: all), in visible_seq order, each exactly once, across the pages it got during and after
//     the faults;
//   - the space feed is gapless, and the receipts of each (consumer, item) advance strictly
//     (received → processed, receipt_version 1, 2) up to the strongest stage any ack asked for.
func propP18(t *testing.T, nb NewBackend, cfg propConfig) {
	plan := &faulty.Random{}
	cfg.check(t, withRandomFaults(nb, plan), func(rt *rapid.T, f *Fixture) {
		plan.Stop()
		c := f.With(rt)
		ctx := context.Background()
		sp := c.Space().SpaceID
		producers := []Party{c.Party(sp), c.Party(sp)}
		x, y := c.Party(sp), c.Party(sp)
		c.Grant(sp, y.ActorID, domain.PermSpaceObserve, "")
		yLog := c.Consumer(sp, y.ActorID, domain.ViewSpaceLog, nil)

		type reader struct {
			actor, consumer, token string
			all                    bool // space_log
			cursor                 *string
			got                    []domain.FeedItem
		}
		readers := []*reader{
			{actor: x.ActorID, consumer: x.ConsumerID, token: x.Token},
			{actor: y.ActorID, consumer: y.ConsumerID, token: y.Token},
			{actor: y.ActorID, consumer: yLog, token: y.Token, all: true},
			{actor: producers[0].ActorID, consumer: producers[0].ConsumerID, token: producers[0].Token},
			{actor: producers[1].ActorID, consumer: producers[1].ConsumerID, token: producers[1].Token},
		}
		type write struct {
			token string
			send  *domain.SendRequest
			ack   *domain.AckRequest
			res   *domain.SendResult
			done  bool
		}
		var writes []*write
		injectedBefore, lostBefore := plan.Counts()

		transient := func(what string, err error) {
			rt.Helper()
			if code := CodeOf(err); code != domain.CodeStorageUnavailable && code != domain.CodeSubmissionPending {
				rt.Fatalf("%s under transient storage faults: %v (code %s); only STORAGE_UNAVAILABLE or SUBMISSION_PENDING may be answered", what, err, code)
			}
		}
		// attempt runs one try of a write; it reports whether it succeeded.
		attempt := func(wr *write, faults bool) bool {
			rt.Helper()
			p, err := c.Svc.Authenticate(ctx, wr.token)
			if err != nil {
				if !faults {
					rt.Fatalf("Authenticate without faults: %v", err)
				}
				transient("Authenticate", err)
				return false
			}
			if wr.send != nil {
				res, err := c.Svc.SendMessage(ctx, p, *wr.send)
				if err == nil {
					if wr.res != nil && !mSameSend(res, *wr.res) {
						rt.Fatalf("send %s answered %+v, earlier %+v", wr.send.RequestID, res, *wr.res)
					}
					wr.res = &res
					return true
				}
				if !faults {
					rt.Fatalf("send %s after the faults stopped: %v", wr.send.RequestID, err)
				}
				transient("send", err)
				return false
			}
			_, err = c.Svc.Ack(ctx, p, *wr.ack)
			if err == nil {
				return true
			}
			if !faults {
				rt.Fatalf("ack %s after the faults stopped: %v", wr.ack.RequestID, err)
			}
			transient("ack", err)
			return false
		}
		readPage := func(r *reader, limit int, faults bool) (more bool, ok bool) {
			rt.Helper()
			p, err := c.Svc.Authenticate(ctx, r.token)
			if err == nil {
				var page domain.Page
				page, err = c.Svc.ReadInbox(ctx, p, domain.ReadRequest{ConsumerID: r.consumer, Cursor: r.cursor, Limit: limit})
				if err == nil {
					r.got = append(r.got, page.Items...)
					next := page.NextCursor
					r.cursor = &next
					return page.HasMore, true
				}
			}
			if !faults {
				rt.Fatalf("read after the faults stopped: %v", err)
			}
			transient("read", err)
			return false, false
		}

		rate := rapid.SampledFrom([]float64{0.05, 0.15, 0.3, 0.5})
		plan.Start(faulty.Plan{Seed: rapid.Uint64().Draw(rt, "fault seed"), Read: rate.Draw(rt, "read fault rate"),
			Commit: rate.Draw(rt, "commit fault rate"), Lost: rapid.SampledFrom([]float64{0, 0.5, 1}).Draw(rt, "lost response share"),
			Put: rate.Draw(rt, "blob fault rate")})
		for range cfg.draw(rt, cfg.steps/2) {
			switch rapid.IntRange(0, 2).Draw(rt, "op") {
			case 0:
				from := producers[rapid.IntRange(0, 1).Draw(rt, "producer")]
				to := rapid.SampledFrom([][]string{{x.ActorID}, {y.ActorID}, {x.ActorID, y.ActorID}, {x.ActorID, producers[0].ActorID}}).Draw(rt, "to")
				req := domain.SendRequest{RequestID: c.RID("send"), RecipientIDs: to, Subject: "live", Body: &domain.MessageBody{Text: drawBody(rt, "live")}}
				writes = append(writes, &write{token: from.Token, send: &req})
			case 1:
				r := readers[rapid.IntRange(0, len(readers)-1).Draw(rt, "acker")]
				if len(r.got) == 0 {
					continue
				}
				req := domain.AckRequest{RequestID: c.RID("ack"), ConsumerID: r.consumer}
				for range rapid.IntRange(1, 3).Draw(rt, "entries") {
					it := r.got[rapid.IntRange(0, len(r.got)-1).Draw(rt, "acked")]
					req.Items = append(req.Items, domain.AckEntry{ItemID: it.ItemID, Stage: rapid.SampledFrom([]domain.Stage{domain.StageReceived, domain.StageProcessed}).Draw(rt, "stage")})
				}
				writes = append(writes, &write{token: r.token, ack: &req})
			case 2:
				r := readers[rapid.IntRange(0, len(readers)-1).Draw(rt, "reader")]
				readPage(r, rapid.IntRange(1, 4).Draw(rt, "limit"), true)
				continue
			}
			wr := writes[len(writes)-1]
			for range rapid.IntRange(1, 3).Draw(rt, "tries") {
				if wr.done = attempt(wr, true); wr.done {
					break
				}
			}
		}
		plan.Stop()
		injected, lost := plan.Counts()
		rt.Logf("%d faults injected, %d of them lost responses", injected-injectedBefore, lost-lostBefore)

		// Faults stopped: every client finishes its writes with the same request IDs and reads to the end.
		for _, wr := range writes {
			if !wr.done {
				wr.done = attempt(wr, false)
			}
		}
		for _, r := range readers {
			for i := 0; ; i++ {
				if i > 1000 {
					rt.Fatalf("reader %s: has_more still true after 1000 pages", r.consumer)
				}
				if more, _ := readPage(r, 7, false); !more {
					break
				}
			}
		}

		obs := c.Feed(sp)
		feed := obs.All()
		sends := 0
		for _, wr := range writes {
			if wr.send == nil {
				continue
			}
			sends++
			var found []domain.FeedItem
			for _, it := range feed {
				if it.ItemType == domain.ItemMessage && it.ResourceID == wr.res.MessageID {
					found = append(found, it)
				}
			}
			if len(found) != 1 || found[0].VisibleSeq != wr.res.VisibleSeq {
				rt.Fatalf("send %s (result %+v) is in the feed %d times: %s", wr.send.RequestID, *wr.res, len(found), mDescribe(found))
			}
		}
		messages := 0
		type rkey struct{ consumer, item string }
		strongest := map[rkey]domain.Stage{}
		for _, wr := range writes {
			if wr.ack != nil {
				for _, e := range wr.ack.Items {
					k := rkey{wr.ack.ConsumerID, e.ItemID}
					if mStageRank(e.Stage) > mStageRank(strongest[k]) {
						strongest[k] = e.Stage
					}
				}
			}
		}
		isReceipt := map[string]bool{}
		last := map[rkey]domain.ReceiptItemData{}
		for _, it := range feed {
			switch it.ItemType {
			case domain.ItemMessage:
				messages++
			case domain.ItemReceipt:
				var d domain.ReceiptItemData
				if err := json.Unmarshal(it.Data, &d); err != nil {
					rt.Fatalf("receipt data %s: %v", it.Data, err)
				}
				k := rkey{d.ConsumerID, d.AckedItemID}
				prev := last[k]
				if mStageRank(d.Stage) <= mStageRank(prev.Stage) || d.ReceiptVersion != prev.ReceiptVersion+1 {
					rt.Fatalf("receipts of %v do not advance: %+v after %+v", k, d, prev)
				}
				last[k] = d
			}
			isReceipt[it.ItemID] = it.ItemType == domain.ItemReceipt
		}
		if messages != sends {
			rt.Fatalf("%d messages in the feed for %d sends", messages, sends)
		}
		for k, s := range strongest {
			if isReceipt[k.item] {
				if _, ok := last[k]; ok {
					rt.Fatalf("acking receipt item %s published a receipt", k.item)
				}
				continue
			}
			if last[k].Stage != s {
				rt.Fatalf("receipts of %v end at %q, the strongest ack asked for %s", k, last[k].Stage, s)
			}
		}
		for k := range last {
			if _, ok := strongest[k]; !ok {
				rt.Fatalf("a receipt for %v nobody acked", k)
			}
		}
		for _, r := range readers {
			var want []domain.FeedItem
			for _, it := range feed {
				if r.all || slices.Contains(it.RecipientIDs, r.actor) {
					want = append(want, it)
				}
			}
			if !sameItemIDs(r.got, want) {
				rt.Fatalf("reader %s (%s) got %s\nwant %s", r.consumer, fmt.Sprint(r.all), mDescribe(r.got), mDescribe(want))
			}
		}
	})
}
