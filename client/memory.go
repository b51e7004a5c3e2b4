package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/waypost/waypost/domain"
)

// Memory collections (RFC §10).

func collectionPath(collectionID string) string { return "/v0/collections/" + seg(collectionID) }

// PublishMemory publishes the next revision of a collection (POST /v0/collections/{collection_id}/revisions,
// memory.publish). req.RequestID and req.ExpectedRevision must be set; changes come inline (Items,
// DeleteIDs, at most memory_inline_changes_max) or as ManifestBlobID. A retry with the same request returns
// the original result even when the head moved since; a new request on an old revision is
// REVISION_CONFLICT with details.current_revision.
func (c *Client) PublishMemory(ctx context.Context, collectionID string, req domain.MemoryPublishRequest) (domain.MemoryPublishResult, error) {
	if req.ExpectedRevision == nil {
		return domain.MemoryPublishResult{}, fmt.Errorf("client: memory.publish %s: expected_revision is required", collectionID)
	}
	return call[domain.MemoryPublishResult](ctx, &c.t, http.MethodPost, collectionPath(collectionID)+"/revisions", nil, req)
}

// ReadMemory returns one page of a collection's entries in item-ID order
// (GET /v0/collections/{collection_id}/items, memory.read). Without cursor and revision it reads the head
// and returns the actual revision; pass the returned NextCursor (and no other revision) to read the next
// page of the same revision.
func (c *Client) ReadMemory(ctx context.Context, collectionID string, req domain.MemoryReadRequest) (domain.MemoryPage, error) {
	q := url.Values{}
	if req.Revision != nil {
		q.Set("revision", strconv.FormatInt(*req.Revision, 10))
	}
	if req.Limit != 0 {
		q.Set("limit", strconv.Itoa(req.Limit))
	}
	if req.Cursor != nil && *req.Cursor != "" {
		q.Set("cursor", *req.Cursor)
	}
	if req.IncludeTombstones != nil {
		q.Set("include_tombstones", strconv.FormatBool(*req.IncludeTombstones))
	}
	return callList(ctx, &c.t, http.MethodGet, collectionPath(collectionID)+"/items", q, nil,
		func(p *domain.MemoryPage) *[]domain.MemoryEntry { return &p.Items })
}

// ReadAllMemory pages through one whole revision of a collection (head when req.Revision is nil), calling
// fn with every page in order; every page after the first is pinned to the first page's revision by the
// cursor. req.Cursor is ignored. It returns the revision read.
func (c *Client) ReadAllMemory(ctx context.Context, collectionID string, req domain.MemoryReadRequest, fn func(domain.MemoryPage) error) (int64, error) {
	req.Cursor = nil
	for {
		page, err := c.ReadMemory(ctx, collectionID, req)
		if err != nil {
			return 0, err
		}
		if err := fn(page); err != nil {
			return page.Revision, err
		}
		if !page.HasMore {
			return page.Revision, nil
		}
		if page.NextCursor == nil || *page.NextCursor == "" {
			return page.Revision, &TransportError{Method: http.MethodGet, Path: collectionPath(collectionID) + "/items",
				Err: fmt.Errorf("page has_more without next_cursor")}
		}
		req.Cursor, req.Revision = page.NextCursor, nil
	}
}

func exportQuery(revision *int64, format string) url.Values {
	q := url.Values{"format": {format}}
	if revision != nil {
		q.Set("revision", strconv.FormatInt(*revision, 10))
	}
	return q
}

// ExportMemory returns the portable export manifest of a revision (head when revision is nil) of a
// collection (GET /v0/collections/{collection_id}/export, memory.export, format json): identity, source
// versions and every item's blob, size and SHA-256; the bytes are fetched with OpenBlobContent.
func (c *Client) ExportMemory(ctx context.Context, collectionID string, revision *int64) (domain.MemoryExport, error) {
	return call[domain.MemoryExport](ctx, &c.t, http.MethodGet, collectionPath(collectionID)+"/export", exportQuery(revision, "json"), nil)
}

// ExportMemoryMarkdown returns the human-readable Markdown index of an export (format markdown).
func (c *Client) ExportMemoryMarkdown(ctx context.Context, collectionID string, revision *int64) (string, error) {
	rc, err := c.openExport(ctx, collectionID, revision, "markdown", "text/markdown")
	if err != nil {
		return "", err
	}
	defer rc.Close()
	raw, err := io.ReadAll(io.LimitReader(rc, maxResponseBytes+1))
	if err != nil {
		return "", fmt.Errorf("client: reading the markdown export of %s: %w", collectionID, err)
	}
	if len(raw) > maxResponseBytes {
		return "", fmt.Errorf("client: the markdown export of %s is larger than %d bytes", collectionID, maxResponseBytes)
	}
	return string(raw), nil
}

// OpenMemoryExportZip opens the server-built ZIP export (format zip, capability server_export): manifest.json,
// README.md and the items under files/. It is streamed; a ZIP cut short by a failure does not open, so check
// the archive before trusting it. Close the reader when done. Where the deployment transfers bytes directly
// (AWS) the service answers with a redirect to the export object in its blob store, which is followed
// without the credential.
func (c *Client) OpenMemoryExportZip(ctx context.Context, collectionID string, revision *int64) (io.ReadCloser, error) {
	return c.openExport(ctx, collectionID, revision, "zip", "application/zip")
}

func (c *Client) openExport(ctx context.Context, collectionID string, revision *int64, format, accept string) (io.ReadCloser, error) {
	resp, err := c.t.stream(ctx, rawRequest{method: http.MethodGet, path: collectionPath(collectionID) + "/export",
		query: exportQuery(revision, format), accept: accept})
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}
