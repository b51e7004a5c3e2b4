// Package verified reads a stream of bytes while checking it against the size and SHA-256 announced for it,
// so that a download (from the service, or from the blob store) is never taken as complete unless it is
// exactly the content it claims to be.
package verified

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
)

// Reader reads from an underlying reader, counting and hashing what passes. It never hands out a byte
// beyond the announced size: a longer stream fails with a *Mismatch as soon as it shows it. At the end of
// the stream it returns io.EOF only when the size and the SHA-256 are the announced ones, and a *Mismatch
// otherwise. Errors of the underlying reader are returned as they are. Every error is sticky.
type Reader struct {
	r      io.Reader
	size   int64
	sha256 string
	h      hash.Hash
	n      int64
	err    error
}

// NewReader returns a Reader of r, which is announced to hold size bytes with the SHA-256 sha256hex
// (lowercase hex).
func NewReader(r io.Reader, size int64, sha256hex string) *Reader {
	return &Reader{r: r, size: size, sha256: sha256hex, h: sha256.New()}
}

// Read reads from the underlying reader, checking the content at its end.
func (v *Reader) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	n, err := v.r.Read(p)
	v.h.Write(p[:n]) // a hash.Hash never fails
	v.n += int64(n)
	switch {
	case v.n > v.size:
		v.err = &Mismatch{Size: v.size, SHA256: v.sha256, Got: v.n}
		return 0, v.err
	case err == io.EOF:
		if v.n != v.size {
			v.err = &Mismatch{Size: v.size, SHA256: v.sha256, Got: v.n}
		} else if got := hex.EncodeToString(v.h.Sum(nil)); got != v.sha256 {
			v.err = &Mismatch{Size: v.size, Got: v.n, SHA256: v.sha256, GotSHA256: got}
		} else {
			v.err = io.EOF
		}
	case err != nil:
		v.err = err
	}
	return n, v.err
}

// Mismatch reports content that is not what was announced: of another size (Got bytes, or more than Size
// when Got > Size, as far as they were read), or of the announced size with another SHA-256.
type Mismatch struct {
	// Size and SHA256 are the announced size and digest.
	Size   int64
	SHA256 string
	// Got is the number of bytes read; GotSHA256 their digest, set only when the size was right.
	Got       int64
	GotSHA256 string
}

// Digest reports whether the size was right and the SHA-256 not.
func (m *Mismatch) Digest() bool { return m.GotSHA256 != "" }

// Error says what differs.
func (m *Mismatch) Error() string {
	switch {
	case m.Digest():
		return fmt.Sprintf("got sha256 %s, want %s", m.GotSHA256, m.SHA256)
	case m.Got > m.Size:
		return fmt.Sprintf("more than %d bytes", m.Size)
	default:
		return fmt.Sprintf("got %d of %d bytes", m.Got, m.Size)
	}
}
