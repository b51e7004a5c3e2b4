package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/waypost/waypost/client"
	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/internal/testjson"
	"github.com/waypost/waypost/internal/testzip"
)

func rev(n int64) *int64 { return &n }

func TestMemoryPublishReadExport(t *testing.T) {
	t.Parallel()
	w := newRealWorld(t, nil)
	ctx := context.Background()
	files := map[string]string{"a.md": "alpha\n", "b/c.md": "charlie\n", "d.txt": "delta\n"}
	var items []domain.MemoryItemInput
	blobs := map[string]string{}
	for _, p := range []string{"a.md", "b/c.md", "d.txt"} {
		info := putBlob(t, w.writer, []byte(files[p]), "text/plain")
		blobs[p] = info.BlobID
		items = append(items, domain.MemoryItemInput{ItemID: "it_" + strings.NewReplacer("/", "_", ".", "_").Replace(p), BlobID: info.BlobID, Path: p})
	}
	snap := domain.MemoryPublishRequest{RequestID: "pub-1", ExpectedRevision: rev(0), Mode: domain.ModeSnapshot, Items: items}
	res, err := w.writer.PublishMemory(ctx, w.collectionID, snap)
	if err != nil {
		t.Fatal(err)
	}
	if res.Revision != 1 || !res.Changed || res.Upserted != 3 || res.SubmissionState != domain.StateCommitted {
		t.Fatalf("snapshot result: %+v", res)
	}
	if again, err := w.writer.PublishMemory(ctx, w.collectionID, snap); err != nil || again.Revision != 1 || again.CommittedAt != res.CommittedAt {
		t.Fatalf("replayed publish: %+v, %v", again, err)
	}
	if _, err := w.writer.PublishMemory(ctx, w.collectionID, domain.MemoryPublishRequest{RequestID: "pub-x", Mode: domain.ModeDelta}); err == nil {
		t.Fatal("a publish without expected_revision was sent")
	}
	// A new request on revision 0 is a conflict that names the current revision.
	_, err = w.writer.PublishMemory(ctx, w.collectionID, domain.MemoryPublishRequest{RequestID: "pub-stale", ExpectedRevision: rev(0), Mode: domain.ModeSnapshot, Items: items})
	var e *client.Error
	if !client.IsCode(err, domain.CodeRevisionConflict) || !errors.As(err, &e) || fmt.Sprint(e.Details["current_revision"]) != "1" {
		t.Fatalf("stale publish: %v, want REVISION_CONFLICT with current_revision 1", err)
	}
	// Delta: delete d.txt.
	res2, err := w.writer.PublishMemory(ctx, w.collectionID, domain.MemoryPublishRequest{RequestID: "pub-2", ExpectedRevision: rev(1),
		Mode: domain.ModeDelta, DeleteIDs: []string{"it_d_txt"}})
	if err != nil || res2.Revision != 2 || res2.Deleted != 1 {
		t.Fatalf("delta: %+v, %v", res2, err)
	}

	// Paging with limit 1, pinned to the revision of the first page (the reader is another actor).
	var ids []string
	got, err := w.reader.ReadAllMemory(ctx, w.collectionID, domain.MemoryReadRequest{Limit: 1}, func(p domain.MemoryPage) error {
		if len(p.Items) > 1 {
			return fmt.Errorf("page of %d items with limit 1", len(p.Items))
		}
		for _, it := range p.Items {
			ids = append(ids, it.ItemID)
		}
		return nil
	})
	if err != nil || got != 2 || !slices.Equal(ids, []string{"it_a_md", "it_b_c_md"}) {
		t.Fatalf("ReadAllMemory: revision %d, ids %v, %v", got, ids, err)
	}
	page, err := w.reader.ReadMemory(ctx, w.collectionID, domain.MemoryReadRequest{Revision: rev(2), IncludeTombstones: ptrTrue()})
	if err != nil || len(page.Items) != 3 || page.Items[2].State != "tombstone" || *page.Items[2].DeletedInRevision != 2 {
		t.Fatalf("read with tombstones: %+v, %v", page, err)
	}
	old, err := w.reader.ReadMemory(ctx, w.collectionID, domain.MemoryReadRequest{Revision: rev(1)})
	if err != nil || old.Revision != 1 || len(old.Items) != 3 {
		t.Fatalf("read of revision 1: %+v, %v", old, err)
	}
	first, err := w.reader.ReadMemory(ctx, w.collectionID, domain.MemoryReadRequest{Limit: 1})
	if err != nil || first.NextCursor == nil {
		t.Fatalf("first page: %+v, %v", first, err)
	}
	if _, err := w.reader.ReadMemory(ctx, w.collectionID, domain.MemoryReadRequest{Limit: 1, Cursor: first.NextCursor, Revision: rev(1)}); !client.IsCode(err, domain.CodeInvalidCursor) {
		t.Fatalf("cursor with another revision: %v, want INVALID_CURSOR", err)
	}

	// Export: JSON manifest, Markdown index and the server ZIP agree, and the bytes verify.
	ex, err := w.reader.ExportMemory(ctx, w.collectionID, nil)
	if err != nil || ex.Revision != 2 || len(ex.Items) != 2 || len(ex.Tombstones) != 1 || ex.CollectionID != w.collectionID {
		t.Fatalf("ExportMemory: %+v, %v", ex, err)
	}
	for _, it := range ex.Items {
		if it.SHA256 != sha([]byte(files[it.Path])) || it.BlobID != blobs[it.Path] {
			t.Fatalf("export item %+v does not match %q", it, files[it.Path])
		}
		if b := readContent(t, w.reader, it.BlobID); string(b) != files[it.Path] {
			t.Fatalf("reader's content of %s: %q", it.Path, b)
		}
	}
	ex1, err := w.reader.ExportMemory(ctx, w.collectionID, rev(1))
	if err != nil || ex1.Revision != 1 || len(ex1.Items) != 3 {
		t.Fatalf("export of revision 1: %+v, %v", ex1, err)
	}
	md, err := w.reader.ExportMemoryMarkdown(ctx, w.collectionID, rev(2))
	if err != nil || !strings.Contains(md, "revision 2") || !strings.Contains(md, "b/c.md") || !strings.Contains(md, "d.txt") {
		t.Fatalf("markdown export: %q, %v", md, err)
	}
	rc, err := w.reader.OpenMemoryExportZip(ctx, w.collectionID, nil)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	inZip := map[string]string{}
	for name, b := range testzip.Entries(t, raw) {
		inZip[name] = string(b)
	}
	if inZip["files/a.md"] != files["a.md"] || inZip["files/b/c.md"] != files["b/c.md"] || inZip["manifest.json"] == "" || len(inZip) != 4 {
		t.Fatalf("zip entries: %v", inZip)
	}
	if _, err := w.reader.ExportMemory(ctx, "no_such_collection", nil); !client.IsCode(err, domain.CodeNotFound) {
		t.Fatalf("export of an absent collection: %v", err)
	}
	if _, err := w.reader.ExportMemoryMarkdown(ctx, w.collectionID, rev(9)); !client.IsCode(err, domain.CodeNotFound) {
		t.Fatalf("markdown export of an absent revision: %v", err)
	}
}

// TestMemoryManifestPublish publishes more than the inline limit through a manifest blob.
func TestMemoryManifestPublish(t *testing.T) {
	t.Parallel()
	w := newRealWorld(t, nil)
	ctx := context.Background()
	blob := putBlob(t, w.writer, []byte("same bytes"), "text/plain")
	var m struct {
		Items     []domain.MemoryItemInput `json:"items"`
		DeleteIDs []string                 `json:"delete_ids"`
	}
	m.DeleteIDs = []string{}
	for i := range 600 {
		m.Items = append(m.Items, domain.MemoryItemInput{ItemID: fmt.Sprintf("it_%04d", i), BlobID: blob.BlobID, Path: fmt.Sprintf("dir/%04d.txt", i)})
	}
	raw := testjson.Marshal(t, m)
	manifest := putBlob(t, w.writer, raw, "application/json")
	inline := domain.MemoryPublishRequest{RequestID: "inline", ExpectedRevision: rev(0), Mode: domain.ModeSnapshot, Items: m.Items}
	if _, err := w.writer.PublishMemory(ctx, w.collectionID, inline); !client.IsCode(err, domain.CodeResourceLimit, domain.CodeInvalidRequest, domain.CodePayloadTooLarge) {
		t.Fatalf("600 inline changes: %v, want a limit error", err)
	}
	res, err := w.writer.PublishMemory(ctx, w.collectionID, domain.MemoryPublishRequest{RequestID: "manifest", ExpectedRevision: rev(0),
		Mode: domain.ModeSnapshot, ManifestBlobID: manifest.BlobID})
	if err != nil || res.Upserted != 600 || res.Revision != 1 {
		t.Fatalf("manifest publish: %+v, %v", res, err)
	}
	n := 0
	if _, err := w.writer.ReadAllMemory(ctx, w.collectionID, domain.MemoryReadRequest{Limit: 500}, func(p domain.MemoryPage) error {
		for _, it := range p.Items {
			if want := fmt.Sprintf("it_%04d", n); it.ItemID != want {
				return fmt.Errorf("item %d is %s, want %s", n, it.ItemID, want)
			}
			n++
		}
		return nil
	}); err != nil || n != 600 {
		t.Fatalf("read back %d items: %v", n, err)
	}
}

func ptrTrue() *bool { t := true; return &t }
