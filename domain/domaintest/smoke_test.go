package domaintest_test

import (
	"context"
	"testing"

	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/domain/domaintest"
)

func TestSmokeLoop(t *testing.T) {
	f := domaintest.New(t, domaintest.MemBackend, nil)
	sp := f.Space()
	a, b := f.Party(sp.SpaceID), f.Party(sp.SpaceID)
	res := f.Send(a.P, "hello", b.ActorID)
	if res.VisibleSeq != "1" || res.SubmissionState != domain.StateCommitted {
		t.Fatalf("send: %+v", res)
	}
	items, cur := f.ReadAll(b.P, b.ConsumerID, nil, 10)
	if len(items) != 1 || items[0].ResourceID != res.MessageID {
		t.Fatalf("read: %+v", items)
	}
	ack, err := f.Svc.Ack(context.Background(), b.P, domain.AckRequest{RequestID: "ack1", ConsumerID: b.ConsumerID,
		Items: []domain.AckEntry{{ItemID: items[0].ItemID, Stage: domain.StageReceived}}, CheckpointCursor: &cur})
	if err != nil || !ack.Receipts[0].Changed {
		t.Fatalf("ack: %+v %v", ack, err)
	}
	got, _ := f.ReadAll(a.P, a.ConsumerID, nil, 10)
	if len(got) != 1 || got[0].ItemType != domain.ItemReceipt {
		t.Fatalf("receipt: %+v", got)
	}
	m, err := f.Svc.GetMessage(context.Background(), b.P, res.MessageID)
	if err != nil || m.Body.Text != "hello" {
		t.Fatalf("get: %+v %v", m, err)
	}
}
