package server

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/waypost/waypost/api/adminauth"
	"github.com/waypost/waypost/api/boundary"
	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/schemas"
)

// backupRequest is the body of POST /admin/v0/backup.
type backupRequest struct {
	RequestID string `json:"request_id,omitempty"`
	Dir       string `json:"dir"`
}

// backupHandler serves POST /admin/v0/backup (this server only: the AWS deployment is backed up by
// DynamoDB point-in-time recovery and S3 versioning) with the admin secret, in the RFC §5.2 envelope.
func (s *Server) backupHandler(admin *adminauth.Verifier, reg *schemas.Registry) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rid := s.ids.NewID("rq")
		answer := func(status int, data any, err error) {
			env := map[string]any{"ok": err == nil, "request_id": rid}
			if err != nil {
				wire := domain.AsError(err).Wire()
				env["error"], status = wire, domain.AsError(err).Code.HTTPStatus()
				if wire.Code == domain.CodeUnauthenticated {
					w.Header().Set("WWW-Authenticate", `Bearer realm="waypost"`)
				}
			} else {
				env["data"] = data
			}
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			w.Header().Set("Cache-Control", "no-store")
			w.WriteHeader(status)
			_ = json.NewEncoder(w).Encode(env)
		}
		if tok := boundary.Bearer(r.Header); admin == nil || tok == "" || !admin.Matches(tok) {
			answer(0, nil, domain.Errorf(domain.CodeUnauthenticated, "missing or wrong admin secret"))
			return
		}
		raw, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
		if err != nil {
			answer(0, nil, domain.Errorf(domain.CodeInvalidRequest, "reading the request body: %v", err))
			return
		}
		var req backupRequest
		if id, err := boundary.DecodeRequest(raw, func(doc any) error { return reg.ValidateDoc("admin.backup.request", doc) }, &req); err != nil {
			if id != "" {
				rid = id
			}
			answer(0, nil, err)
			return
		}
		if req.RequestID != "" {
			rid = req.RequestID
		}
		res, err := s.Backup(r.Context(), req.Dir)
		switch {
		case errors.Is(err, ErrBackupTarget):
			err = domain.Errorf(domain.CodeInvalidRequest, "%v", err).WithDetails("field", "dir")
		case err != nil:
			s.cfg.Logger.Error("backup failed", "request_id", rid, "error", err.Error())
			err = domain.Errorf(domain.CodeInternal, "the backup failed; the server log has the cause (request %s)", rid)
		}
		answer(http.StatusOK, res, err)
	})
}
