package httpapi

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/waypost/waypost/domain"
)

// memoryRoutes serves RFC §10: publish, read and export of memory collections.
func (a *API) memoryRoutes() {
	m := a.mux
	m.HandleFunc("POST /v0/collections/{collection_id}/revisions", a.data(func(ctx context.Context, r *http.Request, p *domain.Principal) (string, any, error) {
		req, rid, err := body[domain.MemoryPublishRequest](a, r, "memory.publish.request")
		if err != nil {
			return rid, nil, err
		}
		res, err := a.svc.PublishMemory(ctx, p, r.PathValue("collection_id"), req)
		return req.RequestID, res, err
	}))
	m.HandleFunc("GET /v0/collections/{collection_id}/items", a.data(func(ctx context.Context, r *http.Request, p *domain.Principal) (string, any, error) {
		q := r.URL.Query()
		req := domain.MemoryReadRequest{}
		var err error
		if req.Revision, err = queryInt64Ptr(q.Get("revision")); err != nil {
			return "", nil, domain.Errorf(domain.CodeInvalidRequest, "revision must be an integer").WithDetails("field", "revision")
		}
		if req.Limit, err = queryInt(q.Get("limit"), 0); err != nil {
			return "", nil, domain.Errorf(domain.CodeInvalidRequest, "limit must be an integer").WithDetails("field", "limit")
		}
		if c := q.Get("cursor"); c != "" {
			req.Cursor = &c
		}
		if v := q.Get("include_tombstones"); v != "" {
			b, err := queryBool(v)
			if err != nil {
				return "", nil, domain.Errorf(domain.CodeInvalidRequest, "include_tombstones must be true or false").WithDetails("field", "include_tombstones")
			}
			req.IncludeTombstones = &b
		}
		res, err := a.svc.ReadMemory(ctx, p, r.PathValue("collection_id"), req)
		return "", res, err
	}))
	m.HandleFunc("GET /v0/collections/{collection_id}/export", func(w http.ResponseWriter, r *http.Request) {
		rid := a.readID()
		p, err := a.principal(r)
		if err == nil {
			err = checkPathIDs(r)
		}
		if err != nil {
			a.fail(w, r, rid, err)
			return
		}
		rev, err := queryInt64Ptr(r.URL.Query().Get("revision"))
		if err != nil {
			a.fail(w, r, rid, domain.Errorf(domain.CodeInvalidRequest, "revision must be an integer").WithDetails("field", "revision"))
			return
		}
		format := r.URL.Query().Get("format")
		if format == "" {
			format = "json"
		}
		if format != "json" && format != "markdown" && format != "zip" {
			a.fail(w, r, rid, domain.Errorf(domain.CodeInvalidRequest, "format must be json, markdown or zip").WithDetails("field", "format"))
			return
		}
		ex, err := a.svc.ExportMemory(r.Context(), p, r.PathValue("collection_id"), rev)
		if err != nil {
			a.fail(w, r, rid, err)
			return
		}
		switch format {
		case "json":
			a.ok(w, rid, ex)
		case "markdown":
			w.Header().Set("Content-Type", "text/markdown; charset=utf-8")
			_, _ = io.WriteString(w, domain.ExportMarkdown(ex))
		case "zip":
			a.writeExportZip(w, r, p, rid, ex)
		}
	})
}

// writeExportZip answers the server ZIP export (capability server_export): a redirect to the export object
// where the blob store transfers bytes directly (AWS: no function response carries it), else the archive
// streamed in the response.
func (a *API) writeExportZip(w http.ResponseWriter, r *http.Request, p *domain.Principal, rid string, ex domain.MemoryExport) {
	link, direct, err := a.svc.ExportZipLink(r.Context(), p, ex)
	if err != nil {
		a.fail(w, r, rid, err)
		return
	}
	if direct {
		redirect(w, link)
		return
	}
	w.Header().Set("Content-Type", domain.ExportContentType)
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s-r%d.zip"`, ex.CollectionID, ex.Revision))
	if err := a.svc.WriteExportZip(r.Context(), p, ex, w); err != nil {
		// The response has begun: a truncated ZIP fails to open, so the client sees the failure.
		a.log.Error("export: writing the archive", "collection_id", ex.CollectionID, "error", err.Error())
	}
}

func queryInt64Ptr(s string) (*int64, error) {
	if s == "" {
		return nil, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return nil, err
	}
	return &n, nil
}

func queryBool(s string) (bool, error) {
	switch strings.ToLower(s) {
	case "", "false", "0":
		return false, nil
	case "true", "1":
		return true, nil
	}
	return false, fmt.Errorf("not a boolean: %q", s)
}
