package verified_test

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"testing"
	"testing/iotest"

	"github.com/waypost/waypost/internal/verified"
)

func sum(b []byte) string { return fmt.Sprintf("%x", sha256.Sum256(b)) }

// TestReader checks the rules on every shape of reads (all at once, one byte at a time, half reads): the
// announced content ends in io.EOF; a short, long or altered one in a *Mismatch saying what differs, and
// never more than the announced size comes out.
func TestReader(t *testing.T) {
	content := []byte("the announced content")
	altered := bytes.ToUpper(content)
	tests := []struct {
		name       string
		body       []byte
		size       int64
		wantDigest bool // a *Mismatch about the digest
		wantSize   bool // a *Mismatch about the size
		wantMsg    string
	}{
		{name: "exact", body: content, size: int64(len(content))},
		{name: "empty", body: nil, size: 0},
		{name: "short", body: content[:5], size: int64(len(content)), wantSize: true, wantMsg: "got 5 of 21 bytes"},
		{name: "long", body: append(append([]byte{}, content...), 'x'), size: int64(len(content)), wantSize: true, wantMsg: "more than 21 bytes"},
		{name: "altered", body: altered, size: int64(len(content)), wantDigest: true,
			wantMsg: "got sha256 " + sum(altered) + ", want " + sum(content)},
	}
	shapes := map[string]func(io.Reader) io.Reader{
		"whole": func(r io.Reader) io.Reader { return r }, "one byte": iotest.OneByteReader, "half": iotest.HalfReader,
	}
	for _, tc := range tests {
		for shape, wrap := range shapes {
			t.Run(tc.name+"/"+shape, func(t *testing.T) {
				want := content[:tc.size]
				r := verified.NewReader(wrap(bytes.NewReader(tc.body)), tc.size, sum(want))
				got, err := io.ReadAll(r)
				if int64(len(got)) > tc.size {
					t.Fatalf("handed out %d bytes of %d announced", len(got), tc.size)
				}
				m, isMismatch := errors.AsType[*verified.Mismatch](err)
				switch {
				case !tc.wantSize && !tc.wantDigest:
					if err != nil || !bytes.Equal(got, want) {
						t.Fatalf("read %q, %v; want the content and no error", got, err)
					}
					return
				case !isMismatch:
					t.Fatalf("error %v, want a *Mismatch", err)
				case m.Digest() != tc.wantDigest || m.Error() != tc.wantMsg:
					t.Fatalf("mismatch %q (digest %v), want %q (digest %v)", m, m.Digest(), tc.wantMsg, tc.wantDigest)
				}
				if _, again := r.Read(make([]byte, 8)); again != err {
					t.Fatalf("a read after the mismatch: %v, want the same error", again)
				}
			})
		}
	}
}

// TestReaderPassesErrors: an error of the underlying reader comes out as it is, with the bytes read with it.
func TestReaderPassesErrors(t *testing.T) {
	boom := errors.New("boom")
	r := verified.NewReader(iotest.DataErrReader(iotest.ErrReader(boom)), 3, sum([]byte("abc")))
	if n, err := r.Read(make([]byte, 8)); n != 0 || err != boom {
		t.Fatalf("Read = %d, %v; want 0, the reader's error", n, err)
	}
	if _, err := r.Read(make([]byte, 8)); err != boom {
		t.Fatalf("second Read: %v, want the same error", err)
	}
}
