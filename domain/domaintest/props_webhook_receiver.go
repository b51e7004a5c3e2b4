package domaintest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/internal/syncbuf"
	"github.com/waypost/waypost/webhook/dial"
	"github.com/waypost/waypost/webhook/sender"
)

// whReceiver is a webhook receiver on a loopback httptest server. It verifies every request with the
// Standard Webhooks reference library (github.com/standard-webhooks/standard-webhooks/libraries/go), which
// this project did not write, echoes verification challenges as the fake's script says, checks each event
// (CloudEvents structure, id = webhook-id, size, no content) and answers as scripted. Problems are collected
// and reported by the test goroutine (errs.Take).
type whReceiver struct {
	srv   *httptest.Server
	fake  *FakeWebhooks
	clock func() time.Time

	errs   syncbuf.List[string]     // problems found, taken by the test goroutine
	events syncbuf.List[whReceived] // every event accepted

	mu        sync.Mutex
	forbidden []string // texts that must never appear in an event (message bodies and subjects)
}

// whReceived is one event the receiver accepted the signature of.
type whReceived struct {
	URL       string
	WebhookID string
	Body      []byte
	Header    http.Header
	Sigs      int // number of v1 signatures in the header
	Status    int // what it answered (0: connection dropped)
}

// newWhReceiver starts a receiver answering from fake's script; the caller closes r.srv.
func newWhReceiver(fake *FakeWebhooks, clock func() time.Time) *whReceiver {
	r := &whReceiver{fake: fake, clock: clock}
	r.srv = httptest.NewServer(http.HandlerFunc(r.handle))
	return r
}

// realSender returns the production sender admitting the loopback receiver, signing on clock.
func realSender(t testing.TB, clock func() time.Time) *sender.Sender {
	s, err := sender.New(sender.Options{Dial: dial.Options{AllowHTTP: true, AllowLoopback: true, Timeout: 5 * time.Second},
		Now: clock, VerifyTimeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("sender.New: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

func (r *whReceiver) fail(format string, args ...any) {
	r.errs.Add(fmt.Sprintf(format, args...))
}

// forbid adds texts that must not appear in any event.
func (r *whReceiver) forbid(texts ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.forbidden = append(r.forbidden, texts...)
}

// verifies reports whether the request verifies with secret (timestamp tolerance off: the signing clock is
// the test's fake clock; the timestamp is compared with it separately).
func verifies(secret string, body []byte, h http.Header) error {
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		return err
	}
	return wh.VerifyIgnoringTimestamp(body, h)
}

func (r *whReceiver) handle(w http.ResponseWriter, req *http.Request) {
	url := r.srv.URL + req.URL.RequestURI()
	body, err := io.ReadAll(req.Body)
	if err != nil {
		r.fail("%s: reading body: %v", url, err)
		return
	}
	h := req.Header
	id, ts, sig := h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature")
	if id == "" || ts == "" || sig == "" {
		r.fail("%s: missing Standard Webhooks headers: id %q timestamp %q signature %q", url, id, ts, sig)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	if want := strconv.FormatInt(r.clock().Unix(), 10); ts != want {
		r.fail("%s: webhook-timestamp %s, the signing clock says %s", url, ts, want)
	}
	nsig := len(strings.Fields(sig))
	var probe struct {
		Type      string `json:"type"`
		Challenge string `json:"challenge"`
	}
	_ = json.Unmarshal(body, &probe)
	if probe.Type == "verification" {
		echo, keys := r.fake.ReceiverVerify(url)
		if err := verifies(keys.Current, body, h); err != nil {
			r.fail("%s: challenge signature does not verify with the subscription's secret: %v", url, err)
		}
		if nsig != 1 {
			r.fail("%s: challenge carries %d signatures, want 1", url, nsig)
		}
		answer := probe.Challenge
		if !echo {
			answer = "not-the-challenge"
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"challenge": answer})
		return
	}
	a, keys, ok := r.fake.ReceiverAnswer(url, id)
	if !ok {
		r.fail("%s: an event %s that no recorded attempt sent", url, id)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	if err := verifies(keys.Current, body, h); err != nil {
		r.fail("%s: event %s does not verify with the current secret: %v", url, id, err)
	}
	wantSigs := 1
	if keys.Previous != "" {
		wantSigs = 2
		if err := verifies(keys.Previous, body, h); err != nil {
			r.fail("%s: event %s inside the rotation window does not verify with the previous secret: %v", url, id, err)
		}
	}
	if nsig != wantSigs {
		r.fail("%s: event %s carries %d signatures, want %d", url, id, nsig, wantSigs)
	}
	r.checkEvent(url, id, req.Header.Get("Content-Type"), body)
	r.events.Add(whReceived{URL: url, WebhookID: id, Body: body, Header: h.Clone(), Sigs: nsig, Status: a.Status})
	if a.Status == 0 {
		panic(http.ErrAbortHandler) // the connection drops without an answer
	}
	if a.RetryAfter != "" {
		w.Header().Set("Retry-After", a.RetryAfter)
	}
	w.WriteHeader(a.Status)
}

// checkEvent checks the CloudEvent of one attempt (RFC §12.2).
func (r *whReceiver) checkEvent(url, id, contentType string, body []byte) {
	if contentType != "application/cloudevents+json" {
		r.fail("%s: event %s has Content-Type %q", url, id, contentType)
	}
	if len(body) > 8192 {
		r.fail("%s: event %s has %d bytes, more than 8 KiB", url, id, len(body))
	}
	var ev struct {
		SpecVersion string          `json:"specversion"`
		ID          string          `json:"id"`
		Source      string          `json:"source"`
		Type        string          `json:"type"`
		Data        json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &ev); err != nil {
		r.fail("%s: event %s is not JSON: %v", url, id, err)
		return
	}
	var data struct {
		APIVersion string `json:"api_version"`
		VisibleSeq string `json:"visible_seq"`
	}
	_ = json.Unmarshal(ev.Data, &data)
	if ev.SpecVersion != "1.0" || ev.ID != id || ev.Source == "" || data.APIVersion == "" || data.VisibleSeq == "" {
		r.fail("%s: event %s: specversion %q, id %q, source %q, api_version %q, visible_seq %q", url, id,
			ev.SpecVersion, ev.ID, ev.Source, data.APIVersion, data.VisibleSeq)
	}
	switch ev.Type {
	case domain.EventMessageCommitted, domain.EventMemoryRevisionPublished, domain.EventReceiptUpdated:
	default:
		r.fail("%s: event %s has type %q", url, id, ev.Type)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, text := range r.forbidden {
		if strings.Contains(string(body), text) {
			r.fail("%s: event %s carries content %q", url, id, text)
		}
	}
}
