package deliver_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/waypost/waypost/webhook/deliver"
	"github.com/waypost/waypost/webhook/dial"
	"github.com/waypost/waypost/webhook/sign"
)

// TestSendDelivers: the receiver gets exactly ev.Bytes with the CloudEvents content type and Standard
// Webhooks headers, and the Go library verifies the signature over the raw body it received.
func TestSendDelivers(t *testing.T) {
	ev := testEvent(t)
	var rec capture
	wh, err := standardwebhooks.NewWebhook(newSecretText)
	if err != nil {
		t.Fatal(err)
	}
	verr := make(chan error, 1)
	srv := server(t, func(w http.ResponseWriter, r *http.Request) {
		got := rec.record(r)
		verr <- wh.Verify(got.Body, got.Header)
		w.WriteHeader(http.StatusNoContent)
	})
	signer, _ := sign.NewSigner(sign.Keys{Current: secret(t, newSecretText)})
	out, err := deliver.Send(context.Background(), loopbackClient(t, 0), srv.URL+"/hook", signer, ev)
	if err != nil {
		t.Fatal(err)
	}
	if out.Class != deliver.Delivered || out.StatusCode != 204 || out.Err != nil || out.WebhookID != ev.ID {
		t.Fatalf("outcome %+v", out)
	}
	reqs := rec.all()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	got := reqs[0]
	if err := <-verr; err != nil {
		t.Fatalf("Standard Webhooks library rejects the delivery: %v", err)
	}
	if !bytes.Equal(got.Body, ev.Bytes) {
		t.Fatalf("sent %s, want %s", got.Body, ev.Bytes)
	}
	if ct := got.Header.Get("Content-Type"); ct != "application/cloudevents+json" {
		t.Fatalf("Content-Type %q", ct)
	}
	if got.Header.Get("webhook-id") != ev.ID || got.Header.Get("webhook-timestamp") != strconv.FormatInt(out.Timestamp.Unix(), 10) {
		t.Fatalf("headers %v, outcome %+v", got.Header, out)
	}
	if d := time.Since(out.Timestamp); d < 0 || d > time.Minute {
		t.Fatalf("timestamp %v is not now", out.Timestamp)
	}
}

func TestSendClassifiesStatus(t *testing.T) {
	cases := []struct {
		status     int
		retryAfter string
		want       deliver.Class
	}{
		{200, "", deliver.Delivered}, {201, "", deliver.Delivered}, {202, "", deliver.Delivered}, {204, "", deliver.Delivered},
		{299, "", deliver.Delivered},
		{410, "", deliver.GiveUp},
		{302, "", deliver.Retry}, {400, "", deliver.Retry}, {401, "", deliver.Retry}, {404, "", deliver.Retry},
		{408, "", deliver.Retry}, {429, "30", deliver.Retry}, {500, "", deliver.Retry},
		{503, "Sun, 01 Nov 2026 12:05:00 GMT", deliver.Retry},
	}
	ev := testEvent(t)
	signer, _ := sign.NewSigner(sign.Keys{Current: secret(t, newSecretText)})
	client := loopbackClient(t, 0)
	for _, tc := range cases {
		srv := server(t, func(w http.ResponseWriter, r *http.Request) {
			if tc.retryAfter != "" {
				w.Header().Set("Retry-After", tc.retryAfter)
			}
			if tc.status == 302 {
				w.Header().Set("Location", "http://127.0.0.1:1/elsewhere")
			}
			w.WriteHeader(tc.status)
		})
		out, err := deliver.Send(context.Background(), client, srv.URL, signer, ev)
		if err != nil {
			t.Fatalf("%d: %v", tc.status, err)
		}
		if out.Class != tc.want || out.StatusCode != tc.status || out.RetryAfter != tc.retryAfter || out.Err != nil {
			t.Fatalf("status %d: outcome %+v, want %v", tc.status, out, tc.want)
		}
		if deliver.ClassifyStatus(tc.status) != tc.want {
			t.Fatalf("ClassifyStatus(%d)", tc.status)
		}
	}
}

func TestSendTransportFailures(t *testing.T) {
	ev := testEvent(t)
	signer, _ := sign.NewSigner(sign.Keys{Current: secret(t, newSecretText)})

	t.Run("connection refused", func(t *testing.T) {
		srv := server(t, func(http.ResponseWriter, *http.Request) {})
		url := srv.URL
		srv.Close()
		out, err := deliver.Send(context.Background(), loopbackClient(t, 0), url, signer, ev)
		if err != nil || out.Class != deliver.Retry || out.StatusCode != 0 || out.Err == nil || out.Reason != "network error" {
			t.Fatalf("%+v %v", out, err)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		release := make(chan struct{})
		srv := server(t, func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		})
		defer close(release)
		out, err := deliver.Send(context.Background(), loopbackClient(t, 200*time.Millisecond), srv.URL, signer, ev)
		if err != nil || out.Class != deliver.Retry || out.Reason != "timeout" || !dial.IsTimeout(out.Err) {
			t.Fatalf("%+v %v", out, err)
		}
	})
	t.Run("forbidden target", func(t *testing.T) {
		var hit atomic.Bool
		srv := server(t, func(http.ResponseWriter, *http.Request) { hit.Store(true) })
		out, err := deliver.Send(context.Background(), strictClient(t), srv.URL, signer, ev)
		var te *dial.TargetError
		if err != nil || out.Class != deliver.GiveUp || !errors.As(out.Err, &te) || hit.Load() {
			t.Fatalf("%+v %v hit=%v", out, err, hit.Load())
		}
	})
	t.Run("caller cancels", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		srv := server(t, func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body) // the server notices a closed connection only once the body is read
			cancel()
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		})
		out, err := deliver.Send(ctx, loopbackClient(t, 0), srv.URL, signer, ev)
		if !errors.Is(err, context.Canceled) || out.Class != deliver.Retry {
			t.Fatalf("%+v %v", out, err)
		}
	})
	t.Run("bad arguments", func(t *testing.T) {
		c := loopbackClient(t, 0)
		if _, err := deliver.Send(context.Background(), nil, "http://127.0.0.1/", signer, ev); err == nil {
			t.Fatal("nil client")
		}
		if _, err := deliver.Send(context.Background(), c, "http://127.0.0.1/", nil, ev); err == nil {
			t.Fatal("nil signer")
		}
		empty := ev
		empty.Bytes = nil
		if _, err := deliver.Send(context.Background(), c, "http://127.0.0.1/", signer, empty); err == nil {
			t.Fatal("event without bytes")
		}
	})
}

// TestSendDualSignature: during the rotation window both the old and the new secret verify a delivery.
func TestSendDualSignature(t *testing.T) {
	ev := testEvent(t)
	var rec capture
	srv := server(t, func(w http.ResponseWriter, r *http.Request) { rec.record(r) })
	keys := sign.Keys{Current: secret(t, oldSecretText)}.Rotate(secret(t, newSecretText), time.Now())
	signer, _ := sign.NewSigner(keys)
	if out, err := deliver.Send(context.Background(), loopbackClient(t, 0), srv.URL, signer, ev); err != nil || out.Class != deliver.Delivered {
		t.Fatalf("%+v %v", out, err)
	}
	got := rec.all()[0]
	if n := len(strings.Split(got.Header.Get("webhook-signature"), " ")); n != 2 {
		t.Fatalf("%d signatures", n)
	}
	for _, s := range []string{oldSecretText, newSecretText} {
		wh, _ := standardwebhooks.NewWebhook(s)
		if err := wh.Verify(got.Body, got.Header); err != nil {
			t.Fatalf("secret rejected: %v", err)
		}
	}
}

func TestClassString(t *testing.T) {
	for c, want := range map[deliver.Class]string{deliver.Delivered: "delivered", deliver.Retry: "retry", deliver.GiveUp: "give_up", 0: "Class(0)"} {
		if c.String() != want {
			t.Fatalf("%d: %q", int(c), c.String())
		}
	}
}
