// Package retry is the domain's policy for when to attempt a webhook delivery again (RFC §12.4): at most 5
// attempts, the first immediately and the next ones 1 s, 5 s, 30 s and 5 min after the previous attempt
// ended, each delay with bounded jitter; a valid Retry-After is honoured, but no attempt is planned at or past the
// subscription's expiry.
//
// The schedule is deliberately short (about six minutes end to end): a webhook is only a hint, and the
// durable feed remains the way to recover anything a receiver missed.
//
// Everything here is a pure function of its arguments: the caller passes the current time (from its clock)
// and, for jitter, a random source.
package retry

import (
	"math/rand/v2"
	"strings"
	"time"
)

// httpDateLayouts are the HTTP-date forms of RFC 9110 §5.6.7 a recipient accepts: IMF-fixdate, then the
// obsolete RFC 850 and asctime forms (as net/http's ParseTime; this package is the domain's and imports no
// HTTP).
func httpDateLayouts() []string {
	return []string{"Mon, 02 Jan 2006 15:04:05 GMT", time.RFC850, time.ANSIC}
}

// parseHTTPDate parses an HTTP-date.
func parseHTTPDate(v string) (time.Time, bool) {
	for _, layout := range httpDateLayouts() {
		if t, err := time.Parse(layout, v); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

// MaxAttempts is the number of attempts after which a delivery stops.
const MaxAttempts = 5

// DefaultJitter is the jitter fraction of DefaultPolicy: each delay varies by up to ±10%.
const DefaultJitter = 0.1

// MaxJitter bounds Policy.Jitter, so a jittered delay is never below half its base and never negative.
const MaxJitter = 0.5

// maxRetryAfterSeconds caps a delta-seconds Retry-After (about 31 years) so it cannot overflow a Duration.
const maxRetryAfterSeconds = 999_999_999

// Schedule returns the base delay before each attempt, indexed by the number of attempts already made.
func Schedule() []time.Duration {
	return []time.Duration{0, time.Second, 5 * time.Second, 30 * time.Second, 5 * time.Minute}
}

// Policy computes retry times. The zero value has no jitter; DefaultPolicy has ±10%.
type Policy struct {
	// Jitter is the fraction by which a delay may vary either way; values outside 0..MaxJitter are clamped.
	Jitter float64
	// Rand returns a number in [0, 1); nil means math/rand/v2.Float64. Tests inject a fixed source.
	Rand func() float64
}

// DefaultPolicy returns the production policy: ±10% jitter from math/rand/v2.
func DefaultPolicy() Policy { return Policy{Jitter: DefaultJitter} }

// StopReason says why no further attempt is planned.
type StopReason string

// The stop reasons.
const (
	// StopExhausted: MaxAttempts attempts have been made.
	StopExhausted StopReason = "attempts_exhausted"
	// StopExpired: the next attempt would fall at or after the subscription's expiry.
	StopExpired StopReason = "subscription_expired"
)

// Decision is the outcome of Next.
type Decision struct {
	// Stop reports that no further attempt is planned; Reason says why.
	Stop   bool
	Reason StopReason
	// At is when to make the next attempt (zero when Stop).
	At time.Time
	// RetryAfter reports that a Retry-After header pushed At later than the schedule.
	RetryAfter bool
}

// Next plans the attempt that follows made attempts (made = 0 plans the first one), the last of which
// ended at now with the given Retry-After header value ("" when absent). expires is the subscription's
// expiry; the zero time means none.
func (p Policy) Next(made int, now time.Time, retryAfter string, expires time.Time) Decision {
	sched := Schedule()
	if made < 0 {
		made = 0
	}
	if made >= len(sched) {
		return Decision{Stop: true, Reason: StopExhausted}
	}
	d := Decision{At: now.Add(p.jitter(sched[made]))}
	if made > 0 {
		if ra, ok := ParseRetryAfter(retryAfter, now); ok && ra.After(d.At) {
			d.At, d.RetryAfter = ra, true
		}
	}
	if !expires.IsZero() && !d.At.Before(expires) {
		return Decision{Stop: true, Reason: StopExpired}
	}
	return d
}

// jitter returns base scaled by a factor in [1-j, 1+j].
func (p Policy) jitter(base time.Duration) time.Duration {
	j := min(max(p.Jitter, 0), MaxJitter)
	if base <= 0 || j == 0 {
		return max(base, 0)
	}
	rnd := p.Rand
	if rnd == nil {
		rnd = rand.Float64
	}
	r := min(max(rnd(), 0), 1)
	return time.Duration(float64(base) * (1 + j*(2*r-1)))
}

// ParseRetryAfter reads a Retry-After value (RFC 9110 §10.2.3): a non-negative integer of seconds or an
// HTTP-date. It returns the time it names (never before now) and whether the value was valid.
func ParseRetryAfter(v string, now time.Time) (time.Time, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return time.Time{}, false
	}
	if strings.Trim(v, "0123456789") == "" {
		secs := int64(0)
		for _, c := range v {
			secs = secs*10 + int64(c-'0')
			if secs > maxRetryAfterSeconds {
				secs = maxRetryAfterSeconds
				break
			}
		}
		return now.Add(time.Duration(secs) * time.Second), true
	}
	t, ok := parseHTTPDate(v)
	if !ok {
		return time.Time{}, false
	}
	if t.Before(now) {
		return now, true
	}
	return t, true
}
