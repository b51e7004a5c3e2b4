package retry_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/waypost/waypost/domain/retry"
)

var t0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

// fakeClock is advanced by the test; attempts "take" a fixed duration.
type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time          { return c.now }
func (c *fakeClock) Advance(d time.Duration) { c.now = c.now.Add(d) }
func (c *fakeClock) Set(t time.Time)         { c.now = t }

// TestRunFollowsSchedule drives a delivery that always fails, on a fake clock, without jitter: attempts
// happen 0 s, 1 s, 5 s, 30 s and 5 min after the previous one ended, and there is no sixth.
func TestRunFollowsSchedule(t *testing.T) {
	const attemptTakes = 200 * time.Millisecond
	clock := &fakeClock{now: t0}
	var starts []time.Duration
	made := 0
	for {
		d := retry.Policy{}.Next(made, clock.Now(), "", t0.Add(24*time.Hour))
		if d.Stop {
			if d.Reason != retry.StopExhausted || !d.At.IsZero() {
				t.Fatalf("stop %+v", d)
			}
			break
		}
		if d.At.Before(clock.Now()) {
			t.Fatalf("planned in the past: %v < %v", d.At, clock.Now())
		}
		clock.Set(d.At)
		starts = append(starts, clock.Now().Sub(t0))
		clock.Advance(attemptTakes) // the attempt fails after 200 ms
		made++
		if made > 10 {
			t.Fatal("never stops")
		}
	}
	a := attemptTakes
	want := []time.Duration{0, 1*time.Second + a, 6*time.Second + 2*a, 36*time.Second + 3*a, 336*time.Second + 4*a}
	if len(starts) != retry.MaxAttempts || len(starts) != len(want) {
		t.Fatalf("%d attempts: %v", len(starts), starts)
	}
	for i := range want {
		if starts[i] != want[i] {
			t.Fatalf("attempt %d at %v, want %v (all: %v)", i+1, starts[i], want[i], starts)
		}
	}
}

func TestJitterBounds(t *testing.T) {
	sched := retry.Schedule()
	cases := []struct {
		name   string
		jitter float64
		r      float64
		factor float64 // expected multiplier of the base delay
	}{
		{"lowest draw", 0.1, 0, 0.9},
		{"middle draw", 0.1, 0.5, 1.0},
		{"highest draw", 0.1, 0.999999999, 1.1},
		{"draw out of range is clamped", 0.1, 7, 1.1},
		{"negative draw is clamped", 0.1, -3, 0.9},
		{"jitter clamped to 0.5", 4, 0, 0.5},
		{"negative jitter means none", -1, 0, 1.0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := retry.Policy{Jitter: tc.jitter, Rand: func() float64 { return tc.r }}
			for made := range retry.MaxAttempts {
				d := p.Next(made, t0, "", time.Time{})
				got := d.At.Sub(t0)
				want := time.Duration(float64(sched[made]) * tc.factor)
				if diff := got - want; diff < -time.Microsecond || diff > time.Microsecond {
					t.Fatalf("made=%d: delay %v, want %v", made, got, want)
				}
				if got < 0 {
					t.Fatalf("negative delay %v", got)
				}
			}
		})
	}
}

// TestDefaultJitterRandom draws many delays with the real random source: all inside ±10%, the first
// attempt always immediate, and the draws actually vary.
func TestDefaultJitterRandom(t *testing.T) {
	p := retry.DefaultPolicy()
	sched := retry.Schedule()
	for made := range retry.MaxAttempts {
		seen := map[time.Duration]bool{}
		for range 500 {
			got := p.Next(made, t0, "", time.Time{}).At.Sub(t0)
			lo, hi := time.Duration(float64(sched[made])*0.9), time.Duration(float64(sched[made])*1.1)
			if got < lo || got > hi {
				t.Fatalf("made=%d: %v outside [%v, %v]", made, got, lo, hi)
			}
			seen[got] = true
		}
		if made == 0 && len(seen) != 1 {
			t.Fatalf("first attempt is not immediate: %v", seen)
		}
		if made > 0 && len(seen) < 50 {
			t.Fatalf("made=%d: only %d distinct delays, jitter not applied", made, len(seen))
		}
	}
}

func TestRetryAfter(t *testing.T) {
	exp := t0.Add(time.Hour)
	date := func(d time.Duration) string { return t0.Add(d).Format(http.TimeFormat) }
	cases := []struct {
		name     string
		made     int
		value    string
		expires  time.Time
		wantStop retry.StopReason
		wantIn   time.Duration // delay from t0 when not stopped
		honoured bool
	}{
		{"absent", 1, "", exp, "", time.Second, false},
		{"seconds longer than schedule", 1, "10", exp, "", 10 * time.Second, true},
		{"seconds shorter than schedule", 3, "10", exp, "", 30 * time.Second, false},
		{"zero seconds", 2, "0", exp, "", 5 * time.Second, false},
		{"padded seconds", 1, " 7 ", exp, "", 7 * time.Second, true},
		{"http date", 1, date(2 * time.Minute), exp, "", 2 * time.Minute, true},
		{"rfc 850 date", 1, t0.Add(3 * time.Minute).Format(time.RFC850), exp, "", 3 * time.Minute, true},
		{"ansi c date", 1, t0.Add(4 * time.Minute).Format(time.ANSIC), exp, "", 4 * time.Minute, true},
		{"date in the past", 2, date(-time.Hour), exp, "", 5 * time.Second, false},
		{"negative", 1, "-5", exp, "", time.Second, false},
		{"fraction", 1, "1.5", exp, "", time.Second, false},
		{"plus sign", 1, "+30", exp, "", time.Second, false},
		{"garbage", 1, "soon", exp, "", time.Second, false},
		{"beyond expiry", 1, "3600", exp, retry.StopExpired, 0, false},
		{"date beyond expiry", 1, date(2 * time.Hour), exp, retry.StopExpired, 0, false},
		{"huge seconds", 1, "99999999999999999999999", exp, retry.StopExpired, 0, false},
		{"huge seconds without expiry", 1, "99999999999999999999999", time.Time{}, "", 999_999_999 * time.Second, true},
		{"just before expiry", 1, "3599", exp, "", 3599 * time.Second, true},
		{"ignored for the first attempt", 0, "60", exp, "", 0, false},
		{"exhausted wins", 5, "1", exp, retry.StopExhausted, 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := retry.Policy{}.Next(tc.made, t0, tc.value, tc.expires)
			if tc.wantStop != "" {
				if !d.Stop || d.Reason != tc.wantStop {
					t.Fatalf("got %+v, want stop %s", d, tc.wantStop)
				}
				return
			}
			if d.Stop || d.At.Sub(t0) != tc.wantIn || d.RetryAfter != tc.honoured {
				t.Fatalf("got %+v (delay %v), want delay %v honoured=%v", d, d.At.Sub(t0), tc.wantIn, tc.honoured)
			}
		})
	}
}

func TestExpiry(t *testing.T) {
	p := retry.Policy{}
	// The fifth attempt is due 5 min after the fourth: a subscription expiring sooner stops the delivery.
	if d := p.Next(4, t0, "", t0.Add(time.Minute)); !d.Stop || d.Reason != retry.StopExpired {
		t.Fatalf("%+v", d)
	}
	if d := p.Next(4, t0, "", t0.Add(5*time.Minute)); !d.Stop {
		t.Fatalf("an attempt exactly at expiry: %+v", d)
	}
	if d := p.Next(4, t0, "", t0.Add(5*time.Minute+time.Nanosecond)); d.Stop || !d.At.Equal(t0.Add(5*time.Minute)) {
		t.Fatalf("just before expiry: %+v", d)
	}
	if d := p.Next(0, t0, "", t0); !d.Stop || d.Reason != retry.StopExpired {
		t.Fatalf("first attempt of an expired subscription: %+v", d)
	}
	// Jitter never pushes an attempt past expiry either.
	hi := retry.Policy{Jitter: 0.1, Rand: func() float64 { return 0.99 }}
	if d := hi.Next(3, t0, "", t0.Add(31*time.Second)); !d.Stop {
		t.Fatalf("jittered past expiry: %+v", d)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := t0
	if at, ok := retry.ParseRetryAfter("120", now); !ok || !at.Equal(now.Add(2*time.Minute)) {
		t.Fatalf("seconds: %v %v", at, ok)
	}
	if at, ok := retry.ParseRetryAfter("Sun, 01 Nov 2026 12:05:00 GMT", now); !ok || !at.Equal(now.Add(5*time.Minute)) {
		t.Fatalf("date: %v %v", at, ok)
	}
	if at, ok := retry.ParseRetryAfter("Sun, 01 Nov 2026 11:00:00 GMT", now); !ok || !at.Equal(now) {
		t.Fatalf("past date: %v %v", at, ok)
	}
	for _, bad := range []string{"", " ", "-1", "1e3", "0x10", "12 s", "Sunday"} {
		if _, ok := retry.ParseRetryAfter(bad, now); ok {
			t.Fatalf("%q accepted", bad)
		}
	}
	if d := retry.Schedule(); len(d) != retry.MaxAttempts {
		t.Fatalf("schedule %v", d)
	}
	// Schedule returns a copy: changing it does not change the policy.
	s := retry.Schedule()
	s[1] = time.Hour
	if retry.Schedule()[1] != time.Second {
		t.Fatal("Schedule exposes shared state")
	}
}
