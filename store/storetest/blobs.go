package storetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/waypost/waypost/domain/port"
)

// EmptySHA256 is the SHA-256 of zero bytes.
const EmptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// RunBlobStore runs the port.BlobStore contract against the stores newStore returns (a fresh, empty one per
// subtest).
func RunBlobStore(t *testing.T, newStore func(t *testing.T) port.BlobStore) {
	runContract(t, newStore, []contractCheck[port.BlobStore]{
		{"RoundTrip", testBlobRoundTrip},
		{"Empty", testBlobEmpty},
		{"Absent", testBlobAbsent},
		{"WrongSize", testBlobWrongSize},
		{"WrongChecksum", testBlobWrongChecksum},
		{"ReaderError", testBlobReaderError},
		{"CreateOnly", testBlobCreateOnly},
		{"ConcurrentPut", testBlobConcurrentPut},
		{"Delete", testBlobDelete},
		{"ContextCancelled", testBlobContextCancelled},
		{"KeysAreDistinct", testBlobKeysDistinct},
		{"LargeStreaming", testBlobLarge},
	})
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func putBlob(t testing.TB, s port.BlobStore, k string, b []byte) port.BlobInfo {
	t.Helper()
	info, err := s.Put(context.Background(), k, int64(len(b)), digest(b), bytes.NewReader(b))
	if err != nil {
		t.Fatalf("put %s: %v", k, err)
	}
	if want := (port.BlobInfo{Size: int64(len(b)), SHA256: digest(b)}); info != want {
		t.Fatalf("put %s returned %+v, want %+v", k, info, want)
	}
	return info
}

// wantBlob checks Head and Get of k against b.
func wantBlob(t testing.TB, s port.BlobStore, k string, b []byte) {
	t.Helper()
	want := port.BlobInfo{Size: int64(len(b)), SHA256: digest(b)}
	info, err := s.Head(context.Background(), k)
	if err != nil || info != want {
		t.Fatalf("head %s: %+v, %v; want %+v", k, info, err, want)
	}
	rc, info, err := s.Get(context.Background(), k)
	if err != nil {
		t.Fatalf("get %s: %v", k, err)
	}
	defer rc.Close()
	if info != want {
		t.Fatalf("get %s info %+v, want %+v", k, info, want)
	}
	got, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read %s: %v", k, err)
	}
	if !bytes.Equal(got, b) {
		t.Fatalf("get %s: %d bytes %.40q, want %d bytes %.40q", k, len(got), got, len(b), b)
	}
}

func wantNoBlob(t testing.TB, s port.BlobStore, k string) {
	t.Helper()
	if info, err := s.Head(context.Background(), k); !errors.Is(err, port.ErrBlobNotFound) {
		t.Fatalf("head %s: %+v, %v; want ErrBlobNotFound", k, info, err)
	}
	rc, _, err := s.Get(context.Background(), k)
	if !errors.Is(err, port.ErrBlobNotFound) {
		if rc != nil {
			rc.Close()
		}
		t.Fatalf("get %s: %v; want ErrBlobNotFound", k, err)
	}
}

func testBlobRoundTrip(t *testing.T, s port.BlobStore) {
	b := []byte("hello, waypost\x00\xff binary")
	putBlob(t, s, "spaces/sp1/messages/m1/body.json", b)
	wantBlob(t, s, "spaces/sp1/messages/m1/body.json", b)
	// One byte, and a multi-buffer size that is not a power of two.
	putBlob(t, s, "one", []byte{0})
	wantBlob(t, s, "one", []byte{0})
	mid := bytes.Repeat([]byte("0123456789"), 100_003)
	putBlob(t, s, "a/b/c-d_e.f", mid)
	wantBlob(t, s, "a/b/c-d_e.f", mid)
}

func testBlobEmpty(t *testing.T, s port.BlobStore) {
	if digest(nil) != EmptySHA256 {
		t.Fatal("EmptySHA256 is wrong")
	}
	info, err := s.Put(context.Background(), "empty", 0, EmptySHA256, strings.NewReader(""))
	if err != nil || info != (port.BlobInfo{Size: 0, SHA256: EmptySHA256}) {
		t.Fatalf("put empty: %+v, %v", info, err)
	}
	wantBlob(t, s, "empty", nil)
	// The empty blob is stored: a second put is refused.
	if _, err := s.Put(context.Background(), "empty", 0, EmptySHA256, strings.NewReader("")); !errors.Is(err, port.ErrBlobExists) {
		t.Fatalf("second put of the empty blob: %v, want ErrBlobExists", err)
	}
}

func testBlobAbsent(t *testing.T, s port.BlobStore) {
	wantNoBlob(t, s, "never/stored")
	putBlob(t, s, "never/stored2", []byte("x"))
	wantNoBlob(t, s, "never/stored")
	wantNoBlob(t, s, "never")
}

func testBlobWrongSize(t *testing.T, s port.BlobStore) {
	b := []byte("twelve bytes")
	for name, size := range map[string]int64{"short": int64(len(b)) + 1, "long": int64(len(b)) - 1, "zero": 0} {
		k := "size/" + name
		_, err := s.Put(context.Background(), k, size, digest(b), bytes.NewReader(b))
		if !errors.Is(err, port.ErrBlobSize) {
			t.Fatalf("%s body: %v, want ErrBlobSize", name, err)
		}
		wantNoBlob(t, s, k)
		// The key is still free.
		putBlob(t, s, k, b)
		wantBlob(t, s, k, b)
	}
}

func testBlobWrongChecksum(t *testing.T, s port.BlobStore) {
	b := []byte("the real content")
	other := digest([]byte("the real contenT"))
	_, err := s.Put(context.Background(), "sum", int64(len(b)), other, bytes.NewReader(b))
	if !errors.Is(err, port.ErrBlobChecksum) {
		t.Fatalf("wrong checksum: %v, want ErrBlobChecksum", err)
	}
	wantNoBlob(t, s, "sum")
	_, err = s.Put(context.Background(), "sum", 0, digest(b), strings.NewReader(""))
	if err == nil {
		t.Fatal("empty body with a non-empty digest was stored")
	}
	wantNoBlob(t, s, "sum")
	for _, bad := range []string{"", "xyz", strings.ToUpper(digest(b)), digest(b)[:63]} {
		if _, err := s.Put(context.Background(), "sum", int64(len(b)), bad, bytes.NewReader(b)); err == nil {
			t.Fatalf("digest %q accepted", bad)
		}
		wantNoBlob(t, s, "sum")
	}
	putBlob(t, s, "sum", b)
	wantBlob(t, s, "sum", b)
}

type failingReader struct {
	r     io.Reader
	after int
	err   error
}

func (f *failingReader) Read(p []byte) (int, error) {
	if f.after <= 0 {
		return 0, f.err
	}
	if len(p) > f.after {
		p = p[:f.after]
	}
	n, err := f.r.Read(p)
	f.after -= n
	return n, err
}

func testBlobReaderError(t *testing.T, s port.BlobStore) {
	b := bytes.Repeat([]byte("x"), 100_000)
	boom := errors.New("client went away")
	_, err := s.Put(context.Background(), "rerr", int64(len(b)), digest(b), &failingReader{r: bytes.NewReader(b), after: 50_000, err: boom})
	if err == nil {
		t.Fatal("put with a failing reader succeeded")
	}
	if !errors.Is(err, boom) && !errors.Is(err, port.ErrBlobSize) {
		t.Logf("reader error reported as %v", err)
	}
	wantNoBlob(t, s, "rerr")
	putBlob(t, s, "rerr", b)
}

func testBlobCreateOnly(t *testing.T, s port.BlobStore) {
	first := []byte("first content")
	info := putBlob(t, s, "co", first)
	for name, b := range map[string][]byte{"same": first, "different": []byte("second, longer content"), "empty": nil} {
		got, err := s.Put(context.Background(), "co", int64(len(b)), digest(b), bytes.NewReader(b))
		if !errors.Is(err, port.ErrBlobExists) {
			t.Fatalf("%s second put: %v, want ErrBlobExists", name, err)
		}
		if got != info {
			t.Fatalf("%s second put returned %+v, want the stored object's %+v", name, got, info)
		}
		wantBlob(t, s, "co", first)
	}
	// Even a second put whose body is wrong reports the existing object and changes nothing.
	_, err := s.Put(context.Background(), "co", 3, digest([]byte("abc")), strings.NewReader("abcd"))
	if err == nil {
		t.Fatal("bad second put succeeded")
	}
	wantBlob(t, s, "co", first)
}

func testBlobConcurrentPut(t *testing.T, s port.BlobStore) {
	const n = 16
	bodies := make([][]byte, n)
	for i := range bodies {
		bodies[i] = bytes.Repeat([]byte(fmt.Sprintf("writer %02d ", i)), 20_000) // ~200 KB each
	}
	var (
		wg    sync.WaitGroup
		infos = make([]port.BlobInfo, n)
		errs  = make([]error, n)
		start = make(chan struct{})
	)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			b := bodies[i]
			infos[i], errs[i] = s.Put(context.Background(), "race/obj", int64(len(b)), digest(b), bytes.NewReader(b))
		}(i)
	}
	close(start)
	wg.Wait()
	winner := -1
	for i, err := range errs {
		if err == nil {
			if winner >= 0 {
				t.Fatalf("puts %d and %d both stored", winner, i)
			}
			winner = i
		} else if !errors.Is(err, port.ErrBlobExists) {
			t.Fatalf("put %d: %v, want nil or ErrBlobExists", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no put stored the object")
	}
	want := port.BlobInfo{Size: int64(len(bodies[winner])), SHA256: digest(bodies[winner])}
	for i, info := range infos {
		if info != want {
			t.Fatalf("put %d returned %+v, want the winner's %+v", i, info, want)
		}
	}
	wantBlob(t, s, "race/obj", bodies[winner])
}

func testBlobDelete(t *testing.T, s port.BlobStore) {
	if err := s.Delete(context.Background(), "d/never"); err != nil {
		t.Fatalf("delete absent: %v", err)
	}
	putBlob(t, s, "d/x", []byte("x"))
	putBlob(t, s, "d/y", []byte("y"))
	if err := s.Delete(context.Background(), "d/x"); err != nil {
		t.Fatalf("delete: %v", err)
	}
	wantNoBlob(t, s, "d/x")
	wantBlob(t, s, "d/y", []byte("y"))
	if err := s.Delete(context.Background(), "d/x"); err != nil {
		t.Fatalf("second delete: %v", err)
	}
	// After a delete the key can be stored again.
	putBlob(t, s, "d/x", []byte("new x"))
	wantBlob(t, s, "d/x", []byte("new x"))
}

func testBlobContextCancelled(t *testing.T, s port.BlobStore) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	b := []byte("content")
	if _, err := s.Put(ctx, "cx", int64(len(b)), digest(b), bytes.NewReader(b)); !errors.Is(err, context.Canceled) {
		t.Fatalf("put: %v, want context.Canceled", err)
	}
	wantNoBlob(t, s, "cx")
	// Cancelled while streaming.
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	big := int64(8 << 20)
	r := &cancellingReader{r: newPattern(big, 1), cancel: cancel, at: 1 << 20}
	if _, err := s.Put(ctx, "cx", big, patternDigest(big, 1), r); err == nil {
		t.Fatal("put cancelled while streaming succeeded")
	}
	wantNoBlob(t, s, "cx")
	putBlob(t, s, "cx2", b)
	if _, err := s.Head(ctx, "cx2"); !errors.Is(err, context.Canceled) {
		t.Fatalf("head: %v, want context.Canceled", err)
	}
	if _, _, err := s.Get(ctx, "cx2"); !errors.Is(err, context.Canceled) {
		t.Fatalf("get: %v, want context.Canceled", err)
	}
}

type cancellingReader struct {
	r      io.Reader
	cancel func()
	at     int64
	n      int64
}

func (c *cancellingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.n >= c.at {
		c.cancel()
	}
	return n, err
}

func testBlobKeysDistinct(t *testing.T, s port.BlobStore) {
	keys := []string{"a", "a/b", "a/b/c", "A", "a.b", "a-b", "a_b", "ab", "spaces/x/y"}
	for i, k := range keys {
		putBlob(t, s, k, []byte(fmt.Sprint("content ", i)))
	}
	for i, k := range keys {
		wantBlob(t, s, k, []byte(fmt.Sprint("content ", i)))
	}
}

// pattern is a deterministic pseudo-random byte stream of a given length, generated on the fly from a 1 MiB
// xorshift table: block k of the stream is the table rotated by k*7919 bytes, so the stream does not repeat
// with the block size, and reading costs a copy (cheap also under the race detector). The stream depends only
// on the seed, not on the read sizes.
type pattern struct {
	table []byte
	pos   int64
	size  int64
}

const patternBlock = 1 << 20

func newPattern(n int64, seed uint64) *pattern {
	t := make([]byte, patternBlock)
	x := seed*0x9E3779B97F4A7C15 + 1
	for i := 0; i < len(t); i += 8 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		binary.LittleEndian.PutUint64(t[i:], x)
	}
	return &pattern{table: t, size: n}
}

func (p *pattern) Read(b []byte) (int, error) {
	if p.pos >= p.size {
		return 0, io.EOF
	}
	if left := p.size - p.pos; int64(len(b)) > left {
		b = b[:left]
	}
	n := 0
	for n < len(b) {
		block, in := p.pos/patternBlock, int(p.pos%patternBlock)
		off := (in + int(block*7919%patternBlock)) % patternBlock
		c := len(b) - n
		if r := patternBlock - in; c > r {
			c = r // stay within the block
		}
		if r := patternBlock - off; c > r {
			c = r // stay within the table
		}
		copy(b[n:n+c], p.table[off:off+c])
		n += c
		p.pos += int64(c)
	}
	return n, nil
}

func patternDigest(n int64, seed uint64) string {
	h := sha256.New()
	if _, err := io.Copy(h, newPattern(n, seed)); err != nil {
		panic(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// testBlobLarge streams 64 MiB generated on the fly in and out and checks the store never holds much of it
// in memory at once (peak heap growth well under the object's size).
func testBlobLarge(t *testing.T, s port.BlobStore) {
	if testing.Short() {
		t.Skip("64 MiB blob skipped in -short mode")
	}
	const size = 64 << 20
	sum := patternDigest(size, 7)
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	var peak atomic.Uint64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		var ms runtime.MemStats
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				runtime.ReadMemStats(&ms)
				if ms.HeapAlloc > peak.Load() {
					peak.Store(ms.HeapAlloc)
				}
			}
		}
	}()
	info, err := s.Put(context.Background(), "large/obj", size, sum, newPattern(size, 7))
	if err != nil {
		close(stop)
		<-done
		t.Fatalf("put 64 MiB: %v", err)
	}
	if info != (port.BlobInfo{Size: size, SHA256: sum}) {
		t.Fatalf("put returned %+v", info)
	}
	rc, info, err := s.Get(context.Background(), "large/obj")
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	h := sha256.New()
	n, err := io.Copy(h, rc)
	rc.Close()
	close(stop)
	<-done
	if err != nil || n != size || hex.EncodeToString(h.Sum(nil)) != sum || info.Size != size || info.SHA256 != sum {
		t.Fatalf("read back %d bytes (%v), info %+v", n, err, info)
	}
	if grew := int64(peak.Load()) - int64(base.HeapAlloc); grew > 32<<20 {
		t.Fatalf("heap grew by %d MiB while streaming 64 MiB: the store buffers the object", grew>>20)
	}
	// A wrong digest is only discovered at the end: the streamed bytes must not be stored.
	if _, err := s.Put(context.Background(), "large/bad", size, EmptySHA256, newPattern(size, 7)); !errors.Is(err, port.ErrBlobChecksum) {
		t.Fatalf("large put with a wrong digest: %v, want ErrBlobChecksum", err)
	}
	wantNoBlob(t, s, "large/bad")
}
