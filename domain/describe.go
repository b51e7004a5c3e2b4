package domain

import (
	"context"
	"slices"
)

// DescribeResult is the result of describe (RFC §11.2).
type DescribeResult struct {
	APIVersion          string       `json:"api_version"`
	AppVersion          string       `json:"app_version"`
	SpaceID             string       `json:"space_id"`
	ActorID             string       `json:"actor_id"`
	ConsumerID          *string      `json:"consumer_id"`
	DefaultRecipientID  string       `json:"default_recipient_id"`
	AllowedRecipientIDs []string     `json:"allowed_recipient_ids"`
	Scopes              []Scope      `json:"scopes"`
	Limits              Limits       `json:"limits"`
	Capabilities        Capabilities `json:"capabilities"`
	// RateLimits are the rate limits of the caller's credential (its space's, or the defaults).
	RateLimits PublishedRateLimits `json:"rate_limits"`
}

// Capabilities returns what this deployment publishes.
func (s *Service) Capabilities() Capabilities { return s.caps }

// Describe tells a principal who it is, where it may send, the actual limits and the capabilities.
func (s *Service) Describe(ctx context.Context, p *Principal) (DescribeResult, error) {
	sp, err := s.space(ctx, p.SpaceID)
	if err != nil {
		return DescribeResult{}, err
	}
	allowed, err := s.actorIDs(ctx, p.SpaceID)
	if err != nil {
		return DescribeResult{}, err
	}
	res := DescribeResult{APIVersion: APIVersion, AppVersion: s.version, SpaceID: p.SpaceID, ActorID: p.ActorID,
		DefaultRecipientID: sp.DefaultRecipientID, AllowedRecipientIDs: allowed, Scopes: slices.Clone(p.Scopes),
		Limits: s.limits, Capabilities: s.caps,
		RateLimits: PublishedRateLimits{RateLimits: s.effectiveRateLimits(sp), AppliesTo: "credential"}}
	q := s.effectiveQuotas(sp)
	res.Limits.SpaceMaxStoredBytes, res.Limits.SpaceMaxItems = q.MaxStoredBytes, q.MaxItems
	if p.ConsumerID != "" {
		c := p.ConsumerID
		res.ConsumerID = &c
	}
	return res, nil
}
