package deliver_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/webhook/dial"
	"github.com/waypost/waypost/webhook/event"
	"github.com/waypost/waypost/webhook/sign"
)

var (
	oldSecretText = "whsec_" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0x5A}, 32))
	newSecretText = "whsec_" + base64.StdEncoding.EncodeToString([]byte("waypost-test-secret-32-bytes-ok!"))
)

func secret(t *testing.T, text string) sign.Secret {
	t.Helper()
	s, err := sign.ParseSecret(text)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// capture is a receiver recording every request exactly as received.
type capture struct {
	mu   sync.Mutex
	reqs []captured
}

type captured struct {
	Header http.Header
	Body   []byte
}

func (c *capture) record(r *http.Request) captured {
	b, _ := io.ReadAll(r.Body)
	got := captured{Header: r.Header.Clone(), Body: b}
	c.mu.Lock()
	c.reqs = append(c.reqs, got)
	c.mu.Unlock()
	return got
}

func (c *capture) all() []captured {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]captured(nil), c.reqs...)
}

// loopbackClient is a development client: loopback and plain HTTP allowed, for httptest receivers.
func loopbackClient(t *testing.T, timeout time.Duration) *dial.Client {
	t.Helper()
	c, err := dial.NewClient(dial.Options{AllowLoopback: true, AllowHTTP: true, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

func strictClient(t *testing.T) *dial.Client {
	t.Helper()
	c, err := dial.NewClient(dial.Options{AllowHTTP: true})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func server(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// echoChallenge answers a verification request correctly.
func echoChallenge(w http.ResponseWriter, body []byte) {
	var ch struct{ Challenge string }
	_ = json.Unmarshal(body, &ch)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]string{"challenge": ch.Challenge})
}

func testEvent(t *testing.T) event.Event {
	t.Helper()
	thread := "thr_1"
	data, _ := json.Marshal(domain.MessageItemData{MessageID: "msg_1", Kind: "note", Subject: "hello"})
	ev, err := event.FromFeedItem("urn:uuid:7fdd711b-6779-4cb8-8108-8e3df90aed95", domain.FeedItem{
		ItemID: "it_1_0011223344556677", SpaceID: "sp_1", VisibleSeq: "17", ItemType: domain.ItemMessage,
		ResourceID: "msg_1", ResourceVersion: 1, ProducerID: "act_a", ThreadID: &thread,
		CommittedAt: time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC), Data: data,
	})
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

func secretZero() sign.Secret { return sign.Secret{} }
