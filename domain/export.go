package domain

import (
	"fmt"
	"strings"
)

// ExportMarkdown renders an export for people: the collection's identity and source versions and one
// section per item. Metadata is shown as JSON; item bytes are referenced by path, never inlined.
func ExportMarkdown(ex MemoryExport) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Collection %s, revision %d\n\n", ex.CollectionID, ex.Revision)
	fmt.Fprintf(&b, "- Scope: %s\n- Source actor: %s\n- Space: %s (%s)\n- Exported at: %s\n- Format: %s\n\n",
		oneLine(ex.Scope), ex.SourceActorID, ex.SpaceID, ex.SourceURI, ex.ExportedAt.Format("2006-01-02T15:04:05Z"), ex.FormatVersion)
	fmt.Fprintf(&b, "## Items (%d)\n\n", len(ex.Items))
	for _, it := range ex.Items {
		fmt.Fprintf(&b, "### %s\n\n- Item: `%s`, written in revision %d\n- Blob: `%s` (%d bytes, %s, sha256 %s)\n",
			it.Path, it.ItemID, it.Revision, it.BlobID, it.SizeBytes, it.ContentType, it.SHA256)
		if len(it.Metadata) > 2 {
			fmt.Fprintf(&b, "- Metadata: `%s`\n", it.Metadata)
		}
		b.WriteString("\n")
	}
	if len(ex.Tombstones) > 0 {
		fmt.Fprintf(&b, "## Deleted (%d)\n\n", len(ex.Tombstones))
		for _, t := range ex.Tombstones {
			fmt.Fprintf(&b, "- %s (`%s`), deleted in revision %d\n", t.Path, t.ItemID, t.DeletedInRevision)
		}
	}
	return b.String()
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
