package client_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/waypost/waypost/client"
	"github.com/waypost/waypost/domain"
)

func sha(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// putBlob prepares, uploads and seals data as one blob of the client's actor.
func putBlob(t *testing.T, c *client.Client, data []byte, ct string) domain.BlobInfo {
	t.Helper()
	ctx := context.Background()
	prep, err := c.PrepareBlob(ctx, domain.BlobPrepareRequest{RequestID: client.NewRequestID(), ContentType: ct, SizeBytes: int64(len(data)), SHA256: sha(data)})
	if err != nil {
		t.Fatalf("PrepareBlob: %v", err)
	}
	if _, err := c.UploadContent(ctx, prep.UploadID, ct, int64(len(data)), bytes.NewReader(data)); err != nil {
		t.Fatalf("UploadContent: %v", err)
	}
	info, err := c.CommitBlob(ctx, domain.BlobCommitRequest{RequestID: client.NewRequestID(), UploadID: prep.UploadID})
	if err != nil {
		t.Fatalf("CommitBlob: %v", err)
	}
	return info
}

func readContent(t *testing.T, c *client.Client, blobID string) []byte {
	t.Helper()
	bc, err := c.OpenBlobContent(context.Background(), blobID)
	if err != nil {
		t.Fatalf("OpenBlobContent(%s): %v", blobID, err)
	}
	defer bc.Close()
	got, err := io.ReadAll(bc)
	if err != nil {
		t.Fatalf("reading %s: %v", blobID, err)
	}
	return got
}

func TestBlobLifecycle(t *testing.T) {
	t.Parallel()
	w := newRealWorld(t, nil)
	ctx := context.Background()
	c := w.writer
	data := []byte("# notes\n\nthe content of a blob\n")
	prepReq := domain.BlobPrepareRequest{RequestID: "req-prep-1", ContentType: "text/markdown", SizeBytes: int64(len(data)), SHA256: sha(data), Filename: "notes.md"}
	prep, err := c.PrepareBlob(ctx, prepReq)
	if err != nil {
		t.Fatal(err)
	}
	if prep.UploadID == "" || prep.BlobID == "" || prep.State != domain.BlobPending || prep.UploadMethod != "PUT" {
		t.Fatalf("prepare result: %+v", prep)
	}
	// Same request again: same upload and blob.
	again, err := c.PrepareBlob(ctx, prepReq)
	if err != nil || again.UploadID != prep.UploadID || again.BlobID != prep.BlobID {
		t.Fatalf("repeated prepare: %+v, %v; want %s/%s", again, err, prep.UploadID, prep.BlobID)
	}
	// Wrong bytes first: CHECKSUM_MISMATCH, nothing stored.
	bad := bytes.ToUpper(data)
	if _, err := c.UploadContent(ctx, prep.UploadID, "text/markdown", int64(len(bad)), bytes.NewReader(bad)); !client.IsCode(err, domain.CodeChecksumMismatch) {
		t.Fatalf("upload of wrong bytes: %v, want CHECKSUM_MISMATCH", err)
	}
	// Committing before any content is INVALID_BLOB.
	if _, err := c.CommitBlob(ctx, domain.BlobCommitRequest{RequestID: "req-commit-early", UploadID: prep.UploadID}); !client.IsCode(err, domain.CodeInvalidBlob) {
		t.Fatalf("commit without content: %v, want INVALID_BLOB", err)
	}
	up, err := c.UploadContent(ctx, prep.UploadID, "text/markdown", int64(len(data)), bytes.NewReader(data))
	if err != nil || up.AlreadyUploaded || up.BlobID != prep.BlobID || up.SHA256 != sha(data) {
		t.Fatalf("upload: %+v, %v", up, err)
	}
	// Repeated PUT of the same bytes: already_uploaded; of different bytes: conflict.
	up2, err := c.UploadContent(ctx, prep.UploadID, "text/markdown", int64(len(data)), bytes.NewReader(data))
	if err != nil || !up2.AlreadyUploaded {
		t.Fatalf("repeated upload: %+v, %v; want already_uploaded", up2, err)
	}
	if _, err := c.UploadContent(ctx, prep.UploadID, "text/markdown", int64(len(bad)), bytes.NewReader(bad)); !client.IsCode(err, domain.CodeUploadContentConflict) {
		t.Fatalf("conflicting upload: %v, want UPLOAD_CONTENT_CONFLICT", err)
	}
	commit := domain.BlobCommitRequest{RequestID: "req-commit-1", UploadID: prep.UploadID}
	info, err := c.CommitBlob(ctx, commit)
	if err != nil {
		t.Fatal(err)
	}
	if info.BlobID != prep.BlobID || info.State != domain.BlobSealed || info.SizeBytes != int64(len(data)) || info.SHA256 != sha(data) ||
		info.Filename != "notes.md" || info.DownloadURL == "" {
		t.Fatalf("commit result: %+v", info)
	}
	replay, err := c.CommitBlob(ctx, commit)
	if err != nil || replay.BlobID != info.BlobID || !replay.SealedAt.Equal(*info.SealedAt) {
		t.Fatalf("commit replay: %+v, %v", replay, err)
	}
	if _, err := c.UploadContent(ctx, prep.UploadID, "text/markdown", int64(len(data)), bytes.NewReader(data)); !client.IsCode(err, domain.CodeUploadSealed) {
		t.Fatalf("upload after seal: %v, want UPLOAD_SEALED", err)
	}
	got, err := c.GetBlob(ctx, info.BlobID)
	if err != nil || got.SHA256 != info.SHA256 || got.State != domain.BlobSealed {
		t.Fatalf("GetBlob: %+v, %v", got, err)
	}
	if b := readContent(t, c, info.BlobID); !bytes.Equal(b, data) {
		t.Fatalf("content %q, want %q", b, data)
	}
	// The reader has memory.read on a collection that does not reference the blob: NOT_FOUND.
	if _, err := w.reader.GetBlob(ctx, info.BlobID); !client.IsCode(err, domain.CodeNotFound) {
		t.Fatalf("GetBlob by a stranger: %v, want NOT_FOUND", err)
	}
	if _, err := w.reader.OpenBlobContent(ctx, info.BlobID); !client.IsCode(err, domain.CodeNotFound) {
		t.Fatalf("OpenBlobContent by a stranger: %v, want NOT_FOUND", err)
	}
	var e *client.Error
	if _, err := c.GetBlob(ctx, "blob_nope"); !errors.As(err, &e) || e.HTTPStatus != http.StatusNotFound {
		t.Fatalf("GetBlob of an absent blob: %v", err)
	}
}

func TestZeroByteBlob(t *testing.T) {
	t.Parallel()
	w := newRealWorld(t, nil)
	info := putBlob(t, w.writer, nil, "application/octet-stream")
	if info.SizeBytes != 0 || info.SHA256 != sha(nil) {
		t.Fatalf("zero-byte blob: %+v", info)
	}
	if b := readContent(t, w.writer, info.BlobID); len(b) != 0 {
		t.Fatalf("zero-byte content: %q", b)
	}
}

// TestUploadContentStreams checks that the body goes out with a Content-Length and is streamed: the
// server receives the first half before the second half even exists.
func TestUploadContentStreams(t *testing.T) {
	t.Parallel()
	const half = 1 << 20
	var received atomic.Int64
	firstHalfSeen := make(chan struct{})
	var seenLength atomic.Int64
	var chunked atomic.Bool
	w := newRealWorld(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPut {
				seenLength.Store(r.ContentLength)
				chunked.Store(len(r.TransferEncoding) > 0)
				r.Body = &countingBody{ReadCloser: r.Body, n: &received, at: half, reached: firstHalfSeen}
			}
			h.ServeHTTP(rw, r)
		})
	})
	ctx := context.Background()
	data := bytes.Repeat([]byte("0123456789abcdef"), 2*half/16)
	prep, err := w.writer.PrepareBlob(ctx, domain.BlobPrepareRequest{RequestID: "r1", ContentType: "application/octet-stream", SizeBytes: int64(len(data)), SHA256: sha(data)})
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	go func() {
		if _, err := pw.Write(data[:half]); err != nil {
			pw.CloseWithError(err)
			return
		}
		select { // the second half is produced only once the server has read the first
		case <-firstHalfSeen:
		case <-time.After(10 * time.Second):
			pw.CloseWithError(errors.New("the server never received the first half: the client buffers the body"))
			return
		}
		_, err := pw.Write(data[half:])
		pw.CloseWithError(err)
	}()
	up, err := w.writer.UploadContent(ctx, prep.UploadID, "application/octet-stream", int64(len(data)), pr)
	if err != nil {
		t.Fatalf("UploadContent: %v", err)
	}
	if up.SizeBytes != int64(len(data)) || seenLength.Load() != int64(len(data)) || chunked.Load() {
		t.Fatalf("upload %+v; server saw Content-Length %d, chunked %v", up, seenLength.Load(), chunked.Load())
	}
}

type countingBody struct {
	io.ReadCloser
	n       *atomic.Int64
	at      int64
	reached chan struct{}
	closed  bool
}

func (c *countingBody) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	if c.n.Add(int64(n)) >= c.at && !c.closed {
		c.closed = true
		close(c.reached)
	}
	return n, err
}

// TestUploadShortBody checks that a body shorter than the announced size fails and stores nothing.
func TestUploadShortBody(t *testing.T) {
	t.Parallel()
	w := newRealWorld(t, nil)
	ctx := context.Background()
	data := []byte("0123456789")
	prep, err := w.writer.PrepareBlob(ctx, domain.BlobPrepareRequest{RequestID: "r1", ContentType: "text/plain", SizeBytes: 10, SHA256: sha(data)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.writer.UploadContent(ctx, prep.UploadID, "text/plain", 10, bytes.NewReader(data[:4])); err == nil {
		t.Fatal("an upload with 4 of 10 bytes succeeded")
	}
	if _, err := w.writer.CommitBlob(ctx, domain.BlobCommitRequest{RequestID: "c1", UploadID: prep.UploadID}); !client.IsCode(err, domain.CodeInvalidBlob) {
		t.Fatalf("commit after a short upload: %v, want INVALID_BLOB", err)
	}
	if _, err := w.writer.UploadContent(ctx, prep.UploadID, "text/plain", -1, bytes.NewReader(data)); err == nil {
		t.Fatal("a negative size was accepted")
	}
}

// TestStallsAreBounded checks that a streamed exchange fails once no byte moved for the client timeout,
// although the exchange as a whole is not bounded by it: an upload the server stops answering and a
// download the server stops sending.
func TestStallsAreBounded(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	defer close(release)
	w := newRealWorld(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			switch {
			case r.Method == http.MethodPut: // read the body, then never answer
				_, _ = io.Copy(io.Discard, r.Body)
			case strings.HasSuffix(r.URL.Path, "/stall/content"): // send half the content, then stop
				rw.Header().Set("ETag", `"`+sha([]byte("0123456789"))+`"`)
				rw.Header().Set("Content-Length", "10")
				_, _ = rw.Write([]byte("01234"))
				rw.(http.Flusher).Flush()
			default:
				h.ServeHTTP(rw, r)
				return
			}
			select {
			case <-release:
			case <-r.Context().Done():
			}
		})
	})
	ctx := context.Background()
	prep, err := w.writer.PrepareBlob(ctx, domain.BlobPrepareRequest{RequestID: "r1", ContentType: "text/plain", SizeBytes: 10, SHA256: sha([]byte("0123456789"))})
	if err != nil {
		t.Fatal(err)
	}
	c := client.New(w.url, w.writerToken, client.WithTimeout(300*time.Millisecond))
	start := time.Now()
	_, err = c.UploadContent(ctx, prep.UploadID, "text/plain", 10, strings.NewReader("0123456789"))
	if !client.IsTransport(err) || !strings.Contains(err.Error(), "no progress") {
		t.Fatalf("stalled upload: %v, want a transport error about no progress", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the stalled upload took %s to fail", d)
	}
	bc, err := c.OpenBlobContent(ctx, "stall")
	if err != nil {
		t.Fatal(err)
	}
	defer bc.Close()
	start = time.Now()
	got, err := io.ReadAll(bc)
	if err == nil || string(got) != "01234" || !strings.Contains(err.Error(), "no progress") {
		t.Fatalf("stalled download: %q, %v", got, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the stalled download took %s to fail", d)
	}
}

// TestOpenBlobContentVerifies checks that a download whose bytes differ from the announced size or digest
// fails at its end instead of returning io.EOF.
func TestOpenBlobContentVerifies(t *testing.T) {
	t.Parallel()
	good := []byte("the real content")
	cases := map[string]struct {
		body []byte
		etag string
	}{
		"ok":         {good, sha(good)},
		"wrong hash": {good, sha([]byte("other"))},
		"short":      {good[:5], sha(good)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("ETag", `"`+tc.etag+`"`)
				w.Header().Set("Content-Length", fmt.Sprint(len(good)))
				w.Header().Set("Content-Type", "text/plain")
				_, _ = w.Write(tc.body) // a short body cuts the connection
			}))
			defer srv.Close()
			bc, err := client.New(srv.URL, "tok").OpenBlobContent(context.Background(), "blob_1")
			if err != nil {
				t.Fatal(err)
			}
			defer bc.Close()
			got, err := io.ReadAll(bc)
			if name == "ok" {
				if err != nil || !bytes.Equal(got, good) {
					t.Fatalf("got %q, %v", got, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("read %q without error", got)
			}
			if name == "wrong hash" && !errors.Is(err, client.ErrContentMismatch) {
				t.Fatalf("error %v, want ErrContentMismatch", err)
			}
		})
	}
}
