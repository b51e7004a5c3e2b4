package s3blob_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/store/s3blob"
	"github.com/waypost/waypost/store/s3blob/s3test"
)

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// rawPut writes an object around the store, as another writer could.
func rawPut(t *testing.T, c *s3.Client, bucket, name string, body []byte, meta map[string]string, withChecksum bool) {
	t.Helper()
	in := &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(name), Body: bytes.NewReader(body), Metadata: meta}
	if withChecksum {
		s := sha256.Sum256(body)
		in.ChecksumSHA256 = aws.String(base64.StdEncoding.EncodeToString(s[:]))
	}
	if _, err := c.PutObject(context.Background(), in); err != nil {
		t.Fatalf("raw put %s: %v", name, err)
	}
}

// The object carries the digest twice: as metadata and as the server-verified SHA-256 checksum, and the
// name ends with the suffix.
func TestObjectLayout(t *testing.T) {
	e := s3test.Require(t)
	c, bucket := e.Client(), e.Bucket(t)
	st, err := s3blob.New(c, bucket, s3blob.Options{Prefix: "pre/"})
	if err != nil {
		t.Fatal(err)
	}
	b := []byte("layout")
	if _, err := st.Put(context.Background(), "a/b", int64(len(b)), digest(b), bytes.NewReader(b)); err != nil {
		t.Fatal(err)
	}
	out, err := c.HeadObject(context.Background(), &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String("pre/a/b~"), ChecksumMode: "ENABLED"})
	if err != nil {
		t.Fatalf("head pre/a/b~: %v", err)
	}
	sum := sha256.Sum256(b)
	if got := aws.ToString(out.ChecksumSHA256); got != base64.StdEncoding.EncodeToString(sum[:]) {
		t.Fatalf("stored checksum %q", got)
	}
	if got := out.Metadata[s3blob.MetaSHA256]; got != digest(b) {
		t.Fatalf("metadata %v", out.Metadata)
	}
}

// Head and Get fall back on the stored checksum for objects without the metadata, refuse objects with
// neither or with both disagreeing, and Get detects bytes that do not match the recorded digest.
func TestForeignObjects(t *testing.T) {
	e := s3test.Require(t)
	c, bucket := e.Client(), e.Bucket(t)
	st, err := s3blob.New(c, bucket, s3blob.Options{})
	if err != nil {
		t.Fatal(err)
	}
	body := []byte("written by someone else")
	rawPut(t, c, bucket, "checksum-only~", body, nil, true)
	rawPut(t, c, bucket, "nothing~", body, nil, false)
	rawPut(t, c, bucket, "lying-meta~", body, map[string]string{s3blob.MetaSHA256: digest([]byte("other"))}, false)
	rawPut(t, c, bucket, "disagree~", body, map[string]string{s3blob.MetaSHA256: digest([]byte("other"))}, true)

	want := port.BlobInfo{Size: int64(len(body)), SHA256: digest(body)}
	if info, err := st.Head(context.Background(), "checksum-only"); err != nil || info != want {
		t.Fatalf("head checksum-only: %+v, %v; want %+v", info, err, want)
	}
	rc, info, err := st.Get(context.Background(), "checksum-only")
	if err != nil || info != want {
		t.Fatalf("get checksum-only: %+v, %v", info, err)
	}
	if got, err := io.ReadAll(rc); err != nil || !bytes.Equal(got, body) {
		t.Fatalf("read checksum-only: %q, %v", got, err)
	}
	rc.Close()
	for _, k := range []string{"nothing", "disagree"} {
		if _, err := st.Head(context.Background(), k); !errors.Is(err, s3blob.ErrCorrupt) {
			t.Fatalf("head %s: %v, want ErrCorrupt", k, err)
		}
	}
	rc, _, err = st.Get(context.Background(), "lying-meta")
	if err != nil {
		t.Fatalf("get lying-meta: %v", err)
	}
	defer rc.Close()
	if _, err := io.ReadAll(rc); !errors.Is(err, port.ErrBlobChecksum) {
		t.Fatalf("reading an object whose bytes do not match its digest: %v, want ErrBlobChecksum", err)
	}
}

// A body with the right length but the wrong bytes is refused by the server, which is what verifies the
// digest: the store does not hash on the way in.
func TestServerVerifiesDigest(t *testing.T) {
	e := s3test.Require(t)
	st, err := s3blob.New(e.Client(), e.Bucket(t), s3blob.Options{})
	if err != nil {
		t.Fatal(err)
	}
	good := bytes.Repeat([]byte("a"), 3<<20) // above the SDK's 100-continue threshold
	bad := append([]byte(nil), good...)
	bad[len(bad)-1] = 'b'
	if _, err := st.Put(context.Background(), "v", int64(len(bad)), digest(good), bytes.NewReader(bad)); !errors.Is(err, port.ErrBlobChecksum) {
		t.Fatalf("put of wrong bytes: %v, want ErrBlobChecksum", err)
	}
	if _, err := st.Head(context.Background(), "v"); !errors.Is(err, port.ErrBlobNotFound) {
		t.Fatalf("head after refused put: %v, want ErrBlobNotFound", err)
	}
	if _, err := st.Put(context.Background(), "v", int64(len(good)), digest(good), bytes.NewReader(good)); err != nil {
		t.Fatalf("put: %v", err)
	}
}

// byteStream is an unseekable stream of n bytes of one value.
type byteStream struct {
	n int64
	c byte
}

func (b *byteStream) Read(p []byte) (int, error) {
	if b.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > b.n {
		p = p[:b.n]
	}
	for i := range p {
		p[i] = b.c
	}
	b.n -= int64(len(p))
	return len(p), nil
}

// Putting 64 MiB from an unseekable stream keeps the heap flat: the SDK neither buffers the body nor reads it
// twice (it signs with the declared digest).
func TestPutMemoryFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("64 MiB put skipped in -short mode")
	}
	e := s3test.Require(t)
	st, err := s3blob.New(e.Client(), e.Bucket(t), s3blob.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const size = 64 << 20
	h := sha256.New()
	if _, err := io.Copy(h, &byteStream{n: size, c: 'z'}); err != nil {
		t.Fatal(err)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var peak atomic.Uint64
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		var ms runtime.MemStats
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
				runtime.ReadMemStats(&ms)
				if ms.HeapAlloc > peak.Load() {
					peak.Store(ms.HeapAlloc)
				}
			}
		}
	}()
	info, err := st.Put(context.Background(), "big", size, sum, &byteStream{n: size, c: 'z'})
	close(stop)
	<-done
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if err != nil || info.Size != size {
		t.Fatalf("put: %+v, %v", info, err)
	}
	grew := int64(peak.Load()) - int64(before.HeapAlloc)
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("64 MiB put: peak heap growth %d KiB, %d KiB allocated in all", grew>>10, allocated>>10)
	if grew > 8<<20 || allocated > 16<<20 {
		t.Fatalf("64 MiB put grew the heap by %d KiB and allocated %d KiB: the body is buffered", grew>>10, allocated>>10)
	}
}

// Invalid arguments are refused before any request.
func TestInvalidArguments(t *testing.T) {
	st, err := s3blob.New(nopAPI{t}, "bucket", s3blob.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sum := digest([]byte("x"))
	for name, call := range map[string]func() error{
		"empty key": func() error { _, err := st.Put(context.Background(), "", 1, sum, strings.NewReader("x")); return err },
		"dot segment": func() error {
			_, err := st.Put(context.Background(), "a/../b", 1, sum, strings.NewReader("x"))
			return err
		},
		"tilde":         func() error { _, err := st.Put(context.Background(), "a~", 1, sum, strings.NewReader("x")); return err },
		"negative size": func() error { _, err := st.Put(context.Background(), "k", -1, sum, strings.NewReader("x")); return err },
		"upper digest": func() error {
			_, err := st.Put(context.Background(), "k", 1, strings.ToUpper(sum), strings.NewReader("x"))
			return err
		},
		"short digest": func() error {
			_, err := st.Put(context.Background(), "k", 1, sum[:62], strings.NewReader("x"))
			return err
		},
		"head bad key":   func() error { _, err := st.Head(context.Background(), "a//b"); return err },
		"get bad key":    func() error { _, _, err := st.Get(context.Background(), "/a"); return err },
		"delete bad key": func() error { return st.Delete(context.Background(), "a b") },
	} {
		if err := call(); err == nil {
			t.Fatalf("%s: accepted", name)
		}
	}
}

type nopAPI struct{ t *testing.T }

func (n nopAPI) PutObject(context.Context, *s3.PutObjectInput, ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	n.t.Fatal("PutObject called")
	return nil, nil
}

func (n nopAPI) HeadObject(context.Context, *s3.HeadObjectInput, ...func(*s3.Options)) (*s3.HeadObjectOutput, error) {
	n.t.Fatal("HeadObject called")
	return nil, nil
}

func (n nopAPI) GetObject(context.Context, *s3.GetObjectInput, ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	n.t.Fatal("GetObject called")
	return nil, nil
}

func (n nopAPI) DeleteObject(context.Context, *s3.DeleteObjectInput, ...func(*s3.Options)) (*s3.DeleteObjectOutput, error) {
	n.t.Fatal("DeleteObject called")
	return nil, nil
}
