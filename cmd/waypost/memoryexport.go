package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/waypost/waypost/client"
	"github.com/waypost/waypost/domain"
)

// Files written next to the exported items.
const (
	exportManifestName = "manifest.json"
	exportIndexName    = "INDEX.md"
)

// exportOutput is the --json output of memory export.
type exportOutput struct {
	CollectionID string `json:"collection_id"`
	Revision     int64  `json:"revision"`
	Items        int    `json:"items"`
	Tombstones   int    `json:"tombstones"`
	Bytes        int64  `json:"bytes"`
	Out          string `json:"out"`
}

func newMemoryExportCmd() *cobra.Command {
	c := &conn{}
	var coll, out string
	var revision int64
	var force bool
	var parallel int
	var prog progressFlag
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Write a collection revision to a directory: manifest.json, INDEX.md and every item at its path",
		Long: `Export one revision of a collection (the current one, or --revision N) into --out DIR: every item's
bytes at its path (forward slashes become directories), manifest.json (the service's structured export:
identity, source, revision, every item's blob, size, SHA-256 and metadata, the tombstones) and INDEX.md
(the same as Markdown). No credential is written.

Every file is downloaded to a temporary name, its size and SHA-256 checked against the manifest, then
renamed into place; manifest.json and INDEX.md are written last, so their presence means every item
was written and verified. Paths are confined to DIR: a path that would leave it (or go through a symbolic
link out of it) is refused, as is an item path that collides with manifest.json or INDEX.md.

DIR must be empty or absent unless --force, which overwrites the files at the exported paths and leaves
other files alone.`,
		Example: `  waypost memory export --collection project_notes --out ./project_notes
  waypost memory export --collection project_notes --revision 2 --out /tmp/r2 --force --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := need("collection", coll); err != nil {
				return err
			}
			if err := need("out", out); err != nil {
				return err
			}
			if err := prog.validate(); err != nil {
				return err
			}
			if parallel < 1 || parallel > 32 {
				return usagef("--parallel must be 1 to 32")
			}
			var rev *int64
			if cmd.Flags().Changed("revision") {
				if revision < 0 {
					return usagef("--revision must not be negative")
				}
				rev = &revision
			}
			if err := checkExportDir(out, force); err != nil {
				return err
			}
			cl, err := c.data()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			ex, err := cl.ExportMemory(ctx, coll, rev)
			if err != nil {
				return err
			}
			if err := checkExportPaths(ex); err != nil {
				return err
			}
			if err := os.MkdirAll(out, 0o755); err != nil {
				return fmt.Errorf("creating %s: %w", out, err)
			}
			root, err := os.OpenRoot(out)
			if err != nil {
				return fmt.Errorf("opening %s: %w", out, err)
			}
			defer root.Close()
			var total int64
			for _, it := range ex.Items {
				total += it.SizeBytes
			}
			stderr := cmd.ErrOrStderr()
			fmt.Fprintf(stderr, "collection %s, revision %d: %d item(s), %d bytes\n", ex.CollectionID, ex.Revision, len(ex.Items), total)
			m := prog.newMeter(stderr, total, "exporting")
			err = exportItems(ctx, cl, root, ex, parallel, m)
			m.finish()
			if err != nil {
				return err
			}
			if err := writeExportMeta(root, ex); err != nil {
				return err
			}
			abs, err := filepath.Abs(out)
			if err != nil {
				abs = out
			}
			res := exportOutput{CollectionID: ex.CollectionID, Revision: ex.Revision, Items: len(ex.Items), Tombstones: len(ex.Tombstones), Bytes: total, Out: abs}
			return c.show(cmd, res, func(w io.Writer) error {
				return fields(w, "collection_id", res.CollectionID, "revision", strconv.FormatInt(res.Revision, 10), "items", strconv.Itoa(res.Items),
					"tombstones", strconv.Itoa(res.Tombstones), "bytes", strconv.FormatInt(res.Bytes, 10), "out", res.Out)
			})
		},
	}
	f := cmd.Flags()
	c.addDataFlags(f)
	f.StringVar(&coll, "collection", "", "collection ID (required)")
	f.StringVar(&out, "out", "", "directory to write the export to (required)")
	f.Int64Var(&revision, "revision", 0, "revision to export (default: the current one)")
	f.BoolVar(&force, "force", false, "write into a non-empty directory, overwriting the exported paths")
	f.IntVar(&parallel, "parallel", 4, "items downloaded at the same time")
	prog.register(f)
	return withUsageErrors(cmd)
}

// checkExportDir accepts an absent or empty directory, or any directory with force.
func checkExportDir(dir string, force bool) error {
	fi, err := os.Stat(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return usagef("%v", err)
	}
	if !fi.IsDir() {
		return usagef("%s is not a directory", dir)
	}
	if force {
		return nil
	}
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("opening %s: %w", dir, err)
	}
	defer f.Close()
	if names, _ := f.Readdirnames(1); len(names) > 0 {
		return usagef("%s is not empty: pass --force to write into it", dir)
	}
	return nil
}

// checkExportPaths refuses item paths that would escape the export directory, collide with the files the
// export writes itself, or with each other (a file where another item needs a directory).
func checkExportPaths(ex domain.MemoryExport) error {
	files := make(map[string]bool, len(ex.Items))
	for _, it := range ex.Items {
		if err := checkMemoryPath(it.Path, 4096); err != nil || !filepath.IsLocal(filepath.FromSlash(it.Path)) {
			return fmt.Errorf("item %s: refusing path %q: it would leave the export directory", it.ItemID, it.Path)
		}
		if strings.EqualFold(it.Path, exportManifestName) || strings.EqualFold(it.Path, exportIndexName) {
			return fmt.Errorf("item %s: path %q collides with the export's own %s", it.ItemID, it.Path, it.Path)
		}
		if files[it.Path] {
			return fmt.Errorf("two items have the path %q", it.Path)
		}
		files[it.Path] = true
	}
	for p := range files {
		for dir := path.Dir(p); dir != "."; dir = path.Dir(dir) {
			if files[dir] {
				return fmt.Errorf("path %q is both an item and the directory of item %q", dir, p)
			}
		}
	}
	return nil
}

// exportItems downloads every item into root at its path, verified, with up to parallel downloads.
func exportItems(ctx context.Context, cl *client.Client, root *os.Root, ex domain.MemoryExport, parallel int, m *meter) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(parallel)
	for _, it := range ex.Items {
		g.Go(func() error { return exportItem(gctx, cl, root, it, m) })
	}
	return g.Wait()
}

func exportItem(ctx context.Context, cl *client.Client, root *os.Root, it domain.ExportItem, m *meter) error {
	name := filepath.FromSlash(it.Path)
	if dir := filepath.Dir(name); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("item %s: creating the directory of %s: %w", it.ItemID, it.Path, err)
		}
	}
	tmp, f, err := createTemp(root, name)
	if err != nil {
		return fmt.Errorf("item %s: %w", it.ItemID, err)
	}
	info := domain.BlobInfo{BlobID: it.BlobID, SHA256: it.SHA256, SizeBytes: it.SizeBytes}
	cw := &meterWriter{w: f, m: m}
	err = downloadBlob(ctx, cl, info, cw, nil)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("writing %s: %w", it.Path, cerr)
	}
	if err == nil {
		if err = root.Rename(tmp, name); err != nil {
			err = fmt.Errorf("moving %s into place: %w", it.Path, err)
		}
	}
	if err != nil {
		_ = root.Remove(tmp)
		m.add(-cw.n)
		return fmt.Errorf("item %s (%s): %w", it.ItemID, it.Path, err)
	}
	return nil
}

// meterWriter counts the bytes written through it on a meter.
type meterWriter struct {
	w io.Writer
	m *meter
	n int64
}

func (w *meterWriter) Write(p []byte) (int, error) {
	n, err := w.w.Write(p)
	w.n += int64(n)
	w.m.add(int64(n))
	return n, err
}

// createTemp creates a new temporary file next to name inside root.
func createTemp(root *os.Root, name string) (string, *os.File, error) {
	for range 10 {
		var b [6]byte
		if _, err := rand.Read(b[:]); err != nil {
			return "", nil, fmt.Errorf("random name: %w", err)
		}
		tmp := filepath.Join(filepath.Dir(name), "."+filepath.Base(name)+".part-"+hex.EncodeToString(b[:]))
		f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return "", nil, fmt.Errorf("creating a file for %s: %w", name, err)
		}
		return tmp, f, nil
	}
	return "", nil, fmt.Errorf("creating a file for %s: too many name collisions", name)
}

// writeExportMeta writes manifest.json and INDEX.md (after the items).
func writeExportMeta(root *os.Root, ex domain.MemoryExport) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(ex); err != nil {
		return fmt.Errorf("encoding %s: %w", exportManifestName, err)
	}
	for _, f := range []struct {
		name string
		data []byte
	}{{exportManifestName, buf.Bytes()}, {exportIndexName, []byte(domain.ExportMarkdown(ex))}} {
		if err := root.WriteFile(f.name, f.data, 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", f.name, err)
		}
	}
	return nil
}
