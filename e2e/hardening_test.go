package e2e

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/waypost/waypost/e2e/wire"
)

// needDescriptors raises this process's descriptor limit to its hard limit (the Go runtime usually did
// already) and skips the test when even that is below n: a test holding thousands of connections must not
// fail for the machine's ulimit. The server raises its own limit the same way (waypost serve).
func needDescriptors(t testing.TB, n uint64) {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Skipf("cannot read RLIMIT_NOFILE: %v", err)
	}
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
		_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
	}
	if lim.Cur < n {
		t.Skipf("needs %d file descriptors, the hard limit is %d (raise it: ulimit -Hn)", n, lim.Cur)
	}
}

// bodyTimeout is waypost serve's documented default --body-timeout.
const bodyTimeout = 10 * time.Second

// floodTolerance is what a loaded test machine may add to a documented deadline before the server's answer
// and close are observed.
const floodTolerance = 15 * time.Second

// slowConn is one connection of the flood: it sends its request head and then one body byte every
// second, and records when the server answered (the status) and when it closed the connection.
type slowConn struct {
	kind     string
	status   int
	reason   string
	answered time.Duration // since the head was sent
	closed   time.Duration
	err      error
}

func runSlowConn(ctx context.Context, addr string, sc *slowConn, head string, bodyLen int) {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		sc.err = fmt.Errorf("dial: %w", err)
		return
	}
	defer c.Close()
	start := time.Now()
	if _, err := io.WriteString(c, head+"{"); err != nil {
		sc.err = fmt.Errorf("writing the head: %w", err)
		return
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for sent := 1; sent < bodyLen-1; sent++ {
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			if _, err := c.Write([]byte(" ")); err != nil {
				return // the server closed it
			}
		}
	}()
	_ = c.SetReadDeadline(time.Now().Add(bodyTimeout + floodTolerance))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		sc.err = fmt.Errorf("no answer after %s: %w", time.Since(start), err)
		return
	}
	sc.answered, sc.status = time.Since(start), resp.StatusCode
	var env wire.Envelope
	if b, err := io.ReadAll(resp.Body); err == nil && json.Unmarshal(b, &env) == nil && env.Error != nil {
		sc.reason, _ = env.Error.Details["reason"].(string)
	}
	if _, err := io.Copy(io.Discard, br); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			sc.err = fmt.Errorf("answered %d after %s but the connection stayed open", sc.status, sc.answered)
			return
		}
	}
	sc.closed = time.Since(start)
}

// TestSlowBodyFlood is issue 14's attack on the real binary with its default flags: 2,000 connections
// whose request bodies trickle in at one byte a second — unauthenticated JSON sends and uploads, and
// authenticated JSON sends and uploads (ten stolen tokens) — while a well-behaved client keeps sending.
// Every send of the well-behaved client succeeds; every slow connection is answered and closed by the
// server within the documented deadline: at once (401, from the headers) without a valid credential, at
// --body-timeout (10 s) otherwise (400 INVALID_REQUEST, body_timeout or body_too_slow), plus a tolerance
// for a loaded machine.
func TestSlowBodyFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("a 25-second flood of 2,000 connections")
	}
	const slow = 2000
	needDescriptors(t, slow+512)
	s := startServer(t)
	adm := newSpace(t, s, "flood")
	good := adm.participant(t, "well-behaved")
	victim := adm.participant(t, "recipient")
	var stolen []string
	for i := range 10 {
		stolen = append(stolen, adm.token(t, adm.actor(t, fmt.Sprintf("careless %d", i)), "", "message.send", "blob.write").Token)
	}
	// Uploads for the authenticated slow PUTs (the trickle never completes them).
	const uploadSize = 50_000
	sum := sha256.Sum256([]byte(strings.Repeat("u", uploadSize)))
	var uploads []string
	for i, tok := range stolen {
		d, _ := ok[struct {
			UploadID string `json:"upload_id"`
		}](t, s, request{Method: "POST", Path: "/v0/blobs", Token: tok, Body: map[string]any{"request_id": fmt.Sprintf("up-%d", i),
			"content_type": "text/plain", "size_bytes": uploadSize, "sha256": hex.EncodeToString(sum[:])}})
		uploads = append(uploads, d.UploadID)
	}
	addr := strings.TrimPrefix(s.base, "http://")
	head := func(method, path, token, contentType string, length int) string {
		h := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n", method, path, addr, contentType, length)
		if token != "" {
			h += "Authorization: Bearer " + token + "\r\n"
		}
		return h + "\r\n"
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The well-behaved client sends one message after another, through the whole flood.
	var goodSent atomic.Int64
	var goodErrs []error
	goodDone := make(chan struct{})
	go func() {
		defer close(goodDone)
		for i := 0; ctx.Err() == nil; i++ {
			r, err := s.roundTrip(context.Background(), request{Method: "POST", Path: "/v0/messages", Token: good.token,
				Body: map[string]any{"request_id": fmt.Sprintf("good-%05d", i), "recipient_ids": []string{victim.actor}, "body": map[string]any{"text": "still here"}}})
			if err == nil && !r.Env.OK {
				err = fmt.Errorf("%s", r)
			}
			if err != nil {
				goodErrs = append(goodErrs, err)
				continue
			}
			goodSent.Add(1)
			time.Sleep(20 * time.Millisecond)
		}
	}()

	conns := make([]*slowConn, slow)
	var wg sync.WaitGroup
	floodStart := time.Now()
	for i := range conns {
		sc := &slowConn{}
		conns[i] = sc
		var h string
		bodyLen := 60_000
		switch i % 4 {
		case 0:
			sc.kind, h = "unauthenticated send", head("POST", "/v0/messages", "", "application/json", bodyLen)
		case 1:
			sc.kind, h = "unauthenticated upload", head("PUT", "/v0/uploads/"+uploads[i%len(uploads)]+"/content", "", "text/plain", uploadSize)
		case 2:
			sc.kind, h = "authenticated send", head("POST", "/v0/messages", stolen[i%len(stolen)], "application/json", bodyLen)
		case 3:
			bodyLen = uploadSize
			sc.kind, h = "authenticated upload", head("PUT", "/v0/uploads/"+uploads[i%len(uploads)]+"/content", stolen[i%len(stolen)], "text/plain", uploadSize)
		}
		wg.Add(1)
		go func() { defer wg.Done(); runSlowConn(ctx, addr, sc, h, bodyLen) }()
		if i%200 == 199 {
			time.Sleep(50 * time.Millisecond) // a steady ramp, not a SYN flood of the listen queue
		}
	}
	wg.Wait()
	flood := time.Since(floodStart)
	cancel()
	<-goodDone

	type stat struct {
		n                    int
		maxAnswer, maxClosed time.Duration
	}
	stats := map[string]*stat{}
	for _, sc := range conns {
		st := stats[sc.kind]
		if st == nil {
			st = &stat{}
			stats[sc.kind] = st
		}
		st.n++
		st.maxAnswer, st.maxClosed = max(st.maxAnswer, sc.answered), max(st.maxClosed, sc.closed)
		if sc.err != nil {
			t.Errorf("%s: %v", sc.kind, sc.err)
			continue
		}
		authenticated := strings.HasPrefix(sc.kind, "authenticated")
		switch {
		case !authenticated && sc.status != http.StatusUnauthorized:
			t.Errorf("%s: HTTP %d, want 401", sc.kind, sc.status)
		case authenticated && (sc.status != http.StatusBadRequest || !slices.Contains([]string{"body_timeout", "body_too_slow"}, sc.reason)):
			t.Errorf("%s: HTTP %d %q, want 400 body_timeout/body_too_slow", sc.kind, sc.status, sc.reason)
		}
		limit := bodyTimeout + floodTolerance
		if !authenticated {
			limit = floodTolerance // the 401 needs no body byte
		}
		if sc.closed > limit {
			t.Errorf("%s: closed after %s, want within %s", sc.kind, sc.closed, limit)
		}
	}
	for kind, st := range stats {
		t.Logf("%-22s %4d connections: answered within %s, closed within %s", kind, st.n, st.maxAnswer.Round(time.Millisecond), st.maxClosed.Round(time.Millisecond))
	}
	t.Logf("flood of %d slow connections over %s; the well-behaved client sent %d messages meanwhile", slow, flood.Round(time.Millisecond), goodSent.Load())
	if len(goodErrs) > 0 {
		t.Fatalf("%d sends of the well-behaved client failed, first: %v", len(goodErrs), goodErrs[0])
	}
	if goodSent.Load() < 10 {
		t.Fatalf("the well-behaved client sent only %d messages", goodSent.Load())
	}
	// Nothing the slow connections sent was committed: the recipient has only the well-behaved messages.
	items, _ := readAll(t, s, victim, nil)
	if int64(len(items)) != goodSent.Load() {
		t.Fatalf("the recipient has %d items, the well-behaved client committed %d", len(items), goodSent.Load())
	}
}

// TestServeRefusesWeakAdminSecret: the binary does not start with a weak WAYPOST_ADMIN_SECRET and says how
// to generate one.
func TestServeRefusesWeakAdminSecret(t *testing.T) {
	addr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second) // a server that starts is killed
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, "serve", "--addr", addr, "--data", t.TempDir())
	cmd.Env = append(os.Environ(), "WAYPOST_ADMIN_SECRET=short")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || !strings.Contains(string(out), "WAYPOST_ADMIN_SECRET") || !strings.Contains(string(out), "openssl rand -base64 32") {
		t.Fatalf("waypost serve with a short admin secret: %v\n%s", err, out)
	}
}
