package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/waypost/waypost/domain"
)

// Admin calls the control plane (/admin/v0) with the instance admin secret. The secret is for the
// instance owner only; never hand it to an agent. Admin is safe for concurrent use.
type Admin struct {
	t transport
}

// NewAdmin returns a control-plane client for the service at baseURL that authenticates with secret
// (WAYPOST_ADMIN_SECRET). An invalid baseURL is reported by every call.
func NewAdmin(baseURL, secret string, opts ...Option) *Admin {
	return &Admin{t: newTransport(baseURL, secret, opts)}
}

// String describes the admin client without its secret.
func (a *Admin) String() string { return "waypost.Admin(" + a.t.base + ", secret redacted)" }

// GoString describes the admin client without its secret.
func (a *Admin) GoString() string { return a.String() }

// emptyBody is the body of revoke and rotate calls.
type emptyBody struct{}

func spacePath(spaceID string) string { return "/admin/v0/spaces/" + seg(spaceID) }

// normalizedFilter returns a copy of f with every list present (the wire form has arrays, never null).
func normalizedFilter(f *domain.Filter) *domain.Filter {
	if f == nil {
		return nil
	}
	n := f.Normalize()
	return &n
}

// CreateSpace creates a space with its default recipient actor and stable source_uri
// (POST /admin/v0/spaces).
func (a *Admin) CreateSpace(ctx context.Context, req domain.CreateSpaceRequest) (domain.SpaceResult, error) {
	return call[domain.SpaceResult](ctx, &a.t, http.MethodPost, "/admin/v0/spaces", nil, req)
}

// GetSpace returns a space (GET /admin/v0/spaces/{space_id}).
func (a *Admin) GetSpace(ctx context.Context, spaceID string) (domain.SpaceResult, error) {
	return call[domain.SpaceResult](ctx, &a.t, http.MethodGet, spacePath(spaceID), nil, nil)
}

// UpdateSpace changes a space's settings — its per-credential rate limits and its capacity quotas — (PATCH
// /admin/v0/spaces/{space_id}) and returns the space with the settings in force.
func (a *Admin) UpdateSpace(ctx context.Context, spaceID string, req domain.UpdateSpaceRequest) (domain.SpaceResult, error) {
	return call[domain.SpaceResult](ctx, &a.t, http.MethodPatch, spacePath(spaceID), nil, req)
}

// DeleteSpace starts deleting a space (DELETE /admin/v0/spaces/{space_id}): every token of it stops
// working at once, and its records and bytes are removed in the background. The result has state
// "deleting"; GetSpace shows "deleted" and what was removed once done.
func (a *Admin) DeleteSpace(ctx context.Context, spaceID string) (domain.SpaceResult, error) {
	return call[domain.SpaceResult](ctx, &a.t, http.MethodDelete, spacePath(spaceID), nil, nil)
}

// Backup asks the running embedded server for a consistent online copy of its data into dir, an absolute
// path on the server's host, absent or empty (POST /admin/v0/backup; `waypost serve` only). The result
// names dir, taken_at, objects, object_bytes and duration_ms (schema admin.backup.response).
func (a *Admin) Backup(ctx context.Context, dir string) (map[string]any, error) {
	return call[map[string]any](ctx, &a.t, http.MethodPost, "/admin/v0/backup", nil, map[string]string{"dir": dir})
}

// Stats counts the stages of everything in a space (GET /admin/v0/spaces/{space_id}/stats); maxScan
// bounds the records read (0: the server's default).
func (a *Admin) Stats(ctx context.Context, spaceID string, maxScan int) (domain.SpaceStats, error) {
	var q url.Values
	if maxScan > 0 {
		q = url.Values{"max_scan": {strconv.Itoa(maxScan)}}
	}
	return call[domain.SpaceStats](ctx, &a.t, http.MethodGet, spacePath(spaceID)+"/stats", q, nil)
}

// CreateActor adds an actor to a space (POST …/actors).
func (a *Admin) CreateActor(ctx context.Context, spaceID string, req domain.CreateActorRequest) (domain.ActorResult, error) {
	return call[domain.ActorResult](ctx, &a.t, http.MethodPost, spacePath(spaceID)+"/actors", nil, req)
}

// RevokeActor revokes an actor and so every credential of it (POST …/actors/{actor_id}/revoke).
func (a *Admin) RevokeActor(ctx context.Context, spaceID, actorID string) (domain.ActorResult, error) {
	return call[domain.ActorResult](ctx, &a.t, http.MethodPost, spacePath(spaceID)+"/actors/"+seg(actorID)+"/revoke", nil, emptyBody{})
}

// CreateConsumer creates a consumer of an actor with a view and a fixed filter (POST …/consumers).
func (a *Admin) CreateConsumer(ctx context.Context, spaceID string, req domain.CreateConsumerRequest) (domain.ConsumerResult, error) {
	req.Filter = normalizedFilter(req.Filter)
	return call[domain.ConsumerResult](ctx, &a.t, http.MethodPost, spacePath(spaceID)+"/consumers", nil, req)
}

// UpdateConsumer changes a consumer's view or filter and bumps its view_revision
// (PATCH …/consumers/{consumer_id}); old cursors then get CURSOR_SCOPE_CHANGED.
func (a *Admin) UpdateConsumer(ctx context.Context, spaceID, consumerID string, req domain.UpdateConsumerRequest) (domain.ConsumerResult, error) {
	req.Filter = normalizedFilter(req.Filter)
	return call[domain.ConsumerResult](ctx, &a.t, http.MethodPatch, spacePath(spaceID)+"/consumers/"+seg(consumerID), nil, req)
}

// CreateCollection creates an empty memory collection with an immutable scope text (POST …/collections).
func (a *Admin) CreateCollection(ctx context.Context, spaceID string, req domain.CreateCollectionRequest) (domain.CollectionResult, error) {
	return call[domain.CollectionResult](ctx, &a.t, http.MethodPost, spacePath(spaceID)+"/collections", nil, req)
}

// CreateGrant gives an actor a permission (POST …/grants).
func (a *Admin) CreateGrant(ctx context.Context, spaceID string, req domain.CreateGrantRequest) (domain.GrantResult, error) {
	return call[domain.GrantResult](ctx, &a.t, http.MethodPost, spacePath(spaceID)+"/grants", nil, req)
}

// RevokeGrant revokes a grant (POST …/grants/{grant_id}/revoke).
func (a *Admin) RevokeGrant(ctx context.Context, spaceID, grantID string) (domain.GrantResult, error) {
	return call[domain.GrantResult](ctx, &a.t, http.MethodPost, spacePath(spaceID)+"/grants/"+seg(grantID)+"/revoke", nil, emptyBody{})
}

// CreateToken issues a data-plane bearer token (POST …/tokens). The secret is in the result's Token only
// this once; a replay of the same request_id returns the token_id without it.
func (a *Admin) CreateToken(ctx context.Context, spaceID string, req domain.CreateTokenRequest) (domain.TokenResult, error) {
	return call[domain.TokenResult](ctx, &a.t, http.MethodPost, spacePath(spaceID)+"/tokens", nil, req)
}

// RevokeToken revokes a token (POST …/tokens/{token_id}/revoke).
func (a *Admin) RevokeToken(ctx context.Context, spaceID, tokenID string) (domain.TokenResult, error) {
	return call[domain.TokenResult](ctx, &a.t, http.MethodPost, spacePath(spaceID)+"/tokens/"+seg(tokenID)+"/revoke", nil, emptyBody{})
}

// RotateToken replaces a token's secret, keeping its ID, actor, consumer and scopes
// (POST …/tokens/{token_id}/rotate). The new secret is in the result's Token.
func (a *Admin) RotateToken(ctx context.Context, spaceID, tokenID string) (domain.TokenResult, error) {
	return call[domain.TokenResult](ctx, &a.t, http.MethodPost, spacePath(spaceID)+"/tokens/"+seg(tokenID)+"/rotate", nil, emptyBody{})
}
