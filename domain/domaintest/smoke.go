package domaintest

import (
	"fmt"
	"testing"

	"github.com/waypost/waypost/domain"
)

// SmokeLoop runs the smoke flow through f, in a new space of two parties a and b: a sends each of bodies to b
// (committed at visible_seq 1, 2, …); b reads them, in order, and acks the first as received with the
// checkpoint cursor; a reads exactly one item, the receipt; b gets each message back with its text. It
// fails t at the first step that differs. A backend that stores large bodies elsewhere
// (Config.InlineBodyMax) is exercised on both paths with a small and a large body.
func SmokeLoop(t testing.TB, f *Fixture, bodies ...string) {
	t.Helper()
	c := f.With(t)
	sp := c.Space()
	a, b := c.Party(sp.SpaceID), c.Party(sp.SpaceID)
	sent := make([]domain.SendResult, len(bodies))
	for i, body := range bodies {
		sent[i] = c.Send(a.P, body, b.ActorID)
		if sent[i].VisibleSeq != fmt.Sprint(i+1) || sent[i].SubmissionState != domain.StateCommitted {
			t.Fatalf("send %d: %+v", i+1, sent[i])
		}
	}
	items, cur := c.ReadAll(b.P, b.ConsumerID, nil, 10)
	if len(items) != len(sent) {
		t.Fatalf("read: %+v, want %d items", items, len(sent))
	}
	for i, it := range items {
		if it.ResourceID != sent[i].MessageID {
			t.Fatalf("read: %+v, want the messages %+v in order", items, sent)
		}
	}
	ack, err := f.Svc.Ack(c.Ctx, b.P, domain.AckRequest{RequestID: "ack1", ConsumerID: b.ConsumerID,
		Items: []domain.AckEntry{{ItemID: items[0].ItemID, Stage: domain.StageReceived}}, CheckpointCursor: &cur})
	if err != nil || !ack.Receipts[0].Changed {
		t.Fatalf("ack: %+v %v", ack, err)
	}
	got, _ := c.ReadAll(a.P, a.ConsumerID, nil, 10)
	if len(got) != 1 || got[0].ItemType != domain.ItemReceipt {
		t.Fatalf("receipt: %+v", got)
	}
	for i, s := range sent {
		m, err := f.Svc.GetMessage(c.Ctx, b.P, s.MessageID)
		if err != nil || m.Body.Text != bodies[i] {
			t.Fatalf("get %s: %+v %v", s.MessageID, m, err)
		}
	}
}
