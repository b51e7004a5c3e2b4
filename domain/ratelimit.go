package domain

import (
	"context"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/waypost/waypost/domain/port"
)

// RateLimits are the request rate limits of each credential (token) of a space: a token bucket refilled
// at RequestsPerSecond that holds at most Burst requests. Describe publishes the space's limits; the
// owner sets them with PATCH /admin/v0/spaces/{space_id}.
type RateLimits struct {
	RequestsPerSecond int `json:"requests_per_second,omitempty"`
	Burst             int `json:"burst,omitempty"`
}

// Default and largest rate limits.
const (
	DefaultRequestsPerSecond = 100
	DefaultBurst             = 300
	MaxRequestsPerSecond     = 100000
	MaxBurst                 = 1000000
)

// DefaultRateLimits returns the rate limits of a space whose owner set none.
func DefaultRateLimits() RateLimits {
	return RateLimits{RequestsPerSecond: DefaultRequestsPerSecond, Burst: DefaultBurst}
}

// check validates limits an owner asks for.
func (l RateLimits) check() error {
	if l.RequestsPerSecond < 1 || l.RequestsPerSecond > MaxRequestsPerSecond {
		return Errorf(CodeInvalidRequest, "rate_limits.requests_per_second must be between 1 and %d", MaxRequestsPerSecond).
			WithDetails("field", "rate_limits.requests_per_second")
	}
	if l.Burst < 1 || l.Burst > MaxBurst {
		return Errorf(CodeInvalidRequest, "rate_limits.burst must be between 1 and %d", MaxBurst).WithDetails("field", "rate_limits.burst")
	}
	return nil
}

// merge returns base with the non-zero members of l (a merge patch: a zero member is absent).
func (l RateLimits) merge(base RateLimits) RateLimits {
	patch(&base.RequestsPerSecond, l.RequestsPerSecond)
	patch(&base.Burst, l.Burst)
	return base
}

// PublishedRateLimits is what describe says about the rate limits of the caller's credential.
type PublishedRateLimits struct {
	RateLimits
	// AppliesTo names what one bucket belongs to: "credential" (each token has its own).
	AppliesTo string `json:"applies_to"`
}

// Rate limiter tuning.
const (
	// rateIdle is how long an unused bucket is kept (a longer idle bucket would be full again anyway, as
	// long as burst/rate stays below it).
	rateIdle = 10 * time.Minute
	// rateSweepEvery is how many admissions pass between two sweeps of idle buckets.
	rateSweepEvery = 4096
)

// rateLimiter holds one token bucket per credential, in memory: exact within a process; every process (a
// Lambda instance) has its own buckets.
type rateLimiter struct {
	mu      sync.Mutex
	buckets map[string]*bucket // by token ID
	admits  int
	def     RateLimits
}

type bucket struct {
	lim    *rate.Limiter
	limits RateLimits
	used   time.Time
}

func newRateLimiter(def RateLimits) *rateLimiter {
	return &rateLimiter{buckets: map[string]*bucket{}, def: def}
}

// effectiveRateLimits returns a space's limits: its own, or the deployment's defaults.
func (s *Service) effectiveRateLimits(sp Space) RateLimits {
	if sp.RateLimits != nil {
		return *sp.RateLimits
	}
	return s.rates.def
}

// spaceRateLimits returns a space's limits, from its record as Service.space serves it (cached for at most
// spaceCacheTTL, so an owner's change reaches other processes within that time).
func (s *Service) spaceRateLimits(ctx context.Context, spaceID string) (RateLimits, error) {
	sp, err := s.space(ctx, spaceID)
	if err != nil {
		return RateLimits{}, err
	}
	return s.effectiveRateLimits(sp), nil
}

// Admit counts one request of the principal's credential against its token bucket (RateLimits of its
// space). Over the limit it returns RATE_LIMITED with details.retry_after_ms, the wait until a request
// would be admitted; nothing is counted then. Transports call it once per request, after authentication.
func (s *Service) Admit(ctx context.Context, p *Principal) error {
	limits, err := s.spaceRateLimits(ctx, p.SpaceID)
	if err != nil {
		return err
	}
	now := s.clock.Now()
	r := s.rates
	r.mu.Lock()
	defer r.mu.Unlock()
	r.admits++
	if r.admits%rateSweepEvery == 0 {
		for id, b := range r.buckets {
			if now.Sub(b.used) > rateIdle {
				delete(r.buckets, id)
			}
		}
	}
	b := r.buckets[p.TokenID]
	switch {
	case b == nil:
		b = &bucket{lim: rate.NewLimiter(rate.Limit(limits.RequestsPerSecond), limits.Burst), limits: limits}
		b.lim.SetLimitAt(now, rate.Limit(limits.RequestsPerSecond)) // the bucket starts full, at now
		r.buckets[p.TokenID] = b
	case b.limits != limits:
		b.lim.SetLimitAt(now, rate.Limit(limits.RequestsPerSecond))
		b.lim.SetBurstAt(now, limits.Burst)
		b.limits = limits
	}
	b.used = now
	res := b.lim.ReserveN(now, 1)
	if !res.OK() {
		return rateLimited(limits, time.Second)
	}
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return rateLimited(limits, d)
	}
	return nil
}

func rateLimited(l RateLimits, wait time.Duration) error {
	ms := int64(math.Ceil(float64(wait) / float64(time.Millisecond)))
	return Errorf(CodeRateLimited, "this credential is over its rate limit (%d requests/s, burst %d); retry after Retry-After",
		l.RequestsPerSecond, l.Burst).WithDetails("reason", "credential_rate", "limit", "rate_limits",
		"requests_per_second", l.RequestsPerSecond, "burst", l.Burst, "retry_after_ms", ms)
}

// UpdateSpaceRequest is the body of PATCH /admin/v0/spaces/{space_id}, a JSON Merge Patch (RFC 7396) of
// the space's settings: each member present changes that setting and absent ones stay as they are, down to
// the members of rate_limits and quotas — {"quotas": {"max_items": 100}} changes max_items and keeps
// max_stored_bytes. A zero member of RateLimits or Quotas is absent (no setting may be zero; the HTTP schema
// refuses an explicit 0 and null). See docs/decisions.md, "PATCH is a merge patch".
type UpdateSpaceRequest struct {
	RequestID  string      `json:"request_id,omitempty"`
	RateLimits *RateLimits `json:"rate_limits,omitempty"`
	// Quotas are the space's capacity quotas (quota.go); lowering them below the usage refuses new writes.
	Quotas *Quotas `json:"quotas,omitempty"`
}

// UpdateSpace changes a space's settings (control plane): its per-credential rate limits and its capacity
// quotas, merged member by member into those in force (UpdateSpaceRequest). A change applies at once in
// this process and within spaceCacheTTL (the space cache) elsewhere.
func (s *Service) UpdateSpace(ctx context.Context, spaceID string, req UpdateSpaceRequest) (SpaceResult, error) {
	if req.RequestID != "" {
		if err := checkRequestID(req.RequestID); err != nil {
			return SpaceResult{}, err
		}
	}
	if req.RateLimits != nil {
		if err := req.RateLimits.merge(DefaultRateLimits()).check(); err != nil {
			return SpaceResult{}, err
		}
	}
	if req.Quotas != nil {
		if err := req.Quotas.merge(DefaultQuotas()).check(); err != nil {
			return SpaceResult{}, err
		}
	}
	if _, err := s.liveSpace(ctx, spaceID); err != nil {
		return SpaceResult{}, err
	}
	var out Space
	err := s.commitRetry(ctx, "update space", func(ctx context.Context) ([]port.Op, error) {
		sp, it, found, err := getRecord[Space](ctx, s.store, keySpace(spaceID))
		if err != nil {
			return nil, err
		}
		if !found {
			return nil, Errorf(CodeNotFound, "no such space")
		}
		if req.RateLimits != nil {
			l := req.RateLimits.merge(s.effectiveRateLimits(sp))
			sp.RateLimits = &l
		}
		if req.Quotas != nil {
			q := req.Quotas.merge(s.effectiveQuotas(sp))
			sp.Quotas = &q
		}
		out = sp
		if sp.state() != SpaceActive {
			return nil, Errorf(CodeNotFound, "no such space")
		}
		return []port.Op{port.Put(item(it.Key, sp), port.Exists()), spaceLive(spaceID)}, nil
	})
	if err != nil {
		return SpaceResult{}, err
	}
	s.auth.putSpace(out, s.clock.Now())
	return s.spaceResultWithUsage(ctx, out)
}
