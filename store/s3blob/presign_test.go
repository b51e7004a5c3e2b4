package s3blob_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/store/s3blob"
	"github.com/waypost/waypost/store/s3blob/s3test"
)

// put sends body to a presigned request with its headers (Content-Length from the body unless length >= 0
// overrides it) and returns the status and the S3 error code of the answer.
func put(t *testing.T, req port.PresignedRequest, body []byte, length int64, drop ...string) (int, string) {
	t.Helper()
	r := s3test.PresignedRequest(t, req.Method, req.URL, req.Headers, body)
	for _, k := range drop {
		r.Header.Del(k)
	}
	r.ContentLength = int64(len(body))
	if length >= 0 {
		r.ContentLength = length
	}
	if r.ContentLength == 0 {
		r.Body = http.NoBody
	}
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	code := ""
	if i := bytes.Index(raw, []byte("<Code>")); i >= 0 {
		code = string(raw[i+6:])
		code = code[:strings.Index(code, "<")]
	}
	return resp.StatusCode, code
}

// TestPresignedPut checks what the S3 server itself enforces on a presigned PUT from PresignPut: the exact
// bytes are stored once, and wrong bytes, another length, a dropped condition or checksum header, a second
// PUT and an expired URL are refused; Head reports the checksum S3 verified.
func TestPresignedPut(t *testing.T) {
	st := newStore(t)
	ctx := context.Background()
	content := make([]byte, 256<<10)
	if _, err := rand.Read(content); err != nil {
		t.Fatal(err)
	}
	sum := digest(content)
	presign := func(t *testing.T, key string, size int64, sha string, ttl time.Duration) port.PresignedRequest {
		t.Helper()
		req, err := st.PresignPut(ctx, key, size, sha, "application/octet-stream", time.Now().Add(ttl))
		if err != nil {
			t.Fatal(err)
		}
		if req.Method != http.MethodPut || req.Headers["X-Amz-Checksum-Sha256"] == "" || req.Headers["If-None-Match"] != "*" {
			t.Fatalf("presigned PUT: %+v", req)
		}
		return req
	}
	head := func(key string) (port.BlobInfo, error) { return st.Head(ctx, key) }

	t.Run("ExactBytesOnce", func(t *testing.T) {
		req := presign(t, "p/once", int64(len(content)), sum, time.Hour)
		if status, code := put(t, req, content, -1); status != 200 {
			t.Fatalf("first PUT: %d %s", status, code)
		}
		info, err := head("p/once")
		if err != nil || info.Size != int64(len(content)) || info.SHA256 != sum {
			t.Fatalf("head after the PUT: %+v, %v", info, err)
		}
		// The same URL again, with the same or other bytes: the key is taken, nothing is overwritten.
		if status, code := put(t, req, content, -1); status != http.StatusPreconditionFailed {
			t.Fatalf("second PUT: %d %s", status, code)
		}
		other := bytes.Clone(content)
		other[0] ^= 1
		if status, _ := put(t, req, other, -1); status/100 == 2 {
			t.Fatalf("second PUT of other bytes: %d", status)
		}
		rc, _, err := st.Get(ctx, "p/once")
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || !bytes.Equal(got, content) {
			t.Fatalf("stored bytes changed: %v", err)
		}
	})
	t.Run("WrongBytesRefused", func(t *testing.T) {
		req := presign(t, "p/wrong", int64(len(content)), sum, time.Hour)
		other := bytes.Clone(content)
		other[len(other)-1] ^= 0x80
		if status, code := put(t, req, other, -1); status != http.StatusBadRequest || code != "BadDigest" {
			t.Fatalf("PUT of other bytes: %d %s", status, code)
		}
		if _, err := head("p/wrong"); !errors.Is(err, port.ErrBlobNotFound) {
			t.Fatalf("after a refused PUT: %v", err)
		}
	})
	t.Run("OtherLengthRefused", func(t *testing.T) {
		req := presign(t, "p/length", int64(len(content)), sum, time.Hour)
		short := content[:len(content)-1]
		if status, code := put(t, req, short, -1); status != http.StatusForbidden {
			t.Fatalf("PUT of a shorter body: %d %s", status, code)
		}
		if _, err := head("p/length"); !errors.Is(err, port.ErrBlobNotFound) {
			t.Fatalf("after a refused PUT: %v", err)
		}
	})
	t.Run("SignedHeadersRequired", func(t *testing.T) {
		for _, h := range []string{"If-None-Match", "X-Amz-Checksum-Sha256", "Content-Type"} {
			req := presign(t, "p/drop-"+strings.ToLower(h), int64(len(content)), sum, time.Hour)
			if status, code := put(t, req, content, -1, h); status != http.StatusForbidden {
				t.Errorf("PUT without %s: %d %s", h, status, code)
			}
		}
	})
	t.Run("ExpiredRefused", func(t *testing.T) {
		req := presign(t, "p/expired", int64(len(content)), sum, 1*time.Second+500*time.Millisecond)
		time.Sleep(2500 * time.Millisecond)
		if status, code := put(t, req, content, -1); status != http.StatusForbidden {
			t.Fatalf("PUT after expiry: %d %s", status, code)
		}
		if _, err := head("p/expired"); !errors.Is(err, port.ErrBlobNotFound) {
			t.Fatalf("after an expired PUT: %v", err)
		}
	})
	t.Run("Empty", func(t *testing.T) {
		req := presign(t, "p/empty", 0, digest(nil), time.Hour)
		if status, code := put(t, req, []byte("x"), -1); status/100 == 2 {
			t.Fatalf("PUT of one byte to an empty blob's URL: %d %s", status, code)
		}
		if status, code := put(t, req, nil, -1); status != 200 {
			t.Fatalf("PUT of nothing: %d %s", status, code)
		}
		if info, err := head("p/empty"); err != nil || info.Size != 0 || info.SHA256 != digest(nil) {
			t.Fatalf("head: %+v %v", info, err)
		}
	})
	t.Run("Get", func(t *testing.T) {
		if _, err := st.Put(ctx, "p/get", int64(len(content)), sum, bytes.NewReader(content)); err != nil {
			t.Fatal(err)
		}
		req, err := st.PresignGet(ctx, "p/get", "text/markdown", "notes ü.md", time.Now().Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		resp, got, err := fetch(t, req.URL)
		if err != nil || resp.StatusCode != 200 || !bytes.Equal(got, content) || resp.Header.Get("Content-Type") != "text/markdown" ||
			!strings.HasPrefix(resp.Header.Get("Content-Disposition"), "attachment; filename*=utf-8''notes%20%C3%BC.md") {
			t.Fatalf("presigned GET: %d %v, %d bytes, headers %v", resp.StatusCode, err, len(got), resp.Header)
		}
	})
}

// TestPutStream stores streams below, at and above one part and reads them back.
func TestPutStream(t *testing.T) {
	st := newStore(t)
	ctx := context.Background()
	for _, n := range []int{0, 1000, s3blob.PartSize, 2*s3blob.PartSize + 12345} {
		content := make([]byte, n)
		if _, err := rand.Read(content); err != nil {
			t.Fatal(err)
		}
		key := "stream/" + strings.Repeat("x", 1+n%7)
		size, err := st.PutStream(ctx, key, "application/zip", bytes.NewReader(content))
		if err != nil || size != int64(n) {
			t.Fatalf("PutStream of %d bytes: %d, %v", n, size, err)
		}
		req, err := st.PresignGet(ctx, key, "application/zip", "", time.Now().Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		_, got, err := fetch(t, req.URL)
		if err != nil || !bytes.Equal(got, content) {
			t.Fatalf("%d bytes streamed, %d read back: %v", n, len(got), err)
		}
		if _, err := st.PutStream(ctx, key, "application/zip", bytes.NewReader(content)); !errors.Is(err, port.ErrBlobExists) {
			t.Fatalf("PutStream over an existing key (%d bytes): %v", n, err)
		}
	}
}

// fetch GETs url (a presigned URL: no credential) and returns the response and its whole body.
func fetch(t *testing.T, url string) (*http.Response, []byte, error) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp, body, err
}
