package livefeed_test

import (
	"context"
	"testing"
	"time"

	"github.com/waypost/waypost/channel/livefeed"
	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/domain/domaintest"
)

// TestPollerServesFeedWait checks that feed.wait over a Poller returns an item committed while it waits,
// and an empty page at its timeout when nothing commits.
func TestPollerServesFeedWait(t *testing.T) {
	f := domaintest.New(t, domaintest.MemBackend, func(c *domain.Config) {
		c.Watcher = livefeed.Poller{Interval: 20 * time.Millisecond}
		c.Clock = realClock{}
	})
	sp := f.Space()
	a, b := f.Party(sp.SpaceID), f.Party(sp.SpaceID)
	ctx := context.Background()

	page, err := f.Svc.WaitFeed(ctx, b.P, domain.WaitRequest{ConsumerID: b.ConsumerID, TimeoutMS: 100})
	if err != nil || len(page.Items) != 0 {
		t.Fatalf("idle wait: %d items, %v", len(page.Items), err)
	}
	done := make(chan domain.Page, 1)
	go func() {
		p, err := f.Svc.WaitFeed(ctx, b.P, domain.WaitRequest{ConsumerID: b.ConsumerID, TimeoutMS: 5000})
		if err != nil {
			t.Error(err)
		}
		done <- p
	}()
	time.Sleep(50 * time.Millisecond)
	sent := f.Send(a.P, "hello", b.ActorID)
	got := <-done
	if len(got.Items) != 1 || got.Items[0].ResourceID != sent.MessageID {
		t.Fatalf("wait returned %+v, want the message %s", got.Items, sent.MessageID)
	}
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }
