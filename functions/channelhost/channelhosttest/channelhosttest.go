// Package channelhosttest drives a channel host (package channelhost: the always-on process that serves
// feed.wait, in process or as the waypost-channel binary) over HTTP for tests: one feed.wait, and waiting
// until feed.wait requests are subscribed to a space's feed channel.
package channelhosttest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/waypost/waypost/channel/chanclient"
	"github.com/waypost/waypost/channel/livefeed"
)

// WaitPath is the path and query of a feed.wait of consumer from cursor ("" for none) that waits up to
// timeoutMS.
func WaitPath(consumer, cursor string, timeoutMS int) string {
	q := url.Values{"consumer_id": {consumer}, "timeout_ms": {fmt.Sprint(timeoutMS)}}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	return "/v0/feed/wait?" + q.Encode()
}

// envelope is the part of the RFC §5.2 result envelope FeedWait reads.
type envelope struct {
	OK    bool            `json:"ok"`
	Data  json.RawMessage `json:"data"`
	Error *struct {
		Code string `json:"code"`
	} `json:"error"`
}

// FeedWait is one GET of waitURL (a host's base URL followed by a WaitPath) with the bearer token, safe off
// the test goroutine: the page decoded into P, or the HTTP status and error code of a failed envelope. A
// STORAGE_UNAVAILABLE answer without Retry-After is an error.
func FeedWait[P any](waitURL, token string) (page P, status int, code string, err error) {
	req, err := http.NewRequest(http.MethodGet, waitURL, nil)
	if err != nil {
		return page, 0, "", err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return page, 0, "", err
	}
	defer resp.Body.Close()
	var env envelope
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		return page, resp.StatusCode, "", fmt.Errorf("feed.wait: status %d: %w", resp.StatusCode, err)
	}
	if !env.OK {
		if env.Error == nil {
			return page, resp.StatusCode, "", fmt.Errorf("feed.wait: status %d without an error", resp.StatusCode)
		}
		if resp.Header.Get("Retry-After") == "" && env.Error.Code == "STORAGE_UNAVAILABLE" {
			return page, resp.StatusCode, "", fmt.Errorf("feed.wait: STORAGE_UNAVAILABLE without Retry-After")
		}
		return page, resp.StatusCode, env.Error.Code, nil
	}
	return page, resp.StatusCode, "", json.Unmarshal(env.Data, &page)
}

// FeedPage is FeedWait for a wait that must answer a page: another status, or an error code, is an error.
func FeedPage[P any](waitURL, token string) (P, error) {
	page, status, code, err := FeedWait[P](waitURL, token)
	if err == nil && (status != http.StatusOK || code != "") {
		err = fmt.Errorf("feed.wait: status %d, %s", status, code)
	}
	return page, err
}

// WaitSubscribed waits, up to 10 s, until n feed.wait requests are subscribed to the space's feed channel on
// the host at hostURL (reached with the channel secret); it fails the test when they are not.
func WaitSubscribed(t testing.TB, hostURL, secret, space string, n int) {
	t.Helper()
	cc, err := chanclient.New(hostURL, secret)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := cc.Count(context.Background(), space, livefeed.ChannelName)
		if err == nil && got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d feed.wait request(s) subscribed on the channel host, want %d (%v)", got, n, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Waited is the answer of a feed.wait started by StartWait.
type Waited[P any] struct {
	Page    P
	Err     error
	Elapsed time.Duration // from the start of the request to its answer
}

// Pending is a feed.wait in progress (StartWait).
type Pending[P any] struct {
	done chan Waited[P]
}

// StartWait starts a feed.wait of waitURL with token (FeedPage) in the background and returns once the host at
// hostURL (reached with the channel secret) has it subscribed to the space's feed channel, so that what the
// test commits next reaches the pending wait.
func StartWait[P any](t testing.TB, hostURL, secret, space, waitURL, token string) *Pending[P] {
	t.Helper()
	p := &Pending[P]{done: make(chan Waited[P], 1)}
	go func() {
		start := time.Now()
		page, err := FeedPage[P](waitURL, token)
		p.done <- Waited[P]{Page: page, Err: err, Elapsed: time.Since(start)}
	}()
	WaitSubscribed(t, hostURL, secret, space, 1)
	return p
}

// Answer returns the answer of the pending feed.wait; it fails the test when there is none within 15 s.
func (p *Pending[P]) Answer(t testing.TB) Waited[P] {
	t.Helper()
	select {
	case w := <-p.done:
		return w
	case <-time.After(15 * time.Second):
		t.Fatal("the pending feed.wait did not answer within 15 s")
		return Waited[P]{}
	}
}
