package domaintest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/domain/port"
)

// ---------------------------------------------------------------------------------------------------------
// FakeWebhooks: a scripted port.WebhookSender.

// WebhookAnswer is how the receiver answers one delivery attempt.
type WebhookAnswer struct {
	// Status is the HTTP status; 0 means no answer arrived (a network error).
	Status int
	// RetryAfter is the Retry-After header of the answer ("" for none).
	RetryAfter string
	// NotMade: the attempt could not be made at all (Deliver returns an error).
	NotMade bool
}

// WebhookCall is one recorded call of the sender.
type WebhookCall struct {
	Kind      string // "verify" or "deliver"
	URL       string
	Keys      port.WebhookKeys
	SourceURI string
	Item      domain.FeedItem // the announced feed item (deliver)
	At        time.Time       // the clock when the call was made
	Answer    WebhookAnswer   // what the receiver was told to answer (deliver)
	Crashed   bool            // the worker "died" during this attempt (its context was cancelled)
	Result    port.WebhookResult
	Err       error
}

// FakeWebhooks is a port.WebhookSender test double. It records every Verify and Deliver call with its keys
// and event, and answers from a programmable script: per URL, a queue of answers and a default (200 when
// none is set). Verify succeeds unless FailVerify was called for the URL; CheckTarget refuses URLs given
// to Forbid. With an inner sender (the production one, posting to a real receiver) the script tells the
// receiver what to answer (ReceiverAnswer) and the inner sender's results are returned. It is safe for
// concurrent use.
type FakeWebhooks struct {
	clock func() time.Time

	mu         sync.Mutex
	forbidden  map[string]string
	verifyFail map[string]*port.WebhookVerifyError
	scripts    map[string][]WebhookAnswer
	defaults   map[string]WebhookAnswer
	crash      func()
	before     func(*WebhookCall)
	after      func(*WebhookCall)
	calls      []WebhookCall
	inner      port.WebhookSender
	answers    map[string]whExpect // inner mode: what the receiver answers, by URL and event ID
	verifyKeys map[string]port.WebhookKeys
}

// NewFakeWebhooks returns a fake sender reading the time from clock.
func NewFakeWebhooks(clock func() time.Time) *FakeWebhooks {
	return &FakeWebhooks{clock: clock, forbidden: map[string]string{}, verifyFail: map[string]*port.WebhookVerifyError{},
		scripts: map[string][]WebhookAnswer{}, defaults: map[string]WebhookAnswer{}, answers: map[string]whExpect{},
		verifyKeys: map[string]port.WebhookKeys{}}
}

// WithInner makes the fake forward Verify, Deliver and CheckTarget to inner after consulting its script.
func (w *FakeWebhooks) WithInner(inner port.WebhookSender) *FakeWebhooks {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.inner = inner
	return w
}

// Forbid makes CheckTarget refuse url (FORBIDDEN_TARGET).
func (w *FakeWebhooks) Forbid(url, reason string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.forbidden[url] = reason
}

// FailVerify makes the challenge to url fail (forbidden: refused by the address rules at dial time);
// PassVerify undoes it.
func (w *FakeWebhooks) FailVerify(url string, forbidden bool, reason string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.verifyFail[url] = &port.WebhookVerifyError{Forbidden: forbidden, Reason: reason}
}

// PassVerify makes the challenge to url succeed.
func (w *FakeWebhooks) PassVerify(url string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.verifyFail, url)
}

// Script queues answers for the next delivery attempts to url.
func (w *FakeWebhooks) Script(url string, answers ...WebhookAnswer) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.scripts[url] = append(w.scripts[url], answers...)
}

// Default sets the answer of attempts to url when its script is empty, and drops the script.
func (w *FakeWebhooks) Default(url string, a WebhookAnswer) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.defaults[url] = a
	delete(w.scripts, url)
}

// CrashNext makes the next delivery attempt "kill the worker": it calls cancel (which must cancel the
// context of that AttemptDelivery) and fails with the context's error, as a process dying mid-request.
func (w *FakeWebhooks) CrashNext(cancel func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.crash = cancel
}

// CancelCrash drops a pending CrashNext and reports whether it was still pending.
func (w *FakeWebhooks) CancelCrash() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	pending := w.crash != nil
	w.crash = nil
	return pending
}

// OnDeliver sets hooks that run, outside the fake's lock, before each delivery attempt is answered (the call
// has its answer; the hook may check it against a model) and after it (the call has its result).
func (w *FakeWebhooks) OnDeliver(before, after func(*WebhookCall)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.before, w.after = before, after
}

// Calls returns every recorded call, in order.
func (w *FakeWebhooks) Calls() []WebhookCall {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.calls)
}

// Deliveries returns the recorded delivery attempts to url.
func (w *FakeWebhooks) Deliveries(url string) []WebhookCall {
	var out []WebhookCall
	for _, c := range w.Calls() {
		if c.Kind == "deliver" && c.URL == url {
			out = append(out, c)
		}
	}
	return out
}

// VerifyCount returns how many challenges were sent to url.
func (w *FakeWebhooks) VerifyCount(url string) int {
	n := 0
	for _, c := range w.Calls() {
		if c.Kind == "verify" && c.URL == url {
			n++
		}
	}
	return n
}

// whExpect is what the receiver should see and answer for one attempt (inner mode).
type whExpect struct {
	answer WebhookAnswer
	keys   port.WebhookKeys
}

// ReceiverAnswer returns what the receiver at url must answer to the attempt of eventID and the keys the
// attempt was signed with (inner mode).
func (w *FakeWebhooks) ReceiverAnswer(url, eventID string) (WebhookAnswer, port.WebhookKeys, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	a, ok := w.answers[url+"\x00"+eventID]
	return a.answer, a.keys, ok
}

// ReceiverVerify returns whether the receiver at url must echo the challenge, and the keys it was signed
// with (inner mode).
func (w *FakeWebhooks) ReceiverVerify(url string) (bool, port.WebhookKeys) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.verifyFail[url] == nil, w.verifyKeys[url]
}

func (w *FakeWebhooks) now() time.Time {
	if w.clock == nil {
		return time.Now()
	}
	return w.clock()
}

// CheckTarget refuses URLs given to Forbid, then asks the inner sender.
func (w *FakeWebhooks) CheckTarget(url string) error {
	w.mu.Lock()
	reason, refused := w.forbidden[url]
	inner := w.inner
	w.mu.Unlock()
	if refused {
		return &port.WebhookVerifyError{Forbidden: true, Reason: reason}
	}
	if inner != nil {
		return inner.CheckTarget(url)
	}
	return nil
}

// Verify records the challenge and answers it as scripted.
func (w *FakeWebhooks) Verify(ctx context.Context, url string, keys port.WebhookKeys) error {
	w.mu.Lock()
	fail := w.verifyFail[url]
	inner := w.inner
	w.verifyKeys[url] = keys
	w.calls = append(w.calls, WebhookCall{Kind: "verify", URL: url, Keys: keys, At: w.now()})
	w.mu.Unlock()
	if inner != nil {
		err := inner.Verify(ctx, url, keys)
		if fail == nil && err != nil {
			return fmt.Errorf("the receiver should have echoed the challenge: %w", err)
		}
		if fail != nil && err == nil {
			return errors.New("the receiver should have failed the challenge")
		}
		return err
	}
	if fail != nil {
		return fail
	}
	return nil
}

// Deliver records the attempt and answers it as scripted (or through the inner sender).
func (w *FakeWebhooks) Deliver(ctx context.Context, url string, keys port.WebhookKeys, ev port.WebhookEvent) (port.WebhookResult, error) {
	call := WebhookCall{Kind: "deliver", URL: url, Keys: keys, SourceURI: ev.SourceURI, At: w.now()}
	if err := json.Unmarshal(ev.FeedItem, &call.Item); err != nil {
		return port.WebhookResult{}, fmt.Errorf("fake webhooks: decoding feed item: %w", err)
	}
	w.mu.Lock()
	if q := w.scripts[url]; len(q) > 0 {
		call.Answer, w.scripts[url] = q[0], q[1:]
	} else if a, ok := w.defaults[url]; ok {
		call.Answer = a
	} else {
		call.Answer = WebhookAnswer{Status: http.StatusOK}
	}
	crash := w.crash
	w.crash = nil
	call.Crashed = crash != nil
	inner, before, after := w.inner, w.before, w.after
	if inner != nil {
		w.answers[url+"\x00"+call.Item.ItemID] = whExpect{answer: call.Answer, keys: keys}
	}
	w.mu.Unlock()
	if before != nil {
		before(&call)
	}
	var res port.WebhookResult
	var err error
	switch {
	case crash != nil:
		crash()
		err = fmt.Errorf("fake webhooks: worker died mid-attempt: %w", ctx.Err())
	case inner != nil:
		res, err = inner.Deliver(ctx, url, keys, ev)
	case call.Answer.NotMade:
		err = errors.New("fake webhooks: attempt not made")
	default:
		res = fakeResult(call.Answer)
	}
	call.Result, call.Err = res, err
	w.mu.Lock()
	w.calls = append(w.calls, call)
	w.mu.Unlock()
	if after != nil {
		after(&call)
	}
	return res, err
}

// fakeResult is the result the production sender reports for an answer (deliver.Send's classification).
func fakeResult(a WebhookAnswer) port.WebhookResult {
	switch {
	case a.Status == 0:
		return port.WebhookResult{Reason: "network error"}
	case a.Status >= 200 && a.Status <= 299:
		return port.WebhookResult{Delivered: true, StatusCode: a.Status, Reason: fmt.Sprintf("status %d", a.Status)}
	case a.Status == http.StatusGone:
		return port.WebhookResult{GiveUp: true, StatusCode: a.Status, Reason: "status 410"}
	default:
		return port.WebhookResult{StatusCode: a.Status, RetryAfter: a.RetryAfter, Reason: fmt.Sprintf("status %d", a.Status)}
	}
}

// FakeQueue is a port.DeliveryQueue that keeps every wake-up, so a test can deliver them late, twice, out
// of order, concurrently or not at all.
type FakeQueue struct {
	mu   sync.Mutex
	refs []port.DeliveryRef
}

// Enqueue records a wake-up.
func (q *FakeQueue) Enqueue(_ context.Context, ref port.DeliveryRef, _ time.Time) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.refs = append(q.refs, ref)
	return nil
}

// Take removes and returns every queued wake-up.
func (q *FakeQueue) Take() []port.DeliveryRef {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.refs
	q.refs = nil
	return out
}
