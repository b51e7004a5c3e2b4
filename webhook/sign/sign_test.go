package sign_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/waypost/waypost/webhook/sign"
)

// Fixed test secrets (32 bytes each).
var (
	oldText = "whsec_" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xA1}, 32))
	newText = "whsec_" + base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
)

func mustSecret(t *testing.T, text string) sign.Secret {
	t.Helper()
	s, err := sign.ParseSecret(text)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func headerOf(h sign.Headers) http.Header {
	out := http.Header{}
	h.Set(out)
	return out
}

// TestSignatureIsStandardHMAC checks the signature against an HMAC computed here from the spec's
// definition, independently of the library the signer uses.
func TestSignatureIsStandardHMAC(t *testing.T) {
	at := time.Unix(1_790_000_000, 987_000_000)
	body := []byte(`{"specversion":"1.0","id":"it_1"}`)
	h := mustSign(t, sign.Keys{Current: mustSecret(t, newText)}, "it_1", body, clockAt(at))
	mac := hmac.New(sha256.New, []byte("0123456789abcdef0123456789abcdef"))
	mac.Write([]byte("it_1.1790000000." + string(body)))
	want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	if h.Signature != want || h.ID != "it_1" || h.Timestamp.Unix() != 1_790_000_000 {
		t.Fatalf("got %+v, want signature %s", h, want)
	}
	hdr := headerOf(h)
	if hdr.Get("webhook-id") != "it_1" || hdr.Get("webhook-timestamp") != "1790000000" || hdr.Get("webhook-signature") != want {
		t.Fatalf("headers %v", hdr)
	}
}

// TestLibraryVerifies checks signatures with the Standard Webhooks Go library's verifier (real clock,
// 5-minute tolerance), and that it rejects a changed body, ID, timestamp or secret.
func TestLibraryVerifies(t *testing.T) {
	body := []byte(`{"type":"verification","challenge":"abc"}`)
	h := mustSign(t, sign.Keys{Current: mustSecret(t, newText)}, "wv_1", body)
	wh, err := standardwebhooks.NewWebhook(newText)
	if err != nil {
		t.Fatal(err)
	}
	if err := wh.Verify(body, headerOf(h)); err != nil {
		t.Fatalf("library rejects a good signature: %v", err)
	}
	other, _ := standardwebhooks.NewWebhook(oldText)
	tamper := []struct {
		name string
		wh   *standardwebhooks.Webhook
		body []byte
		edit func(http.Header)
	}{
		{"body", wh, append(bytes.Clone(body), ' '), func(http.Header) {}},
		{"id", wh, body, func(h http.Header) { h.Set("webhook-id", "wv_2") }},
		{"timestamp", wh, body, func(h http.Header) {
			h.Set("webhook-timestamp", strconv.FormatInt(h2i(h.Get("webhook-timestamp"))+1, 10))
		}},
		{"secret", other, body, func(http.Header) {}},
	}
	for _, tc := range tamper {
		hdr := headerOf(h)
		tc.edit(hdr)
		if err := tc.wh.Verify(tc.body, hdr); !errors.Is(err, standardwebhooks.ErrNoMatchingSignature) {
			t.Fatalf("%s changed: got %v, want no matching signature", tc.name, err)
		}
	}
}

func h2i(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

// TestRotationWindow drives a fake clock across the dual-signature window.
func TestRotationWindow(t *testing.T) {
	oldS, newS := mustSecret(t, oldText), mustSecret(t, newText)
	t0 := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	keys := sign.Keys{Current: oldS}.Rotate(newS, t0)
	if !keys.Current.Equal(newS) || !keys.Previous.Equal(oldS) || !keys.RotatedAt.Equal(t0) {
		t.Fatalf("rotate: %+v", keys)
	}
	oldWH, _ := standardwebhooks.NewWebhook(oldText)
	newWH, _ := standardwebhooks.NewWebhook(newText)
	body := []byte(`{"id":"it_1"}`)
	cases := []struct {
		name    string
		at      time.Duration
		opts    []sign.SignerOption
		wantOld bool
	}{
		{"at rotation", 0, nil, true},
		{"4m59s after", 4*time.Minute + 59*time.Second, nil, true},
		{"5m after", 5 * time.Minute, nil, false},
		{"an hour after", time.Hour, nil, false},
		{"clock before rotation", -time.Second, nil, true},
		{"longer window is capped at 5m", 5 * time.Minute, []sign.SignerOption{sign.WithDualWindow(10 * time.Minute)}, false},
		{"shorter window", time.Minute, []sign.SignerOption{sign.WithDualWindow(time.Minute)}, false},
		{"within shorter window", 59 * time.Second, []sign.SignerOption{sign.WithDualWindow(time.Minute)}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			now := t0.Add(tc.at)
			h := mustSign(t, keys, "it_1", body, append(tc.opts, clockAt(now))...)
			parts := strings.Split(h.Signature, " ")
			if want := map[bool]int{true: 2, false: 1}[tc.wantOld]; len(parts) != want {
				t.Fatalf("%d signatures %q, want %d", len(parts), h.Signature, want)
			}
			hdr := headerOf(h)
			if err := newWH.VerifyIgnoringTimestamp(body, hdr); err != nil {
				t.Fatalf("new secret: %v", err)
			}
			if err := oldWH.VerifyIgnoringTimestamp(body, hdr); (err == nil) != tc.wantOld {
				t.Fatalf("old secret verifies=%v, want %v", err == nil, tc.wantOld)
			}
			// The current secret's signature comes first.
			if ns := headerOf(mustSign(t, sign.Keys{Current: newS}, "it_1", body, clockAt(now))).Get("webhook-signature"); parts[0] != ns {
				t.Fatalf("first signature %q is not the current secret's %q", parts[0], ns)
			}
		})
	}
}

// TestRotationWindowSubsecond: the window ends exactly 5 minutes after a mid-second rotation, although
// webhook-timestamp is in whole seconds.
func TestRotationWindowSubsecond(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 12, 0, 0, 500_000_000, time.UTC)
	keys := sign.Keys{Current: mustSecret(t, oldText)}.Rotate(mustSecret(t, newText), t0)
	for _, tc := range []struct {
		at   time.Duration
		want int
	}{{5*time.Minute - time.Nanosecond, 2}, {5 * time.Minute, 1}, {5*time.Minute + 100*time.Millisecond, 1}} {
		now := t0.Add(tc.at)
		h := mustSign(t, keys, "it_1", []byte("{}"), clockAt(now))
		if n := len(strings.Split(h.Signature, " ")); n != tc.want {
			t.Fatalf("at rotation+%v: %d signatures, want %d", tc.at, n, tc.want)
		}
		if h.Timestamp.Unix() != now.Unix() {
			t.Fatalf("timestamp %v for %v", h.Timestamp, now)
		}
	}
}

// mustSign signs body as webhook id with a signer of keys and opts, failing t on any error.
func mustSign(t *testing.T, keys sign.Keys, id string, body []byte, opts ...sign.SignerOption) sign.Headers {
	t.Helper()
	s, err := sign.NewSigner(keys, opts...)
	if err != nil {
		t.Fatal(err)
	}
	h, err := s.Sign(id, body)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// clockAt is a signer clock standing at now.
func clockAt(now time.Time) sign.SignerOption {
	return sign.WithClock(func() time.Time { return now })
}

func TestSignerRejects(t *testing.T) {
	if _, err := sign.NewSigner(sign.Keys{}); err == nil {
		t.Fatal("signer without a current secret")
	}
	s, _ := sign.NewSigner(sign.Keys{Current: mustSecret(t, newText)})
	for _, id := range []string{"", "a.b", "a b", "a,b", "é", strings.Repeat("a", 257), "a\n"} {
		if _, err := s.Sign(id, []byte("{}")); err == nil {
			t.Fatalf("webhook-id %q accepted", id)
		}
	}
	if _, err := s.Sign("msg_2KWPBgLlAfxdpx2AI54pPJ85f4W", []byte("{}")); err != nil {
		t.Fatal(err)
	}
}

func TestParseSecret(t *testing.T) {
	s := mustSecret(t, newText)
	if s.Reveal() != newText || s.IsZero() {
		t.Fatalf("round trip: %q", s.Reveal())
	}
	if !s.Equal(mustSecret(t, newText)) || s.Equal(mustSecret(t, oldText)) || s.Equal(sign.Secret{}) {
		t.Fatal("Equal")
	}
	key31 := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 31))
	key33 := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 33))
	bad := []string{
		"", "whsec_", strings.TrimPrefix(newText, "whsec_"), "WHSEC_" + strings.TrimPrefix(newText, "whsec_"),
		"whsec_" + key31, "whsec_" + key33, strings.TrimRight(newText, "="), newText + " ", "whsec_!!!!" + newText[10:],
		"whsec_" + base64.URLEncoding.EncodeToString(bytes.Repeat([]byte{0xff}, 32)),
		newText[:20] + "\n" + newText[20:], newText[:20] + "\r\n" + newText[20:],
	}
	for _, b := range bad {
		_, err := sign.ParseSecret(b)
		if err == nil {
			t.Fatalf("accepted %q", b)
		}
		if len(b) > 10 && strings.Contains(err.Error(), b[6:]) {
			t.Fatalf("error %q repeats the secret", err)
		}
	}
	if (sign.Secret{}).Reveal() != "" || !(sign.Secret{}).IsZero() {
		t.Fatal("zero secret")
	}
}

func TestNewSecret(t *testing.T) {
	a, b := sign.NewSecret(), sign.NewSecret()
	if a.IsZero() || a.Equal(b) {
		t.Fatal("NewSecret is not random")
	}
	back, err := sign.ParseSecret(a.Reveal())
	if err != nil || !back.Equal(a) {
		t.Fatalf("reparse: %v", err)
	}
}

// TestSecretNeverPrinted formats a secret every way a log line might, alone and inside a struct.
func TestSecretNeverPrinted(t *testing.T) {
	s := mustSecret(t, newText)
	raw := []byte("0123456789abcdef0123456789abcdef")
	leaks := []string{
		strings.TrimPrefix(newText, "whsec_"), string(raw), hex.EncodeToString(raw), fmt.Sprint(raw[:4]),
		"48 49 50 51", "[48", // decimal bytes of the key
	}
	type holder struct {
		Name   string
		Secret sign.Secret
		Ptr    *sign.Secret
	}
	h := holder{Name: "sub", Secret: s, Ptr: &s}
	var outs []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%o", "%b", "%08.3f", "%T"} {
		outs = append(outs, fmt.Sprintf(verb, s), fmt.Sprintf(verb, h), fmt.Sprintf(verb, &s))
	}
	outs = append(outs, fmt.Sprint(s), fmt.Sprintln(h), s.String(), s.GoString())
	for _, newHandler := range []func(*bytes.Buffer) slog.Handler{
		func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) },
		func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) },
	} {
		var buf bytes.Buffer
		log := slog.New(newHandler(&buf))
		log.Info("rotating", "secret", s, "holder", h, slog.Any("ptr", &s))
		outs = append(outs, buf.String())
	}
	if _, err := json.Marshal(h); err == nil {
		t.Fatal("json.Marshal of a struct holding a secret succeeded")
	}
	for _, out := range outs {
		for _, leak := range leaks {
			if strings.Contains(out, leak) {
				t.Fatalf("output %q contains %q", out, leak)
			}
		}
	}
	if !strings.Contains(fmt.Sprint(s), "REDACTED") || !strings.Contains(outs[len(outs)-1], "REDACTED") {
		t.Fatalf("redaction marker missing: %q", outs)
	}
}
