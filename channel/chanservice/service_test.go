package chanservice_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/waypost/waypost/channel"
	"github.com/waypost/waypost/channel/chanservice"
	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/schemas"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const secret = "test-secret-0123456789abcdef"

func newService(t *testing.T, limits channel.Limits) *chanservice.Service {
	t.Helper()
	svc, err := chanservice.New(secret, limits, nil)
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// call sends one request to the handler and decodes the JSON response.
func call(t *testing.T, h http.Handler, method, path, auth, contentType, body string) (int, http.Header, map[string]any) {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%s %s: Content-Type %q", method, path, ct)
	}
	var out map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatalf("%s %s: body %q: %v", method, path, rec.Body.String(), err)
	}
	return rec.Code, rec.Header(), out
}

// errCode checks that body is Waypost's standard error envelope (schema envelope.error, the HTTP status
// of its code as in SUPPLEMENT §11.4) and returns its details.reason.
func errCode(t *testing.T, status int, body map[string]any) string {
	t.Helper()
	raw, _ := json.Marshal(body)
	if err := registry(t).Validate("envelope.error", raw); err != nil {
		t.Fatalf("not the standard error envelope: %v: %s", err, raw)
	}
	e := body["error"].(map[string]any)
	if code := domain.Code(e["code"].(string)); code.HTTPStatus() != status || code.Retryable() != e["retryable"] {
		t.Fatalf("%s with HTTP %d: %s", code, status, raw)
	}
	reason, _ := e["details"].(map[string]any)["reason"].(string)
	return reason
}

var reg struct {
	once sync.Once
	r    *schemas.Registry
	err  error
}

func registry(t *testing.T) *schemas.Registry {
	reg.once.Do(func() { reg.r, reg.err = schemas.New() })
	if reg.err != nil {
		t.Fatal(reg.err)
	}
	return reg.r
}

const bearer = "Bearer " + secret
const feed = "/internal/v0/spaces/sp_1/channels/feed"

func TestNewRejectsWeakSecret(t *testing.T) {
	for _, s := range []string{"", "short", strings.Repeat("x", chanservice.MinSecretBytes-1)} {
		if _, err := chanservice.New(s, channel.Limits{}, nil); !errors.Is(err, chanservice.ErrWeakSecret) {
			t.Errorf("New(%d-byte secret): %v, want ErrWeakSecret", len(s), err)
		}
	}
	if _, err := chanservice.New(strings.Repeat("x", chanservice.MinSecretBytes), channel.Limits{}, nil); err != nil {
		t.Errorf("New(16-byte secret): %v", err)
	}
}

func TestAuthRequired(t *testing.T) {
	svc := newService(t, channel.Limits{})
	tests := []struct {
		desc, auth string
	}{
		{"no header", ""},
		{"basic scheme", "Basic " + secret},
		{"no token", "Bearer"},
		{"empty token", "Bearer "},
		{"wrong token", "Bearer wrong-secret-0123456789abcdef"},
		{"prefix of secret", "Bearer " + secret[:len(secret)-1]},
		{"secret plus suffix", "Bearer " + secret + "x"},
		{"secret without scheme", secret},
	}
	routes := []struct{ method, path, body string }{
		{"POST", feed + "/publish", `{"text":"m"}`},
		{"POST", feed + "/close", `{"reason":"r"}`},
		{"GET", feed + "/count", ""},
		{"GET", "/internal/v0/unknown", ""},
		{"GET", feed + "/publish", ""}, // wrong method: still 401 first
	}
	hub := svc.HubFor("sp_1")
	sc := hub.NewScope(context.Background())
	defer sc.End()
	h, _ := sc.Subscribe("feed")
	for _, tc := range tests {
		for _, r := range routes {
			code, hdr, body := call(t, svc, r.method, r.path, tc.auth, "application/json", r.body)
			if code != http.StatusUnauthorized || errCode(t, code, body) != chanservice.CodeUnauthorized {
				t.Errorf("%s: %s %s = %d %v, want 401 unauthorized", tc.desc, r.method, r.path, code, body)
			}
			if !strings.HasPrefix(hdr.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("%s: WWW-Authenticate %q", tc.desc, hdr.Get("WWW-Authenticate"))
			}
		}
	}
	// Nothing was published or closed by the rejected requests.
	st, _, err := sc.Wait(context.Background(), h, 0)
	if err != nil || st != channel.StatusTimeout {
		t.Fatalf("after rejected requests Wait = %d, %v; want timeout", st, err)
	}
	// The scheme is case-insensitive; the health check needs no token.
	if code, _, body := call(t, svc, "GET", feed+"/count", "bearer "+secret, "", ""); code != 200 || body["count"] != 1.0 {
		t.Fatalf("lower-case scheme: %d %v", code, body)
	}
	if code, _, body := call(t, svc, "GET", "/healthz", "", "", ""); code != 200 || body["status"] != "ok" {
		t.Fatalf("healthz: %d %v", code, body)
	}
}

func TestPublishCloseCountOverHTTP(t *testing.T) {
	svc := newService(t, channel.Limits{})
	hub := svc.HubFor("sp_1")
	if svc.HubFor("sp_1") != hub || svc.HubFor("sp_2") == hub {
		t.Fatal("HubFor must return one hub per space")
	}
	sc := hub.NewScope(context.Background())
	defer sc.End()
	h, err := sc.Subscribe("feed")
	if err != nil {
		t.Fatal(err)
	}

	code, _, body := call(t, svc, "GET", feed+"/count", bearer, "", "")
	if code != 200 || body["count"] != 1.0 {
		t.Fatalf("count = %d %v", code, body)
	}
	code, _, body = call(t, svc, "POST", feed+"/publish", bearer, "application/json; charset=utf-8", `{"text":"{\"visible_seq\":7,\"item_id\":\"it_1\"} é"}`)
	if code != 200 || body["delivered"] != 1.0 {
		t.Fatalf("publish = %d %v", code, body)
	}
	st, text, err := sc.Wait(context.Background(), h, time.Second)
	if err != nil || st != channel.StatusMessage || text != `{"visible_seq":7,"item_id":"it_1"} é` {
		t.Fatalf("Wait = %d %q %v", st, text, err)
	}
	// Empty text is legal; a missing Content-Type is accepted.
	code, _, body = call(t, svc, "POST", feed+"/publish", bearer, "", `{"text":""}`)
	if code != 200 || body["delivered"] != 1.0 {
		t.Fatalf("empty publish = %d %v", code, body)
	}
	if st, text, _ := sc.Wait(context.Background(), h, time.Second); st != channel.StatusMessage || text != "" {
		t.Fatalf("Wait = %d %q", st, text)
	}
	// Another space is isolated and its channel does not exist.
	code, _, body = call(t, svc, "POST", "/internal/v0/spaces/sp_2/channels/feed/publish", bearer, "", `{"text":"x"}`)
	if code != 200 || body["delivered"] != 0.0 {
		t.Fatalf("publish to other space = %d %v", code, body)
	}
	code, _, body = call(t, svc, "POST", feed+"/close", bearer, "application/json", `{"reason":"收摊"}`)
	if code != 200 || body["closed"] != 1.0 {
		t.Fatalf("close = %d %v", code, body)
	}
	if st, text, _ := sc.Wait(context.Background(), h, time.Second); st != channel.StatusEnded || text != "收摊" {
		t.Fatalf("Wait after close = %d %q", st, text)
	}
	code, _, body = call(t, svc, "GET", feed+"/count", bearer, "", "")
	if code != 200 || body["count"] != 0.0 {
		t.Fatalf("count after close = %d %v", code, body)
	}
	code, _, body = call(t, svc, "POST", feed+"/close", bearer, "", `{"reason":""}`)
	if code != 200 || body["closed"] != 0.0 {
		t.Fatalf("close of absent channel = %d %v", code, body)
	}
}

func TestRequestValidationOverHTTP(t *testing.T) {
	svc := newService(t, channel.Limits{MaxTextBytes: 100, MaxReasonBytes: 10})
	long := strings.Repeat("a", 101)
	tests := []struct {
		desc, method, path, ctype, body string
		status                          int
		code                            string
	}{
		{"bad channel name", "POST", "/internal/v0/spaces/sp_1/channels/a%20b/publish", "", `{"text":"m"}`, 400, chanservice.CodeInvalidChannelName},
		{"channel name too long", "GET", "/internal/v0/spaces/sp_1/channels/" + strings.Repeat("n", 65) + "/count", "", "", 400, chanservice.CodeInvalidChannelName},
		{"non-ASCII channel name", "GET", "/internal/v0/spaces/sp_1/channels/%E9%A2%91/count", "", "", 400, chanservice.CodeInvalidChannelName},
		{"bad space id", "GET", "/internal/v0/spaces/sp%2F1/channels/feed/count", "", "", 400, chanservice.CodeInvalidSpaceID},
		{"space id too long", "GET", "/internal/v0/spaces/" + strings.Repeat("s", 129) + "/channels/feed/count", "", "", 400, chanservice.CodeInvalidSpaceID},
		{"text too large", "POST", feed + "/publish", "", `{"text":"` + long + `"}`, 422, chanservice.CodeTextTooLarge},
		{"reason too large", "POST", feed + "/close", "", `{"reason":"12345678901"}`, 422, chanservice.CodeReasonTooLarge},
		{"raw 0xFF byte", "POST", feed + "/publish", "", "{\"text\":\"\xffx\"}", 400, chanservice.CodeBadRequest},
		{"not JSON", "POST", feed + "/publish", "", `text=m`, 400, chanservice.CodeBadRequest},
		{"empty body", "POST", feed + "/publish", "", ``, 400, chanservice.CodeBadRequest},
		{"array", "POST", feed + "/publish", "", `["m"]`, 400, chanservice.CodeBadRequest},
		{"unknown member", "POST", feed + "/publish", "", `{"text":"m","x":1}`, 400, chanservice.CodeBadRequest},
		{"wrong member", "POST", feed + "/close", "", `{"text":"m"}`, 400, chanservice.CodeBadRequest},
		{"duplicate member", "POST", feed + "/publish", "", `{"text":"a","text":"b"}`, 400, chanservice.CodeBadRequest},
		{"missing member", "POST", feed + "/publish", "", `{}`, 400, chanservice.CodeBadRequest},
		{"number", "POST", feed + "/publish", "", `{"text":1}`, 400, chanservice.CodeBadRequest},
		{"null", "POST", feed + "/publish", "", `{"text":null}`, 400, chanservice.CodeBadRequest},
		{"object value", "POST", feed + "/publish", "", `{"text":{}}`, 400, chanservice.CodeBadRequest},
		{"trailing data", "POST", feed + "/publish", "", `{"text":"m"} {}`, 400, chanservice.CodeBadRequest},
		{"unterminated", "POST", feed + "/publish", "", `{"text":"m"`, 400, chanservice.CodeBadRequest},
		{"wrong content type", "POST", feed + "/publish", "text/plain", `{"text":"m"}`, 400, chanservice.CodeUnsupportedMediaType},
		{"body too large", "POST", feed + "/publish", "", `{"text":"` + strings.Repeat("a", 6*100+4096) + `"}`, 413, chanservice.CodeBodyTooLarge},
		{"GET publish", "GET", feed + "/publish", "", "", 404, chanservice.CodeMethodNotAllowed},
		{"POST count", "POST", feed + "/count", "", "", 404, chanservice.CodeMethodNotAllowed},
		{"unknown op", "POST", feed + "/purge", "", `{}`, 404, chanservice.CodeNotFound},
		{"unknown route", "GET", "/internal/v0/spaces", "", "", 404, chanservice.CodeNotFound},
		{"outside internal", "GET", "/admin", "", "", 404, chanservice.CodeNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			code, hdr, body := call(t, svc, tc.method, tc.path, bearer, tc.ctype, tc.body)
			if code != tc.status || errCode(t, code, body) != tc.code {
				t.Fatalf("= %d %v, want %d %s", code, body, tc.status, tc.code)
			}
			if tc.code == chanservice.CodeMethodNotAllowed && hdr.Get("Allow") == "" {
				t.Fatal("wrong method without Allow")
			}
		})
	}
	// Exactly at the limits is accepted.
	code, _, body := call(t, svc, "POST", feed+"/publish", bearer, "", `{"text":"`+long[:100]+`"}`)
	if code != 200 {
		t.Fatalf("100-byte text = %d %v", code, body)
	}
	code, _, body = call(t, svc, "POST", feed+"/close", bearer, "", `{"reason":"1234567890"}`)
	if code != 200 {
		t.Fatalf("10-byte reason = %d %v", code, body)
	}
}

func TestInProcessOperations(t *testing.T) {
	svc := newService(t, channel.Limits{})
	for _, bad := range []string{"", "a/b", "a b", strings.Repeat("s", 129)} {
		if _, err := svc.Publish(bad, "feed", "m"); !errors.Is(err, chanservice.ErrInvalidSpaceID) {
			t.Errorf("Publish(%q): %v", bad, err)
		}
	}
	if _, err := svc.Count(strings.Repeat("s", 128), "feed"); err != nil {
		t.Errorf("Count(128-byte space id): %v", err)
	}
	// Spaces without a hub still validate arguments.
	if _, err := svc.Publish("none", "bad name", "m"); !errors.Is(err, channel.ErrInvalidName) {
		t.Errorf("Publish bad name: %v", err)
	}
	if _, err := svc.Publish("none", "feed", "\xff"); !errors.Is(err, channel.ErrInvalidText) {
		t.Errorf("Publish 0xFF: %v", err)
	}
	if _, err := svc.Close("none", "feed", strings.Repeat("r", 1025)); !errors.Is(err, channel.ErrReasonTooLarge) {
		t.Errorf("Close long reason: %v", err)
	}
	for err, want := range map[error]int{chanservice.ErrInvalidSpaceID: 400, channel.ErrInvalidName: 400, channel.ErrTextTooLarge: 422,
		channel.ErrInvalidText: 400, channel.ErrReasonTooLarge: 422} {
		status, code := chanservice.Classify(err)
		if status != want || !errors.Is(chanservice.SentinelFor(code), err) {
			t.Errorf("Classify(%v) = %d %s, SentinelFor does not invert it", err, status, code)
		}
	}
	if status, code := chanservice.Classify(io.EOF); status != 500 || code != chanservice.CodeInternal {
		t.Errorf("Classify(other) = %d %s", status, code)
	}
}

// The embedded server hands the service to packages that only need
// HubFor (channel/livefeed's Hubs).
var _ interface {
	HubFor(spaceID string) *channel.Hub
} = (*chanservice.Service)(nil)

// TestSlowBodyIsCut: over a real connection, a request whose body trickles in is answered at once when
// the secret is wrong (401, without waiting for the body) and the connection is closed.
func TestSlowBodyIsCut(t *testing.T) {
	svc := newService(t, channel.Limits{})
	hs := httptest.NewServer(svc)
	defer hs.Close()
	c, err := net.Dial("tcp", strings.TrimPrefix(hs.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	head := "POST " + feed + "/publish HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 60000\r\n" +
		"Authorization: Bearer wrong-secret-0123456789abcdef\r\n\r\n{"
	if _, err := io.WriteString(c, head); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer while the body trickles: %v", err)
	}
	if resp.StatusCode != http.StatusUnauthorized || !resp.Close {
		t.Fatalf("HTTP %d, close %v", resp.StatusCode, resp.Close)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	if _, err := br.ReadByte(); err == nil {
		t.Fatal("more bytes after the answer")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("the connection stayed open")
	}
}
