package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/waypost/waypost/client"
	"github.com/waypost/waypost/domain"
)

func newBlobCmd() *cobra.Command {
	cmd := group("blob", "Upload and download sealed blobs (files referenced by messages and memory)",
		newBlobPutCmd(), newBlobGetCmd())
	return withUsageErrors(cmd)
}

func newBlobPutCmd() *cobra.Command {
	c := &conn{}
	var contentType, stateDir string
	var fresh bool
	var prog progressFlag
	cmd := &cobra.Command{
		Use:   "put FILE",
		Short: "Upload a file as a sealed blob, resumably, and print its blob_id",
		Long: `Upload FILE as a blob of the token's actor and print its blob_id.

The file is read twice: first to compute its SHA-256 and size, then to stream it to the upload_url that
blob.prepare answers: the service's upload route, or (on AWS) a presigned S3 URL that takes exactly these
bytes once, without the token. Either checks size and SHA-256 on the bytes it receives. Nothing is
buffered in memory, whatever the file's size (up to the service's max_blob_bytes, see 'waypost describe').

The upload is resumable. Before anything is sent, the request IDs of blob.prepare and blob.commit are
saved in a state file under <state-dir>/uploads/ (default ~/.waypost/uploads/). Running the same command
again after a failure repeats the steps with the same request IDs: the service answers the same upload,
a content it already stored as already_uploaded, and the original seal. Once sealed, running it again
with the same content reuses the blob (after checking that it still exists); --new uploads it as a new
blob. Each step is also retried at most twice with the same request ID after a timeout or a retryable
error.

The content type is --content-type, else guessed from the extension or the first bytes.`,
		Example: `  waypost blob put report.pdf
  waypost blob put notes.md --content-type "text/markdown; charset=utf-8" -q
  waypost blob put dataset.tar.gz --progress always --json`,
		Args: exactArgs(1, "FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := prog.validate(); err != nil {
				return err
			}
			dir, err := defaultStateDir(stateDir)
			if err != nil {
				return err
			}
			cl, err := c.data()
			if err != nil {
				return err
			}
			ctx, stderr := cmd.Context(), cmd.ErrOrStderr()
			fi, err := os.Stat(args[0])
			if err != nil {
				return usagef("%v", err)
			}
			if !fi.Mode().IsRegular() {
				return usagef("%s is not a regular file", args[0])
			}
			put, d, err := newBlobPutter(ctx, cl, dir, stderr)
			if err != nil {
				return err
			}
			put.fresh = fresh
			if fi.Size() > d.Limits.MaxBlobBytes {
				return fmt.Errorf("%s has %d bytes; the service accepts at most %d (max_blob_bytes)", args[0], fi.Size(), d.Limits.MaxBlobBytes)
			}
			hm := prog.newMeter(stderr, fi.Size(), "hashing  ")
			src, err := fileSource(args[0], contentType, hm)
			hm.finish()
			if err != nil {
				return err
			}
			um := prog.newMeter(stderr, src.size, "uploading")
			res, err := put.put(ctx, src, um)
			um.finish()
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if c.json {
				return printJSON(w, res)
			}
			if c.quiet {
				_, err := fmt.Fprintln(w, res.Info.BlobID)
				return err
			}
			return fields(w, "blob_id", res.Info.BlobID, "state", string(res.Info.State), "size_bytes", strconv.FormatInt(res.Info.SizeBytes, 10),
				"sha256", res.Info.SHA256, "content_type", res.Info.ContentType, "filename", res.Info.Filename,
				"already_uploaded", strconv.FormatBool(res.AlreadyUploaded), "reused", strconv.FormatBool(res.Reused))
		},
	}
	f := cmd.Flags()
	c.addDataFlags(f)
	f.BoolVarP(&c.quiet, "quiet", "q", false, "print only the blob_id")
	f.StringVar(&contentType, "content-type", "", "media type of the content (default: guessed)")
	f.StringVar(&stateDir, "state-dir", "", "where resumable upload state is kept (default ~/.waypost)")
	f.BoolVar(&fresh, "new", false, "ignore the state of earlier runs: upload as a new blob with new request IDs")
	prog.register(f)
	return withUsageErrors(cmd)
}

func newBlobGetCmd() *cobra.Command {
	c := &conn{}
	var out string
	var force bool
	var prog progressFlag
	cmd := &cobra.Command{
		Use:   "get BLOB_ID",
		Short: "Show a blob's metadata; with -o, download its bytes and verify their SHA-256",
		Long: `Show a blob's fixed metadata (size, type, SHA-256, owner, seal time). The token's actor must own the
blob, or read a message or memory collection that references it.

With -o FILE the bytes are streamed to FILE (via a temporary file in the same directory, renamed into
place only after the size and SHA-256 matched the blob's metadata); -o - writes them to standard output
and the metadata to standard error. An existing FILE is replaced only with --force.`,
		Example: `  waypost blob get blob_0123456789abcdefghjk
  waypost blob get blob_0123456789abcdefghjk -o report.pdf
  waypost blob get blob_0123456789abcdefghjk -o - | tar xz`,
		Args: exactArgs(1, "BLOB_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := prog.validate(); err != nil {
				return err
			}
			cl, err := c.data()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			info, err := cl.GetBlob(ctx, args[0])
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if out == "-" {
				w = cmd.ErrOrStderr()
			}
			if out != "" && out != "-" && !force {
				if _, err := os.Lstat(out); err == nil {
					return usagef("%s exists: pass --force to replace it", out)
				}
			}
			if c.json {
				if err := printJSON(w, info); err != nil {
					return err
				}
			} else if err := fields(w, "blob_id", info.BlobID, "state", string(info.State), "size_bytes", strconv.FormatInt(info.SizeBytes, 10),
				"sha256", info.SHA256, "content_type", info.ContentType, "filename", info.Filename, "owner_id", info.OwnerID,
				"created_at", info.CreatedAt.Format(time.RFC3339Nano), "sealed_at", timeOrEmpty(info.SealedAt)); err != nil {
				return err
			}
			if out == "" {
				return nil
			}
			if info.State != domain.BlobSealed {
				return fmt.Errorf("blob %s is %s: only sealed blobs have content", info.BlobID, info.State)
			}
			m := prog.newMeter(cmd.ErrOrStderr(), info.SizeBytes, "downloading")
			defer m.finish()
			if out == "-" {
				return downloadBlob(ctx, cl, info, cmd.OutOrStdout(), m)
			}
			return downloadBlobToFile(ctx, cl, info, out, m)
		},
	}
	f := cmd.Flags()
	c.addDataFlags(f)
	f.StringVarP(&out, "output", "o", "", "write the bytes to this file (- for standard output)")
	f.BoolVar(&force, "force", false, "replace an existing output file")
	prog.register(f)
	return withUsageErrors(cmd)
}

func timeOrEmpty(t *time.Time) string {
	if t == nil {
		return ""
	}
	return t.Format(time.RFC3339Nano)
}

// downloadBlob streams a sealed blob's bytes to w, verifying that they have the size and SHA-256 of its
// metadata. On a mismatch, what was written must be discarded.
func downloadBlob(ctx context.Context, cl *client.Client, info domain.BlobInfo, w io.Writer, m *meter) error {
	bc, err := cl.OpenBlobContent(ctx, info.BlobID)
	if err != nil {
		return err
	}
	defer bc.Close()
	if bc.SHA256 != info.SHA256 || bc.SizeBytes != info.SizeBytes {
		return fmt.Errorf("blob %s: the content is announced with size %d and sha256 %s, the metadata says %d and %s",
			info.BlobID, bc.SizeBytes, bc.SHA256, info.SizeBytes, info.SHA256)
	}
	// BlobContent fails at the end when the bytes do not hash to the announced digest.
	if _, err := io.CopyBuffer(w, &meterReader{r: bc, m: m}, make([]byte, 256<<10)); err != nil {
		if errors.Is(err, client.ErrContentMismatch) {
			return fmt.Errorf("blob %s: %w", info.BlobID, err)
		}
		return fmt.Errorf("downloading blob %s: %w", info.BlobID, err)
	}
	return nil
}

// downloadBlobToFile downloads into a temporary file next to path, syncs it, and renames it into place
// once verified.
func downloadBlobToFile(ctx context.Context, cl *client.Client, info domain.BlobInfo, path string, m *meter) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".part-*")
	if err != nil {
		return fmt.Errorf("creating a file in %s: %w", dir, err)
	}
	tmp := f.Name()
	err = downloadBlob(ctx, cl, info, f, m)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("writing %s: %w", tmp, cerr)
	}
	if err == nil {
		if err = os.Rename(tmp, path); err != nil {
			err = fmt.Errorf("moving the download into %s: %w", path, err)
		}
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}
