package httpapi

import (
	"encoding/base64"
	"encoding/hex"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/waypost/waypost/api/ops"
	"github.com/waypost/waypost/domain"
)

// upload streams the body of PUT /v0/uploads/{upload_id}/content to the blob store, never buffered whole:
// at most max_blob_bytes+1 bytes are read, at no less than the minimum upload rate.
func (a *API) upload(w http.ResponseWriter, r *http.Request) {
	c, err := a.caller(r, a.ops.Op(ops.Upload))
	if err != nil {
		a.fail(w, r, a.readID(), err)
		return
	}
	a.streamBody(r)
	body := http.MaxBytesReader(nil, r.Body, a.svc.Limits().MaxBlobBytes+1)
	res, err := a.svc.Upload(r.Context(), c.P, r.PathValue("upload_id"), r.Header.Get("Content-Type"), r.ContentLength, body)
	a.reply(w, r, ops.Upload, "", res, err)
}

// blobContent serves GET /v0/blobs/{blob_id}/content: the bytes, or where the blob store transfers bytes
// directly (AWS) a redirect to a short-lived presigned GET, carrying the digest the client checks the bytes
// against.
func (a *API) blobContent(w http.ResponseWriter, r *http.Request) {
	c, err := a.caller(r, a.ops.Op(ops.BlobContent))
	if err != nil {
		a.fail(w, r, a.readID(), err)
		return
	}
	p := c.P
	link, info, direct, err := a.svc.BlobDownloadLink(r.Context(), p, r.PathValue("blob_id"))
	if err != nil {
		a.fail(w, r, a.readID(), err)
		return
	}
	if direct {
		setDigest(w.Header(), info.SHA256)
		redirect(w, link)
		return
	}
	rc, info, err := a.svc.OpenBlob(r.Context(), p, r.PathValue("blob_id"))
	if err != nil {
		a.fail(w, r, a.readID(), err)
		return
	}
	defer rc.Close()
	h := w.Header()
	h.Set("Content-Type", info.ContentType)
	// The bytes are the uploader's: a browser must neither sniff another type nor run them in this
	// origin (RFC §9; issue 14). Types it would render or run are downloads, never inline.
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "sandbox")
	h.Set("Content-Length", strconv.FormatInt(info.SizeBytes, 10))
	setDigest(h, info.SHA256)
	switch {
	case info.Filename != "":
		h.Set("Content-Disposition", `attachment; filename="`+sanitizeFilename(info.Filename)+`"`)
	case !inertType(info.ContentType):
		h.Set("Content-Disposition", "attachment")
	}
	w.WriteHeader(http.StatusOK)
	_, _ = io.Copy(w, rc)
}

// setDigest announces a blob's SHA-256 as its entity tag and as Repr-Digest (RFC 9530).
func setDigest(h http.Header, sha256hex string) {
	h.Set("ETag", `"`+sha256hex+`"`)
	if sum, err := hex.DecodeString(sha256hex); err == nil {
		h.Set("Repr-Digest", "sha-256=:"+base64.StdEncoding.EncodeToString(sum)+":")
	}
}

// redirect answers 302 Found to a presigned download, which no cache may keep (it expires).
func redirect(w http.ResponseWriter, link domain.DownloadLink) {
	w.Header().Set("Location", link.URL)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Expires", link.ExpiresAt.UTC().Format(http.TimeFormat))
	w.WriteHeader(http.StatusFound)
}

// inertType reports whether a browser shows content of this media type without rendering markup or running
// code (plain text, common raster images, audio, video, JSON, opaque bytes). Anything else — HTML, SVG, XML,
// scripts, PDF, unknown or malformed types — is served as an attachment.
func inertType(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	switch mt {
	case "text/plain", "image/png", "image/jpeg", "image/gif", "image/webp", "image/avif", "application/json",
		"application/octet-stream":
		return true
	}
	return strings.HasPrefix(mt, "audio/") || strings.HasPrefix(mt, "video/")
}

func sanitizeFilename(s string) string {
	out := make([]rune, 0, len(s))
	for _, r := range s {
		if r == '"' || r == '\\' || r < 0x20 || r > 0x7e {
			r = '_'
		}
		out = append(out, r)
	}
	return string(out)
}
