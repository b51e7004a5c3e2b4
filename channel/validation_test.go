package channel_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/waypost/waypost/channel"
)

func TestNameValidation(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"", false},
		{"c", true},
		{"C", true},
		{"0", true},
		{".", true},
		{"_", true},
		{":", true},
		{"-", true},
		{"feed:space_1.items-v2", true},
		{"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._", true},
		{strings.Repeat("a", 64), true},
		{strings.Repeat("a", 65), false},
		{"a b", false},
		{"a/b", false},
		{"a@b", false},
		{"a\x00", false},
		{"a\n", false},
		{"a+b", false},
		{"a*", false},
		{"é", false},
		{"频道", false},
		{"\xff", false},
		{"a,b", false},
		{"a#b", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hub, sc := newScope(t)
			check := func(op string, err error) {
				t.Helper()
				if tc.ok && err != nil {
					t.Errorf("%s(%q): %v, want nil", op, tc.name, err)
				}
				if !tc.ok && !errors.Is(err, channel.ErrInvalidName) {
					t.Errorf("%s(%q): %v, want ErrInvalidName", op, tc.name, err)
				}
			}
			_, err := sc.Subscribe(tc.name)
			check("Subscribe", err)
			n, err := hub.Count(tc.name)
			check("Count", err)
			if tc.ok && n != 1 || !tc.ok && n != 0 {
				t.Errorf("Count(%q) = %d", tc.name, n)
			}
			n, err = hub.Publish(tc.name, "m")
			check("Publish", err)
			if tc.ok && n != 1 || !tc.ok && n != 0 {
				t.Errorf("Publish(%q) = %d", tc.name, n)
			}
			n, err = hub.Close(tc.name, "r")
			check("Close", err)
			if tc.ok && n != 1 || !tc.ok && n != 0 {
				t.Errorf("Close(%q) = %d", tc.name, n)
			}
		})
	}
}

func TestNamesAreCaseSensitive(t *testing.T) {
	hub, sc := newScope(t)
	lower := mustSubscribe(t, sc, "feed")
	upper := mustSubscribe(t, sc, "Feed")
	if n := mustPublish(t, hub, "FEED", "none"); n != 0 {
		t.Fatalf("Publish(FEED) = %d, want 0", n)
	}
	mustPublish(t, hub, "Feed", "upper")
	want(t, wait(t, sc, lower, 0), channel.StatusTimeout, "")
	want(t, wait(t, sc, upper, 0), channel.StatusMessage, "upper")
}

func TestTextValidation(t *testing.T) {
	tests := []struct {
		desc string
		text string
		err  error
	}{
		{"empty", "", nil},
		{"one byte", "a", nil},
		{"65535 bytes", strings.Repeat("a", 65535), nil},
		{"65536 bytes", strings.Repeat("a", 65536), nil},
		{"65537 bytes", strings.Repeat("a", 65537), channel.ErrTextTooLarge},
		{"1 MiB", strings.Repeat("a", 1<<20), channel.ErrTextTooLarge},
		{"0xFF alone", "\xff", channel.ErrInvalidText},
		{"0xFF first", "\xffhello", channel.ErrInvalidText},
		{"0xFF first and too large", "\xff" + strings.Repeat("a", 65536), channel.ErrTextTooLarge},
		{"0xFF not first", "a\xff", nil},
		{"0xFE first", "\xfe", nil},
		{"NUL first", "\x00", nil},
		{"UTF-8", "收摊", nil},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			hub, sc := newScope(t)
			h := mustSubscribe(t, sc, "c")
			n, err := hub.Publish("c", tc.text)
			if !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
				t.Fatalf("Publish: %v, want %v", err, tc.err)
			}
			if tc.err != nil {
				if n != 0 {
					t.Fatalf("failed Publish returned %d", n)
				}
				want(t, wait(t, sc, h, 0), channel.StatusTimeout, "") // no side effect
				// The same validation applies to an absent channel.
				if _, err := hub.Publish("absent", tc.text); !errors.Is(err, tc.err) {
					t.Fatalf("Publish to absent channel: %v, want %v", err, tc.err)
				}
				return
			}
			if n != 1 {
				t.Fatalf("Publish = %d, want 1", n)
			}
			want(t, wait(t, sc, h, 0), channel.StatusMessage, tc.text)
		})
	}
}

func TestWaitTimeoutValidation(t *testing.T) {
	tests := []struct {
		timeout time.Duration
		ok      bool
	}{
		{-time.Hour, false},
		{-time.Millisecond, false},
		{-1, false},
		{0, true},
		{time.Millisecond, true},
		{3_600_000 * time.Millisecond, true},
		{3_600_000*time.Millisecond + 1, false},
		{3_600_001 * time.Millisecond, false},
		{24 * time.Hour, false},
	}
	for _, tc := range tests {
		t.Run(tc.timeout.String(), func(t *testing.T) {
			hub, sc := newScope(t)
			h := mustSubscribe(t, sc, "c")
			// A message is queued so that valid timeouts return at once.
			mustPublish(t, hub, "c", "m")
			st, text, err := sc.Wait(context.Background(), h, tc.timeout)
			if !tc.ok {
				if !errors.Is(err, channel.ErrInvalidTimeout) {
					t.Fatalf("Wait(%v): %v, want ErrInvalidTimeout", tc.timeout, err)
				}
				want(t, wait(t, sc, h, 0), channel.StatusMessage, "m") // not consumed
				return
			}
			if err != nil {
				t.Fatalf("Wait(%v): %v", tc.timeout, err)
			}
			want(t, result{st, text}, channel.StatusMessage, "m")
		})
	}
}

func TestCloseReasonValidation(t *testing.T) {
	tests := []struct {
		desc   string
		reason string
		ok     bool
	}{
		{"empty", "", true},
		{"short", "收摊", true},
		{"1024 bytes", strings.Repeat("r", 1024), true},
		{"1025 bytes", strings.Repeat("r", 1025), false},
		{"64 KiB", strings.Repeat("r", 65536), false},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			hub, sc := newScope(t)
			h := mustSubscribe(t, sc, "c")
			n, err := hub.Close("c", tc.reason)
			if !tc.ok {
				if !errors.Is(err, channel.ErrReasonTooLarge) || n != 0 {
					t.Fatalf("Close = %d, %v; want 0, ErrReasonTooLarge", n, err)
				}
				if c := mustCount(t, hub, "c"); c != 1 {
					t.Fatalf("failed Close changed Count to %d", c)
				}
				want(t, wait(t, sc, h, 0), channel.StatusTimeout, "")
				if _, err := hub.Close("absent", tc.reason); !errors.Is(err, channel.ErrReasonTooLarge) {
					t.Fatalf("Close of absent channel: %v, want ErrReasonTooLarge", err)
				}
				return
			}
			if err != nil || n != 1 {
				t.Fatalf("Close = %d, %v; want 1, nil", n, err)
			}
			want(t, wait(t, sc, h, 0), channel.StatusEnded, tc.reason)
		})
	}
}

func TestLimitsDefaults(t *testing.T) {
	d := channel.DefaultLimits()
	if d.MaxChannels != 64 || d.MaxSubscriptionsPerChannel != 256 || d.MaxBacklogBytes != 1<<20 ||
		d.MaxTextBytes != 65536 || d.MaxReasonBytes != 1024 || d.MaxWaitTimeout != 3_600_000*time.Millisecond {
		t.Fatalf("DefaultLimits = %+v", d)
	}
	if got := channel.NewHub(channel.Limits{}).Limits(); got != d {
		t.Fatalf("zero Limits became %+v, want defaults", got)
	}
	if got := channel.NewHub(channel.Limits{MaxChannels: -1, MaxTextBytes: 10}).Limits(); got.MaxChannels != 64 || got.MaxTextBytes != 10 {
		t.Fatalf("partial Limits became %+v", got)
	}
	if r := d.BacklogReason(); r != "订阅因积压超过 1 MiB 被断开 (evicted: backlog exceeded 1 MiB)" {
		t.Fatalf("default BacklogReason = %q", r)
	}
	if r := (channel.Limits{MaxBacklogBytes: 100}).BacklogReason(); r != "订阅因积压超过 100 bytes 被断开 (evicted: backlog exceeded 100 bytes)" {
		t.Fatalf("BacklogReason(100) = %q", r)
	}
	for _, s := range []channel.Status{channel.StatusMessage, channel.StatusTimeout, channel.StatusEnded} {
		if int(s) != map[string]int{"message": 0, "timeout": 1, "ended": 2}[s.String()] {
			t.Fatalf("status %d named %q", s, s)
		}
	}
}

func TestCustomLimitsApply(t *testing.T) {
	hub := channel.NewHub(channel.Limits{
		MaxChannels: 2, MaxSubscriptionsPerChannel: 2, MaxBacklogBytes: 10,
		MaxTextBytes: 4, MaxReasonBytes: 3, MaxWaitTimeout: time.Second,
	})
	sc := addScope(t, hub)
	h := mustSubscribe(t, sc, "a")
	mustSubscribe(t, sc, "a")
	if _, err := sc.Subscribe("a"); !errors.Is(err, channel.ErrTooManySubscriptions) {
		t.Fatalf("3rd subscription: %v", err)
	}
	mustSubscribe(t, sc, "b")
	if _, err := sc.Subscribe("c"); !errors.Is(err, channel.ErrTooManyChannels) {
		t.Fatalf("3rd channel: %v", err)
	}
	if _, err := hub.Publish("a", "12345"); !errors.Is(err, channel.ErrTextTooLarge) {
		t.Fatalf("5-byte text: %v", err)
	}
	if _, err := hub.Close("a", "1234"); !errors.Is(err, channel.ErrReasonTooLarge) {
		t.Fatalf("4-byte reason: %v", err)
	}
	if _, _, err := sc.Wait(context.Background(), h, time.Second+1); !errors.Is(err, channel.ErrInvalidTimeout) {
		t.Fatalf("timeout over 1s: %v", err)
	}
	// Backlog 10 bytes: 4+4+2 fits, one more byte evicts.
	for _, m := range []string{"1234", "5678", "90"} {
		if n := mustPublish(t, hub, "a", m); n != 2 {
			t.Fatalf("Publish(%q) = %d, want 2", m, n)
		}
	}
	if n := mustPublish(t, hub, "a", "x"); n != 0 {
		t.Fatalf("evicting Publish = %d, want 0", n)
	}
	want(t, wait(t, sc, h, 0), channel.StatusEnded, "订阅因积压超过 10 bytes 被断开 (evicted: backlog exceeded 10 bytes)")
	if c := mustCount(t, hub, "a"); c != 0 {
		t.Fatalf("Count = %d after evicting all", c)
	}
}

func TestEmptyMessagesAreBoundedByCount(t *testing.T) {
	hub := channel.NewHub(channel.Limits{MaxBacklogBytes: 5})
	sc := addScope(t, hub)
	h := mustSubscribe(t, sc, "c")
	for i := range 5 {
		if n := mustPublish(t, hub, "c", ""); n != 1 {
			t.Fatalf("empty Publish %d = %d, want 1", i, n)
		}
	}
	if n := mustPublish(t, hub, "c", ""); n != 0 {
		t.Fatalf("6th queued empty message = %d, want 0 (evicted)", n)
	}
	want(t, wait(t, sc, h, 0), channel.StatusEnded, hub.Limits().BacklogReason())
}
