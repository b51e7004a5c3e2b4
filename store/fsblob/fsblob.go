// Package fsblob is the embedded port.BlobStore: create-only, SHA-256-verified objects in files under a root
// directory.
//
// # Layout
//
// A key is validated (ValidateKey) and then named by the lowercase hex SHA-256 of the key, sharded twice by
// its leading hex digits:
//
//	<root>/<h[0:2]>/<h[2:4]>/<h>
//
// Hashing keeps every key a plain file name of fixed length, whatever the key looks like (a key "a" and a key
// "a/b" cannot collide as file and directory), and spreads objects over 65536 directories.
//
// Each object file starts with a fixed 73-byte header, "wpblob1 " ‖ 64 lowercase hex digits of the content's
// SHA-256 ‖ "\n", followed by the content. The digest thus travels with the content in one file published by
// one link, so Head (open, read 73 bytes, fstat) is cheap and always consistent with what is stored; the size
// is the file size minus the header.
//
// # Put
//
// Put streams the reader into a temporary file ".tmp-*" in the object's directory while hashing and counting
// (never buffering the whole object), rejects a size or digest mismatch (port.ErrBlobSize,
// port.ErrBlobChecksum; the temporary file is removed, nothing is stored), fsyncs the file, publishes it with
// os.Link — which fails if the name exists, so a stored object is never overwritten and of concurrent puts
// exactly one wins — removes the temporary name and fsyncs the directory. A losing or repeated put returns
// the stored object's BlobInfo with an error wrapping port.ErrBlobExists. The file system must support hard
// links (ext4, xfs, btrfs, tmpfs, overlayfs do). Temporary files orphaned by a crash (kill -9 during a put)
// are removed by RemoveTemporaries, which `waypost serve` runs at start and on its sweep schedule.
package fsblob

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/internal/dirsync"
)

// MaxKeyBytes is the longest key, as on S3.
const MaxKeyBytes = 1024

// ErrInvalidKey reports a key that ValidateKey rejects.
var ErrInvalidKey = errors.New("invalid blob key")

// ErrInvalidArgument reports a negative size or a digest that is not 64 lowercase hex digits.
var ErrInvalidArgument = errors.New("invalid blob argument")

// ErrCorrupt reports a stored object file without a valid header.
var ErrCorrupt = errors.New("corrupt blob file")

const (
	magic      = "wpblob1 "
	headerSize = len(magic) + sha256.Size*2 + 1
	copyBuffer = 256 << 10
)

// Store is a port.BlobStore on the local file system. It is safe for concurrent use, also by several
// processes sharing the root.
type Store struct {
	root   string
	noSync bool
}

// Options configure a Store.
type Options struct {
	// NoSync skips every fsync (of objects and of directories): a crash may lose or tear what was stored.
	// For tests and benchmarks only, where the disk's flush would dominate without adding to what they check.
	NoSync bool
}

var _ port.BlobStore = (*Store)(nil)

// New returns a store rooted at root, creating the directory (mode 0700) if needed.
func New(root string) (*Store, error) { return NewWithOptions(root, Options{}) }

// NewWithOptions is New with options.
func NewWithOptions(root string, o Options) (*Store, error) {
	if root == "" {
		return nil, errors.New("fsblob: empty root")
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("fsblob: root %s: %w", root, err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, fmt.Errorf("fsblob: root %s: %w", abs, err)
	}
	return &Store{root: abs, noSync: o.NoSync}, nil
}

// tempPrefix starts the name of every temporary file of a put in progress.
const tempPrefix = ".tmp-"

// IsTemporary reports whether name, the base name of a file under the root, is the temporary file of a put
// (in progress, or orphaned by a crash) rather than a stored object: a copy of the root leaves it out.
func IsTemporary(name string) bool { return strings.HasPrefix(name, tempPrefix) }

// RemoveTemporaries removes the temporary files of puts (".tmp-*") whose last write is older than
// olderThan (0: every one), and returns how many it removed. A put in progress writes to its file as its
// body arrives, so a file untouched for long was orphaned by a crash; its put never completed, so nothing
// stored refers to it. Call it with 0 only while no put runs on this root (at start, under the store's
// lock). Files that vanish meanwhile are not errors.
func (s *Store) RemoveTemporaries(ctx context.Context, olderThan time.Duration) (int, error) {
	cutoff := time.Now().Add(-olderThan)
	n := 0
	err := filepath.WalkDir(s.root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if d.IsDir() || !IsTemporary(d.Name()) {
			return nil
		}
		if olderThan > 0 {
			info, err := d.Info()
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			if err != nil {
				return err
			}
			if info.ModTime().After(cutoff) {
				return nil
			}
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		n++
		return nil
	})
	if err != nil {
		return n, fmt.Errorf("fsblob: removing temporary files: %w", err)
	}
	return n, nil
}

// ValidateKey accepts 1 to MaxKeyBytes characters of [A-Za-z0-9_./-], made of non-empty "/"-separated
// segments none of which is "." or ".." (so no absolute path, no trailing slash, no backslash).
func ValidateKey(key string) error {
	if key == "" || len(key) > MaxKeyBytes {
		return fmt.Errorf("%w: length %d", ErrInvalidKey, len(key))
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == '/' || c == '-') {
			return fmt.Errorf("%w: %q: character %q", ErrInvalidKey, key, c)
		}
	}
	for _, seg := range strings.Split(key, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("%w: %q: segment %q", ErrInvalidKey, key, seg)
		}
	}
	return nil
}

func validDigest(s string) bool {
	if len(s) != sha256.Size*2 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// path returns the object file of a validated key.
func (s *Store) path(key string) string {
	sum := sha256.Sum256([]byte(key))
	h := hex.EncodeToString(sum[:])
	return filepath.Join(s.root, h[0:2], h[2:4], h)
}

// Put stores exactly size bytes of r hashing to sha256 at key, create-only (see the package documentation).
func (s *Store) Put(ctx context.Context, key string, size int64, sha256hex string, r io.Reader) (port.BlobInfo, error) {
	if err := ValidateKey(key); err != nil {
		return port.BlobInfo{}, fmt.Errorf("fsblob: put: %w", err)
	}
	if size < 0 || !validDigest(sha256hex) {
		return port.BlobInfo{}, fmt.Errorf("fsblob: put %s: %w: size %d, sha256 %q", key, ErrInvalidArgument, size, sha256hex)
	}
	if err := ctx.Err(); err != nil {
		return port.BlobInfo{}, fmt.Errorf("fsblob: put %s: %w", key, err)
	}
	final := s.path(key)
	// Cheap early answer for a repeated put; the link below is what guarantees create-only.
	if info, err := readInfo(final); err == nil {
		return info, fmt.Errorf("fsblob: put %s: %w", key, port.ErrBlobExists)
	} else if !errors.Is(err, port.ErrBlobNotFound) {
		return port.BlobInfo{}, fmt.Errorf("fsblob: put %s: %w", key, err)
	}
	dir := filepath.Dir(final)
	if err := s.mkdirs(dir); err != nil {
		return port.BlobInfo{}, fmt.Errorf("fsblob: put %s: %w", key, ioErr(err))
	}
	f, err := os.CreateTemp(dir, tempPrefix+"*")
	if err != nil {
		return port.BlobInfo{}, fmt.Errorf("fsblob: put %s: %w", key, ioErr(err))
	}
	tmp := f.Name()
	defer func() {
		if f != nil {
			_ = f.Close()
		}
		_ = os.Remove(tmp) // after a successful link this only drops the temporary name
	}()

	if _, err := io.WriteString(f, magic+sha256hex+"\n"); err != nil {
		return port.BlobInfo{}, fmt.Errorf("fsblob: put %s: %w", key, ioErr(err))
	}
	h := sha256.New()
	src := io.Reader(&ctxReader{ctx: ctx, r: r})
	if size < 1<<62 {
		src = io.LimitReader(src, size+1) // one byte more than expected is enough to detect a long body
	}
	n, err := io.CopyBuffer(&teeWriter{f: f, h: h}, src, make([]byte, copyBuffer))
	if err != nil {
		var we *writeError
		if errors.As(err, &we) {
			return port.BlobInfo{}, fmt.Errorf("fsblob: put %s: %w", key, ioErr(we.err))
		}
		return port.BlobInfo{}, fmt.Errorf("fsblob: put %s: read body: %w", key, err)
	}
	if n != size {
		return port.BlobInfo{}, fmt.Errorf("fsblob: put %s: got %d+ bytes, want %d: %w", key, n, size, port.ErrBlobSize)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != sha256hex {
		return port.BlobInfo{}, fmt.Errorf("fsblob: put %s: got sha256 %s, want %s: %w", key, got, sha256hex, port.ErrBlobChecksum)
	}
	if err := s.sync(f); err != nil {
		return port.BlobInfo{}, fmt.Errorf("fsblob: put %s: %w", key, ioErr(err))
	}
	err = f.Close()
	f = nil
	if err != nil {
		return port.BlobInfo{}, fmt.Errorf("fsblob: put %s: %w", key, ioErr(err))
	}
	if err := os.Link(tmp, final); err != nil {
		if errors.Is(err, fs.ErrExist) {
			info, herr := readInfo(final)
			if herr != nil {
				return port.BlobInfo{}, fmt.Errorf("fsblob: put %s: exists, but: %w", key, herr)
			}
			return info, fmt.Errorf("fsblob: put %s: %w", key, port.ErrBlobExists)
		}
		return port.BlobInfo{}, fmt.Errorf("fsblob: put %s: publish: %w", key, ioErr(err))
	}
	if err := s.syncDir(dir); err != nil {
		return port.BlobInfo{}, fmt.Errorf("fsblob: put %s: %w", key, ioErr(err))
	}
	return port.BlobInfo{Size: size, SHA256: sha256hex}, nil
}

// Head returns the size and SHA-256 of the object at key, or an error wrapping port.ErrBlobNotFound.
func (s *Store) Head(ctx context.Context, key string) (port.BlobInfo, error) {
	if err := ValidateKey(key); err != nil {
		return port.BlobInfo{}, fmt.Errorf("fsblob: head: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return port.BlobInfo{}, fmt.Errorf("fsblob: head %s: %w", key, err)
	}
	info, err := readInfo(s.path(key))
	if err != nil {
		return port.BlobInfo{}, fmt.Errorf("fsblob: head %s: %w", key, err)
	}
	return info, nil
}

// Get opens the object at key for streaming, or returns an error wrapping port.ErrBlobNotFound. The caller
// must close the reader.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, port.BlobInfo, error) {
	if err := ValidateKey(key); err != nil {
		return nil, port.BlobInfo{}, fmt.Errorf("fsblob: get: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, port.BlobInfo{}, fmt.Errorf("fsblob: get %s: %w", key, err)
	}
	f, info, err := open(s.path(key))
	if err != nil {
		return nil, port.BlobInfo{}, fmt.Errorf("fsblob: get %s: %w", key, err)
	}
	return &body{r: io.LimitReader(f, info.Size), f: f}, info, nil
}

// Delete removes the object at key; an absent object is not an error.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := ValidateKey(key); err != nil {
		return fmt.Errorf("fsblob: delete: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("fsblob: delete %s: %w", key, err)
	}
	p := s.path(key)
	if err := os.Remove(p); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("fsblob: delete %s: %w", key, ioErr(err))
	}
	if err := s.syncDir(filepath.Dir(p)); err != nil {
		return fmt.Errorf("fsblob: delete %s: %w", key, ioErr(err))
	}
	return nil
}

// open opens an object file positioned after its header.
func open(p string) (*os.File, port.BlobInfo, error) {
	f, err := os.Open(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, port.BlobInfo{}, port.ErrBlobNotFound
		}
		return nil, port.BlobInfo{}, ioErr(err)
	}
	info, err := readHeader(f)
	if err != nil {
		_ = f.Close()
		return nil, port.BlobInfo{}, err
	}
	return f, info, nil
}

func readInfo(p string) (port.BlobInfo, error) {
	f, info, err := open(p)
	if err != nil {
		return port.BlobInfo{}, err
	}
	_ = f.Close()
	return info, nil
}

func readHeader(f *os.File) (port.BlobInfo, error) {
	var hdr [headerSize]byte
	if _, err := io.ReadFull(f, hdr[:]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return port.BlobInfo{}, fmt.Errorf("%w: %s: short header", ErrCorrupt, f.Name())
		}
		return port.BlobInfo{}, ioErr(err)
	}
	sum := string(hdr[len(magic) : headerSize-1])
	if !bytes.HasPrefix(hdr[:], []byte(magic)) || hdr[headerSize-1] != '\n' || !validDigest(sum) {
		return port.BlobInfo{}, fmt.Errorf("%w: %s: bad header", ErrCorrupt, f.Name())
	}
	st, err := f.Stat()
	if err != nil {
		return port.BlobInfo{}, ioErr(err)
	}
	return port.BlobInfo{Size: st.Size() - int64(headerSize), SHA256: sum}, nil
}

// mkdirs creates dir and its missing parents under the root, fsyncing each parent that gained an entry.
func (s *Store) mkdirs(dir string) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	parent := filepath.Dir(dir)
	if parent != s.root {
		if err := s.mkdirs(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil
		}
		return err
	}
	return s.syncDir(parent)
}

// sync flushes f to the disk (unless NoSync).
func (s *Store) sync(f *os.File) error {
	if s.noSync {
		return nil
	}
	return f.Sync()
}

// syncDir flushes a directory's entries to the disk (unless NoSync).
func (s *Store) syncDir(dir string) error {
	if s.noSync {
		return nil
	}
	return dirsync.Sync(dir)
}

// ioErr marks a file-system failure as transient.
func ioErr(err error) error { return fmt.Errorf("%w: %w", port.ErrUnavailable, err) }

// writeError distinguishes a failed file write from a failed read of the caller's body.
type writeError struct{ err error }

func (e *writeError) Error() string { return e.err.Error() }

type teeWriter struct {
	f *os.File
	h io.Writer
}

func (w *teeWriter) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	if err != nil {
		return n, &writeError{err}
	}
	w.h.Write(p[:n]) // hash.Hash never fails
	return n, nil
}

// ctxReader stops reading once ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// body streams an object's content, hiding the file (and its header) from the caller.
type body struct {
	r io.Reader
	f *os.File
}

func (b *body) Read(p []byte) (int, error) { return b.r.Read(p) }
func (b *body) Close() error               { return b.f.Close() }
