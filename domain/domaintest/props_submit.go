package domaintest

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/store/faulty"
)

// sameSend reports whether two send results are the same stable result.
func mSameSend(a, b domain.SendResult) bool {
	return a.SubmissionState == b.SubmissionState && a.ResourceID == b.ResourceID && a.MessageID == b.MessageID &&
		a.ThreadID == b.ThreadID && a.CommittedAt.Equal(b.CommittedAt) && a.VisibleSeq == b.VisibleSeq
}

// drawSendRequest draws a valid send request to a subset of recipients.
func drawSendRequest(t *rapid.T, c *Client, recipients []string) domain.SendRequest {
	req := domain.SendRequest{RequestID: c.RID("send"),
		Subject: rapid.StringMatching(`[a-z ]{0,12}`).Draw(t, "subject"),
		Body:    &domain.MessageBody{Text: drawBody(t, rapid.StringMatching(`[a-zé ]{0,24}`).Draw(t, "text"))}}
	for i, r := range recipients {
		if rapid.Bool().Draw(t, fmt.Sprintf("to recipient %d", i)) {
			req.RecipientIDs = append(req.RecipientIDs, r)
		}
	}
	if rapid.Bool().Draw(t, "with metadata") {
		req.Metadata = json.RawMessage(drawMetadata(t).json(t))
	}
	return req
}

// propP01 is property P01 (idempotent submit): the same key and fingerprint always yields the same
// resource_id, thread_id, committed_at and visible_seq — when N goroutines send the identical request at once
// (with one or two credentials of the producer; each gets the result or the retryable SUBMISSION_PENDING,
// whose retry gets the result), when it is replayed later (after other commits and with the clock moved),
// and through status — and there is exactly one feed item per request, at that visible_seq.
func propP01(t *testing.T, nb NewBackend, cfg propConfig) {
	cfg.check(t, nb, func(rt *rapid.T, f *Fixture) {
		c := f.With(rt)
		ctx := context.Background()
		sp := c.Space().SpaceID
		a, b, d := c.Party(sp), c.Party(sp), c.Party(sp)
		tok2, _ := c.Token(sp, a.ActorID, "") // a second credential of the producer: same idempotency scope
		obs := c.Feed(sp)
		type sent struct {
			req domain.SendRequest
			res domain.SendResult
		}
		var done []sent
		principal := func(second bool) *domain.Principal {
			if second {
				return c.Principal(tok2)
			}
			return c.Principal(a.Token)
		}
		for range max(1, cfg.draw(rt, 1)*2/3) {
			f.Clock.Advance(time.Duration(rapid.IntRange(1, 5000).Draw(rt, "advance ms")) * time.Millisecond)
			if len(done) > 0 && rapid.IntRange(0, 2).Draw(rt, "replay") == 0 {
				s := done[rapid.IntRange(0, len(done)-1).Draw(rt, "which")]
				res, err := c.Svc.SendMessage(ctx, principal(rapid.Bool().Draw(rt, "second credential")), s.req)
				if err != nil || !mSameSend(res, s.res) {
					rt.Fatalf("replay of %s: %+v %v, first result %+v", s.req.RequestID, res, err, s.res)
				}
				st, err := c.Svc.Status(ctx, principal(false), domain.OpMessageSend, s.req.RequestID)
				var stored domain.SendResult
				if err != nil || st.SubmissionState != domain.StateCommitted || json.Unmarshal(st.Result, &stored) != nil || !mSameSend(stored, s.res) {
					rt.Fatalf("status of %s: %+v %v, want the committed result %+v", s.req.RequestID, st, err, s.res)
				}
				continue
			}
			req := drawSendRequest(rt, c, []string{b.ActorID, d.ActorID})
			n := rapid.IntRange(1, cfg.concurrency).Draw(rt, "goroutines")
			ps := make([]*domain.Principal, n)
			for i := range ps {
				ps[i] = principal(rapid.Bool().Draw(rt, "second credential"))
			}
			results, errs := make([]domain.SendResult, n), make([]error, n)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					defer recovered(&errs[i])
					<-start
					results[i], errs[i] = c.Svc.SendMessage(ctx, ps[i], req)
				})
			}
			close(start)
			wg.Wait()
			var first *domain.SendResult
			pending := 0
			for i := range n {
				if errs[i] != nil {
					e := domain.AsError(errs[i])
					if e.Code != domain.CodeSubmissionPending || !e.Code.Retryable() {
						rt.Fatalf("concurrent identical send %d of %d: %v; only the result or SUBMISSION_PENDING is allowed", i, n, errs[i])
					}
					pending++
					continue
				}
				if first == nil {
					first = &results[i]
				} else if !mSameSend(results[i], *first) {
					rt.Fatalf("concurrent identical sends got two results: %+v and %+v", *first, results[i])
				}
			}
			for range 50 {
				if first != nil {
					break
				}
				res, err := c.Svc.SendMessage(ctx, principal(false), req)
				if err == nil {
					first = &res
				} else if CodeOf(err) != domain.CodeSubmissionPending {
					rt.Fatalf("retry after SUBMISSION_PENDING: %v", err)
				}
			}
			if first == nil {
				rt.Fatalf("still SUBMISSION_PENDING after 50 sequential retries")
			}
			for i := range n {
				if errs[i] != nil {
					e := domain.AsError(errs[i])
					if e.Details["resource_id"] != first.ResourceID {
						rt.Fatalf("SUBMISSION_PENDING names resource %v, the result is %s", e.Details["resource_id"], first.ResourceID)
					}
					res, err := c.Svc.SendMessage(ctx, ps[i], req)
					if err != nil || !mSameSend(res, *first) {
						rt.Fatalf("retry after SUBMISSION_PENDING: %+v %v, want %+v", res, err, *first)
					}
				}
			}
			prev := 0
			if len(done) > 0 {
				prev = mustAtoi(rt, done[len(done)-1].res.VisibleSeq)
			}
			if seq := mustAtoi(rt, first.VisibleSeq); seq <= prev || first.SubmissionState != domain.StateCommitted {
				rt.Fatalf("send %d: %+v, want committed at a visible_seq above %d", len(done)+1, *first, prev)
			}
			if pending > 0 {
				rt.Logf("%d of %d concurrent sends got SUBMISSION_PENDING", pending, n)
			}
			done = append(done, sent{req: req, res: *first})
			// exactly one feed item per request so far
			feed := obs.All()
			if len(feed) != len(done) {
				rt.Fatalf("%d feed items after %d distinct requests: %s", len(feed), len(done), mDescribe(feed))
			}
		}
		feed := obs.All()
		if len(feed) != len(done) {
			rt.Fatalf("%d feed items for %d distinct requests", len(feed), len(done))
		}
		for i, s := range done {
			it := feed[i]
			if it.ItemType != domain.ItemMessage || it.ResourceID != s.res.MessageID || it.VisibleSeq != s.res.VisibleSeq ||
				!it.CommittedAt.Equal(s.res.CommittedAt) || it.ThreadID == nil || *it.ThreadID != s.res.ThreadID {
				rt.Fatalf("feed item %d %+v does not match the send result %+v", i, it, s.res)
			}
		}
	})
}

// mMetadata is a generated metadata object that can be written in several equivalent JSON forms.
type mMetadata map[string]any

func drawMetadata(t *rapid.T) mMetadata {
	m := mMetadata{}
	for _, k := range []string{"a", "b", "zz"} {
		if rapid.Bool().Draw(t, "metadata "+k) {
			m[k] = rapid.SampledFrom([]any{float64(1), float64(2.5), "x", true, nil, map[string]any{"n": float64(3)}, []any{"y", float64(1)}}).Draw(t, "value "+k)
		}
	}
	return m
}

// json writes m with a drawn key order, spacing and number form (all equivalent under RFC 8785).
func (m mMetadata) json(t *rapid.T) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	keys = rapid.Permutation(keys).Draw(t, "key order")
	sp := rapid.SampledFrom([]string{"", " ", "\n  "}).Draw(t, "spacing")
	var b strings.Builder
	b.WriteString("{" + sp)
	for i, k := range keys {
		if i > 0 {
			b.WriteString("," + sp)
		}
		fmt.Fprintf(&b, "%q%s:%s%s", k, sp, sp, mJSONValue(t, m[k]))
	}
	b.WriteString(sp + "}")
	return b.String()
}

func mJSONValue(t *rapid.T, v any) string {
	switch x := v.(type) {
	case float64:
		if x == 1 {
			return rapid.SampledFrom([]string{"1", "1.0", "1e0", "10e-1"}).Draw(t, "number form")
		}
		return strconv.FormatFloat(x, 'g', -1, 64)
	default:
		raw, _ := json.Marshal(v)
		return string(raw)
	}
}

// mCanonSend is the model's idea of what the fingerprint of message.send covers (RFC §5.1): the recipient
// set after de-duplication with the default recipient filled in, kind with its default, the content, the
// source, the attachment list in order and metadata as a JSON value.
type mCanonSend struct {
	Recipients  []string
	Thread      *string
	InReplyTo   *string
	Kind        string
	Subject     string
	Text        string
	Source      domain.MessageSource
	Attachments []string
	Metadata    any
}

func mCanonical(req domain.SendRequest, defaultRcpt string) mCanonSend {
	c := mCanonSend{Thread: req.ThreadID, InReplyTo: req.InReplyTo, Kind: req.Kind, Subject: req.Subject, Text: req.Body.Text,
		Attachments: slices.Clone(req.AttachmentIDs)}
	c.Recipients = slices.Clone(req.RecipientIDs)
	if len(c.Recipients) == 0 {
		c.Recipients = []string{defaultRcpt}
	}
	slices.Sort(c.Recipients)
	c.Recipients = slices.Compact(c.Recipients)
	if c.Kind == "" {
		c.Kind = "message"
	}
	if req.Source != nil {
		c.Source = *req.Source
	}
	if len(c.Attachments) == 0 {
		c.Attachments = nil
	}
	c.Metadata = map[string]any{}
	if len(req.Metadata) > 0 {
		var v any
		if err := json.Unmarshal(req.Metadata, &v); err == nil && v != nil {
			c.Metadata = v
		}
	}
	return c
}

// mutate draws a variant of req: some changes keep the fingerprint (recipient order and duplicates, the
// default recipient named explicitly, kind "message", another JSON form of the metadata, an empty source),
// others change it. The model (canonical) decides which is which.
func mMutate(t *rapid.T, req domain.SendRequest, md mMetadata, defaultRcpt string, others []string) domain.SendRequest {
	v := req
	v.RecipientIDs = slices.Clone(req.RecipientIDs)
	body := *req.Body
	v.Body = &body
	for range rapid.IntRange(1, 3).Draw(t, "mutations") {
		switch rapid.IntRange(0, 12).Draw(t, "mutation") {
		case 0: // same set, another order, duplicates
			if len(v.RecipientIDs) > 0 {
				v.RecipientIDs = rapid.Permutation(v.RecipientIDs).Draw(t, "recipient order")
				v.RecipientIDs = append(v.RecipientIDs, v.RecipientIDs[0])
			}
		case 1: // the default recipient, named or implied
			if len(v.RecipientIDs) == 0 {
				v.RecipientIDs = []string{defaultRcpt}
			} else if slices.Equal(slices.Compact(slices.Sorted(slices.Values(v.RecipientIDs))), []string{defaultRcpt}) {
				v.RecipientIDs = nil
			}
		case 2:
			if v.Kind == "" {
				v.Kind = "message"
			} else if v.Kind == "message" {
				v.Kind = ""
			}
		case 3:
			if md != nil {
				v.Metadata = json.RawMessage(md.json(t))
			} else {
				v.Metadata = json.RawMessage(rapid.SampledFrom([]string{"{}", "null", " { } "}).Draw(t, "empty metadata"))
			}
		case 4:
			if v.Source == nil {
				v.Source = &domain.MessageSource{}
			}
		case 5:
			v.Subject += "!"
		case 6:
			v.Body.Text += "?"
		case 7:
			v.RecipientIDs = append(v.RecipientIDs, rapid.SampledFrom(others).Draw(t, "added recipient"))
		case 8:
			v.Kind = "note"
		case 9:
			th := "thread-x"
			v.ThreadID = &th
		case 10:
			v.Metadata = json.RawMessage(`{"a":"changed"}`)
		case 11:
			v.AttachmentIDs = []string{"blob_1"}
		case 12:
			v.Source = &domain.MessageSource{NativeThreadID: "native"}
		}
	}
	return v
}

// propP02 is property P02 (conflict): reusing a request_id with a request whose fingerprint differs is
// IDEMPOTENCY_CONFLICT with no side effect (no feed item, the first submission and its result unchanged),
// whether the first submission is committed or still reserved; a variant with the same fingerprint gets
// the first result. The key is (space, producer, operation, request_id): another producer, or inbox.ack,
// may use the same request_id freely. An ack reusing its request_id with other items conflicts too and
// changes no receipt.
func propP02(t *testing.T, nb NewBackend, cfg propConfig) {
	var blobs *faulty.BlobStore
	cfg.check(t, Faulty(nb, nil, &blobs), func(rt *rapid.T, f *Fixture) {
		c := f.With(rt)
		ctx := context.Background()
		space := c.Space()
		sp, def := space.SpaceID, space.DefaultRecipientID
		a, b, d, e := c.Party(sp), c.Party(sp), c.Party(sp), c.Party(sp)
		obs := c.Feed(sp)
		others := []string{b.ActorID, d.ActorID, def}
		base := drawSendRequest(rt, c, others)
		var md mMetadata
		if len(base.Metadata) > 0 {
			md = mMetadata{}
			_ = json.Unmarshal(base.Metadata, &md)
		}
		want := mCanonical(base, def)
		var result *domain.SendResult
		if rapid.Bool().Draw(rt, "leave the first attempt reserved") {
			base.Body.Text = longBody(base.Body.Text)
			want = mCanonical(base, def)
			blobs.FailPut(faulty.PutFault{}) // the body write fails: the submission stays reserved
			_, err := c.Svc.SendMessage(ctx, a.P, base)
			WantCode(rt, "send whose body write fails", err, domain.CodeStorageUnavailable)
			st, err := c.Svc.Status(ctx, a.P, domain.OpMessageSend, base.RequestID)
			if err != nil || st.SubmissionState != domain.StateReserved {
				rt.Fatalf("status after a failed body write: %+v %v, want reserved", st, err)
			}
		} else {
			res := c.Svc.SendMessage
			r, err := res(ctx, a.P, base)
			if err != nil {
				rt.Fatalf("first send: %v", err)
			}
			result = &r
		}
		feedLen := len(obs.All())
		otherUsed := false
		for range cfg.draw(rt, 1) {
			v := mMutate(rt, base, md, def, others)
			res, err := c.Svc.SendMessage(ctx, a.P, v)
			if !reflect.DeepEqual(mCanonical(v, def), want) {
				WantCode(rt, fmt.Sprintf("request_id reused with other content %+v", mCanonical(v, def)), err, domain.CodeIdempotencyConflict)
				if got := len(obs.All()); got != feedLen {
					rt.Fatalf("a conflicting request changed the feed: %d items, before %d", got, feedLen)
				}
				st, serr := c.Svc.Status(ctx, a.P, domain.OpMessageSend, base.RequestID)
				wantState := domain.StateReserved
				if result != nil {
					wantState = domain.StateCommitted
				}
				if serr != nil || st.SubmissionState != wantState || result != nil && st.ResourceID != result.ResourceID {
					rt.Fatalf("status after a conflict: %+v %v", st, serr)
				}
				// Another producer may use the same request_id with that content.
				if !otherUsed && rapid.IntRange(0, 3).Draw(rt, "other producer") == 0 && len(v.AttachmentIDs) == 0 {
					otherUsed = true
					other, err := c.Svc.SendMessage(ctx, e.P, v)
					if err != nil || result != nil && other.ResourceID == result.ResourceID {
						rt.Fatalf("the same request_id by another producer: %+v %v, want a new message", other, err)
					}
					feedLen++
				}
				continue
			}
			if err != nil {
				rt.Fatalf("an equivalent request (same fingerprint): %v", err)
			}
			if result == nil {
				result = &res // the equivalent request completed the reserved submission
				feedLen++
			} else if !mSameSend(res, *result) {
				rt.Fatalf("an equivalent request got %+v, first result %+v", res, *result)
			}
			if got := len(obs.All()); got != feedLen {
				rt.Fatalf("an equivalent request changed the feed: %d items, want %d", got, feedLen)
			}
		}
		if result == nil {
			r, err := c.Svc.SendMessage(ctx, a.P, base)
			if err != nil {
				rt.Fatalf("retrying the reserved submission: %v", err)
			}
			result = &r
			feedLen++
		}
		// inbox.ack: the same request_id as the send is another key; reusing an ack's request_id with other
		// content conflicts and changes no receipt.
		to := want.Recipients[0]
		var reader Party
		for _, p := range []Party{b, d} {
			if p.ActorID == to {
				reader = p
			}
		}
		if reader.ActorID == "" {
			return // sent to the default recipient only
		}
		all, _ := c.ReadAll(reader.P, reader.ConsumerID, nil, 10)
		var items []domain.FeedItem
		for _, it := range all {
			if it.ResourceID == result.MessageID {
				items = append(items, it)
			}
		}
		if len(items) != 1 {
			rt.Fatalf("the recipient reads the message %d times, want once", len(items))
		}
		ack := domain.AckRequest{RequestID: base.RequestID, ConsumerID: reader.ConsumerID, Items: []domain.AckEntry{{ItemID: items[0].ItemID, Stage: domain.StageReceived}}}
		if r, err := c.Svc.Ack(ctx, reader.P, ack); err != nil || !r.Receipts[0].Changed {
			rt.Fatalf("ack: %+v %v", r, err)
		}
		ack.Items[0].Stage = domain.StageProcessed
		_, err := c.Svc.Ack(ctx, reader.P, ack)
		WantCode(rt, "ack reusing a request_id with another stage", err, domain.CodeIdempotencyConflict)
		ack.RequestID = c.RID("ack")
		r, err := c.Svc.Ack(ctx, reader.P, ack)
		if err != nil || !r.Receipts[0].Changed || r.Receipts[0].Stage != domain.StageProcessed {
			rt.Fatalf("ack processed with a new request_id: %+v %v; the conflicting ack must not have applied", r, err)
		}
		if got := len(obs.All()); got != feedLen+2 {
			rt.Fatalf("%d feed items, want %d (two receipts)", got, feedLen+2)
		}
	})
}
