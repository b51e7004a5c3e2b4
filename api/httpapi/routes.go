package httpapi

import (
	"fmt"
	"net/http"

	"github.com/waypost/waypost/api/ops"
	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/schemas"
)

// routes serves every operation of ops.List at its method and path: the data plane (SUPPLEMENT §11.1),
// the webhook subscriptions (RFC §12.3) and the control plane (SUPPLEMENT §11.3). An operation marked
// Stream is served by its handler below; one marked Embedded by the handler its deployment mounts; every
// other one by operation.
func (a *API) routes() error {
	streams := map[string]http.HandlerFunc{
		ops.Upload:       a.upload,
		ops.BlobContent:  a.blobContent,
		ops.MemoryExport: a.export,
		ops.SchemaList:   a.schemaList,
		ops.SchemaGet:    a.schemaGet,
		ops.OpenAPI:      a.openAPI,
	}
	a.opNames = make(map[string]string, len(a.ops.List()))
	for _, o := range a.ops.List() {
		a.opNames[o.Method+" "+o.Path] = o.Name
		if o.Embedded { // mounted by the deployment that serves it (package server)
			continue
		}
		h := a.operation(o)
		if o.Stream {
			if h = streams[o.Name]; h == nil {
				return fmt.Errorf("httpapi: no handler serves %s (%s %s)", o.Name, o.Method, o.Path)
			}
		}
		a.mux.HandleFunc(o.Method+" "+o.Path, h)
	}
	return nil
}

// operation serves o: the caller's credential, the request from the path and query or the body, the
// domain call, the envelope.
func (a *API) operation(o *ops.Op) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		rid, data, err := a.invoke(r, o)
		a.reply(w, r, o.Name, rid, data, err)
	}
}

func (a *API) invoke(r *http.Request, o *ops.Op) (string, any, error) {
	c, err := a.caller(r, o)
	if err != nil {
		return "", nil, err
	}
	req, rid, err := a.request(r, o)
	if err != nil {
		return rid, nil, err
	}
	data, err := o.Run(r.Context(), c, req)
	return rid, data, err
}

// caller authenticates a request for o's plane (before any body byte is read) and refuses a malformed ID
// in its path.
func (a *API) caller(r *http.Request, o *ops.Op) (ops.Call, error) {
	c := ops.Call{Svc: a.svc}
	var err error
	switch o.Plane {
	case ops.Data:
		c.P, err = a.principal(r)
	case ops.Admin:
		err = a.adminOK(r)
	}
	if err == nil {
		err = checkPathIDs(r)
	}
	return c, err
}

// request binds o's request: the JSON body for the methods with one, else the path and query parameters,
// checked against the operation's schema as the MCP arguments are. It returns the request_id of the body,
// which the envelope echoes.
func (a *API) request(r *http.Request, o *ops.Op) (any, string, error) {
	var raw []byte
	if o.HasBody() {
		var err error
		if raw, err = a.readRaw(r); err != nil {
			return nil, "", err
		}
	} else {
		raw = o.Params(r.PathValue, r.URL.Query())
	}
	req, rid, err := a.ops.Decode(o, raw, false, r.PathValue)
	if !o.EchoesRequestID() {
		rid = ""
	}
	return req, rid, err
}

func (a *API) schemaList(w http.ResponseWriter, r *http.Request) {
	a.ok(w, a.readID(), map[string]any{"version": schemas.Version, "names": a.ops.Schemas().Names()})
}

func (a *API) schemaGet(w http.ResponseWriter, r *http.Request) {
	raw, ok := a.ops.Schemas().Raw(r.PathValue("name"))
	if !ok {
		a.fail(w, r, a.readID(), domain.Errorf(domain.CodeNotFound, "no such schema"))
		return
	}
	w.Header().Set("Content-Type", "application/schema+json")
	_, _ = w.Write(raw)
}

// openAPI serves the OpenAPI 3.1 document of the operations (package openapi), generated once.
func (a *API) openAPI(w http.ResponseWriter, r *http.Request) {
	raw, err := a.doc.JSON()
	if err != nil {
		a.fail(w, r, a.readID(), fmt.Errorf("httpapi: generating the OpenAPI document: %w", err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(raw)
}
