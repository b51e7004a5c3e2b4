package server_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/waypost/waypost/api/httpapi"
	"github.com/waypost/waypost/client"
	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/internal/cputime"
	"github.com/waypost/waypost/internal/platform"
	"github.com/waypost/waypost/server"
	"github.com/waypost/waypost/store/fsblob"
	"github.com/waypost/waypost/store/pebble"
)

// M1 performance tests: blobs and memory through the real HTTP handler, over the pebble item store and the file blob store
// with fsync ON unless a test says otherwise. docs/benchmarks-m1.md has the figures and how to run them.
//
//	WAYPOST_LARGE_TESTS=1 go test ./server -run TestLargeUploadBoundedMemory -v -timeout 30m
//	go test ./server -run '^$' -bench 'Upload|ManifestSnapshot10k' -benchtime 3x -timeout 30m
//	go test ./server -run TestManifestSnapshot10k -v

const m1Admin = "test-admin-secret-0123456789abcdefghijklmnopqrstuvwxyz"

// largeServer is the embedded deployment assembled as server.Open does (pebble, file blobs, HTTP API), with
// max_blob_bytes raised: the embedded default (100 MiB) is below what the large-upload tests send. It
// serves over real loopback TCP (httptest).
type largeServer struct {
	svc   *domain.Service
	url   string
	token string
}

func openLargeServer(tb testing.TB, maxBlob int64) *largeServer {
	tb.Helper()
	dir := tb.TempDir()
	st, err := pebble.Open(filepath.Join(dir, "items"), pebble.Options{}) // fsync ON
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = st.Close() })
	blobs, err := fsblob.New(filepath.Join(dir, "blobs"))
	if err != nil {
		tb.Fatal(err)
	}
	lim := domain.DefaultLimits()
	lim.MaxBlobBytes = maxBlob
	svc, err := domain.New(domain.Config{Store: st, Blobs: blobs, Clock: platform.Clock{}, IDs: platform.IDs{},
		CursorKey: bytes.Repeat([]byte("k"), 32), Limits: &lim, InlineBodyMax: server.InlineBodyMax})
	if err != nil {
		tb.Fatal(err)
	}
	api, err := httpapi.New(svc, httpapi.Options{AdminSecret: m1Admin, IDs: platform.IDs{}})
	if err != nil {
		tb.Fatal(err)
	}
	hs := httptest.NewServer(api)
	tb.Cleanup(hs.Close)
	return &largeServer{svc: svc, url: hs.URL, token: writerToken(tb, svc)}
}

// writerToken creates a space and an actor with every scope, and returns the actor's token.
func writerToken(tb testing.TB, svc *domain.Service) string {
	tb.Helper()
	ctx := context.Background()
	sp, err := svc.CreateSpace(ctx, domain.CreateSpaceRequest{RequestID: "sp"})
	if err != nil {
		tb.Fatal(err)
	}
	a, err := svc.CreateActor(ctx, sp.SpaceID, domain.CreateActorRequest{RequestID: "a"})
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := svc.CreateCollection(ctx, sp.SpaceID, domain.CreateCollectionRequest{RequestID: "c", SourceActorID: a.ActorID,
		CollectionID: "big", Scope: "performance test"}); err != nil {
		tb.Fatal(err)
	}
	tok, err := svc.CreateToken(ctx, sp.SpaceID, domain.CreateTokenRequest{RequestID: "t", ActorID: a.ActorID, Scopes: domain.AllScopes()})
	if err != nil {
		tb.Fatal(err)
	}
	return tok.Token
}

// genReader is the deterministic pseudo-random content of the large tests.
func genReader(seed uint64, n int64) io.Reader {
	var s [32]byte
	for i := range s {
		s[i] = byte(seed >> (8 * (i % 8)))
	}
	return io.LimitReader(rand.NewChaCha8(s), n)
}

// heapSampler records the peak HeapInuse growth over a baseline while it runs.
type heapSampler struct {
	base, peak atomic.Uint64
	stop       chan struct{}
	done       sync.WaitGroup
}

func startHeapSampler() *heapSampler {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	h := &heapSampler{stop: make(chan struct{})}
	h.base.Store(ms.HeapInuse)
	h.peak.Store(ms.HeapInuse)
	h.done.Add(1)
	go func() {
		defer h.done.Done()
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-h.stop:
				return
			case <-t.C:
				runtime.ReadMemStats(&ms)
				if ms.HeapInuse > h.peak.Load() {
					h.peak.Store(ms.HeapInuse)
				}
			}
		}
	}()
	return h
}

// growth stops the sampler and returns the peak growth in bytes.
func (h *heapSampler) growth() int64 {
	close(h.stop)
	h.done.Wait()
	return int64(h.peak.Load()) - int64(h.base.Load())
}

// peakRSS returns VmHWM from /proc/self/status, or "" where there is none.
func peakRSS() string {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func mbps(n int64, d time.Duration) float64 { return float64(n) / 1e6 / d.Seconds() }

// TestLargeUploadBoundedMemory uploads 1 GiB generated on the fly through the HTTP handler (fsync ON),
// seals it and reads it back, and checks that the Go heap stays bounded: nothing buffers the content.
func TestLargeUploadBoundedMemory(t *testing.T) {
	if testing.Short() || os.Getenv("WAYPOST_LARGE_TESTS") != "1" {
		t.Skip("set WAYPOST_LARGE_TESTS=1 (and drop -short) to upload 1 GiB")
	}
	const size = int64(1) << 30
	const maxGrowth = 64 << 20
	srv := openLargeServer(t, 2<<30)
	ctx := context.Background()
	cl := client.New(srv.url, srv.token)

	start := time.Now()
	h := sha256.New()
	if _, err := io.CopyBuffer(h, genReader(42, size), make([]byte, 256<<10)); err != nil {
		t.Fatal(err)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	t.Logf("hash of the generated content: %s in %s", sum, time.Since(start).Round(time.Millisecond))

	heap := startHeapSampler()
	start = time.Now()
	prep, err := cl.PrepareBlob(ctx, domain.BlobPrepareRequest{RequestID: "large-prep", ContentType: "application/octet-stream", SizeBytes: size, SHA256: sum})
	if err != nil {
		t.Fatal(err)
	}
	up, err := cl.UploadContent(ctx, prep.UploadID, "application/octet-stream", size, genReader(42, size))
	if err != nil {
		t.Fatalf("upload: %v", err)
	}
	info, err := cl.CommitBlob(ctx, domain.BlobCommitRequest{RequestID: "large-commit", UploadID: prep.UploadID})
	if err != nil {
		t.Fatalf("commit: %v", err)
	}
	upTime := time.Since(start)
	if up.AlreadyUploaded || info.SizeBytes != size || info.SHA256 != sum || info.State != domain.BlobSealed {
		t.Fatalf("upload %+v, seal %+v", up, info)
	}

	start = time.Now()
	bc, err := cl.OpenBlobContent(ctx, info.BlobID)
	if err != nil {
		t.Fatal(err)
	}
	rh := sha256.New()
	n, err := io.CopyBuffer(rh, bc, make([]byte, 256<<10)) // BlobContent also verifies size and digest at EOF
	bc.Close()
	if err != nil {
		t.Fatalf("reading back: %v", err)
	}
	downTime := time.Since(start)
	growth := heap.growth()
	if got := hex.EncodeToString(rh.Sum(nil)); n != size || got != sum {
		t.Fatalf("read back %d bytes hashing to %s, want %d and %s", n, got, size, sum)
	}
	t.Logf("upload+seal of 1 GiB: %s (%.0f MB/s); read back with SHA-256: %s (%.0f MB/s)",
		upTime.Round(time.Millisecond), mbps(size, upTime), downTime.Round(time.Millisecond), mbps(size, downTime))
	t.Logf("peak Go heap growth %.1f MiB (limit %d MiB); peak RSS (VmHWM) %s", float64(growth)/(1<<20), maxGrowth>>20, peakRSS())
	if growth > maxGrowth {
		t.Fatalf("the Go heap grew by %.1f MiB during the 1 GiB transfer (limit %d MiB): something buffers the content", float64(growth)/(1<<20), maxGrowth>>20)
	}
}

// BenchmarkUpload measures blob.prepare + PUT + blob.commit of a 256 MiB file through HTTP (loopback TCP,
// fsync ON), against sha256sum of the same file on the same machine. Reported: upload-MB/s and
// sha256sum-MB/s (wall clock, page cache warm), their ratio, and the same per CPU-second (this process
// runs client and server; the CPU figures stay meaningful when other processes compete for the cores).
func BenchmarkUpload(b *testing.B) {
	const size = int64(256) << 20
	srv := openLargeServer(b, 1<<30)
	ctx := context.Background()
	cl := client.New(srv.url, srv.token)
	path := filepath.Join(b.TempDir(), "upload.bin")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(f, h), genReader(7, size)); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	// sha256sum of the same bytes: best of 3 runs.
	var shaWall, shaCPU time.Duration
	if _, err := exec.LookPath("sha256sum"); err == nil {
		for range 3 {
			start := time.Now()
			cmd := exec.Command("sha256sum", path)
			out, err := cmd.Output()
			wall := time.Since(start)
			if err != nil || !strings.HasPrefix(string(out), sum) {
				b.Fatalf("sha256sum: %v %q", err, out)
			}
			cpu := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
			if shaWall == 0 || wall < shaWall {
				shaWall = wall
			}
			if shaCPU == 0 || cpu < shaCPU {
				shaCPU = cpu
			}
		}
	}
	var wall, cpu time.Duration
	b.SetBytes(size)
	b.ResetTimer()
	for i := range b.N {
		start, cpu0 := time.Now(), cputime.Self()
		prep, err := cl.PrepareBlob(ctx, domain.BlobPrepareRequest{RequestID: fmt.Sprintf("bench-prep-%d", i), ContentType: "application/octet-stream",
			SizeBytes: size, SHA256: sum, Filename: fmt.Sprintf("upload-%d.bin", i)})
		if err != nil {
			b.Fatal(err)
		}
		f, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		_, err = cl.UploadContent(ctx, prep.UploadID, "application/octet-stream", size, f)
		f.Close()
		if err != nil {
			b.Fatal(err)
		}
		if _, err := cl.CommitBlob(ctx, domain.BlobCommitRequest{RequestID: fmt.Sprintf("bench-commit-%d", i), UploadID: prep.UploadID}); err != nil {
			b.Fatal(err)
		}
		wall += time.Since(start)
		cpu += cputime.Self() - cpu0
	}
	b.StopTimer()
	up := mbps(size*int64(b.N), wall)
	b.ReportMetric(up, "upload-MB/s")
	b.ReportMetric(float64(size*int64(b.N))/1e6/cpu.Seconds(), "upload-MB/cpu-s")
	if shaWall > 0 {
		b.ReportMetric(mbps(size, shaWall), "sha256sum-MB/s")
		b.ReportMetric(up/mbps(size, shaWall), "ratio")
		b.ReportMetric(float64(size)/1e6/shaCPU.Seconds(), "sha256sum-MB/cpu-s")
	}
	b.Logf("peak RSS (VmHWM) %s", peakRSS())
}

// snapshot10k is a collection with 10,000 sealed small blobs of one actor, made through the domain.
type snapshot10k struct {
	url, token, collection string
	cl                     *client.Client
	blobIDs                []string
	setup                  time.Duration
}

const items10k = 10000

// newSnapshot10k creates the blobs with fsync off (item store and blob store; setup only), then reopens the
// same data directory with fsync ON for what is measured.
func newSnapshot10k(tb testing.TB) *snapshot10k {
	tb.Helper()
	start := time.Now()
	dir := tb.TempDir()
	setup, err := server.Open(server.Config{DataDir: dir, NoSync: true, NoSyncBlobs: true, AdminSecret: m1Admin})
	if err != nil {
		tb.Fatal(err)
	}
	svc := setup.Service()
	token := writerToken(tb, svc)
	ctx := context.Background()
	p, err := svc.Authenticate(ctx, token)
	if err != nil {
		tb.Fatal(err)
	}
	s := &snapshot10k{token: token, collection: "big", blobIDs: make([]string, items10k)}
	var next atomic.Int64
	var wg sync.WaitGroup
	const workers = 32 // concurrent uploads, as from many clients
	errs := make(chan error, workers)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pp := *p
			for {
				i := int(next.Add(1)) - 1
				if i >= items10k {
					return
				}
				data := []byte(fmt.Sprintf("item %05d: a small memory note\n", i))
				sum := sha256.Sum256(data)
				prep, err := svc.PrepareBlob(ctx, &pp, domain.BlobPrepareRequest{RequestID: fmt.Sprintf("p%05d", i), ContentType: "text/plain",
					SizeBytes: int64(len(data)), SHA256: hex.EncodeToString(sum[:])})
				if err == nil {
					_, err = svc.Upload(ctx, &pp, prep.UploadID, "text/plain", int64(len(data)), bytes.NewReader(data))
				}
				if err == nil {
					_, err = svc.CommitBlob(ctx, &pp, domain.BlobCommitRequest{RequestID: fmt.Sprintf("c%05d", i), UploadID: prep.UploadID})
				}
				if err != nil {
					errs <- fmt.Errorf("blob %d: %w", i, err)
					return
				}
				s.blobIDs[i] = prep.BlobID
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		tb.Fatal(err)
	}
	if err := setup.Close(); err != nil {
		tb.Fatal(err)
	}
	srv, err := server.Open(server.Config{DataDir: dir, AdminSecret: m1Admin}) // fsync ON from here
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = srv.Close() })
	hs := httptest.NewServer(srv.Handler())
	tb.Cleanup(hs.Close)
	s.url = hs.URL
	s.cl = client.New(hs.URL, token)
	s.setup = time.Since(start)
	return s
}

func itemID10k(i int) string { return fmt.Sprintf("it_%05d", i) }

// publish uploads a manifest of the 10,000 items (paths under prefix) through HTTP and publishes it as a
// snapshot on expected. It returns the result, the time of the manifest upload and of the publish call.
func (s *snapshot10k) publish(tb testing.TB, expected int64, prefix string) (domain.MemoryPublishResult, time.Duration, time.Duration) {
	tb.Helper()
	ctx := context.Background()
	type entry struct {
		ItemID string `json:"item_id"`
		BlobID string `json:"blob_id"`
		Path   string `json:"path"`
	}
	m := struct {
		Items     []entry  `json:"items"`
		DeleteIDs []string `json:"delete_ids"`
	}{DeleteIDs: []string{}}
	for i, id := range s.blobIDs {
		m.Items = append(m.Items, entry{ItemID: itemID10k(i), BlobID: id, Path: fmt.Sprintf("%s/d%02d/f%05d.txt", prefix, i%100, i)})
	}
	raw, err := json.Marshal(m)
	if err != nil {
		tb.Fatal(err)
	}
	sum := sha256.Sum256(raw)
	start := time.Now()
	prep, err := s.cl.PrepareBlob(ctx, domain.BlobPrepareRequest{RequestID: "m-" + prefix, ContentType: "application/json", SizeBytes: int64(len(raw)),
		SHA256: hex.EncodeToString(sum[:])})
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := s.cl.UploadContent(ctx, prep.UploadID, "application/json", int64(len(raw)), bytes.NewReader(raw)); err != nil {
		tb.Fatal(err)
	}
	if _, err := s.cl.CommitBlob(ctx, domain.BlobCommitRequest{RequestID: "mc-" + prefix, UploadID: prep.UploadID}); err != nil {
		tb.Fatal(err)
	}
	manifest := time.Since(start)
	start = time.Now()
	res, err := s.cl.PublishMemory(ctx, s.collection, domain.MemoryPublishRequest{RequestID: "pub-" + prefix, ExpectedRevision: &expected,
		Mode: domain.ModeSnapshot, ManifestBlobID: prep.BlobID})
	if err != nil {
		tb.Fatalf("publish: %v", err)
	}
	return res, manifest, time.Since(start)
}

// readAll reads the head revision in pages of 500 and checks that it holds every item exactly once, in
// item_id order, with its blob and the paths of prefix. It returns the time it took.
func (s *snapshot10k) readAll(tb testing.TB, revision int64, prefix string) time.Duration {
	tb.Helper()
	start := time.Now()
	n, pages := 0, 0
	rev, err := s.cl.ReadAllMemory(context.Background(), s.collection, domain.MemoryReadRequest{Limit: 500}, func(p domain.MemoryPage) error {
		pages++
		if len(p.Items) > 500 {
			return fmt.Errorf("page of %d items", len(p.Items))
		}
		for _, it := range p.Items {
			if n >= items10k {
				return fmt.Errorf("more than %d items", items10k)
			}
			want := fmt.Sprintf("%s/d%02d/f%05d.txt", prefix, n%100, n)
			if it.ItemID != itemID10k(n) || it.BlobID != s.blobIDs[n] || it.Path != want || it.State != "active" {
				return fmt.Errorf("item %d is %+v, want %s at %s", n, it, itemID10k(n), want)
			}
			n++
		}
		return nil
	})
	d := time.Since(start)
	if err != nil {
		tb.Fatalf("memory.read: %v", err)
	}
	if rev != revision || n != items10k || pages != items10k/500 {
		tb.Fatalf("read revision %d: %d items in %d pages, want revision %d, %d items in %d pages", rev, n, pages, revision, items10k, items10k/500)
	}
	return d
}

// TestManifestSnapshot10k publishes a 10,000-item snapshot through a manifest blob and reads all of it
// back through HTTP in pages of 500 (fsync ON for both).
func TestManifestSnapshot10k(t *testing.T) {
	s := newSnapshot10k(t)
	res, manifest, publish := s.publish(t, 0, "r1")
	if res.Revision != 1 || !res.Changed || res.Upserted != items10k || res.Deleted != 0 {
		t.Fatalf("publish: %+v", res)
	}
	read := s.readAll(t, 1, "r1")
	t.Logf("setup of %d blobs: %s; manifest upload+seal %s; publish %s; full read %s (%.0f items/s)", items10k,
		s.setup.Round(time.Millisecond), manifest.Round(time.Millisecond), publish.Round(time.Millisecond), read.Round(time.Millisecond),
		float64(items10k)/read.Seconds())
	// The next snapshot moves every path; the pinned read of revision 1 still sees the old paths.
	res2, _, _ := s.publish(t, 1, "r2")
	if res2.Revision != 2 || res2.Upserted != items10k {
		t.Fatalf("second publish: %+v", res2)
	}
	s.readAll(t, 2, "r2")
	page, err := s.cl.ReadMemory(context.Background(), s.collection, domain.MemoryReadRequest{Revision: &res.Revision, Limit: 1})
	if err != nil || page.Items[0].Path != "r1/d00/f00000.txt" {
		t.Fatalf("read of revision 1 after revision 2: %+v, %v", page, err)
	}
}

// BenchmarkManifestSnapshot10k measures one 10,000-item manifest snapshot publish (every path changes) and
// one full read of it in pages of 500, per iteration.
func BenchmarkManifestSnapshot10k(b *testing.B) {
	s := newSnapshot10k(b)
	var manifest, publish, read time.Duration
	b.ResetTimer()
	for i := range b.N {
		prefix := "r" + strconv.Itoa(i+1)
		res, m, p := s.publish(b, int64(i), prefix)
		if res.Revision != int64(i+1) || res.Upserted != items10k {
			b.Fatalf("publish: %+v", res)
		}
		manifest += m
		publish += p
		read += s.readAll(b, int64(i+1), prefix)
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(manifest.Seconds()*1e3/n, "manifest-ms")
	b.ReportMetric(publish.Seconds()*1e3/n, "publish-ms")
	b.ReportMetric(read.Seconds()*1e3/n, "read-all-ms")
	b.ReportMetric(items10k*n/read.Seconds(), "read-items/s")
	b.Logf("setup of %d blobs (fsync off): %s", items10k, s.setup.Round(time.Millisecond))
}
