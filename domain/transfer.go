package domain

import (
	"archive/zip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/waypost/waypost/domain/port"
)

// Direct transfer between clients and the blob store (issue 17).
//
// When the blob store offers port.BlobPresigner, the bytes of blobs never pass through the service:
//
//   - blob.prepare answers an upload_url that is a presigned, create-only PUT of exactly the declared size
//     and SHA-256 at the blob's one object key, expiring with the upload (its upload_headers must be sent as
//     given: they are signed). It is signed when answered, never stored, so a replayed prepare signs again.
//     The service's own upload route keeps working for clients that build it from upload_id.
//   - blob.commit seals only after the store's Head shows exactly the declared size and SHA-256 (on S3 the
//     checksum S3 verified itself), re-checking the caller's authorization in the sealing transaction.
//   - blob.get answers a short-lived presigned GET as download_url (DownloadLinkTTL), and the content route
//     redirects to one (BlobDownloadLink), both after the authorization check.
//   - A ZIP export is written to the store as an export object (port.BlobStreamer) and served by a
//     presigned GET the same way (ExportZipLink), so no response of the service carries it.
//
// Without the capability (the embedded file store) every byte travels through the service's routes.

// DownloadLinkTTL is how long a presigned download link (blob.get's download_url, the content and ZIP
// export redirects) works. A download that started before it expires runs to its end.
const DownloadLinkTTL = 15 * time.Minute

// ExportContentType is the media type of a ZIP export.
const ExportContentType = "application/zip"

// DownloadLink is a short-lived direct download from the blob store: a plain GET of URL, without the
// service's credentials.
type DownloadLink struct {
	URL       string    `json:"url"`
	ExpiresAt time.Time `json:"expires_at"`
}

// presigner returns the blob store's presigning capability, or nil.
func (s *Service) presigner() port.BlobPresigner {
	p, _ := s.blobs.(port.BlobPresigner)
	return p
}

// presignUpload turns a pending upload's result into a presigned PUT when the store offers one. An upload
// whose time passed keeps the service's route, which answers UPLOAD_EXPIRED.
func (s *Service) presignUpload(ctx context.Context, spaceID string, res BlobPrepareResult) (BlobPrepareResult, error) {
	ps := s.presigner()
	if ps == nil || res.State != BlobPending || !s.clock.Now().Before(res.ExpiresAt.Add(-time.Second)) {
		return res, nil
	}
	req, err := ps.PresignPut(ctx, blobObjectKey(spaceID, res.BlobID), res.SizeBytes, res.SHA256, res.UploadHeaders["Content-Type"], res.ExpiresAt)
	if errors.Is(err, port.ErrPresignExpiry) {
		return res, nil // expired by the store's clock: the route answers UPLOAD_EXPIRED
	}
	if err != nil {
		return BlobPrepareResult{}, fmt.Errorf("blob.prepare: presigning the upload: %w", err)
	}
	res.UploadURL, res.UploadMethod, res.UploadHeaders = req.URL, req.Method, req.Headers
	return res, nil
}

// presignDownload returns a presigned GET of a sealed blob, or ok false when the store offers none.
func (s *Service) presignDownload(ctx context.Context, spaceID string, b blobRecord) (DownloadLink, bool, error) {
	ps := s.presigner()
	if ps == nil || b.State != BlobSealed {
		return DownloadLink{}, false, nil
	}
	return s.downloadLink(ctx, ps, "blob.get", blobObjectKey(spaceID, b.BlobID), b.ContentType, b.Filename)
}

// downloadLink presigns a GET of the object at key for DownloadLinkTTL. ok is false when the service's clock
// is behind the store's (port.ErrPresignExpiry): the caller then serves the bytes itself. what names the
// operation in an error.
func (s *Service) downloadLink(ctx context.Context, ps port.BlobPresigner, what, key, contentType, filename string) (DownloadLink, bool, error) {
	req, err := ps.PresignGet(ctx, key, contentType, filename, s.clock.Now().Add(DownloadLinkTTL))
	if errors.Is(err, port.ErrPresignExpiry) {
		return DownloadLink{}, false, nil
	}
	if err != nil {
		return DownloadLink{}, false, fmt.Errorf("%s: presigning the download: %w", what, err)
	}
	return DownloadLink{URL: req.URL, ExpiresAt: req.ExpiresAt}, true, nil
}

// BlobDownloadLink authorizes a download of a sealed blob (as OpenBlob) and, when the blob store offers
// direct transfer, returns a short-lived presigned GET of its bytes with the blob's metadata; ok is false
// when the bytes must be served through OpenBlob.
func (s *Service) BlobDownloadLink(ctx context.Context, p *Principal, blobID string) (DownloadLink, BlobInfo, bool, error) {
	if s.presigner() == nil {
		return DownloadLink{}, BlobInfo{}, false, nil
	}
	b, err := s.readableBlob(ctx, p, blobID)
	if err != nil {
		return DownloadLink{}, BlobInfo{}, false, err
	}
	if b.State != BlobSealed {
		return DownloadLink{}, BlobInfo{}, false, Errorf(CodeBlobNotSealed, "the blob is not sealed").WithDetails("blob_id", blobID)
	}
	link, ok, err := s.presignDownload(ctx, p.SpaceID, b)
	return link, b.info(), ok, err
}

// WriteExportZip writes the ZIP export of ex (capability server_export) to w: manifest.json, README.md and
// every item's bytes at its path under files/. It never includes credentials. An item that cannot be read
// ends the archive early with an error, so a client never takes a truncated ZIP for a whole one.
func (s *Service) WriteExportZip(ctx context.Context, p *Principal, ex MemoryExport, w io.Writer) error {
	zw := zip.NewWriter(w)
	f, err := zw.Create("manifest.json")
	if err == nil {
		enc := json.NewEncoder(f)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		err = enc.Encode(ex)
	}
	if err == nil {
		if f, err = zw.Create("README.md"); err == nil {
			_, err = io.WriteString(f, ExportMarkdown(ex))
		}
	}
	if err != nil {
		return fmt.Errorf("export: writing the index: %w", err)
	}
	for _, it := range ex.Items {
		rc, _, err := s.OpenBlob(ctx, p, it.BlobID)
		if err != nil {
			return fmt.Errorf("export: opening item %s: %w", it.ItemID, err)
		}
		f, err := zw.Create("files/" + it.Path)
		if err == nil {
			_, err = io.Copy(f, rc)
		}
		rc.Close()
		if err != nil {
			return fmt.Errorf("export: writing item %s: %w", it.ItemID, err)
		}
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("export: finishing the archive: %w", err)
	}
	return nil
}

// ExportZipLink writes the ZIP export of ex (built by ExportMemory for p) to the blob store as an export
// object and returns a short-lived presigned GET of it, when the store offers direct transfer and streamed
// puts; ok is false when the ZIP must be written to the response with WriteExportZip. Export objects live
// under exports/<space>/ and are removed by the store's retention (on AWS, a lifecycle rule of one day).
func (s *Service) ExportZipLink(ctx context.Context, p *Principal, ex MemoryExport) (DownloadLink, bool, error) {
	ps := s.presigner()
	st, ok := s.blobs.(port.BlobStreamer)
	if ps == nil || !ok {
		return DownloadLink{}, false, nil
	}
	key := exportObjectKey(p.SpaceID, s.ids.NewID("exp"))
	pr, pw := io.Pipe()
	written := make(chan error, 1)
	go func() {
		err := s.WriteExportZip(ctx, p, ex, pw)
		pw.CloseWithError(err) // nil closes cleanly: the store sees the end of the archive
		written <- err
	}()
	_, err := st.PutStream(ctx, key, ExportContentType, pr)
	pr.CloseWithError(errors.New("export: the store stopped reading")) // unblocks the writer after a failed put
	werr := <-written
	if err != nil {
		return DownloadLink{}, false, fmt.Errorf("export: storing the archive: %w", err)
	}
	if werr != nil {
		return DownloadLink{}, false, werr
	}
	// ok false (the service's clock is behind the store's): the caller streams the archive.
	return s.downloadLink(ctx, ps, "export", key, ExportContentType, fmt.Sprintf("%s-r%d.zip", ex.CollectionID, ex.Revision))
}
