package channel_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/waypost/waypost/channel"
)

// The tests in this file are the nine conformance examples (一致性样例) of the
// channel specification 0.1.0, in order. 甲 (A), 乙 (B), 丙 (C), 丁 (D) are
// scopes (the specification's events).

// 事件甲订阅 c；事件乙先后发布 a、b，各返回 1；甲两次等待依次得（0，a）、（0，b）。
func TestConformance1_PublishTwiceThenWaitTwiceInOrder(t *testing.T) {
	t.Run("queued before waiting", func(t *testing.T) {
		hub, a := newScope(t)
		h := mustSubscribe(t, a, "c")
		if n := mustPublish(t, hub, "c", "a"); n != 1 {
			t.Fatalf("Publish a = %d, want 1", n)
		}
		if n := mustPublish(t, hub, "c", "b"); n != 1 {
			t.Fatalf("Publish b = %d, want 1", n)
		}
		want(t, wait(t, a, h, time.Second), channel.StatusMessage, "a")
		want(t, wait(t, a, h, time.Second), channel.StatusMessage, "b")
	})
	t.Run("waiter blocked before publishing", func(t *testing.T) {
		hub, a := newScope(t)
		h := mustSubscribe(t, a, "c")
		first := asyncWait(a, h, time.Minute)
		time.Sleep(5 * time.Millisecond) // let A park; correctness does not depend on it
		addScope(t, hub)                 // B, the publisher
		if n := mustPublish(t, hub, "c", "a"); n != 1 {
			t.Fatalf("Publish a = %d, want 1", n)
		}
		if n := mustPublish(t, hub, "c", "b"); n != 1 {
			t.Fatalf("Publish b = %d, want 1", n)
		}
		want(t, recv(t, first), channel.StatusMessage, "a")
		want(t, wait(t, a, h, time.Second), channel.StatusMessage, "b")
	})
}

// 无订阅时发布返回 0；订阅之前发布的消息不补发。
func TestConformance2_NoSubscriberReturnsZeroAndNoReplay(t *testing.T) {
	hub := channel.NewHub(channel.Limits{})
	if n := mustPublish(t, hub, "c", "before"); n != 0 {
		t.Fatalf("Publish without subscriber = %d, want 0", n)
	}
	a := addScope(t, hub)
	h := mustSubscribe(t, a, "c")
	want(t, wait(t, a, h, 0), channel.StatusTimeout, "")
	// A channel with a subscriber that then left must not keep messages either.
	other := mustSubscribe(t, a, "d")
	if err := a.Unsubscribe(other); err != nil {
		t.Fatal(err)
	}
	if n := mustPublish(t, hub, "d", "nobody"); n != 0 {
		t.Fatalf("Publish after last unsubscribe = %d, want 0", n)
	}
	if n := mustPublish(t, hub, "c", "after"); n != 1 {
		t.Fatalf("Publish after subscribe = %d, want 1", n)
	}
	want(t, wait(t, a, h, time.Second), channel.StatusMessage, "after")
	want(t, wait(t, a, h, 0), channel.StatusTimeout, "")
}

// 甲等待 200 毫秒而无消息，得（1，空），用时约 200 毫秒；期间读取订阅数不改变这一长短。
func TestConformance3_TimeoutLastsItsDurationDespiteCount(t *testing.T) {
	hub, a := newScope(t)
	h := mustSubscribe(t, a, "c")

	stop := make(chan struct{})
	var counts atomic.Int64
	var bad atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // event B reads the subscription count during the wait
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if n, err := hub.Count("c"); err != nil || n != 1 {
				bad.Add(1)
			}
			counts.Add(1)
			time.Sleep(100 * time.Microsecond)
		}
	}()
	start := time.Now()
	got := wait(t, a, h, 200*time.Millisecond)
	elapsed := time.Since(start)
	close(stop)
	wg.Wait()

	want(t, got, channel.StatusTimeout, "")
	if elapsed < 190*time.Millisecond {
		t.Errorf("200ms wait returned after %v, want >= 190ms", elapsed)
	}
	if elapsed > 10*time.Second {
		t.Errorf("200ms wait returned after %v, want about 200ms", elapsed)
	}
	if counts.Load() < 2 {
		t.Errorf("Count ran %d times during the wait, want several", counts.Load())
	}
	if bad.Load() != 0 {
		t.Errorf("Count returned something other than 1 %d times", bad.Load())
	}
	want(t, wait(t, a, h, 0), channel.StatusTimeout, "") // no message appeared
}

// 乙以原因“收摊”关闭 c：甲先收到已排队的消息，再得（2，收摊）；再等仍是（2，收摊）；同名可重新订阅。
func TestConformance4_CloseDeliversQueuedThenEnds(t *testing.T) {
	hub, a := newScope(t)
	h := mustSubscribe(t, a, "c")
	mustPublish(t, hub, "c", "m1")
	mustPublish(t, hub, "c", "m2")

	b := addScope(t, hub)
	hb := mustSubscribe(t, b, "c") // a second subscription that is blocked in Wait
	mustPublish(t, hub, "c", "m3")
	want(t, wait(t, b, hb, time.Second), channel.StatusMessage, "m3") // not m1, m2
	blocked := asyncWait(b, hb, time.Minute)

	n, err := hub.Close("c", "收摊")
	if err != nil || n != 2 {
		t.Fatalf("Close = %d, %v; want 2, nil", n, err)
	}
	want(t, recv(t, blocked), channel.StatusEnded, "收摊")

	want(t, wait(t, a, h, time.Second), channel.StatusMessage, "m1")
	want(t, wait(t, a, h, time.Second), channel.StatusMessage, "m2")
	want(t, wait(t, a, h, time.Second), channel.StatusMessage, "m3")
	want(t, wait(t, a, h, time.Second), channel.StatusEnded, "收摊")
	want(t, wait(t, a, h, time.Second), channel.StatusEnded, "收摊")
	want(t, wait(t, a, h, 0), channel.StatusEnded, "收摊")

	if c := mustCount(t, hub, "c"); c != 0 {
		t.Fatalf("Count after close = %d, want 0", c)
	}
	if n := mustPublish(t, hub, "c", "lost"); n != 0 {
		t.Fatalf("Publish after close = %d, want 0", n)
	}
	if n, err := hub.Close("c", "again"); err != nil || n != 0 {
		t.Fatalf("Close of absent channel = %d, %v; want 0, nil", n, err)
	}

	// The same name can be subscribed again: a new generation.
	h2 := mustSubscribe(t, a, "c")
	if h2 == h {
		t.Fatal("new subscription reused the old handle")
	}
	if n := mustPublish(t, hub, "c", "gen2"); n != 1 {
		t.Fatalf("Publish to new generation = %d, want 1", n)
	}
	want(t, wait(t, a, h2, time.Second), channel.StatusMessage, "gen2")
	want(t, wait(t, a, h, 0), channel.StatusEnded, "收摊")
	// Unsubscribing a closed subscription keeps its first reason.
	if err := a.Unsubscribe(h); err != nil {
		t.Fatal(err)
	}
	want(t, wait(t, a, h, 0), channel.StatusEnded, "收摊")
	if c := mustCount(t, hub, "c"); c != 1 {
		t.Fatalf("Count of new generation = %d, want 1", c)
	}
}

// 甲订阅后不读取，乙连续发布超过 1 MiB：之后甲的等待得（2，含“积压”的原因），乙的发布不再送达甲。
func TestConformance5_BacklogOverOneMiBEvicts(t *testing.T) {
	hub, a := newScope(t)
	h := mustSubscribe(t, a, "c")
	r := hub.NewScope(context.Background()) // a reader that keeps up
	defer r.End()
	hr := mustSubscribe(t, r, "c")

	chunk := strings.Repeat("x", 65536)
	for i := range 16 { // exactly 1 MiB queued for A: not over the limit
		msg := fmt.Sprintf("%02d", i) + chunk[2:]
		if n := mustPublish(t, hub, "c", msg); n != 2 {
			t.Fatalf("Publish %d = %d, want 2", i, n)
		}
		want(t, wait(t, r, hr, time.Second), channel.StatusMessage, msg)
	}
	if c := mustCount(t, hub, "c"); c != 2 {
		t.Fatalf("Count at exactly 1 MiB backlog = %d, want 2", c)
	}
	// One more byte exceeds 1 MiB: A is evicted and not counted.
	if n := mustPublish(t, hub, "c", "y"); n != 1 {
		t.Fatalf("Publish over the backlog = %d, want 1 (the reader only)", n)
	}
	want(t, wait(t, r, hr, time.Second), channel.StatusMessage, "y")
	if c := mustCount(t, hub, "c"); c != 1 {
		t.Fatalf("Count after eviction = %d, want 1", c)
	}
	if n := mustPublish(t, hub, "c", "z"); n != 1 {
		t.Fatalf("Publish after eviction = %d, want 1", n)
	}

	got := wait(t, a, h, time.Second) // queued messages were dropped
	if got.st != channel.StatusEnded || !strings.Contains(got.text, "backlog") {
		t.Fatalf("Wait after eviction = (%d, %q), want (2, reason containing \"backlog\")", got.st, got.text)
	}
	if got.text != "订阅因积压超过 1 MiB 被断开 (evicted: backlog exceeded 1 MiB)" || got.text != hub.Limits().BacklogReason() {
		t.Fatalf("eviction reason = %q, want the documented %q", got.text, hub.Limits().BacklogReason())
	}
	want(t, wait(t, a, h, time.Second), channel.StatusEnded, got.text)

	// Eviction of the last subscription makes the channel disappear.
	if err := r.Unsubscribe(hr); err != nil {
		t.Fatal(err)
	}
	hb := mustSubscribe(t, a, "solo")
	for range 16 {
		mustPublish(t, hub, "solo", chunk)
	}
	if n := mustPublish(t, hub, "solo", "!"); n != 0 {
		t.Fatalf("Publish evicting the only subscription = %d, want 0", n)
	}
	if c := mustCount(t, hub, "solo"); c != 0 {
		t.Fatalf("Count after evicting the only subscription = %d, want 0", c)
	}
	want(t, wait(t, a, hb, 0), channel.StatusEnded, got.text)
}

// 同一频道第 257 个订阅抛可捕获的豫言异常；第 65 个频道由宿主拒绝。
func TestConformance6_SubscriptionAndChannelLimits(t *testing.T) {
	hub := channel.NewHub(channel.Limits{})
	var scopes []*channel.Scope
	defer func() {
		for _, s := range scopes {
			s.End()
		}
	}()
	var handles []string
	var owner []*channel.Scope
	for i := range 256 {
		s := hub.NewScope(context.Background())
		scopes = append(scopes, s)
		h, err := s.Subscribe("c")
		if err != nil {
			t.Fatalf("subscription %d: %v", i+1, err)
		}
		handles, owner = append(handles, h), append(owner, s)
	}
	extra := hub.NewScope(context.Background())
	scopes = append(scopes, extra)
	_, err := extra.Subscribe("c")
	if !errors.Is(err, channel.ErrTooManySubscriptions) || errors.Is(err, channel.ErrTooManyChannels) {
		t.Fatalf("257th subscription: %v, want ErrTooManySubscriptions", err)
	}
	if c := mustCount(t, hub, "c"); c != 256 {
		t.Fatalf("Count = %d, want 256", c)
	}
	if n := mustPublish(t, hub, "c", "m"); n != 256 {
		t.Fatalf("Publish = %d, want 256", n)
	}
	// The error was catchable: after one unsubscribes, a subscription fits again.
	if err := owner[0].Unsubscribe(handles[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := extra.Subscribe("c"); err != nil {
		t.Fatalf("subscription after a slot freed: %v", err)
	}

	// Channels: "c" exists; create 63 more, then the 65th is rejected.
	for i := 1; i < 64; i++ {
		mustSubscribe(t, extra, fmt.Sprintf("ch-%d", i))
	}
	_, err = extra.Subscribe("ch-64")
	if !errors.Is(err, channel.ErrTooManyChannels) || errors.Is(err, channel.ErrTooManySubscriptions) {
		t.Fatalf("65th channel: %v, want ErrTooManyChannels", err)
	}
	if c := mustCount(t, hub, "ch-64"); c != 0 {
		t.Fatalf("rejected channel exists with %d subscriptions", c)
	}
	// Existing channels still accept subscriptions at the channel limit.
	mustSubscribe(t, extra, "ch-1")
	// Closing a channel frees its slot.
	if n, err := hub.Close("ch-1", "bye"); err != nil || n != 2 {
		t.Fatalf("Close = %d, %v; want 2, nil", n, err)
	}
	mustSubscribe(t, extra, "ch-64")
}

// 事件乙用事件甲的订阅柄调用等待或取消，抛豫言异常。
func TestConformance7_ForeignHandleIsRejected(t *testing.T) {
	hub, a := newScope(t)
	b := addScope(t, hub)
	h := mustSubscribe(t, a, "c")
	mustSubscribe(t, b, "c") // B has its own subscription to the same channel

	if _, _, err := b.Wait(context.Background(), h, 0); !errors.Is(err, channel.ErrForeignHandle) {
		t.Fatalf("B.Wait(A's handle): %v, want ErrForeignHandle", err)
	}
	if err := b.Unsubscribe(h); !errors.Is(err, channel.ErrForeignHandle) {
		t.Fatalf("B.Unsubscribe(A's handle): %v, want ErrForeignHandle", err)
	}
	// A's subscription is untouched.
	if c := mustCount(t, hub, "c"); c != 2 {
		t.Fatalf("Count = %d, want 2", c)
	}
	mustPublish(t, hub, "c", "still mine")
	want(t, wait(t, a, h, time.Second), channel.StatusMessage, "still mine")

	// A handle of another hub (another space), even from a scope with the
	// same position in its hub, and strings that were never handles.
	other := channel.NewHub(channel.Limits{})
	oa := other.NewScope(context.Background())
	defer oa.End()
	oh := mustSubscribe(t, oa, "c")
	for _, bad := range []string{oh, "", "x", h + "0", strings.TrimSuffix(h, "1")} {
		if _, _, err := a.Wait(context.Background(), bad, 0); !errors.Is(err, channel.ErrForeignHandle) {
			t.Errorf("Wait(%q): %v, want ErrForeignHandle", bad, err)
		}
		if err := a.Unsubscribe(bad); !errors.Is(err, channel.ErrForeignHandle) {
			t.Errorf("Unsubscribe(%q): %v, want ErrForeignHandle", bad, err)
		}
	}
	// Still foreign after A ended.
	a.End()
	if _, _, err := b.Wait(context.Background(), h, 0); !errors.Is(err, channel.ErrForeignHandle) {
		t.Fatalf("B.Wait(ended A's handle): %v, want ErrForeignHandle", err)
	}
}

// 发布 0 与 65536 字节成功；65537 字节、字节 0xFF 起首的文字失败；频道名不合规失败。
func TestConformance8_TextSizesAndNames(t *testing.T) {
	hub, a := newScope(t)
	h := mustSubscribe(t, a, "c")

	max := strings.Repeat("é", 65536/2)
	for _, text := range []string{"", max} {
		if n := mustPublish(t, hub, "c", text); n != 1 {
			t.Fatalf("Publish(%d bytes) = %d, want 1", len(text), n)
		}
		want(t, wait(t, a, h, time.Second), channel.StatusMessage, text)
	}
	for _, tc := range []struct {
		text string
		err  error
	}{
		{max + "x", channel.ErrTextTooLarge},
		{"\xff", channel.ErrInvalidText},
		{"\xffabc", channel.ErrInvalidText},
	} {
		n, err := hub.Publish("c", tc.text)
		if !errors.Is(err, tc.err) || n != 0 {
			t.Errorf("Publish(%d bytes, first %#x) = %d, %v; want 0, %v", len(tc.text), tc.text[0], n, err, tc.err)
		}
	}
	want(t, wait(t, a, h, 0), channel.StatusTimeout, "") // nothing was delivered

	for _, name := range []string{"", "a b", "频道", strings.Repeat("n", 65)} {
		if _, err := a.Subscribe(name); !errors.Is(err, channel.ErrInvalidName) {
			t.Errorf("Subscribe(%q): %v, want ErrInvalidName", name, err)
		}
		if _, err := hub.Publish(name, "m"); !errors.Is(err, channel.ErrInvalidName) {
			t.Errorf("Publish(%q): %v, want ErrInvalidName", name, err)
		}
	}
}

// 回放范例：事件丙先订阅，再读头与历史；事件丁在此窗口内追加并发布若干事件，丙的输出里每个序号恰好出现一次。
//
// Each seed drives a seeded schedule of yields and sleeps in both goroutines.
// Every seed forces the three interesting cases: an event committed before
// the subscription but published after it, events committed and published
// between the subscription and the head read (seen twice, de-duplicated), and
// events after the head read. One seed in three uses a tiny backlog limit and
// a slow reader so that the reader is evicted and must re-subscribe and
// continue from the last forwarded sequence number.
func TestConformance9_ReplayExactlyOnce(t *testing.T) {
	seeds := make([]uint64, 0, 200)
	if *replaySeed != 0 {
		seeds = append(seeds, *replaySeed)
	} else {
		for s := range uint64(200) {
			seeds = append(seeds, s+1)
		}
	}
	evictions := 0
	for _, seed := range seeds {
		n, err := runReplay(seed)
		if err != nil {
			t.Fatalf("seed %d: %v\nrerun: go test ./channel -run TestConformance9 -replay.seed=%d", seed, err, seed)
		}
		evictions += n
	}
	if len(seeds) > 1 && evictions == 0 {
		t.Fatal("no seed exercised eviction and re-subscription")
	}
	t.Logf("%d seeds, %d evictions handled", len(seeds), evictions)
}
