package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/waypost/waypost/client"
	"github.com/waypost/waypost/domain"
)

func newMemoryCmd() *cobra.Command {
	cmd := group("memory", "Publish, read and export memory collections (source memory with revisions)",
		newMemoryPublishCmd(), newMemoryReadCmd(), newMemoryExportCmd())
	return withUsageErrors(cmd)
}

// publishStateFormat is the version of the publish state file.
const publishStateFormat = 1

// publishState remembers a publish whose outcome is not known yet, so that running the same publish
// again reuses its request ID and expected revision (and so cannot publish twice).
type publishState struct {
	Format           int    `json:"format"`
	CollectionID     string `json:"collection_id"`
	Mode             string `json:"mode"`
	ChangesDigest    string `json:"changes_digest"`
	RequestID        string `json:"request_id"`
	ExpectedRevision int64  `json:"expected_revision"`
}

// localFile is a file to publish: where it is, and its path in the collection.
type localFile struct {
	abs, rel string
	size     int64
}

// publishedItem is one item of a publish, for the output.
type publishedItem struct {
	ItemID   string `json:"item_id"`
	Path     string `json:"path"`
	BlobID   string `json:"blob_id"`
	Uploaded bool   `json:"uploaded"`
}

// publishOutput is the --json output of memory publish.
type publishOutput struct {
	domain.MemoryPublishResult
	RequestID        string          `json:"request_id"`
	ExpectedRevision int64           `json:"expected_revision"`
	ManifestBlobID   string          `json:"manifest_blob_id,omitempty"`
	Items            []publishedItem `json:"items"`
	DeleteIDs        []string        `json:"delete_ids"`
}

func newMemoryPublishCmd() *cobra.Command {
	c := &conn{}
	var coll, stateDir, requestID string
	var snapshot, delta, includeHidden, allowEmpty bool
	var expected int64
	var deletePaths []string
	var parallel int
	var prog progressFlag
	cmd := &cobra.Command{
		Use:   "publish DIR|FILE",
		Short: "Publish a directory (or one file) as the next revision of a collection",
		Long: `Publish the files under DIR (or one FILE) as items of a collection: every file becomes a sealed blob
(uploaded resumably, as 'waypost blob put' does) and an item whose path is the file's path relative to
DIR with forward slashes, and whose item_id is derived from that path (the same path always gives the same
item_id, so a later publish updates the item). Hidden files and directories (starting with '.') are
skipped unless --include-hidden; symbolic links and other special files are skipped.

--snapshot replaces the whole collection: items not in DIR get a tombstone. An empty snapshot clears the
collection and needs --allow-empty. --delta upserts the files of DIR and leaves every other item alone;
--delete-path PATH (repeatable) deletes the item of that path.

--expected-revision N is the revision the change is based on (compare-and-set); without it the current
revision is read just before publishing. A concurrent change makes the publish fail with
REVISION_CONFLICT, and nothing is published.

Up to memory_inline_changes_max changes (500 by default) are sent inline; more go through a manifest blob
(at most memory_manifest_changes_max, 10,000 by default). The publish request ID is printed on stderr and
kept in <state-dir>/publish/ until the outcome is known: running the same publish again after a failure
reuses it and its expected revision, so it is never published twice. Content that did not change keeps its
blob, so publishing an unchanged directory again answers changed: false.`,
		Example: `  waypost memory publish ./notes --collection project_notes --snapshot
  waypost memory publish ./notes --collection project_notes --delta --expected-revision 3
  waypost memory publish decisions.md --collection project_notes --delta
  waypost memory publish ./empty --collection project_notes --snapshot --allow-empty
  waypost memory publish ./notes --collection project_notes --delta --delete-path old/draft.md --json`,
		Args: exactArgs(1, "DIR or FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := need("collection", coll); err != nil {
				return err
			}
			if snapshot == delta {
				return usagef("give exactly one of --snapshot (replace the whole collection) or --delta (upsert)")
			}
			mode := domain.ModeDelta
			if snapshot {
				mode = domain.ModeSnapshot
			}
			if snapshot && len(deletePaths) > 0 {
				return usagef("--delete-path needs --delta (a snapshot deletes what it does not contain)")
			}
			expectedSet := cmd.Flags().Changed("expected-revision")
			if expectedSet && expected < 0 {
				return usagef("--expected-revision must not be negative")
			}
			if requestID != "" && !domain.ValidRequestID(requestID) {
				return usagef("--request-id must match [A-Za-z0-9_.:-]{1,128}")
			}
			if parallel < 1 || parallel > 32 {
				return usagef("--parallel must be 1 to 32")
			}
			if err := prog.validate(); err != nil {
				return err
			}
			dir, err := defaultStateDir(stateDir)
			if err != nil {
				return err
			}
			stderr := cmd.ErrOrStderr()
			files, err := collectFiles(args[0], includeHidden, stderr)
			if err != nil {
				return err
			}
			var deleteIDs []string
			for _, p := range deletePaths {
				p = strings.TrimPrefix(filepath.ToSlash(p), "./")
				if err := checkMemoryPath(p, 1024); err != nil {
					return usagef("--delete-path %q: %v", p, err)
				}
				deleteIDs = append(deleteIDs, itemIDForPath(p))
			}
			slices.Sort(deleteIDs)
			deleteIDs = slices.Compact(deleteIDs)
			if len(files) == 0 && len(deleteIDs) == 0 && (delta || !allowEmpty) {
				if delta {
					return usagef("nothing to publish: %s has no files and there is no --delete-path", args[0])
				}
				return usagef("%s has no files: an empty snapshot clears the collection; pass --allow-empty to do that", args[0])
			}
			cl, err := c.data()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			put, d, err := newBlobPutter(ctx, cl, dir, nil)
			if err != nil {
				return err
			}
			p := &publisher{cmd: cmd, c: c, cl: cl, put: put, limits: d.Limits, prog: &prog, parallel: parallel, stateDir: dir}
			return p.run(ctx, coll, mode, files, deleteIDs, expectedSet, expected, requestID)
		},
	}
	f := cmd.Flags()
	c.addDataFlags(f)
	f.StringVar(&coll, "collection", "", "collection ID (required)")
	f.BoolVar(&snapshot, "snapshot", false, "replace the whole collection with these files")
	f.BoolVar(&delta, "delta", false, "upsert these files, keep every other item")
	f.Int64Var(&expected, "expected-revision", 0, "revision the change is based on (default: the current revision)")
	f.StringArrayVar(&deletePaths, "delete-path", nil, "with --delta: delete the item of this path (repeatable)")
	f.BoolVar(&includeHidden, "include-hidden", false, "also publish files and directories whose name starts with '.'")
	f.BoolVar(&allowEmpty, "allow-empty", false, "allow an empty snapshot (it clears the collection)")
	f.StringVar(&requestID, "request-id", "", "idempotency key of the publish (default: the saved one of an unfinished run, else new)")
	f.StringVar(&stateDir, "state-dir", "", "where resumable upload and publish state is kept (default ~/.waypost)")
	f.IntVar(&parallel, "parallel", 4, "files uploaded at the same time")
	prog.register(f)
	return withUsageErrors(cmd)
}

// publisher runs one memory publish.
type publisher struct {
	cmd      *cobra.Command
	c        *conn
	cl       *client.Client
	put      *blobPutter
	limits   domain.Limits
	prog     *progressFlag
	parallel int
	stateDir string
}

func (p *publisher) run(ctx context.Context, coll, mode string, files []localFile, deleteIDs []string, expectedSet bool, expected int64, requestID string) error {
	stderr := p.cmd.ErrOrStderr()
	l := p.limits
	if n := len(files) + len(deleteIDs); n > l.MemoryManifestChangesMax {
		return fmt.Errorf("%d changes: the service accepts at most %d in one publish (memory_manifest_changes_max); split the collection", n, l.MemoryManifestChangesMax)
	}
	var total int64
	for _, f := range files {
		if err := checkMemoryPath(f.rel, l.MemoryPathBytes); err != nil {
			return fmt.Errorf("%s cannot be published: path %q: %w", f.abs, f.rel, err)
		}
		if f.size > l.MaxBlobBytes {
			return fmt.Errorf("%s has %d bytes; the service accepts at most %d (max_blob_bytes)", f.abs, f.size, l.MaxBlobBytes)
		}
		total += f.size
	}

	// 1. Hash every file: the identity of each blob.
	fmt.Fprintf(stderr, "%d file(s), %d bytes: hashing\n", len(files), total)
	srcs := make([]blobSource, len(files))
	hm := p.prog.newMeter(stderr, total, "hashing  ")
	for i, f := range files {
		src, err := fileSource(f.abs, "", hm)
		if err != nil {
			hm.finish()
			return err
		}
		src.name = f.rel
		srcs[i] = src
	}
	hm.finish()

	// 2. Upload (or resume, or reuse) one blob per file.
	fmt.Fprintf(stderr, "uploading with %d worker(s)\n", p.parallel)
	um := p.prog.newMeter(stderr, total, "uploading")
	// Files with the same content and name share one upload (and its state file).
	first := map[string]int{}
	for i, src := range srcs {
		if _, dup := first[p.put.statePath(src)]; !dup {
			first[p.put.statePath(src)] = i
		} else {
			um.add(src.size)
		}
	}
	results := make([]blobPutResult, len(srcs))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(p.parallel)
	for _, i := range first {
		g.Go(func() error {
			r, err := p.put.put(gctx, srcs[i], um)
			results[i] = r
			return err
		})
	}
	err := g.Wait()
	um.finish()
	if err != nil {
		return err
	}
	for i, src := range srcs {
		if j := first[p.put.statePath(src)]; j != i {
			results[i] = results[j]
			results[i].Reused = true
		}
	}
	out := publishOutput{Items: make([]publishedItem, len(files)), DeleteIDs: deleteIDs}
	uploaded := 0
	items := make([]domain.MemoryItemInput, len(files))
	for i, f := range files {
		r := results[i]
		up := !r.Reused && !r.AlreadyUploaded
		if up {
			uploaded++
		}
		items[i] = domain.MemoryItemInput{ItemID: itemIDForPath(f.rel), BlobID: r.Info.BlobID, Path: f.rel}
		out.Items[i] = publishedItem{ItemID: items[i].ItemID, Path: f.rel, BlobID: r.Info.BlobID, Uploaded: up}
	}
	fmt.Fprintf(stderr, "%d blob(s) uploaded, %d unchanged\n", uploaded, len(files)-uploaded)
	slices.SortFunc(items, func(a, b domain.MemoryItemInput) int { return strings.Compare(a.ItemID, b.ItemID) })
	for i := 1; i < len(items); i++ {
		if items[i].ItemID == items[i-1].ItemID {
			return fmt.Errorf("paths %q and %q give the same item_id", items[i-1].Path, items[i].Path)
		}
	}

	// 3. The change set: inline, or a manifest blob when it is too large for one request.
	req := domain.MemoryPublishRequest{Mode: mode, Items: items, DeleteIDs: deleteIDs}
	if req.Items == nil {
		req.Items = []domain.MemoryItemInput{}
	}
	if req.DeleteIDs == nil {
		req.DeleteIDs = []string{}
	}
	maxRev := int64(domain.MaxSafeInteger)
	probe, _ := json.Marshal(domain.MemoryPublishRequest{RequestID: strings.Repeat("x", 128), ExpectedRevision: &maxRev,
		Mode: mode, Items: req.Items, DeleteIDs: req.DeleteIDs})
	if n := len(items) + len(deleteIDs); n > l.MemoryInlineChangesMax || len(probe) > l.MaxRequestBytes-512 {
		raw, err := json.Marshal(map[string]any{"items": req.Items, "delete_ids": req.DeleteIDs})
		if err != nil {
			return fmt.Errorf("encoding the manifest: %w", err)
		}
		if int64(len(raw)) > l.MaxBlobBytes {
			return fmt.Errorf("the manifest has %d bytes; the service accepts blobs of at most %d", len(raw), l.MaxBlobBytes)
		}
		mres, err := p.put.put(ctx, bytesSource("manifest.json", raw, "application/json", "manifest.json"), nil)
		if err != nil {
			return fmt.Errorf("uploading the manifest: %w", err)
		}
		req = domain.MemoryPublishRequest{Mode: mode, ManifestBlobID: mres.Info.BlobID}
		out.ManifestBlobID = mres.Info.BlobID
		fmt.Fprintf(stderr, "publishing %d change(s) through manifest blob %s (%d bytes)\n", n, mres.Info.BlobID, len(raw))
	} else {
		fmt.Fprintf(stderr, "publishing %d change(s) inline\n", n)
	}

	// 4. The publish itself, with a request ID and expected revision kept until the outcome is known.
	digest := changesDigest(req)
	statePath := p.publishStatePath(coll)
	st, err := loadPublishState(statePath)
	if err != nil {
		return err
	}
	reuse := st != nil && st.CollectionID == coll && st.Mode == mode && st.ChangesDigest == digest &&
		(!expectedSet || st.ExpectedRevision == expected) && (requestID == "" || requestID == st.RequestID)
	if reuse {
		fmt.Fprintf(stderr, "resuming the unfinished publish of an earlier run (request_id %s, expected revision %d)\n", st.RequestID, st.ExpectedRevision)
	} else {
		st = &publishState{Format: publishStateFormat, CollectionID: coll, Mode: mode, ChangesDigest: digest, RequestID: requestID, ExpectedRevision: expected}
		if st.RequestID == "" {
			st.RequestID = client.NewRequestID()
		}
		if !expectedSet {
			page, err := p.cl.ReadMemory(ctx, coll, domain.MemoryReadRequest{Limit: 1})
			if err != nil {
				return fmt.Errorf("reading the current revision of %s: %w", coll, err)
			}
			st.ExpectedRevision = page.Revision
		}
		if err := saveJSONFile(statePath, st); err != nil {
			return err
		}
	}
	fmt.Fprintf(stderr, "request_id: %s (expected revision %d; to repeat this publish safely: --request-id %s --expected-revision %d)\n",
		st.RequestID, st.ExpectedRevision, st.RequestID, st.ExpectedRevision)
	req.RequestID, req.CollectionID, req.ExpectedRevision = st.RequestID, coll, &st.ExpectedRevision
	res, err := retryStep(ctx, stderr, "memory.publish", func() (domain.MemoryPublishResult, error) {
		return p.cl.PublishMemory(ctx, coll, req)
	})
	if err != nil {
		if !client.IsRetryable(err) { // a final answer: the saved state has served its purpose
			_ = os.Remove(statePath)
		}
		var e *client.Error
		if errors.As(err, &e) && e.Code == domain.CodeRevisionConflict {
			return fmt.Errorf("%w (the collection is at revision %v, not %d: check what changed, then publish again)", err,
				e.Details["current_revision"], st.ExpectedRevision)
		}
		return err
	}
	if err := os.Remove(statePath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("published, but removing %s failed: %w", statePath, err)
	}
	out.MemoryPublishResult, out.RequestID, out.ExpectedRevision = res, st.RequestID, st.ExpectedRevision
	w := p.cmd.OutOrStdout()
	if p.c.json {
		return printJSON(w, out)
	}
	return fields(w, "collection_id", res.CollectionID, "revision", strconv.FormatInt(res.Revision, 10), "changed", strconv.FormatBool(res.Changed),
		"upserted", strconv.Itoa(res.Upserted), "deleted", strconv.Itoa(res.Deleted), "items_sent", strconv.Itoa(len(files)),
		"manifest_blob_id", out.ManifestBlobID, "submission_state", string(res.SubmissionState), "visible_seq", orNone(res.VisibleSeq))
}

func (p *publisher) publishStatePath(coll string) string {
	return stateFile(p.stateDir, "publish", p.put.spaceID, p.put.actorID, coll)
}

func loadPublishState(path string) (*publishState, error) {
	raw, found, err := readStateFile(path, "publish state")
	if !found {
		return nil, err
	}
	var st publishState
	if json.Unmarshal(raw, &st) != nil || st.Format != publishStateFormat || !domain.ValidRequestID(st.RequestID) {
		return nil, nil
	}
	return &st, nil
}

// changesDigest identifies the content of a publish (mode and changes), not its request ID or base.
func changesDigest(req domain.MemoryPublishRequest) string {
	raw, _ := json.Marshal(map[string]any{"mode": req.Mode, "items": req.Items, "delete_ids": req.DeleteIDs, "manifest_blob_id": req.ManifestBlobID})
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])
}

// itemIDForPath derives a stable item_id from a collection path: a readable slug of the path and 96 bits
// of its SHA-256, within [A-Za-z0-9_-]{1,96}.
func itemIDForPath(p string) string {
	slug := make([]byte, 0, 48)
	for i := 0; i < len(p) && len(slug) < 48; i++ {
		switch ch := p[i]; {
		case 'a' <= ch && ch <= 'z', 'A' <= ch && ch <= 'Z', '0' <= ch && ch <= '9':
			slug = append(slug, ch)
		case len(slug) > 0 && slug[len(slug)-1] != '-':
			slug = append(slug, '-')
		}
	}
	s := strings.TrimRight(string(slug), "-")
	if s == "" {
		s = "item"
	}
	sum := sha256.Sum256([]byte(p))
	return s + "_" + hex.EncodeToString(sum[:12])
}

// checkMemoryPath applies the RFC §10.4 path rules: relative, forward slashes, no empty, "." or ".."
// segment, no backslash, no drive letter, at most max bytes.
func checkMemoryPath(p string, max int) error {
	switch {
	case p == "" || len(p) > max:
		return fmt.Errorf("a path must have 1 to %d bytes", max)
	case strings.HasPrefix(p, "/") || strings.ContainsAny(p, "\\\x00"):
		return errors.New("a path must be relative, without backslashes")
	case len(p) >= 2 && p[1] == ':':
		return errors.New("a path must not start with a drive letter")
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return errors.New("a path must not have an empty, '.' or '..' segment")
		}
	}
	return nil
}

// collectFiles lists the regular files to publish from a directory (recursively) or one file, sorted by
// their collection path.
func collectFiles(root string, includeHidden bool, log io.Writer) ([]localFile, error) {
	fi, err := os.Stat(root)
	if err != nil {
		return nil, usagef("%v", err)
	}
	if fi.Mode().IsRegular() {
		abs, err := filepath.Abs(root)
		if err != nil {
			return nil, fmt.Errorf("resolving %s: %w", root, err)
		}
		return []localFile{{abs: abs, rel: filepath.Base(abs), size: fi.Size()}}, nil
	}
	if !fi.IsDir() {
		return nil, usagef("%s is neither a directory nor a regular file", root)
	}
	var files []localFile
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("listing %s: %w", path, err)
		}
		if path != root && !includeHidden && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		if !d.Type().IsRegular() {
			fmt.Fprintf(log, "skipping %s: not a regular file\n", path)
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return fmt.Errorf("reading %s: %w", path, err)
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return fmt.Errorf("resolving %s: %w", path, err)
		}
		abs, err := filepath.Abs(path)
		if err != nil {
			return fmt.Errorf("resolving %s: %w", path, err)
		}
		files = append(files, localFile{abs: abs, rel: filepath.ToSlash(rel), size: info.Size()})
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(files, func(a, b localFile) int { return strings.Compare(a.rel, b.rel) })
	return files, nil
}

func newMemoryReadCmd() *cobra.Command {
	c := &conn{}
	var coll string
	var revision int64
	var tombstones bool
	var limit int
	cmd := &cobra.Command{
		Use:   "read",
		Short: "List every item of a collection revision (all pages, one revision)",
		Long: `List the items of a collection in item_id order: the current revision, or --revision N. Every page is
read (--limit items at a time) and pinned to the revision of the first page, so the list is one consistent
state even while others publish. --tombstones also lists the deleted items of that revision.

Each line shows item_id, path, blob_id and the revision the item was last written in; fetch an item's
bytes with 'waypost blob get BLOB_ID -o FILE', or everything with 'waypost memory export'.`,
		Example: `  waypost memory read --collection project_notes
  waypost memory read --collection project_notes --revision 2 --tombstones
  waypost memory read --collection project_notes --json | jq -r '.items[].path'`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := need("collection", coll); err != nil {
				return err
			}
			if limit < 1 {
				return usagef("--limit must be positive")
			}
			req := domain.MemoryReadRequest{Limit: limit}
			if tombstones {
				req.IncludeTombstones = &tombstones
			}
			if cmd.Flags().Changed("revision") {
				if revision < 0 {
					return usagef("--revision must not be negative")
				}
				req.Revision = &revision
			}
			cl, err := c.data()
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			all := []domain.MemoryEntry{}
			active, deleted := 0, 0
			rev, err := cl.ReadAllMemory(cmd.Context(), coll, req, func(p domain.MemoryPage) error {
				for _, e := range p.Items {
					if e.State == "tombstone" {
						deleted++
					} else {
						active++
					}
					if c.json {
						all = append(all, e)
						continue
					}
					if err := printMemoryEntry(w, e); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				return err
			}
			if c.json {
				return printJSON(w, domain.MemoryPage{CollectionID: coll, Revision: rev, Items: all})
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "collection %s, revision %d: %d item(s)", coll, rev, active)
			if tombstones {
				fmt.Fprintf(cmd.ErrOrStderr(), ", %d tombstone(s)", deleted)
			}
			fmt.Fprintln(cmd.ErrOrStderr())
			return nil
		},
	}
	f := cmd.Flags()
	c.addDataFlags(f)
	f.StringVar(&coll, "collection", "", "collection ID (required)")
	f.Int64Var(&revision, "revision", 0, "revision to read (default: the current one)")
	f.BoolVar(&tombstones, "tombstones", false, "also list the items deleted in or before this revision")
	f.IntVar(&limit, "limit", 500, "items per page (at most the service's memory_read_page_max)")
	return withUsageErrors(cmd)
}

func printMemoryEntry(w io.Writer, e domain.MemoryEntry) error {
	var err error
	if e.State == "tombstone" {
		deleted := int64(0)
		if e.DeletedInRevision != nil {
			deleted = *e.DeletedInRevision
		}
		_, err = fmt.Fprintf(w, "%s  %s  (deleted in revision %d)\n", e.ItemID, e.Path, deleted)
	} else {
		_, err = fmt.Fprintf(w, "%s  %s  %s  revision=%d\n", e.ItemID, e.Path, e.BlobID, e.Revision)
	}
	if err != nil {
		return fmt.Errorf("writing output: %w", err)
	}
	return nil
}
