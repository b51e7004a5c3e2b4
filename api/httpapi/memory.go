package httpapi

import (
	"fmt"
	"io"
	"net/http"

	"github.com/waypost/waypost/api/ops"
	"github.com/waypost/waypost/domain"
)

// export serves GET /v0/collections/{collection_id}/export: memory.export in the format asked for (json,
// the default: the envelope; markdown; zip: the archive, or a redirect to it).
func (a *API) export(w http.ResponseWriter, r *http.Request) {
	o := a.ops.Op(ops.MemoryExport)
	rid := a.readID()
	c, err := a.caller(r, o)
	if err != nil {
		a.fail(w, r, rid, err)
		return
	}
	format := r.URL.Query().Get("format")
	if format == "" {
		format = "json"
	}
	req, _, err := a.request(r, o)
	if err == nil && format != "json" && format != "markdown" && format != "zip" {
		err = domain.Errorf(domain.CodeInvalidRequest, "format must be json, markdown or zip").WithDetails("field", "format")
	}
	if err != nil {
		a.fail(w, r, rid, err)
		return
	}
	data, err := o.Run(r.Context(), c, req)
	if err != nil {
		a.fail(w, r, rid, err)
		return
	}
	ex := data.(domain.MemoryExport)
	switch format {
	case "json":
		a.ok(w, rid, ex)
	case "markdown":
		w.Header().Set("Content-Type", "text/markdown; charset=utf-8")
		_, _ = io.WriteString(w, domain.ExportMarkdown(ex))
	case "zip":
		a.writeExportZip(w, r, c.P, rid, ex)
	}
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
