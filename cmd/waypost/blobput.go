package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode"

	"github.com/waypost/waypost/client"
	"github.com/waypost/waypost/domain"
)

// The resumable blob upload shared by 'waypost blob put' and 'waypost memory publish'.
//
// Before anything is sent, the two request IDs (blob.prepare, blob.commit) are saved in a small state file
// under <state-dir>/uploads/, named after the space, the actor and the content's identity (SHA-256,
// size, type, file name). Every step is then repeated with the saved values until it succeeds, so a run
// that failed at any point resumes where it stopped: prepare answers the same upload_id, a PUT of bytes
// already stored answers already_uploaded, commit answers the original seal. Once sealed, the state keeps
// the blob_id, and a later run with the same content reuses the blob after checking that it still exists.

// uploadStateFormat is the version of the state file.
const uploadStateFormat = 1

// maxStepRetries is how many times one step is retried with the same request ID after a transport
// failure or a retryable error (RFC §13.1.4).
const maxStepRetries = 2

// uploadState is the state file of one resumable upload.
type uploadState struct {
	Format           int       `json:"format"`
	BaseURL          string    `json:"base_url"`
	SpaceID          string    `json:"space_id"`
	ActorID          string    `json:"actor_id"`
	SHA256           string    `json:"sha256"`
	SizeBytes        int64     `json:"size_bytes"`
	ContentType      string    `json:"content_type"`
	Filename         string    `json:"filename,omitempty"`
	PrepareRequestID string    `json:"prepare_request_id"`
	CommitRequestID  string    `json:"commit_request_id"`
	UploadID         string    `json:"upload_id,omitempty"`
	BlobID           string    `json:"blob_id,omitempty"`
	Sealed           bool      `json:"sealed"`
	UpdatedAt        time.Time `json:"updated_at"`
}

// blobSource is content to upload: its identity, computed beforehand, and a way to read it again for each
// attempt.
type blobSource struct {
	name        string // for messages
	size        int64
	sha256      string
	contentType string
	filename    string
	open        func() (io.ReadCloser, error)
}

// blobPutResult reports one upload.
type blobPutResult struct {
	Info            domain.BlobInfo `json:"blob"`
	AlreadyUploaded bool            `json:"already_uploaded"`
	Reused          bool            `json:"reused"`
	StateFile       string          `json:"state_file"`
}

// blobPutter uploads blobs for one principal.
type blobPutter struct {
	cl       *client.Client
	baseURL  string
	spaceID  string
	actorID  string
	stateDir string
	fresh    bool      // ignore saved state: new request IDs
	log      io.Writer // step messages (nil: none)
}

func newBlobPutter(ctx context.Context, cl *client.Client, stateDir string, log io.Writer) (*blobPutter, domain.DescribeResult, error) {
	d, err := cl.Describe(ctx)
	if err != nil {
		return nil, d, err
	}
	return &blobPutter{cl: cl, baseURL: cl.BaseURL(), spaceID: d.SpaceID, actorID: d.ActorID, stateDir: stateDir, log: log}, d, nil
}

func (p *blobPutter) logf(format string, args ...any) {
	if p.log != nil {
		fmt.Fprintf(p.log, format+"\n", args...)
	}
}

// statePath names the state file of a content for this principal.
func (p *blobPutter) statePath(src blobSource) string {
	// Not the base URL: the same service may be reached under several (space and actor IDs are unique).
	return stateFile(p.stateDir, "uploads", p.spaceID, p.actorID, src.sha256, fmt.Sprint(src.size), src.contentType, src.filename)
}

func (p *blobPutter) newState(src blobSource) *uploadState {
	return &uploadState{Format: uploadStateFormat, BaseURL: p.baseURL, SpaceID: p.spaceID, ActorID: p.actorID, SHA256: src.sha256,
		SizeBytes: src.size, ContentType: src.contentType, Filename: src.filename,
		PrepareRequestID: client.NewRequestID(), CommitRequestID: client.NewRequestID()}
}

// loadState reads a state file; it returns nil when there is none or it does not describe src.
func (p *blobPutter) loadState(path string, src blobSource) (*uploadState, error) {
	raw, found, err := readStateFile(path, "upload state")
	if !found {
		return nil, err
	}
	var st uploadState
	if err := json.Unmarshal(raw, &st); err != nil || st.Format != uploadStateFormat || st.SHA256 != src.sha256 || st.SizeBytes != src.size ||
		st.ContentType != src.contentType || st.Filename != src.filename || st.SpaceID != p.spaceID || st.ActorID != p.actorID ||
		!domain.ValidRequestID(st.PrepareRequestID) || !domain.ValidRequestID(st.CommitRequestID) {
		p.logf("ignoring the unusable upload state %s", path)
		return nil, nil
	}
	return &st, nil
}

// put uploads src (or resumes or reuses an earlier upload of it) and returns the sealed blob. m, when not
// nil, counts the bytes sent.
func (p *blobPutter) put(ctx context.Context, src blobSource, m *meter) (blobPutResult, error) {
	path := p.statePath(src)
	res := blobPutResult{StateFile: path}
	var st *uploadState
	if !p.fresh {
		var err error
		if st, err = p.loadState(path, src); err != nil {
			return res, err
		}
	}
	if st != nil && st.Sealed && st.BlobID != "" {
		info, err := p.cl.GetBlob(ctx, st.BlobID)
		switch {
		case err == nil && info.State == domain.BlobSealed && info.SHA256 == src.sha256 && info.SizeBytes == src.size:
			p.logf("%s: reusing blob %s sealed by an earlier run (state %s)", src.name, info.BlobID, path)
			m.add(src.size)
			res.Info, res.Reused = info, true
			return res, nil
		case err == nil, client.IsCode(err, domain.CodeNotFound):
			p.logf("%s: blob %s of an earlier run is gone: uploading again", src.name, st.BlobID)
			st = nil
		default:
			return res, fmt.Errorf("%s: checking blob %s of an earlier run: %w", src.name, st.BlobID, err)
		}
	}
	if st != nil {
		p.logf("%s: resuming the upload of an earlier run (state %s)", src.name, path)
	}
	for restart := 0; ; restart++ {
		if st == nil {
			st = p.newState(src)
		}
		// The request IDs are saved before the first request that uses them.
		if err := saveJSONFile(path, st); err != nil {
			return res, err
		}
		info, already, err := p.attempt(ctx, src, st, path, m)
		if client.IsCode(err, domain.CodeUploadExpired) && restart == 0 {
			p.logf("%s: the upload of an earlier run expired: starting a new one", src.name)
			st = nil
			continue
		}
		if err != nil {
			return res, err
		}
		st.BlobID, st.Sealed = info.BlobID, true
		if err := saveJSONFile(path, st); err != nil {
			return res, err
		}
		res.Info, res.AlreadyUploaded = info, already
		return res, nil
	}
}

// attempt runs prepare, PUT and commit with the request IDs of st.
func (p *blobPutter) attempt(ctx context.Context, src blobSource, st *uploadState, path string, m *meter) (domain.BlobInfo, bool, error) {
	prepReq := domain.BlobPrepareRequest{RequestID: st.PrepareRequestID, ContentType: src.contentType, SizeBytes: src.size, SHA256: src.sha256,
		Filename: src.filename}
	prep, err := retryStep(ctx, p.log, src.name+": blob.prepare", func() (domain.BlobPrepareResult, error) {
		return p.cl.PrepareBlob(ctx, prepReq)
	})
	if err != nil {
		return domain.BlobInfo{}, false, fmt.Errorf("%s: blob.prepare (request_id %s): %w", src.name, st.PrepareRequestID, err)
	}
	if prep.UploadID != st.UploadID || prep.BlobID != st.BlobID {
		st.UploadID, st.BlobID = prep.UploadID, prep.BlobID
		if err := saveJSONFile(path, st); err != nil {
			return domain.BlobInfo{}, false, err
		}
	}
	up, err := retryStep(ctx, p.log, src.name+": upload", func() (domain.UploadResult, error) {
		rc, err := src.open()
		if err != nil {
			return domain.UploadResult{}, fmt.Errorf("opening %s: %w", src.name, err)
		}
		defer rc.Close()
		body := &meterReader{r: rc, m: m}
		r, err := p.cl.UploadPrepared(ctx, prep, src.size, body)
		if err != nil || r.AlreadyUploaded {
			m.add(-body.n.Load()) // the bytes of this attempt did not count
			if err == nil {
				m.add(src.size)
			}
		}
		return r, err
	})
	switch {
	case err == nil:
		if up.AlreadyUploaded {
			p.logf("%s: the content was already uploaded (already_uploaded)", src.name)
		}
	case client.IsCode(err, domain.CodeUploadSealed):
		p.logf("%s: the upload is already sealed", src.name)
		m.add(src.size)
	case client.IsCode(err, domain.CodeChecksumMismatch, domain.CodeInvalidBlob):
		return domain.BlobInfo{}, false, fmt.Errorf("%s changed since it was hashed; run again: %w", src.name, err)
	default:
		return domain.BlobInfo{}, false, fmt.Errorf("%s: upload %s: %w", src.name, prep.UploadID, err)
	}
	info, err := retryStep(ctx, p.log, src.name+": blob.commit", func() (domain.BlobInfo, error) {
		return p.cl.CommitBlob(ctx, domain.BlobCommitRequest{RequestID: st.CommitRequestID, UploadID: prep.UploadID})
	})
	if err != nil {
		return domain.BlobInfo{}, false, fmt.Errorf("%s: blob.commit (request_id %s): %w", src.name, st.CommitRequestID, err)
	}
	if info.SHA256 != src.sha256 || info.SizeBytes != src.size || info.State != domain.BlobSealed {
		return domain.BlobInfo{}, false, fmt.Errorf("%s: the service sealed blob %s with size %d and sha256 %s, not %d and %s",
			src.name, info.BlobID, info.SizeBytes, info.SHA256, src.size, src.sha256)
	}
	return info, up.AlreadyUploaded, nil
}

// retryStep runs f, and again with the same request after a transport failure or a retryable error, at
// most maxStepRetries more times.
func retryStep[T any](ctx context.Context, log io.Writer, what string, f func() (T, error)) (T, error) {
	for retry := 1; ; retry++ {
		v, err := f()
		if err == nil || !client.IsRetryable(err) || retry > maxStepRetries || ctx.Err() != nil {
			return v, err
		}
		delay := time.Duration(retry) * 500 * time.Millisecond
		var e *client.Error
		if errors.As(err, &e) && e.RetryAfter > 0 {
			delay = min(e.RetryAfter, 30*time.Second)
		}
		if log != nil {
			fmt.Fprintf(log, "%s: retry %d/%d with the same request after: %v\n", what, retry, maxStepRetries, err)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return v, err
		case <-t.C:
		}
	}
}

// fileSource hashes a file (counting on m) and describes it for upload. contentType "" detects it.
func fileSource(path, contentType string, m *meter) (blobSource, error) {
	f, err := os.Open(path)
	if err != nil {
		return blobSource{}, fmt.Errorf("opening %s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return blobSource{}, fmt.Errorf("reading %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return blobSource{}, fmt.Errorf("%s is not a regular file", path)
	}
	head := make([]byte, 512)
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return blobSource{}, fmt.Errorf("reading %s: %w", path, err)
	}
	head = head[:n]
	h := sha256.New()
	h.Write(head)
	m.add(int64(n))
	rest, err := io.CopyBuffer(h, &meterReader{r: f, m: m}, make([]byte, 256<<10))
	if err != nil {
		return blobSource{}, fmt.Errorf("reading %s: %w", path, err)
	}
	size := int64(n) + rest
	if size != fi.Size() {
		return blobSource{}, fmt.Errorf("%s changed while it was read (%d bytes, then %d)", path, fi.Size(), size)
	}
	if contentType == "" {
		contentType = detectContentType(path, head)
	}
	return blobSource{name: path, size: size, sha256: hex.EncodeToString(h.Sum(nil)), contentType: contentType,
		filename: blobFilename(filepath.Base(path)), open: func() (io.ReadCloser, error) { return os.Open(path) }}, nil
}

// bytesSource describes in-memory content for upload.
func bytesSource(name string, data []byte, contentType, filename string) blobSource {
	sum := sha256.Sum256(data)
	return blobSource{name: name, size: int64(len(data)), sha256: hex.EncodeToString(sum[:]), contentType: contentType, filename: filename,
		open: func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }}
}

// textTypes are media types for common text files that the system table may not know.
var textTypes = map[string]string{".md": "text/markdown; charset=utf-8", ".markdown": "text/markdown; charset=utf-8",
	".txt": "text/plain; charset=utf-8", ".json": "application/json", ".yaml": "application/yaml", ".yml": "application/yaml",
	".csv": "text/csv; charset=utf-8"}

// detectContentType picks a media type from the extension, else from the first bytes.
func detectContentType(path string, head []byte) string {
	ext := strings.ToLower(filepath.Ext(path))
	if t, ok := textTypes[ext]; ok {
		return t
	}
	if t := mime.TypeByExtension(ext); t != "" {
		if _, _, err := mime.ParseMediaType(t); err == nil {
			return t
		}
	}
	return http.DetectContentType(head)
}

// blobFilename returns name when the service accepts it as a blob's filename, else "".
func blobFilename(name string) string {
	if name == "" || name == "." || name == ".." || len(name) > 255 || strings.ContainsAny(name, "/\\") {
		return ""
	}
	for _, r := range name {
		if unicode.IsControl(r) {
			return ""
		}
	}
	return name
}

// stateFile names a state file in the folder kind of stateDir after the values that identify what it
// describes: the first 40 hex digits of a SHA-256 over them.
func stateFile(stateDir, kind string, ids ...string) string {
	h := sha256.New()
	for _, s := range ids {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return filepath.Join(stateDir, kind, hex.EncodeToString(h.Sum(nil))[:40]+".json")
}

// readStateFile reads the state file (what it holds: what) at path; found is false when there is none.
func readStateFile(path, what string) (raw []byte, found bool, err error) {
	raw, err = os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("reading %s %s: %w", what, path, err)
	}
	return raw, true, nil
}

// saveJSONFile writes v to path atomically and durably (temporary file, fsync, rename, fsync of the
// directory), creating the directory with mode 0700.
func saveJSONFile(path string, v any) error {
	if st, ok := v.(*uploadState); ok {
		st.UpdatedAt = time.Now().UTC()
	}
	raw, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding %s: %w", path, err)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	f, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return fmt.Errorf("saving %s: %w", path, err)
	}
	tmp := f.Name()
	_, err = f.Write(append(raw, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("saving %s: %w", path, err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}

// defaultStateDir is ~/.waypost, where the client keeps its local state.
func defaultStateDir(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", usagef("no home directory for the local state (%v): pass --state-dir", err)
	}
	return filepath.Join(home, ".waypost"), nil
}
