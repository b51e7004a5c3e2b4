package client

import (
	"context"
	"net/http"

	"github.com/waypost/waypost/domain"
)

// ListSpaces lists the deployment's spaces that are not deleted (GET /admin/v0/spaces).
func (a *Admin) ListSpaces(ctx context.Context) (domain.SpaceList, error) {
	return callList(ctx, &a.t, http.MethodGet, "/admin/v0/spaces", nil, nil,
		func(l *domain.SpaceList) *[]domain.SpaceResult { return &l.Spaces })
}

// ListActors lists a space's actors, revoked ones marked (GET …/actors).
func (a *Admin) ListActors(ctx context.Context, spaceID string) (domain.ActorList, error) {
	return callList(ctx, &a.t, http.MethodGet, spacePath(spaceID)+"/actors", nil, nil,
		func(l *domain.ActorList) *[]domain.ActorResult { return &l.Actors })
}

// ListConsumers lists a space's consumers (GET …/consumers).
func (a *Admin) ListConsumers(ctx context.Context, spaceID string) (domain.ConsumerList, error) {
	return callList(ctx, &a.t, http.MethodGet, spacePath(spaceID)+"/consumers", nil, nil,
		func(l *domain.ConsumerList) *[]domain.ConsumerResult { return &l.Consumers })
}

// ListTokens lists a space's tokens without secrets, revoked ones marked; a token issued through OAuth names
// its client (GET …/tokens).
func (a *Admin) ListTokens(ctx context.Context, spaceID string) (domain.TokenList, error) {
	return callList(ctx, &a.t, http.MethodGet, spacePath(spaceID)+"/tokens", nil, nil,
		func(l *domain.TokenList) *[]domain.TokenResult { return &l.Tokens })
}

// ListOAuthClients lists the clients registered with the OAuth authorization server
// (GET /admin/v0/oauth/clients).
func (a *Admin) ListOAuthClients(ctx context.Context) (domain.OAuthClientList, error) {
	return callList(ctx, &a.t, http.MethodGet, "/admin/v0/oauth/clients", nil, nil,
		func(l *domain.OAuthClientList) *[]domain.OAuthClient { return &l.Clients })
}

// RevokeOAuthClient revokes an OAuth client and every token issued to it
// (POST /admin/v0/oauth/clients/{client_id}/revoke).
func (a *Admin) RevokeOAuthClient(ctx context.Context, clientID string) (domain.OAuthClient, error) {
	return call[domain.OAuthClient](ctx, &a.t, http.MethodPost, "/admin/v0/oauth/clients/"+seg(clientID)+"/revoke", nil, emptyBody{})
}
