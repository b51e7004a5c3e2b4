package channel_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/waypost/waypost/channel"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// result is one Wait outcome.
type result struct {
	st   channel.Status
	text string
}

// wait calls Wait with a background context and fails the test on error.
func wait(t testing.TB, sc *channel.Scope, h string, timeout time.Duration) result {
	t.Helper()
	st, text, err := sc.Wait(context.Background(), h, timeout)
	if err != nil {
		t.Fatalf("Wait(%v): %v", timeout, err)
	}
	return result{st, text}
}

// want compares a Wait outcome.
func want(t testing.TB, got result, st channel.Status, text string) {
	t.Helper()
	if got.st != st || got.text != text {
		t.Fatalf("Wait = (%d, %.40q), want (%d, %.40q)", got.st, got.text, st, text)
	}
}

// newScope is a hub with the default limits and one scope on it, ended when the test ends.
func newScope(t testing.TB) (*channel.Hub, *channel.Scope) {
	t.Helper()
	hub := channel.NewHub(channel.Limits{})
	return hub, addScope(t, hub)
}

// addScope is another scope on hub, ended when the test ends.
func addScope(t testing.TB, hub *channel.Hub) *channel.Scope {
	sc := hub.NewScope(context.Background())
	t.Cleanup(sc.End)
	return sc
}

func mustSubscribe(t testing.TB, sc *channel.Scope, name string) string {
	t.Helper()
	h, err := sc.Subscribe(name)
	if err != nil {
		t.Fatalf("Subscribe(%q): %v", name, err)
	}
	return h
}

func mustPublish(t testing.TB, hub *channel.Hub, name, text string) int {
	t.Helper()
	n, err := hub.Publish(name, text)
	if err != nil {
		t.Fatalf("Publish(%q, %d bytes): %v", name, len(text), err)
	}
	return n
}

func mustCount(t testing.TB, hub *channel.Hub, name string) int {
	t.Helper()
	n, err := hub.Count(name)
	if err != nil {
		t.Fatalf("Count(%q): %v", name, err)
	}
	return n
}

// asyncWait runs Wait in a goroutine and delivers its outcome.
func asyncWait(sc *channel.Scope, h string, timeout time.Duration) <-chan result {
	out := make(chan result, 1)
	go func() {
		st, text, err := sc.Wait(context.Background(), h, timeout)
		if err != nil {
			text = "error: " + err.Error()
			st = -1
		}
		out <- result{st, text}
	}()
	return out
}

// recv receives from an asyncWait channel, failing after a generous bound.
func recv(t testing.TB, ch <-chan result) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(30 * time.Second):
		t.Fatal("Wait did not return within 30s")
		return result{}
	}
}
