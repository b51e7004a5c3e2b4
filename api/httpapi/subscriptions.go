package httpapi

import (
	"context"
	"net/http"

	"github.com/waypost/waypost/domain"
)

// subscriptionRoutes serves RFC §12.3 (webhook subscriptions, SUPPLEMENT §11.1) and the delivery records of
// the control plane (SUPPLEMENT §11.3). Without a webhook sender the domain answers UNSUPPORTED. The
// delivery secret of an upsert is never part of a response or a log line: results carry only mode and URL.
func (a *API) subscriptionRoutes() {
	m := a.mux
	m.HandleFunc("GET /v0/subscriptions", a.data(func(ctx context.Context, r *http.Request, p *domain.Principal) (string, any, error) {
		res, err := a.svc.ListSubscriptions(ctx, p)
		return "", res, err
	}))
	m.HandleFunc("POST /v0/subscriptions", a.data(func(ctx context.Context, r *http.Request, p *domain.Principal) (string, any, error) {
		req, rid, err := body[domain.UpsertSubscriptionRequest](a, r, "subscription.upsert.request")
		if err != nil {
			return rid, nil, err
		}
		res, err := a.svc.UpsertSubscription(ctx, p, req)
		return req.RequestID, res, err
	}))
	m.HandleFunc("POST /v0/subscriptions/{subscription_id}/stop", a.data(func(ctx context.Context, r *http.Request, p *domain.Principal) (string, any, error) {
		req, rid, err := body[domain.StopSubscriptionRequest](a, r, "subscription.stop.request")
		if err != nil {
			return rid, nil, err
		}
		res, err := a.svc.StopSubscription(ctx, p, r.PathValue("subscription_id"), req)
		return req.RequestID, res, err
	}))

	const sp = "/admin/v0/spaces/{space_id}"
	m.HandleFunc("GET "+sp+"/deliveries", a.adminHandler(func(ctx context.Context, r *http.Request) (string, any, error) {
		res, err := a.svc.ListDeliveries(ctx, r.PathValue("space_id"), r.URL.Query().Get("state"))
		return "", res, err
	}))
	m.HandleFunc("POST "+sp+"/deliveries/{delivery_id}/redeliver", a.adminHandler(func(ctx context.Context, r *http.Request) (string, any, error) {
		if _, rid, err := body[emptyRequest](a, r, "admin.empty.request"); err != nil {
			return rid, nil, err
		}
		res, err := a.svc.Redeliver(ctx, r.PathValue("space_id"), r.PathValue("delivery_id"))
		return "", res, err
	}))
}
