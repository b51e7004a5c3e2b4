package httpapi

import (
	"context"
	"net/http"
	"strconv"

	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/schemas"
)

// body decodes a request body of the named schema into a fresh T.
func body[T any](a *API, r *http.Request, schema string) (T, string, error) {
	var v T
	rid, err := a.readBody(r, schema, &v)
	return v, rid, err
}

func (a *API) routes() {
	m := a.mux
	// Data plane (SUPPLEMENT §11.1).
	m.HandleFunc("GET /v0/describe", a.data(func(ctx context.Context, r *http.Request, p *domain.Principal) (string, any, error) {
		res, err := a.svc.Describe(ctx, p)
		return "", res, err
	}))
	m.HandleFunc("GET /v0/status", a.data(func(ctx context.Context, r *http.Request, p *domain.Principal) (string, any, error) {
		q := r.URL.Query()
		res, err := a.svc.Status(ctx, p, q.Get("operation"), q.Get("request_id"))
		return "", res, err
	}))
	m.HandleFunc("POST /v0/messages", a.data(func(ctx context.Context, r *http.Request, p *domain.Principal) (string, any, error) {
		req, rid, err := body[domain.SendRequest](a, r, "message.send.request")
		if err != nil {
			return rid, nil, err
		}
		res, err := a.svc.SendMessage(ctx, p, req)
		return req.RequestID, res, err
	}))
	m.HandleFunc("GET /v0/messages/{message_id}", a.data(func(ctx context.Context, r *http.Request, p *domain.Principal) (string, any, error) {
		res, err := a.svc.GetMessage(ctx, p, r.PathValue("message_id"))
		return "", res, err
	}))
	m.HandleFunc("POST /v0/inbox/read", a.data(func(ctx context.Context, r *http.Request, p *domain.Principal) (string, any, error) {
		req, _, err := body[domain.ReadRequest](a, r, "inbox.read.request")
		if err != nil {
			return "", nil, err
		}
		res, err := a.svc.ReadInbox(ctx, p, req)
		return "", res, err
	}))
	m.HandleFunc("POST /v0/inbox/ack", a.data(func(ctx context.Context, r *http.Request, p *domain.Principal) (string, any, error) {
		req, rid, err := body[domain.AckRequest](a, r, "inbox.ack.request")
		if err != nil {
			return rid, nil, err
		}
		res, err := a.svc.Ack(ctx, p, req)
		return req.RequestID, res, err
	}))
	m.HandleFunc("GET /v0/feed/wait", a.data(func(ctx context.Context, r *http.Request, p *domain.Principal) (string, any, error) {
		q := r.URL.Query()
		req := domain.WaitRequest{ConsumerID: q.Get("consumer_id")}
		if !domain.ValidID(req.ConsumerID) {
			return "", nil, domain.Errorf(domain.CodeInvalidRequest, "consumer_id must match [A-Za-z0-9_-]{1,96}").WithDetails("field", "consumer_id")
		}
		if c := q.Get("cursor"); c != "" {
			req.Cursor = &c
		}
		var err error
		if req.TimeoutMS, err = queryInt(q.Get("timeout_ms"), 0); err != nil {
			return "", nil, domain.Errorf(domain.CodeInvalidRequest, "timeout_ms must be an integer").WithDetails("field", "timeout_ms")
		}
		if req.Limit, err = queryInt(q.Get("limit"), 0); err != nil {
			return "", nil, domain.Errorf(domain.CodeInvalidRequest, "limit must be an integer").WithDetails("field", "limit")
		}
		res, err := a.svc.WaitFeed(ctx, p, req)
		return "", res, err
	}))
	m.HandleFunc("GET /v0/schemas/{name}", func(w http.ResponseWriter, r *http.Request) {
		raw, ok := a.schemas.Raw(r.PathValue("name"))
		if !ok {
			a.fail(w, r, a.readID(), domain.Errorf(domain.CodeNotFound, "no such schema"))
			return
		}
		w.Header().Set("Content-Type", "application/schema+json")
		_, _ = w.Write(raw)
	})
	m.HandleFunc("GET /v0/schemas", func(w http.ResponseWriter, r *http.Request) {
		a.ok(w, a.readID(), map[string]any{"version": schemas.Version, "names": a.schemas.Names()})
	})

	// Control plane (SUPPLEMENT §11.3).
	const sp = "/admin/v0/spaces/{space_id}"
	m.HandleFunc("POST /admin/v0/spaces", a.adminHandler(func(ctx context.Context, r *http.Request) (string, any, error) {
		req, rid, err := body[domain.CreateSpaceRequest](a, r, "admin.space.create.request")
		if err != nil {
			return rid, nil, err
		}
		res, err := a.svc.CreateSpace(ctx, req)
		return req.RequestID, res, err
	}))
	m.HandleFunc("GET "+sp, a.adminHandler(func(ctx context.Context, r *http.Request) (string, any, error) {
		res, err := a.svc.GetSpace(ctx, r.PathValue("space_id"))
		return "", res, err
	}))
	m.HandleFunc("PATCH "+sp, a.adminHandler(func(ctx context.Context, r *http.Request) (string, any, error) {
		req, rid, err := body[domain.UpdateSpaceRequest](a, r, "admin.space.update.request")
		if err != nil {
			return rid, nil, err
		}
		res, err := a.svc.UpdateSpace(ctx, r.PathValue("space_id"), req)
		return req.RequestID, res, err
	}))
	m.HandleFunc("POST "+sp+"/actors", a.adminHandler(func(ctx context.Context, r *http.Request) (string, any, error) {
		req, rid, err := body[domain.CreateActorRequest](a, r, "admin.actor.create.request")
		if err != nil {
			return rid, nil, err
		}
		res, err := a.svc.CreateActor(ctx, r.PathValue("space_id"), req)
		return req.RequestID, res, err
	}))
	m.HandleFunc("POST "+sp+"/actors/{actor_id}/revoke", a.adminHandler(func(ctx context.Context, r *http.Request) (string, any, error) {
		req, rid, err := body[domain.ChangeRequest](a, r, "admin.empty.request")
		if err != nil {
			return rid, nil, err
		}
		res, err := a.svc.RevokeActor(ctx, r.PathValue("space_id"), r.PathValue("actor_id"), req)
		return req.RequestID, res, err
	}))
	m.HandleFunc("POST "+sp+"/consumers", a.adminHandler(func(ctx context.Context, r *http.Request) (string, any, error) {
		req, rid, err := body[domain.CreateConsumerRequest](a, r, "admin.consumer.create.request")
		if err != nil {
			return rid, nil, err
		}
		res, err := a.svc.CreateConsumer(ctx, r.PathValue("space_id"), req)
		return req.RequestID, res, err
	}))
	m.HandleFunc("PATCH "+sp+"/consumers/{consumer_id}", a.adminHandler(func(ctx context.Context, r *http.Request) (string, any, error) {
		req, rid, err := body[domain.UpdateConsumerRequest](a, r, "admin.consumer.update.request")
		if err != nil {
			return rid, nil, err
		}
		res, err := a.svc.UpdateConsumer(ctx, r.PathValue("space_id"), r.PathValue("consumer_id"), req)
		return req.RequestID, res, err
	}))
	m.HandleFunc("POST "+sp+"/collections", a.adminHandler(func(ctx context.Context, r *http.Request) (string, any, error) {
		req, rid, err := body[domain.CreateCollectionRequest](a, r, "admin.collection.create.request")
		if err != nil {
			return rid, nil, err
		}
		res, err := a.svc.CreateCollection(ctx, r.PathValue("space_id"), req)
		return req.RequestID, res, err
	}))
	m.HandleFunc("POST "+sp+"/grants", a.adminHandler(func(ctx context.Context, r *http.Request) (string, any, error) {
		req, rid, err := body[domain.CreateGrantRequest](a, r, "admin.grant.create.request")
		if err != nil {
			return rid, nil, err
		}
		res, err := a.svc.CreateGrant(ctx, r.PathValue("space_id"), req)
		return req.RequestID, res, err
	}))
	m.HandleFunc("POST "+sp+"/grants/{grant_id}/revoke", a.adminHandler(func(ctx context.Context, r *http.Request) (string, any, error) {
		req, rid, err := body[domain.ChangeRequest](a, r, "admin.empty.request")
		if err != nil {
			return rid, nil, err
		}
		res, err := a.svc.RevokeGrant(ctx, r.PathValue("space_id"), r.PathValue("grant_id"), req)
		return req.RequestID, res, err
	}))
	m.HandleFunc("POST "+sp+"/tokens", a.adminHandler(func(ctx context.Context, r *http.Request) (string, any, error) {
		req, rid, err := body[domain.CreateTokenRequest](a, r, "admin.token.create.request")
		if err != nil {
			return rid, nil, err
		}
		res, err := a.svc.CreateToken(ctx, r.PathValue("space_id"), req)
		return req.RequestID, res, err
	}))
	m.HandleFunc("POST "+sp+"/tokens/{token_id}/revoke", a.adminHandler(func(ctx context.Context, r *http.Request) (string, any, error) {
		req, rid, err := body[domain.ChangeRequest](a, r, "admin.empty.request")
		if err != nil {
			return rid, nil, err
		}
		res, err := a.svc.RevokeToken(ctx, r.PathValue("space_id"), r.PathValue("token_id"), req)
		return req.RequestID, res, err
	}))
	m.HandleFunc("POST "+sp+"/tokens/{token_id}/rotate", a.adminHandler(func(ctx context.Context, r *http.Request) (string, any, error) {
		req, rid, err := body[domain.ChangeRequest](a, r, "admin.empty.request")
		if err != nil {
			return rid, nil, err
		}
		res, err := a.svc.RotateToken(ctx, r.PathValue("space_id"), r.PathValue("token_id"), req)
		return req.RequestID, res, err
	}))
}

func queryInt(s string, def int) (int, error) {
	if s == "" {
		return def, nil
	}
	return strconv.Atoi(s)
}

// emptyRequest is the body of the redeliver call: empty, or an optional request_id.
type emptyRequest struct {
	RequestID string `json:"request_id,omitempty"`
}
