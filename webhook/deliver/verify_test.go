package deliver_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/waypost/waypost/webhook/deliver"
	"github.com/waypost/waypost/webhook/dial"
)

// TestVerifySucceeds: a receiver that checks the signature and echoes the challenge passes; the request
// has the RFC shape, and each verification uses a fresh challenge and webhook-id.
func TestVerifySucceeds(t *testing.T) {
	wh, _ := standardwebhooks.NewWebhook(newSecretText)
	var rec capture
	var problems []string
	var mu sync.Mutex
	fail := func(s string) { mu.Lock(); problems = append(problems, s); mu.Unlock() }
	srv := server(t, func(w http.ResponseWriter, r *http.Request) {
		got := rec.record(r)
		if err := wh.Verify(got.Body, got.Header); err != nil {
			fail("signature: " + err.Error())
		}
		if ct := r.Header.Get("Content-Type"); ct != "application/json" {
			fail("content type " + ct)
		}
		var m map[string]any
		if err := json.Unmarshal(got.Body, &m); err != nil || len(m) != 2 || m["type"] != "verification" {
			fail("body " + string(got.Body))
		}
		ch, _ := m["challenge"].(string)
		if raw, err := base64.RawURLEncoding.DecodeString(ch); err != nil || len(raw) != 32 {
			fail("challenge is not 32 bytes of base64url: " + ch)
		}
		echoChallenge(w, got.Body)
	})
	client := loopbackClient(t, 0)
	for range 2 {
		if err := deliver.Verify(context.Background(), client, srv.URL+"/hook", secret(t, newSecretText)); err != nil {
			t.Fatal(err)
		}
	}
	if len(problems) > 0 {
		t.Fatal(strings.Join(problems, "\n"))
	}
	reqs := rec.all()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	a, b := reqs[0], reqs[1]
	if a.Header.Get("webhook-id") == b.Header.Get("webhook-id") || string(a.Body) == string(b.Body) {
		t.Fatal("challenge or webhook-id reused")
	}
	if !strings.HasPrefix(a.Header.Get("webhook-id"), "wv_") {
		t.Fatalf("webhook-id %q", a.Header.Get("webhook-id"))
	}
}

func TestVerifyFailures(t *testing.T) {
	s := secret(t, newSecretText)
	release := make(chan struct{})
	defer close(release)
	var last atomic.Value // the previous challenge body, for the replay receiver
	handlers := map[string]http.HandlerFunc{
		"wrong echo": func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, `{"challenge":"not-it"}`)
		},
		"no echo": func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, `{"ok":true}`)
		},
		"empty body": func(w http.ResponseWriter, r *http.Request) {},
		"not json": func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			var ch struct{ Challenge string }
			_ = json.Unmarshal(b, &ch)
			_, _ = io.WriteString(w, ch.Challenge) // the bare string, not the object
		},
		"echo of an older challenge": func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			prev, _ := last.Swap(b).([]byte)
			if prev == nil {
				prev = b
			}
			echoChallenge(w, prev)
		},
		"status 404": func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(404)
			echoChallenge(w, mustRead(r))
		},
		"status 302": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Location", "http://127.0.0.1:1/")
			w.WriteHeader(302)
		},
		"status 500": func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(500) },
		"slow": func(w http.ResponseWriter, r *http.Request) {
			_ = mustRead(r) // lets the server notice the client hanging up
			select {
			case <-release:
			case <-r.Context().Done():
			}
		},
		"oversized answer": func(w http.ResponseWriter, r *http.Request) {
			// A correct echo followed by padding: valid JSON, but more than the client reads.
			echoChallenge(w, mustRead(r))
			_, _ = io.WriteString(w, strings.Repeat(" ", 70_000))
		},
	}
	want := map[string]struct {
		failure deliver.Failure
		status  int
	}{
		"wrong echo": {deliver.FailEcho, 200}, "no echo": {deliver.FailEcho, 200}, "empty body": {deliver.FailEcho, 200},
		"not json": {deliver.FailEcho, 200}, "echo of an older challenge": {deliver.FailEcho, 200},
		"status 404": {deliver.FailStatus, 404}, "status 302": {deliver.FailStatus, 302}, "status 500": {deliver.FailStatus, 500},
		"slow": {deliver.FailTimeout, 0}, "oversized answer": {deliver.FailEcho, 200},
	}
	client := loopbackClient(t, 0)
	for name, h := range handlers {
		t.Run(name, func(t *testing.T) {
			srv := server(t, h)
			v := deliver.Verifier{Timeout: 300 * time.Millisecond}
			if name == "echo of an older challenge" {
				// First round primes the receiver with a challenge it will replay next time.
				_ = v.Verify(context.Background(), client, srv.URL, s)
			}
			err := v.Verify(context.Background(), client, srv.URL, s)
			var ve *deliver.VerifyError
			if !errors.As(err, &ve) || ve.Failure != want[name].failure || ve.StatusCode != want[name].status {
				t.Fatalf("got %v (%#v), want %v status %d", err, ve, want[name].failure, want[name].status)
			}
		})
	}
}

func mustRead(r *http.Request) []byte {
	b, _ := io.ReadAll(r.Body)
	return b
}

func TestVerifyRefusedAndUnreachable(t *testing.T) {
	s := secret(t, newSecretText)
	var hits atomic.Int64
	srv := server(t, func(w http.ResponseWriter, r *http.Request) { hits.Add(1); echoChallenge(w, mustRead(r)) })

	err := deliver.Verify(context.Background(), strictClient(t), srv.URL, s)
	var ve *deliver.VerifyError
	var te *dial.TargetError
	if !errors.As(err, &ve) || ve.Failure != deliver.FailForbiddenTarget || !errors.As(err, &te) {
		t.Fatalf("loopback target without the option: %v", err)
	}
	if hits.Load() != 0 {
		t.Fatal("refused target was contacted")
	}
	if err := deliver.Verify(context.Background(), strictClient(t), "ftp://example.com/", s); !errors.As(err, &ve) || ve.Failure != deliver.FailForbiddenTarget {
		t.Fatalf("bad scheme: %v", err)
	}

	closed := server(t, func(http.ResponseWriter, *http.Request) {})
	url := closed.URL
	closed.Close()
	if err := deliver.Verify(context.Background(), loopbackClient(t, 0), url, s); !errors.As(err, &ve) || ve.Failure != deliver.FailUnreachable {
		t.Fatalf("closed port: %v", err)
	}
	// With the development option the same receiver verifies.
	if err := deliver.Verify(context.Background(), loopbackClient(t, 0), srv.URL, s); err != nil || hits.Load() != 1 {
		t.Fatalf("AllowLoopback: %v (hits %d)", err, hits.Load())
	}
}

// TestVerifyChallengeExpires: an echo that arrives (by the injected clock) more than 60 s after the
// challenge was issued is refused, one at exactly 60 s is accepted.
func TestVerifyChallengeExpires(t *testing.T) {
	s := secret(t, newSecretText)
	var clock atomic.Int64
	clock.Store(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC).UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	var advance atomic.Int64
	srv := server(t, func(w http.ResponseWriter, r *http.Request) {
		clock.Add(advance.Load())
		echoChallenge(w, mustRead(r))
	})
	client := loopbackClient(t, 0)
	v := deliver.Verifier{Now: now}
	advance.Store(int64(60 * time.Second))
	if err := v.Verify(context.Background(), client, srv.URL, s); err != nil {
		t.Fatalf("at 60 s: %v", err)
	}
	advance.Store(int64(60*time.Second + time.Millisecond))
	err := v.Verify(context.Background(), client, srv.URL, s)
	var ve *deliver.VerifyError
	if !errors.As(err, &ve) || ve.Failure != deliver.FailTimeout {
		t.Fatalf("after 60 s: %v", err)
	}
}

func TestVerifyArguments(t *testing.T) {
	var ve *deliver.VerifyError
	err := deliver.Verify(context.Background(), loopbackClient(t, 0), "http://127.0.0.1:1/", secretZero())
	if err == nil || errors.As(err, &ve) {
		t.Fatalf("zero secret: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	srv := server(t, func(w http.ResponseWriter, r *http.Request) { echoChallenge(w, mustRead(r)) })
	err = deliver.Verify(ctx, loopbackClient(t, 0), srv.URL, secret(t, newSecretText))
	if !errors.Is(err, context.Canceled) || errors.As(err, &ve) {
		t.Fatalf("canceled context: %v", err)
	}
	if deliver.FailEcho.String() != "wrong echo" || deliver.Failure(99).String() != "Failure(99)" {
		t.Fatal("Failure.String")
	}
}
