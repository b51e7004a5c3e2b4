package e2e

import (
	"bytes"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/waypost/waypost/e2e/wire"
	"github.com/waypost/waypost/internal/testjson"
)

// TestRFC16_1_AsyncLoop is RFC §16.1, the first asynchronous loop, over real HTTP: A sends to B while B is
// not reading; B reads later from a null cursor, saves the page, acks received with the checkpoint, and
// replies (in_reply_to, explicit recipient A, thread inherited); A reads its inbox and finds B's receipt
// item and the reply with the §8.1 data fields, then acks.
func TestRFC16_1_AsyncLoop(t *testing.T) {
	s := startServer(t)
	adm := newSpace(t, s, "loop")
	a := adm.participant(t, "agent A")
	b := adm.participant(t, "client B")

	// describe tells each principal who it is.
	d, _ := ok[struct {
		APIVersion         string  `json:"api_version"`
		SpaceID            string  `json:"space_id"`
		ActorID            string  `json:"actor_id"`
		ConsumerID         *string `json:"consumer_id"`
		DefaultRecipientID string  `json:"default_recipient_id"`
		Capabilities       struct {
			Mailbox  bool `json:"mailbox"`
			Receipts bool `json:"receipts"`
		} `json:"capabilities"`
	}](t, s, request{Method: "GET", Path: "/v0/describe", Token: a.token})
	if d.SpaceID != adm.space.SpaceID || d.ActorID != a.actor || d.ConsumerID == nil || *d.ConsumerID != a.consumer ||
		d.DefaultRecipientID != adm.space.DefaultRecipientID || d.APIVersion != "0.1" || !d.Capabilities.Mailbox || !d.Capabilities.Receipts {
		t.Fatalf("describe of A: %+v", d)
	}

	// A sends while B is offline.
	sendBody := map[string]any{
		"request_id":     "req_report_001",
		"recipient_ids":  []string{b.actor},
		"thread_id":      nil,
		"in_reply_to":    nil,
		"kind":           "result",
		"subject":        "研究资料已整理",
		"body":           map[string]any{"text": "已整理三个方案，附件包含完整资料。"},
		"source":         map[string]any{"native_thread_id": "external_thread_01"},
		"attachment_ids": []string{},
		"metadata":       map[string]any{},
	}
	sent := send(t, s, a.token, sendBody)
	if sent.VisibleSeq != "1" {
		t.Fatalf("first message of a space: visible_seq %q, want \"1\"", sent.VisibleSeq)
	}
	// The lost-response retry returns the same stable result (RFC §6.3, P01), never a second message.
	if again := send(t, s, a.token, sendBody); again != sent {
		t.Fatalf("retry with the same request_id: %+v, first %+v", again, sent)
	}
	st, _ := ok[wire.Status](t, s, request{Method: "GET", Token: a.token,
		Path: "/v0/status?" + url.Values{"operation": {"message.send"}, "request_id": {"req_report_001"}}.Encode()})
	var stRes wire.Send
	if err := json.Unmarshal(st.Result, &stRes); err != nil || st.SubmissionState != "committed" || st.ResourceID != sent.ResourceID || stRes != sent {
		t.Fatalf("status of A's send: %+v (result %s), want committed %+v", st, st.Result, sent)
	}

	// B comes online later and reads from the start of its history. A read's request_id is a fresh
	// service-generated tracking ID (RFC §8.2), not an idempotency key.
	r1 := s.call(t, request{Method: "POST", Path: "/v0/inbox/read", Token: b.token, Body: map[string]any{"consumer_id": b.consumer, "cursor": nil}})
	r2 := s.call(t, request{Method: "POST", Path: "/v0/inbox/read", Token: b.token, Body: map[string]any{"consumer_id": b.consumer, "cursor": nil}})
	if !r1.Env.OK || !r2.Env.OK || r1.Env.RequestID == r2.Env.RequestID {
		t.Fatalf("two reads: request_id %q and %q, want two different tracking IDs", r1.Env.RequestID, r2.Env.RequestID)
	}
	page := read(t, s, b, nil, 50)
	items := page.Feed(t)
	if len(items) != 1 || page.HasMore || page.CheckpointCursor != nil {
		t.Fatalf("B's first page: %d items, has_more %v, checkpoint %v; want the one message, no checkpoint yet", len(items), page.HasMore, page.CheckpointCursor)
	}
	msgItem := items[0]
	if msgItem.ItemType != "message" || msgItem.ResourceID != sent.ResourceID || msgItem.VisibleSeq != sent.VisibleSeq ||
		msgItem.ProducerID != a.actor || !slices.Equal(msgItem.RecipientIDs, []string{b.actor}) || msgItem.SpaceID != adm.space.SpaceID ||
		msgItem.ThreadID == nil || *msgItem.ThreadID != sent.ThreadID || msgItem.CommittedAt != sent.CommittedAt || msgItem.ResourceVersion != 1 {
		t.Fatalf("B's item %+v does not describe A's message %+v", msgItem, sent)
	}
	wantMsgData := map[string]any{"message_id": sent.ResourceID, "kind": "result", "subject": "研究资料已整理", "in_reply_to": nil, "attachment_count": float64(0)}
	checkData(t, "message item", msgItem.Data, wantMsgData)

	// B "saves" the page and the body it points to before acknowledging (RFC §8.3: persist, then ack).
	msg, _ := ok[wire.Message](t, s, request{Method: "GET", Path: "/v0/messages/" + sent.ResourceID, Token: b.token})
	if msg.Body.Text != "已整理三个方案，附件包含完整资料。" || msg.ProducerID != a.actor || msg.ThreadID != sent.ThreadID ||
		!slices.Equal(msg.RecipientIDs, []string{b.actor}) || msg.InReplyTo != nil || msg.CommittedAt != sent.CommittedAt || msg.EnvelopeVersion < 1 {
		t.Fatalf("message.get by B: %+v", msg)
	}
	saved := filepath.Join(t.TempDir(), "page.json")
	if err := os.WriteFile(saved, testjson.Marshal(t, map[string]any{"page": page, "bodies": map[string]string{msg.MessageID: msg.Body.Text}}), 0o600); err != nil {
		t.Fatal(err)
	}
	ackRes := ack(t, s, b, "ack_001", []map[string]string{{"item_id": msgItem.ItemID, "stage": "received"}}, &page.NextCursor)
	if len(ackRes.Receipts) != 1 || ackRes.Receipts[0] != (wire.AckReceipt{ItemID: msgItem.ItemID, Stage: "received", Changed: true}) ||
		ackRes.CheckpointCursor == nil || *ackRes.CheckpointCursor != page.NextCursor {
		t.Fatalf("B's ack: %+v", ackRes)
	}
	// The ack deleted nothing: a fresh read still returns the message, and publishes the stored checkpoint.
	again := read(t, s, b, nil, 50)
	if got := again.Feed(t); len(got) != 1 || got[0].ItemID != msgItem.ItemID || again.CheckpointCursor == nil || *again.CheckpointCursor != page.NextCursor {
		t.Fatalf("B re-read after ack: %d items, checkpoint %v", len(got), again.CheckpointCursor)
	}
	if rest := read(t, s, b, again.CheckpointCursor, 50); len(rest.Items) != 0 || rest.HasMore {
		t.Fatalf("B from its checkpoint: %d items, want none", len(rest.Items))
	}

	// B replies: explicit recipient, in_reply_to, thread inherited.
	reply := send(t, s, b.token, map[string]any{
		"request_id":    "req_reply_001",
		"recipient_ids": []string{a.actor},
		"in_reply_to":   sent.ResourceID,
		"kind":          "answer",
		"subject":       "Re: 研究资料已整理",
		"body":          map[string]any{"text": "收到，方案二最合适。"},
	})
	if reply.ThreadID != sent.ThreadID {
		t.Fatalf("reply thread_id %q, want the original's %q", reply.ThreadID, sent.ThreadID)
	}

	// A reads its inbox: B's receipt for the message, then the reply.
	aPage := read(t, s, a, nil, 50)
	aItems := aPage.Feed(t)
	if len(aItems) != 2 || aPage.HasMore {
		t.Fatalf("A's inbox: %d items (has_more %v), want the receipt and the reply", len(aItems), aPage.HasMore)
	}
	rcpt, rep := aItems[0], aItems[1]
	if rcpt.ItemType != "receipt" || rcpt.VisibleSeq != "2" || rcpt.ProducerID != b.actor || !slices.Equal(rcpt.RecipientIDs, []string{a.actor}) ||
		rcpt.ThreadID == nil || *rcpt.ThreadID != sent.ThreadID || rcpt.ResourceVersion != 1 {
		t.Fatalf("A's first item %+v: want B's receipt at visible_seq 2", rcpt)
	}
	checkData(t, "receipt item", rcpt.Data, map[string]any{"consumer_id": b.consumer, "acked_item_id": msgItem.ItemID,
		"resource_id": sent.ResourceID, "stage": "received", "receipt_version": float64(1)})
	if rep.ItemType != "message" || rep.ResourceID != reply.ResourceID || rep.VisibleSeq != reply.VisibleSeq || rep.VisibleSeq != "3" ||
		rep.ProducerID != b.actor || rep.ThreadID == nil || *rep.ThreadID != sent.ThreadID {
		t.Fatalf("A's second item %+v: want the reply %+v", rep, reply)
	}
	checkData(t, "reply item", rep.Data, map[string]any{"message_id": reply.ResourceID, "kind": "answer",
		"subject": "Re: 研究资料已整理", "in_reply_to": sent.ResourceID, "attachment_count": float64(0)})
	replyMsg, _ := ok[wire.Message](t, s, request{Method: "GET", Path: "/v0/messages/" + reply.ResourceID, Token: a.token})
	if replyMsg.Body.Text != "收到，方案二最合适。" || replyMsg.InReplyTo == nil || *replyMsg.InReplyTo != sent.ResourceID {
		t.Fatalf("message.get of the reply by A: %+v", replyMsg)
	}

	// A saves and acks both as processed. Acking the receipt item publishes no receipt (no ack loop); acking
	// the reply publishes exactly one receipt, to B.
	aAck := ack(t, s, a, "ack_a_001", []map[string]string{{"item_id": rcpt.ItemID, "stage": "processed"}, {"item_id": rep.ItemID, "stage": "processed"}}, &aPage.NextCursor)
	if len(aAck.Receipts) != 2 || !aAck.Receipts[0].Changed || !aAck.Receipts[1].Changed ||
		aAck.Receipts[0].Stage != "processed" || aAck.Receipts[1].Stage != "processed" || aAck.CheckpointCursor == nil {
		t.Fatalf("A's ack: %+v", aAck)
	}
	bNew := read(t, s, b, again.CheckpointCursor, 50)
	bItems := bNew.Feed(t)
	if len(bItems) != 1 || bItems[0].ItemType != "receipt" || bItems[0].VisibleSeq != "4" {
		t.Fatalf("B's new items after A's ack: %+v, want exactly one receipt at visible_seq 4", bItems)
	}
	checkData(t, "A's receipt", bItems[0].Data, map[string]any{"consumer_id": a.consumer, "acked_item_id": rep.ItemID,
		"resource_id": reply.ResourceID, "stage": "processed", "receipt_version": float64(1)})
	// A's checkpoint stands: reading from it yields nothing new.
	if aRest := read(t, s, a, aAck.CheckpointCursor, 50); len(aRest.Items) != 0 {
		t.Fatalf("A from its checkpoint: %d items, want none", len(aRest.Items))
	}
	// A repeated ack is a no-op success with the same stable result.
	if aAck2 := ack(t, s, a, "ack_a_001", []map[string]string{{"item_id": rcpt.ItemID, "stage": "processed"}, {"item_id": rep.ItemID, "stage": "processed"}}, &aPage.NextCursor); !jsonEqual(t, aAck2, aAck) {
		t.Fatalf("replayed ack %+v, first %+v", aAck2, aAck)
	}
	if bAfter := read(t, s, b, again.CheckpointCursor, 50); len(bAfter.Items) != 1 {
		t.Fatalf("a replayed ack published %d more items", len(bAfter.Items)-1)
	}
}

// TestRFC16_4_IndependentConsumers is RFC §16.4: two consumers that may read the same message read it
// independently. The first reads and acks processed; the second still reads from its own start, gets the
// identical item, and the first's processed does not mark the second.
func TestRFC16_4_IndependentConsumers(t *testing.T) {
	s := startServer(t)
	adm := newSpace(t, s, "independent")
	producer := adm.participant(t, "producer")
	user := adm.actor(t, "user")
	// Two installations of the same actor, and a second recipient: three consumers entitled to the message.
	install1 := participant{actor: user, consumer: adm.consumer(t, user, "inbox")}
	install1.token = adm.token(t, user, install1.consumer, allScopes...).Token
	install2 := participant{actor: user, consumer: adm.consumer(t, user, "inbox")}
	install2.token = adm.token(t, user, install2.consumer, allScopes...).Token
	other := adm.participant(t, "other recipient")

	sent := send(t, s, producer.token, map[string]any{"request_id": "r-1", "recipient_ids": []string{user, other.actor},
		"subject": "shared", "body": map[string]any{"text": "for both"}})

	p1 := read(t, s, install1, nil, 50)
	i1 := p1.Feed(t)
	if len(i1) != 1 || i1[0].ResourceID != sent.ResourceID {
		t.Fatalf("consumer 1: %+v", i1)
	}
	a1 := ack(t, s, install1, "ack-1", []map[string]string{{"item_id": i1[0].ItemID, "stage": "processed"}}, &p1.NextCursor)
	if len(a1.Receipts) != 1 || a1.Receipts[0] != (wire.AckReceipt{ItemID: i1[0].ItemID, Stage: "processed", Changed: true}) {
		t.Fatalf("consumer 1 ack: %+v", a1)
	}
	if p := read(t, s, install1, nil, 50); p.CheckpointCursor == nil || *p.CheckpointCursor != p1.NextCursor {
		t.Fatalf("consumer 1's checkpoint after its ack: %v, want %q", p.CheckpointCursor, p1.NextCursor)
	}

	// Consumer 2 (same actor) starts from its own beginning, with no checkpoint, and gets the identical item.
	p2 := read(t, s, install2, nil, 50)
	if len(p2.Items) != 1 || !bytes.Equal(p2.Items[0], p1.Items[0]) {
		t.Fatalf("consumer 2 page %s, consumer 1 got %s", testjson.Marshal(t, p2.Items), p1.Items[0])
	}
	if p2.CheckpointCursor != nil {
		t.Fatalf("consumer 2 sees a checkpoint %q it never stored", *p2.CheckpointCursor)
	}
	// Cursors are not shared between consumers, even of one actor.
	fail(t, s, request{Method: "POST", Path: "/v0/inbox/read", Token: install2.token,
		Body: map[string]any{"consumer_id": install2.consumer, "cursor": p1.NextCursor}}, "CURSOR_SCOPE_CHANGED")
	// Consumer 1's processed did not mark consumer 2: its own ack advances none → received.
	a2 := ack(t, s, install2, "ack-2", []map[string]string{{"item_id": p2.Feed(t)[0].ItemID, "stage": "received"}}, nil)
	if len(a2.Receipts) != 1 || a2.Receipts[0] != (wire.AckReceipt{ItemID: i1[0].ItemID, Stage: "received", Changed: true}) {
		t.Fatalf("consumer 2 ack: %+v; consumer 1's processed must not count for consumer 2", a2)
	}
	// Consumer 1 acking processed again changes nothing.
	if a1b := ack(t, s, install1, "ack-1b", []map[string]string{{"item_id": i1[0].ItemID, "stage": "received"}}, nil); a1b.Receipts[0] != (wire.AckReceipt{ItemID: i1[0].ItemID, Stage: "processed", Changed: false}) {
		t.Fatalf("late received for consumer 1: %+v, want processed unchanged", a1b)
	}

	// The other recipient's consumer reads the identical item too.
	p3 := read(t, s, other, nil, 50)
	if len(p3.Items) != 1 || !bytes.Equal(p3.Items[0], p1.Items[0]) {
		t.Fatalf("other recipient page %s", testjson.Marshal(t, p3.Items))
	}

	// The producer sees one receipt per consumer advance, each naming its consumer and stage.
	prodItems, _ := readAll(t, s, producer, nil)
	var got []string
	for _, it := range prodItems {
		if it.ItemType != "receipt" {
			t.Fatalf("producer item %+v, want receipts only", it)
		}
		d := decodeData(t, it.Data)
		if d["acked_item_id"] != i1[0].ItemID || d["resource_id"] != sent.ResourceID || d["receipt_version"] != float64(1) {
			t.Fatalf("receipt data %v", d)
		}
		got = append(got, d["consumer_id"].(string)+":"+d["stage"].(string))
	}
	want := []string{install1.consumer + ":processed", install2.consumer + ":received"}
	if !slices.Equal(got, want) {
		t.Fatalf("producer's receipts %v, want %v", got, want)
	}
}

// checkData checks that an item's data object has every field of want with that value (SUPPLEMENT §8.1;
// fields may be added, never renamed).
func checkData(t testing.TB, what string, raw json.RawMessage, want map[string]any) {
	t.Helper()
	got := decodeData(t, raw)
	for k, v := range want {
		g, present := got[k]
		if !present || !jsonEqual(t, g, v) {
			t.Fatalf("%s data %s: field %s must be %s", what, raw, k, testjson.Marshal(t, v))
		}
	}
}

// jsonEqual compares two values by their JSON form (maps marshal with sorted keys).
func jsonEqual(t testing.TB, a, b any) bool {
	t.Helper()
	return bytes.Equal(testjson.Marshal(t, a), testjson.Marshal(t, b))
}
