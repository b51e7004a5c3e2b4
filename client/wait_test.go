package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/waypost/waypost/client"
	"github.com/waypost/waypost/domain"
)

func TestWaitFeed(t *testing.T) {
	t.Parallel()
	w := newRealWorld(t, nil)
	ctx := context.Background()
	// A client timeout shorter than the long poll: the exchange is still allowed the poll plus a margin.
	c := client.New(w.url, w.writerToken, client.WithTimeout(300*time.Millisecond))
	start := time.Now()
	page, err := c.WaitFeed(ctx, domain.WaitRequest{ConsumerID: w.writerConsumer, TimeoutMS: 800})
	if err != nil {
		t.Fatalf("WaitFeed with nothing to return: %v", err)
	}
	if len(page.Items) != 0 || page.NextCursor == "" || time.Since(start) < 700*time.Millisecond {
		t.Fatalf("empty wait returned %+v after %s", page, time.Since(start))
	}

	// A pending wait returns as soon as a message for the consumer commits.
	type result struct {
		page domain.Page
		err  error
	}
	done := make(chan result, 1)
	cursor := page.NextCursor
	go func() {
		p, err := c.WaitFeed(ctx, domain.WaitRequest{ConsumerID: w.writerConsumer, Cursor: &cursor, TimeoutMS: 30000, Limit: 10})
		done <- result{p, err}
	}()
	time.Sleep(200 * time.Millisecond)
	sent, err := w.reader.Send(ctx, domain.SendRequest{RequestID: "send-1", RecipientIDs: []string{w.writerID}, Subject: "wake up",
		Body: &domain.MessageBody{Text: "hello"}})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.err != nil || len(r.page.Items) != 1 || r.page.Items[0].ResourceID != sent.ResourceID {
			t.Fatalf("woken wait: %+v, %v", r.page, r.err)
		}
		// The returned cursor is past the item: the next wait with it times out empty.
		next, err := c.WaitFeed(ctx, domain.WaitRequest{ConsumerID: w.writerConsumer, Cursor: &r.page.NextCursor, TimeoutMS: 100})
		if err != nil || len(next.Items) != 0 {
			t.Fatalf("wait after the item: %+v, %v", next, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the wait did not return within 10 s of the send")
	}

	if _, err := c.WaitFeed(ctx, domain.WaitRequest{ConsumerID: w.writerConsumer, TimeoutMS: 10_000_000}); !client.IsCode(err, domain.CodeResourceLimit) {
		t.Fatalf("timeout above feed_wait_max_ms: %v, want RESOURCE_LIMIT", err)
	}
	bad := "not-a-cursor"
	if _, err := c.WaitFeed(ctx, domain.WaitRequest{ConsumerID: w.writerConsumer, Cursor: &bad, TimeoutMS: 10}); !client.IsCode(err, domain.CodeInvalidCursor) {
		t.Fatalf("tampered cursor: %v, want INVALID_CURSOR", err)
	}
}
