package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/internal/syncbuf"
)

// m1Fixture is a space with a writer actor A (all scopes, own consumer, source of collection "notes") and
// a client actor B (sends messages, reads the collection).
type m1Fixture struct {
	fixture
	coll       string
	asA, asB   []string
	stateDir   string
	writerAll  string
	readerToks string
}

func (c *cliTest) m1Setup() m1Fixture {
	c.t.Helper()
	f := m1Fixture{fixture: c.setup()}
	sp := []string{"--space", f.space, "--url", c.url, "--admin-secret", testAdminSecret}
	f.coll = c.ok(append([]string{"admin", "collection", "create", "--source-actor", f.a, "--id", "notes", "--scope", "project notes", "-q"}, sp...)...)
	c.ok(append([]string{"admin", "grant", "create", "--actor", f.b, "--permission", "memory.read", "--collection", f.coll, "-q"}, sp...)...)
	all := "message.send,message.read,receipt.write,blob.write,blob.read,memory.read,memory.write"
	f.writerAll = c.ok(append([]string{"admin", "token", "create", "--actor", f.a, "--consumer", f.ca, "--scope", all, "-q"}, sp...)...)
	f.readerToks = c.ok(append([]string{"admin", "token", "create", "--actor", f.b, "--consumer", f.cb, "--scope", "message.send,message.read,receipt.write,memory.read,blob.read", "-q"}, sp...)...)
	f.asA = []string{"--url", c.url, "--token", f.writerAll}
	f.asB = []string{"--url", c.url, "--token", f.readerToks}
	f.stateDir = filepath.Join(c.home, ".waypost")
	return f
}

// faultProxy forwards to target; fault handles a request itself when it returns true.
func faultProxy(t *testing.T, target string, fault func(w http.ResponseWriter, r *http.Request, forward http.Handler) bool) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if fault == nil || !fault(w, r, rp) {
			rp.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(hs.Close)
	return hs.URL
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func hexSHA(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// fails runs a command that must fail and returns its error and stderr.
func (c *cliTest) fails(args ...string) (string, error) {
	c.t.Helper()
	_, errOut, err := c.run("", args...)
	if err == nil {
		c.t.Fatalf("waypost %s succeeded", strings.Join(args, " "))
	}
	return errOut, err
}

func TestCLIBlobPutGet(t *testing.T) {
	c := newCLITest(t)
	f := c.m1Setup()
	data := randomBytes(1, 300<<10)
	file := filepath.Join(t.TempDir(), "data.bin")
	writeFile(t, file, data)

	out, errOut, err := c.run("", append([]string{"blob", "put", file, "--progress", "always", "--json"}, f.asA...)...)
	if err != nil {
		t.Fatalf("blob put: %v\n%s", err, errOut)
	}
	var res blobPutResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("blob put --json: %v\n%s", err, out)
	}
	if res.Info.State != domain.BlobSealed || res.Info.SHA256 != hexSHA(data) || res.Info.SizeBytes != int64(len(data)) ||
		res.Info.Filename != "data.bin" || res.AlreadyUploaded || res.Reused {
		t.Fatalf("blob put result: %+v", res)
	}
	if !strings.Contains(errOut, "hashing") || !strings.Contains(errOut, "uploading") || !strings.Contains(errOut, "100%") {
		t.Fatalf("no progress bars on stderr:\n%q", errOut)
	}
	if !strings.HasPrefix(res.StateFile, filepath.Join(f.stateDir, "uploads")) {
		t.Fatalf("state file %s is not under %s", res.StateFile, f.stateDir)
	}
	// The same content again: the sealed blob is reused; --new uploads a new one.
	if id := c.ok(append([]string{"blob", "put", file, "-q"}, f.asA...)...); id != res.Info.BlobID {
		t.Fatalf("second put printed %q, want the reused %s", id, res.Info.BlobID)
	}
	if id := c.ok(append([]string{"blob", "put", file, "-q", "--new"}, f.asA...)...); id == res.Info.BlobID || !domain.ValidID(id) {
		t.Fatalf("put --new printed %q", id)
	}

	// Metadata, then the bytes to a file, verified.
	meta := c.ok(append([]string{"blob", "get", res.Info.BlobID}, f.asA...)...)
	if !strings.Contains(meta, "sha256:") || !strings.Contains(meta, res.Info.SHA256) || !strings.Contains(meta, "state:") {
		t.Fatalf("blob get:\n%s", meta)
	}
	dst := filepath.Join(t.TempDir(), "copy.bin")
	c.ok(append([]string{"blob", "get", res.Info.BlobID, "-o", dst}, f.asA...)...)
	if got, err := os.ReadFile(dst); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("downloaded file differs (%d bytes, %v)", len(got), err)
	}
	_, err = c.fails(append([]string{"blob", "get", res.Info.BlobID, "-o", dst}, f.asA...)...)
	if exitCode(err) != 2 {
		t.Fatalf("overwriting without --force: %v (exit %d)", err, exitCode(err))
	}
	c.ok(append([]string{"blob", "get", res.Info.BlobID, "-o", dst, "--force"}, f.asA...)...)
	stdout, stderr, err := c.run("", append([]string{"blob", "get", res.Info.BlobID, "-o", "-"}, f.asA...)...)
	if err != nil || stdout != string(data) || !strings.Contains(stderr, res.Info.SHA256) {
		t.Fatalf("blob get -o -: %v, %d bytes on stdout, stderr:\n%s", err, len(stdout), stderr)
	}
	// B may not read A's blob; a missing file is a usage error.
	if _, err := c.fails(append([]string{"blob", "get", res.Info.BlobID}, f.asB...)...); !strings.Contains(err.Error(), "NOT_FOUND") {
		t.Fatalf("B reads A's blob: %v", err)
	}
	if _, err := c.fails(append([]string{"blob", "put", filepath.Join(t.TempDir(), "absent")}, f.asA...)...); exitCode(err) != 2 {
		t.Fatalf("put of a missing file: %v", err)
	}
}

// TestCLIBlobGetVerifies checks that altered bytes on the way are detected and leave no output file.
func TestCLIBlobGetVerifies(t *testing.T) {
	c := newCLITest(t)
	f := c.m1Setup()
	file := filepath.Join(t.TempDir(), "a.txt")
	writeFile(t, file, []byte("the original content of the file\n"))
	id := c.ok(append([]string{"blob", "put", file, "-q"}, f.asA...)...)
	via := faultProxy(t, c.url, func(w http.ResponseWriter, r *http.Request, forward http.Handler) bool {
		if !strings.HasSuffix(r.URL.Path, "/content") {
			return false
		}
		rec := httptest.NewRecorder()
		forward.ServeHTTP(rec, r)
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		body := rec.Body.Bytes()
		body[0] ^= 0xff
		w.WriteHeader(rec.Code)
		_, _ = w.Write(body)
		return true
	})
	dst := filepath.Join(t.TempDir(), "out.txt")
	_, err := c.fails("blob", "get", id, "-o", dst, "--url", via, "--token", f.writerAll)
	if !strings.Contains(err.Error(), "does not match") {
		t.Fatalf("altered download: %v", err)
	}
	if entries, _ := os.ReadDir(filepath.Dir(dst)); len(entries) != 0 {
		t.Fatalf("a failed download left %v", entries)
	}
}

// TestCLIBlobPutResumes interrupts an upload at two points and checks that the next run resumes it with
// the same request IDs: same upload, same blob.
func TestCLIBlobPutResumes(t *testing.T) {
	for _, tc := range []struct {
		name string
		// fault breaks the first run; the second run passes through.
		fault           func(t *testing.T) func(http.ResponseWriter, *http.Request, http.Handler) bool
		alreadyUploaded bool
	}{
		// The PUT is cut in the middle of the body: nothing is stored, the second run uploads.
		{"put cut", func(t *testing.T) func(http.ResponseWriter, *http.Request, http.Handler) bool {
			return func(w http.ResponseWriter, r *http.Request, _ http.Handler) bool {
				if r.Method != http.MethodPut {
					return false
				}
				_, _ = io.CopyN(io.Discard, r.Body, 64<<10)
				hangUp(t, w)
				return true
			}
		}, false},
		// Every commit fails: the bytes are stored, the second run gets already_uploaded and seals.
		{"commit lost", func(t *testing.T) func(http.ResponseWriter, *http.Request, http.Handler) bool {
			return func(w http.ResponseWriter, r *http.Request, _ http.Handler) bool {
				if r.URL.Path != "/v0/blobs/commit" {
					return false
				}
				hangUp(t, w)
				return true
			}
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCLITest(t)
			f := c.m1Setup()
			data := randomBytes(2, 256<<10)
			file := filepath.Join(t.TempDir(), "big.bin")
			writeFile(t, file, data)
			via := faultProxy(t, c.url, tc.fault(t))
			errOut, err := c.fails("blob", "put", file, "--url", via, "--token", f.writerAll)
			if !strings.Contains(errOut, "retry 2/2 with the same request") {
				t.Fatalf("first run: %v; stderr:\n%s", err, errOut)
			}
			matches, _ := filepath.Glob(filepath.Join(f.stateDir, "uploads", "*.json"))
			if len(matches) != 1 {
				t.Fatalf("state files after the failed run: %v", matches)
			}
			var st uploadState
			raw, _ := os.ReadFile(matches[0])
			if err := json.Unmarshal(raw, &st); err != nil || st.UploadID == "" || st.BlobID == "" || st.Sealed {
				t.Fatalf("state after the failed run: %+v, %v", st, err)
			}
			// The second run goes straight to the service.
			out, errOut, err := c.run("", append([]string{"blob", "put", file, "--json"}, f.asA...)...)
			if err != nil {
				t.Fatalf("second run: %v\n%s", err, errOut)
			}
			var res blobPutResult
			if err := json.Unmarshal([]byte(out), &res); err != nil {
				t.Fatal(err)
			}
			if res.Info.BlobID != st.BlobID || res.AlreadyUploaded != tc.alreadyUploaded || !strings.Contains(errOut, "resuming") {
				t.Fatalf("second run: %+v (state had blob %s); stderr:\n%s", res, st.BlobID, errOut)
			}
			var st2 uploadState
			raw, _ = os.ReadFile(matches[0])
			if err := json.Unmarshal(raw, &st2); err != nil || !st2.Sealed || st2.PrepareRequestID != st.PrepareRequestID ||
				st2.CommitRequestID != st.CommitRequestID || st2.UploadID != st.UploadID {
				t.Fatalf("state after the second run: %+v (before %+v)", st2, st)
			}
			dst := filepath.Join(t.TempDir(), "back")
			c.ok(append([]string{"blob", "get", res.Info.BlobID, "-o", dst}, f.asA...)...)
			if got, _ := os.ReadFile(dst); !bytes.Equal(got, data) {
				t.Fatal("the resumed blob's content differs")
			}
		})
	}
}

func TestCLIMemoryPublishReadExport(t *testing.T) {
	c := newCLITest(t)
	f := c.m1Setup()
	src := t.TempDir()
	files := map[string]string{"a.md": "# A\n", "sub/b.txt": "bee\n", "sub/deeper/c.json": `{"c":1}`}
	for p, s := range files {
		writeFile(t, filepath.Join(src, filepath.FromSlash(p)), []byte(s))
	}
	writeFile(t, filepath.Join(src, ".hidden", "x"), []byte("hidden"))
	writeFile(t, filepath.Join(src, "sub", ".dot"), []byte("dot"))

	var pub publishOutput
	out, errOut, err := c.run("", append([]string{"memory", "publish", src, "--collection", f.coll, "--snapshot", "--json"}, f.asA...)...)
	if err != nil {
		t.Fatalf("publish: %v\n%s", err, errOut)
	}
	if err := json.Unmarshal([]byte(out), &pub); err != nil {
		t.Fatal(err)
	}
	if pub.Revision != 1 || !pub.Changed || pub.Upserted != 3 || len(pub.Items) != 3 || pub.ExpectedRevision != 0 || pub.ManifestBlobID != "" {
		t.Fatalf("snapshot: %+v", pub)
	}
	if !strings.Contains(errOut, "publishing 3 change(s) inline") || !regexp.MustCompile(`request_id: req_[0-9a-f]{32}`).MatchString(errOut) {
		t.Fatalf("publish stderr:\n%s", errOut)
	}
	for _, it := range pub.Items {
		if it.ItemID != itemIDForPath(it.Path) || files[it.Path] == "" {
			t.Fatalf("item %+v", it)
		}
	}
	if m, _ := filepath.Glob(filepath.Join(f.stateDir, "publish", "*")); len(m) != 0 {
		t.Fatalf("publish state left after success: %v", m)
	}

	// Unchanged directory: the blobs are reused and nothing changes.
	c.okJSON(&pub, append([]string{"memory", "publish", src, "--collection", f.coll, "--snapshot"}, f.asA...)...)
	if pub.Changed || pub.Revision != 1 {
		t.Fatalf("republishing an unchanged directory: %+v", pub)
	}
	for _, it := range pub.Items {
		if it.Uploaded {
			t.Fatalf("unchanged %s was uploaded again", it.Path)
		}
	}

	// Delta: change b, add d, delete a.
	writeFile(t, filepath.Join(src, "sub", "b.txt"), []byte("bee v2\n"))
	writeFile(t, filepath.Join(src, "d.md"), []byte("dee\n"))
	if err := os.Remove(filepath.Join(src, "a.md")); err != nil {
		t.Fatal(err)
	}
	c.okJSON(&pub, append([]string{"memory", "publish", src, "--collection", f.coll, "--delta", "--expected-revision", "1", "--delete-path", "a.md"}, f.asA...)...)
	if pub.Revision != 2 || pub.Upserted != 2 || pub.Deleted != 1 {
		t.Fatalf("delta: %+v", pub)
	}
	// A stale expected revision is a conflict naming the current one, and publishes nothing.
	_, err = c.fails(append([]string{"memory", "publish", src, "--collection", f.coll, "--delta", "--expected-revision", "1"}, f.asA...)...)
	if !strings.Contains(err.Error(), "REVISION_CONFLICT") || !strings.Contains(err.Error(), "at revision 2") || exitCode(err) != 1 {
		t.Fatalf("stale publish: %v", err)
	}

	// B reads every page of revision 2 (limit 1), in item_id order.
	text := c.ok(append([]string{"memory", "read", "--collection", f.coll, "--limit", "1"}, f.asB...)...)
	lines := strings.Split(text, "\n")
	want := []string{"d.md", "sub/b.txt", "sub/deeper/c.json"}
	if len(lines) != 3 {
		t.Fatalf("memory read:\n%s", text)
	}
	var gotIDs []string
	for _, l := range lines {
		gotIDs = append(gotIDs, strings.Fields(l)[0])
	}
	if !slices.IsSorted(gotIDs) {
		t.Fatalf("items not in item_id order:\n%s", text)
	}
	for _, p := range want {
		if !strings.Contains(text, "  "+p+"  ") {
			t.Fatalf("memory read misses %s:\n%s", p, text)
		}
	}
	var page domain.MemoryPage
	c.okJSON(&page, append([]string{"memory", "read", "--collection", f.coll, "--tombstones", "--revision", "2", "--limit", "2"}, f.asB...)...)
	if page.Revision != 2 || len(page.Items) != 4 {
		t.Fatalf("read with tombstones: %+v", page)
	}
	c.okJSON(&page, append([]string{"memory", "read", "--collection", f.coll, "--revision", "1"}, f.asB...)...)
	if page.Revision != 1 || len(page.Items) != 3 || page.Items[0].ItemID != itemIDForPath("a.md") {
		t.Fatalf("read of revision 1: %+v", page)
	}

	// B exports revision 2 and revision 1.
	dst := filepath.Join(t.TempDir(), "export")
	var ex exportOutput
	out, errOut, err = c.run("", append([]string{"memory", "export", "--collection", f.coll, "--out", dst, "--progress", "always", "--json"}, f.asB...)...)
	if err != nil || json.Unmarshal([]byte(out), &ex) != nil || ex.Revision != 2 || ex.Items != 3 || ex.Tombstones != 1 {
		t.Fatalf("export: %+v, %v\n%s", ex, err, errOut)
	}
	if !strings.Contains(errOut, "exporting") {
		t.Fatalf("no progress bar:\n%s", errOut)
	}
	wantFiles := map[string]string{"d.md": "dee\n", "sub/b.txt": "bee v2\n", "sub/deeper/c.json": `{"c":1}`}
	checkTree(t, dst, wantFiles)
	var manifest domain.MemoryExport
	raw, err := os.ReadFile(filepath.Join(dst, "manifest.json"))
	if err != nil || json.Unmarshal(raw, &manifest) != nil || manifest.Revision != 2 || len(manifest.Items) != 3 || manifest.CollectionID != f.coll {
		t.Fatalf("manifest.json: %v\n%s", err, raw)
	}
	if idx, err := os.ReadFile(filepath.Join(dst, "INDEX.md")); err != nil || !strings.Contains(string(idx), "revision 2") || !strings.Contains(string(idx), "sub/b.txt") {
		t.Fatalf("INDEX.md: %v\n%s", err, idx)
	}
	if _, err := c.fails(append([]string{"memory", "export", "--collection", f.coll, "--out", dst}, f.asB...)...); exitCode(err) != 2 {
		t.Fatalf("export into a non-empty directory: %v", err)
	}
	// The source exports revision 1. (B cannot: the service lets a collection reader fetch only the blobs of
	// the current revision, see the M1 report.)
	dst1 := filepath.Join(t.TempDir(), "r1")
	c.ok(append([]string{"memory", "export", "--collection", f.coll, "--out", dst1, "--revision", "1"}, f.asA...)...)
	checkTree(t, dst1, map[string]string{"a.md": "# A\n", "sub/b.txt": "bee\n", "sub/deeper/c.json": `{"c":1}`})
}

// checkTree checks that dir holds exactly the files of want plus manifest.json and INDEX.md.
func checkTree(t *testing.T, dir string, want map[string]string) {
	t.Helper()
	got := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		b, err := os.ReadFile(p)
		got[filepath.ToSlash(rel)] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if got["manifest.json"] == "" || got["INDEX.md"] == "" {
		t.Fatalf("export lacks manifest.json or INDEX.md: %v", got)
	}
	delete(got, "manifest.json")
	delete(got, "INDEX.md")
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("exported files %v, want %v", got, want)
	}
}

// TestCLIMemoryExportRefusesEscapes checks that an export never writes outside its directory, even
// through a symbolic link planted in it.
func TestCLIMemoryExportRefusesEscapes(t *testing.T) {
	c := newCLITest(t)
	f := c.m1Setup()
	src := t.TempDir()
	writeFile(t, filepath.Join(src, "sub", "x.md"), []byte("x"))
	c.ok(append([]string{"memory", "publish", src, "--collection", f.coll, "--snapshot"}, f.asA...)...)
	dst, outside := t.TempDir(), t.TempDir()
	if err := os.Symlink(outside, filepath.Join(dst, "sub")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.fails(append([]string{"memory", "export", "--collection", f.coll, "--out", dst, "--force"}, f.asA...)...); err == nil {
		t.Fatal("unreachable")
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Fatalf("the export wrote outside its directory: %v", entries)
	}
	for _, bad := range []string{"../evil", "a/../../evil", "/etc/passwd", "manifest.json", "INDEX.md", `a\b`} {
		ex := domain.MemoryExport{Items: []domain.ExportItem{{ItemID: "it", Path: bad}}}
		if err := checkExportPaths(ex); err == nil {
			t.Errorf("export path %q accepted", bad)
		}
	}
	ex := domain.MemoryExport{Items: []domain.ExportItem{{ItemID: "a", Path: "a"}, {ItemID: "b", Path: "a/b"}}}
	if err := checkExportPaths(ex); err == nil {
		t.Error("an item path that is another item's directory was accepted")
	}
}

// TestCLIMemoryPublishManifest publishes more files than fit inline: the changes go through a manifest
// blob, and read pages through all of them.
func TestCLIMemoryPublishManifest(t *testing.T) {
	if testing.Short() {
		t.Skip("uploads 600 blobs")
	}
	c := newCLITest(t)
	f := c.m1Setup()
	src := t.TempDir()
	for i := range 600 {
		writeFile(t, filepath.Join(src, fmt.Sprintf("d%d", i%7), fmt.Sprintf("f%04d.txt", i)), []byte(fmt.Sprintf("file %d\n", i)))
	}
	var pub publishOutput
	out, errOut, err := c.run("", append([]string{"memory", "publish", src, "--collection", f.coll, "--snapshot", "--json", "--parallel", "8"}, f.asA...)...)
	if err != nil || json.Unmarshal([]byte(out), &pub) != nil {
		t.Fatalf("publish: %v\n%s", err, errOut)
	}
	if pub.ManifestBlobID == "" || pub.Upserted != 600 || pub.Revision != 1 || !strings.Contains(errOut, "through manifest blob "+pub.ManifestBlobID) {
		t.Fatalf("manifest publish: %+v\n%s", pub.MemoryPublishResult, errOut)
	}
	var page domain.MemoryPage
	c.okJSON(&page, append([]string{"memory", "read", "--collection", f.coll}, f.asA...)...)
	if len(page.Items) != 600 {
		t.Fatalf("read %d items", len(page.Items))
	}
	seen := map[string]bool{}
	for i, it := range page.Items {
		if i > 0 && page.Items[i-1].ItemID >= it.ItemID || seen[it.Path] || it.ItemID != itemIDForPath(it.Path) {
			t.Fatalf("item %d: %+v", i, it)
		}
		seen[it.Path] = true
	}
}

// TestCLIMemoryPublishResumes loses every response of the first publish (the service commits it); the
// second run reuses the saved request ID and gets the original revision instead of publishing again.
func TestCLIMemoryPublishResumes(t *testing.T) {
	c := newCLITest(t)
	f := c.m1Setup()
	src := t.TempDir()
	writeFile(t, filepath.Join(src, "a.md"), []byte("a"))
	var forwarded atomic.Int32
	via := faultProxy(t, c.url, func(w http.ResponseWriter, r *http.Request, forward http.Handler) bool {
		if !strings.HasSuffix(r.URL.Path, "/revisions") {
			return false
		}
		forwarded.Add(1)
		rec := httptest.NewRecorder()
		forward.ServeHTTP(rec, r)
		hangUp(t, w)
		return true
	})
	errOut, err := c.fails("memory", "publish", src, "--collection", f.coll, "--snapshot", "--url", via, "--token", f.writerAll)
	if forwarded.Load() != 3 || !strings.Contains(errOut, "retry 2/2") {
		t.Fatalf("first run: %v, %d attempts; stderr:\n%s", err, forwarded.Load(), errOut)
	}
	rid := regexp.MustCompile(`request_id: (req_[0-9a-f]{32})`).FindStringSubmatch(errOut)
	var pub publishOutput
	out, errOut2, err := c.run("", append([]string{"memory", "publish", src, "--collection", f.coll, "--snapshot", "--json"}, f.asA...)...)
	if err != nil || json.Unmarshal([]byte(out), &pub) != nil {
		t.Fatalf("second run: %v\n%s", err, errOut2)
	}
	if rid == nil || pub.RequestID != rid[1] || pub.Revision != 1 || !pub.Changed || !strings.Contains(errOut2, "resuming the unfinished publish") {
		t.Fatalf("second run: %+v (first request_id %v)\n%s", pub, rid, errOut2)
	}
	var page domain.MemoryPage
	c.okJSON(&page, append([]string{"memory", "read", "--collection", f.coll}, f.asA...)...)
	if page.Revision != 1 {
		t.Fatalf("the collection is at revision %d after one publish", page.Revision)
	}
}

func TestCLIMemoryUsageErrors(t *testing.T) {
	c := newCLITest(t)
	f := c.m1Setup()
	src := t.TempDir()
	empty := t.TempDir()
	writeFile(t, filepath.Join(src, "a.md"), []byte("a"))
	for _, args := range [][]string{
		{"memory", "publish", src, "--collection", f.coll},
		{"memory", "publish", src, "--collection", f.coll, "--snapshot", "--delta"},
		{"memory", "publish", src, "--snapshot"},
		{"memory", "publish", src, "--collection", f.coll, "--snapshot", "--delete-path", "a.md"},
		{"memory", "publish", src, "--collection", f.coll, "--delta", "--expected-revision", "-1"},
		{"memory", "publish", empty, "--collection", f.coll, "--snapshot"},
		{"memory", "publish", empty, "--collection", f.coll, "--delta"},
		{"memory", "publish", src, "--collection", f.coll, "--delta", "--delete-path", "../x"},
		{"memory", "read"},
		{"memory", "export", "--collection", f.coll},
		{"memory", "read", "--collection", f.coll, "--progress", "sometimes"},
		{"blob", "put"},
		{"blob", "put", src, "--progress", "sometimes"},
		{"wait", "--timeout", "0s"},
		{"wait", "--follow", "--cursor", "abc"},
		{"wait", "--state", "x"},
	} {
		_, err := c.fails(append(args, f.asA...)...)
		if exitCode(err) != 2 {
			t.Errorf("waypost %s: %v (exit %d), want a usage error", strings.Join(args, " "), err, exitCode(err))
		}
	}
	// An explicitly empty snapshot clears the collection.
	c.ok(append([]string{"memory", "publish", src, "--collection", f.coll, "--snapshot"}, f.asA...)...)
	var pub publishOutput
	c.okJSON(&pub, append([]string{"memory", "publish", empty, "--collection", f.coll, "--snapshot", "--allow-empty"}, f.asA...)...)
	if pub.Revision != 2 || pub.Deleted != 1 {
		t.Fatalf("empty snapshot: %+v", pub)
	}
}

// start runs a command in the background until its context is cancelled.
func (c *cliTest) start(args ...string) (stdout, stderr *syncbuf.Buffer, stop func() error) {
	root := newRoot()
	stdout, stderr = &syncbuf.Buffer{}, &syncbuf.Buffer{}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetIn(strings.NewReader(""))
	root.SetArgs(args)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	return stdout, stderr, func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(15 * time.Second):
			c.t.Fatal("the command did not stop within 15 s of its interruption")
			return nil
		}
	}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 15 s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestCLIWait(t *testing.T) {
	c := newCLITest(t)
	f := c.m1Setup()
	// Nothing for A yet: the wait times out with a cursor.
	out, errOut, err := c.run("", append([]string{"wait", "--timeout", "300ms"}, f.asA...)...)
	if err != nil || !strings.Contains(errOut, "nothing new within 300ms") || !strings.Contains(out, "next_cursor:") {
		t.Fatalf("empty wait: %v\n%s\n%s", err, out, errOut)
	}
	var empty domain.Page
	c.okJSON(&empty, append([]string{"wait", "--timeout", "100ms", "--consumer", f.ca}, f.asA...)...)
	if len(empty.Items) != 0 || empty.NextCursor == "" {
		t.Fatalf("empty wait --json: %+v", empty)
	}
	// A wait pending from that cursor returns the message B sends.
	type result struct {
		page domain.Page
		err  error
	}
	done := make(chan result, 1)
	go func() {
		root := newRoot()
		var o, e bytes.Buffer
		root.SetOut(&o)
		root.SetErr(&e)
		root.SetArgs(append([]string{"wait", "--cursor", empty.NextCursor, "--timeout", "20s", "--json"}, f.asA...))
		err := root.ExecuteContext(context.Background())
		var p domain.Page
		if err == nil {
			err = json.Unmarshal(o.Bytes(), &p)
		}
		done <- result{p, err}
	}()
	time.Sleep(200 * time.Millisecond)
	msg := c.ok(append([]string{"send", "--to", f.a, "--text", "wake", "-q"}, f.asB...)...)
	select {
	case r := <-done:
		if r.err != nil || len(r.page.Items) != 1 || r.page.Items[0].ResourceID != msg {
			t.Fatalf("woken wait: %+v, %v", r.page, r.err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the wait did not return after the send")
	}
}

// TestCLIWaitFollow follows A's feed through the durable queue while B sends, interrupts it, and checks
// that a second follow shows only what is new and that everything is in the queue.
func TestCLIWaitFollow(t *testing.T) {
	c := newCLITest(t)
	f := c.m1Setup()
	first := c.ok(append([]string{"send", "--to", f.a, "--subject", "before", "--text", "x", "-q"}, f.asB...)...)
	stdout, stderr, stop := c.start(append([]string{"wait", "--follow", "--timeout", "2s", "--body"}, f.asA...)...)
	eventually(t, "the backlog", func() bool { return strings.Contains(stdout.String(), first) })
	var sent []string
	for i := range 3 {
		sent = append(sent, c.ok(append([]string{"send", "--to", f.a, "--subject", fmt.Sprintf("live %d", i), "--text", fmt.Sprintf("body %d", i), "-q"}, f.asB...)...))
	}
	eventually(t, "the live messages", func() bool {
		s := stdout.String()
		if !strings.Contains(s, "    body 2") { // the last item is printed with its body
			return false
		}
		for _, id := range sent {
			if !strings.Contains(s, id) {
				return false
			}
		}
		return true
	})
	if err := stop(); err != nil {
		t.Fatalf("follow: %v\n%s", err, stderr.String())
	}
	s := stdout.String()
	for _, id := range append([]string{first}, sent...) {
		if strings.Count(s, id) != 1 {
			t.Fatalf("%s shown %d times:\n%s", id, strings.Count(s, id), s)
		}
	}
	if !strings.Contains(s, "    body 2") || !strings.Contains(stderr.String(), "4 new item(s) received, 0 marked processed, 4 pending") {
		t.Fatalf("follow output:\n%s\nstderr:\n%s", s, stderr.String())
	}
	// The same queue as 'waypost inbox': the four items are pending there.
	var pend inboxResult
	c.okJSON(&pend, append([]string{"inbox", "--pending"}, f.asA...)...)
	if pend.Pending != 4 || len(pend.Items) != 4 {
		t.Fatalf("inbox --pending after follow: %+v", pend)
	}
	// A second follow (JSON lines, marking processed) shows only the new message.
	stdout, stderr, stop = c.start(append([]string{"wait", "--follow", "--timeout", "2s", "--json", "--ack-processed"}, f.asA...)...)
	time.Sleep(300 * time.Millisecond)
	last := c.ok(append([]string{"send", "--to", f.a, "--text", "last", "-q"}, f.asB...)...)
	eventually(t, "the last message", func() bool { return strings.Contains(stdout.String(), last) })
	if err := stop(); err != nil {
		t.Fatalf("second follow: %v\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	var it domain.FeedItem
	if len(lines) != 1 || json.Unmarshal([]byte(lines[0]), &it) != nil || it.ResourceID != last {
		t.Fatalf("second follow printed:\n%s", stdout.String())
	}
	c.okJSON(&pend, append([]string{"inbox", "--pending"}, f.asA...)...)
	if pend.Pending != 4 {
		t.Fatalf("pending after the second follow: %+v", pend)
	}
}

func TestItemIDForPath(t *testing.T) {
	seen := map[string]string{}
	for _, p := range []string{"a.md", "a/md", "a-md", "A.md", "notes/2026/10/11.md", "ü/ß.md", "...x", strings.Repeat("long/", 200) + "end.md"} {
		id := itemIDForPath(p)
		if !domain.ValidID(id) || id != itemIDForPath(p) {
			t.Errorf("itemIDForPath(%q) = %q", p, id)
		}
		if other, dup := seen[id]; dup {
			t.Errorf("%q and %q share item_id %s", p, other, id)
		}
		seen[id] = p
	}
	if id := itemIDForPath("notes/2026/10/11.md"); !strings.HasPrefix(id, "notes-2026-10-11-md_") {
		t.Errorf("item_id %s is not readable", id)
	}
}

// TestM1CLIHelp checks that the blob, memory and wait commands have examples and a working --help.
func TestM1CLIHelp(t *testing.T) {
	if n := checkHelp(t, "blob", "memory", "wait"); n != 6 {
		t.Errorf("checked %d runnable commands, want 6", n)
	}
}

// TestCLIMemoryPublishSharedContent publishes two files with the same name and content: one upload serves
// both items, and the export writes both.
func TestCLIMemoryPublishSharedContent(t *testing.T) {
	c := newCLITest(t)
	f := c.m1Setup()
	src := t.TempDir()
	writeFile(t, filepath.Join(src, "a", "x.md"), []byte("same"))
	writeFile(t, filepath.Join(src, "b", "x.md"), []byte("same"))
	writeFile(t, filepath.Join(src, "c", "x.md"), []byte("other"))
	var pub publishOutput
	c.okJSON(&pub, append([]string{"memory", "publish", src, "--collection", f.coll, "--snapshot", "--parallel", "3"}, f.asA...)...)
	if len(pub.Items) != 3 || pub.Items[0].BlobID != pub.Items[1].BlobID || pub.Items[0].BlobID == pub.Items[2].BlobID || pub.Upserted != 3 {
		t.Fatalf("publish: %+v", pub)
	}
	if m, _ := filepath.Glob(filepath.Join(f.stateDir, "uploads", "*.json")); len(m) != 2 {
		t.Fatalf("upload state files: %v, want 2", m)
	}
	dst := filepath.Join(t.TempDir(), "out")
	c.ok(append([]string{"memory", "export", "--collection", f.coll, "--out", dst}, f.asA...)...)
	checkTree(t, dst, map[string]string{"a/x.md": "same", "b/x.md": "same", "c/x.md": "other"})
}

// TestCLIInboxFollow: `waypost inbox --follow` uses the same durable queue and wake-ups as `wait --follow`.
func TestCLIInboxFollow(t *testing.T) {
	c := newCLITest(t)
	f := c.m1Setup()
	first := c.ok(append([]string{"send", "--to", f.a, "--subject", "before", "--text", "x", "-q"}, f.asB...)...)
	stdout, stderr, stop := c.start(append([]string{"inbox", "--follow", "--wait", "2s"}, f.asA...)...)
	eventually(t, "the backlog", func() bool { return strings.Contains(stdout.String(), first) })
	live := c.ok(append([]string{"send", "--to", f.a, "--subject", "live", "--text", "y", "-q"}, f.asB...)...)
	eventually(t, "the live message", func() bool { return strings.Contains(stdout.String(), live) })
	if err := stop(); err != nil {
		t.Fatalf("inbox --follow: %v\n%s", err, stderr.String())
	}
	for _, id := range []string{first, live} {
		if n := strings.Count(stdout.String(), id); n != 1 {
			t.Fatalf("%s shown %d times:\n%s", id, n, stdout.String())
		}
	}
	if _, _, err := c.run("", append([]string{"inbox", "--follow", "--raw"}, f.asA...)...); exitCode(err) != 2 {
		t.Fatalf("--follow --raw: want a usage error, got %v", err)
	}
}
