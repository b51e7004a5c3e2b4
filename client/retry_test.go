package client_test

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/waypost/waypost/client"
	"github.com/waypost/waypost/domain"
)

// reply answers one scripted call.
type reply func(c call, w http.ResponseWriter)

// sendScript answers POST /v0/messages and GET /v0/status from two lists of actions (one per call; the
// last action repeats).
type sendScript struct {
	sends, statuses []reply
}

// failWith answers with an error envelope.
func failWith(status int, requestID string, code domain.Code, message string) reply {
	return func(c call, w http.ResponseWriter) { errEnvelope(w, status, requestID, code, message, nil) }
}

// dropped drops the connection without an answer.
func dropped(t *testing.T) reply {
	return func(c call, w http.ResponseWriter) { dropConnection(t, w) }
}

// sendStatus answers a status lookup of the send of sendReq: its submission state plus fields.
func sendStatus(state string, fields map[string]any) reply {
	data := map[string]any{"operation": "message.send", "request_id": "req-retry-1", "submission_state": state}
	maps.Copy(data, fields)
	return func(c call, w http.ResponseWriter) { okEnvelope(w, "rq_s", data) }
}

// sendWithRetry runs SendWithRetry of sendReq against s with fast retries and also returns the retries it
// was notified of.
func sendWithRetry(s *stub) (domain.SendResult, []int, error) {
	var notified []int
	res, err := client.New(s.srv.URL, testToken, fastRetries(&notified)...).SendWithRetry(context.Background(), sendReq())
	return res, notified, err
}

func pick(list []reply, n int) reply {
	if n >= len(list) {
		n = len(list) - 1
	}
	return list[n]
}

func runScript(t *testing.T, sc sendScript) (*stub, *atomic.Int32, *atomic.Int32) {
	var nSend, nStatus atomic.Int32
	s := newStub(t, nil)
	s.reply = func(c call, w http.ResponseWriter, r *http.Request) {
		switch c.Method + " " + c.Path {
		case "POST /v0/messages":
			pick(sc.sends, int(nSend.Add(1))-1)(c, w)
		case "GET /v0/status":
			pick(sc.statuses, int(nStatus.Add(1))-1)(c, w)
		default:
			t.Errorf("unexpected call %s %s", c.Method, c.Path)
		}
	}
	return s, &nSend, &nStatus
}

var sendOK = map[string]any{"submission_state": "committed", "resource_id": "msg_1", "message_id": "msg_1",
	"thread_id": "thr_1", "committed_at": "2026-10-11T10:00:00Z", "visible_seq": "4"}

func fastRetries(notified *[]int) []client.Option {
	return []client.Option{
		client.WithRetryDelay(func(int, error) time.Duration { return time.Millisecond }),
		client.WithRetryNotify(func(retry int, _ error) { *notified = append(*notified, retry) }),
	}
}

func sendReq() domain.SendRequest {
	return domain.SendRequest{RequestID: "req-retry-1", RecipientIDs: []string{"act_b"}, Subject: "s", Body: &domain.MessageBody{Text: "t"}}
}

func TestSendWithRetryTransportFailureThenSuccessSameRequestID(t *testing.T) {
	t.Parallel()
	var sc sendScript
	sc.sends = []reply{
		dropped(t),
		func(c call, w http.ResponseWriter) { okEnvelope(w, c.Body["request_id"].(string), sendOK) },
	}
	sc.statuses = []reply{
		failWith(404, "rq_s", domain.CodeNotFound, "no submission"),
	}
	s, nSend, nStatus := runScript(t, sc)
	res, notified, err := sendWithRetry(s)
	if err != nil || res.ResourceID != "msg_1" || res.VisibleSeq != "4" {
		t.Fatalf("SendWithRetry = %+v, %v", res, err)
	}
	if nSend.Load() != 2 || nStatus.Load() != 1 || !reflect.DeepEqual(notified, []int{1}) {
		t.Fatalf("sends %d, statuses %d, notified %v", nSend.Load(), nStatus.Load(), notified)
	}
	calls := s.seen()
	var posts []call
	for _, c := range calls {
		switch c.Method {
		case http.MethodPost:
			posts = append(posts, c)
		case http.MethodGet:
			if c.Query != "operation=message.send&request_id=req-retry-1" {
				t.Errorf("status asked about %q", c.Query)
			}
		}
	}
	if posts[0].Body["request_id"] != "req-retry-1" || !reflect.DeepEqual(posts[0].Body, posts[1].Body) {
		t.Fatalf("the retry changed the request: %v vs %v", posts[0].Body, posts[1].Body)
	}
	if calls[1].Method != http.MethodGet {
		t.Fatalf("status must be asked before the retry: %v", calls)
	}
}

func TestSendWithRetryLostResponseRecoveredFromStatus(t *testing.T) {
	t.Parallel()
	s, nSend, nStatus := runScript(t, sendScript{
		sends:    []reply{dropped(t)},
		statuses: []reply{sendStatus("committed", map[string]any{"resource_id": "msg_1", "result": sendOK})},
	})
	res, notified, err := sendWithRetry(s)
	if err != nil || res.ResourceID != "msg_1" || res.ThreadID != "thr_1" || res.SubmissionState != domain.StateCommitted {
		t.Fatalf("SendWithRetry = %+v, %v", res, err)
	}
	if nSend.Load() != 1 || nStatus.Load() != 1 || len(notified) != 0 {
		t.Fatalf("a committed submission must not be sent again: sends %d statuses %d", nSend.Load(), nStatus.Load())
	}
}

func TestSendWithRetryAtMostTwoRetries(t *testing.T) {
	t.Parallel()
	s, nSend, nStatus := runScript(t, sendScript{
		sends:    []reply{failWith(503, "req-retry-1", domain.CodeStorageUnavailable, "storage is temporarily unavailable")},
		statuses: []reply{sendStatus("reserved", map[string]any{"resource_id": "msg_1"})},
	})
	_, notified, err := sendWithRetry(s)
	if !client.IsCode(err, domain.CodeStorageUnavailable) {
		t.Fatalf("err = %v", err)
	}
	if nSend.Load() != 1+client.MaxSendRetries || nStatus.Load() != 1+client.MaxSendRetries || !reflect.DeepEqual(notified, []int{1, 2}) {
		t.Fatalf("sends %d (want 3), statuses %d (want 3), notified %v", nSend.Load(), nStatus.Load(), notified)
	}
}

// wantRefusedAtOnce checks that SendWithRetry returns a refusal of the send itself (code, with its HTTP
// status and message) after that one send, without asking the status.
func wantRefusedAtOnce(t *testing.T, status int, code domain.Code, message string) {
	t.Helper()
	s, nSend, nStatus := runScript(t, sendScript{
		sends:    []reply{failWith(status, "req-retry-1", code, message)},
		statuses: []reply{func(c call, w http.ResponseWriter) { t.Error("status must not be asked") }},
	})
	_, _, err := sendWithRetry(s)
	if !client.IsCode(err, code) || nSend.Load() != 1 || nStatus.Load() != 0 {
		t.Fatalf("err = %v, sends %d, statuses %d", err, nSend.Load(), nStatus.Load())
	}
}

func TestSendWithRetryStopsOnConflict(t *testing.T) {
	t.Parallel()
	wantRefusedAtOnce(t, 409, domain.CodeIdempotencyConflict, "the request ID was already used with different content")
}

func TestSendWithRetryStopsOnAuthFailure(t *testing.T) {
	t.Parallel()
	for _, code := range []domain.Code{domain.CodeUnauthenticated, domain.CodeForbidden} {
		t.Run(string(code), func(t *testing.T) {
			// The first attempt's outcome is unknown; status then says the credential no longer works.
			s, nSend, nStatus := runScript(t, sendScript{
				sends:    []reply{dropped(t)},
				statuses: []reply{failWith(code.HTTPStatus(), "rq_s", code, "credential problem")},
			})
			_, _, err := sendWithRetry(s)
			if !client.IsCode(err, code) || nSend.Load() != 1 || nStatus.Load() != 1 {
				t.Fatalf("err = %v, sends %d, statuses %d", err, nSend.Load(), nStatus.Load())
			}
		})
	}
	t.Run("send itself", func(t *testing.T) {
		wantRefusedAtOnce(t, 401, domain.CodeUnauthenticated, "missing, malformed, expired or revoked credential")
	})
}

func TestSendWithRetryFailedSubmissionReturnsStoredError(t *testing.T) {
	t.Parallel()
	s, nSend, _ := runScript(t, sendScript{
		sends: []reply{failWith(500, "req-retry-1", domain.CodeInternal, "internal error")},
		statuses: []reply{sendStatus("failed", map[string]any{
			"error": map[string]any{"code": "RESOURCE_LIMIT", "message": "the space reached visible_seq_max", "retryable": false, "details": map[string]any{}}})},
	})
	_, _, err := sendWithRetry(s)
	if !client.IsCode(err, domain.CodeResourceLimit) || nSend.Load() != 1 {
		t.Fatalf("err = %v, sends %d", err, nSend.Load())
	}
}

func TestSendWithRetryNeedsRequestID(t *testing.T) {
	t.Parallel()
	req := sendReq()
	req.RequestID = ""
	_, err := client.New("http://127.0.0.1:1", testToken).SendWithRetry(context.Background(), req)
	if !errors.Is(err, client.ErrNoRequestID) {
		t.Fatalf("err = %v", err)
	}
}

func TestSendWithRetryStopsWhenContextEnds(t *testing.T) {
	t.Parallel()
	s, nSend, _ := runScript(t, sendScript{
		sends:    []reply{dropped(t)},
		statuses: []reply{failWith(404, "rq", domain.CodeNotFound, "none")},
	})
	ctx, cancel := context.WithCancel(context.Background())
	c := client.New(s.srv.URL, testToken,
		client.WithRetryDelay(func(int, error) time.Duration { cancel(); return time.Hour }))
	_, err := c.SendWithRetry(ctx, sendReq())
	if !errors.Is(err, context.Canceled) || nSend.Load() != 1 {
		t.Fatalf("err = %v, sends %d", err, nSend.Load())
	}
}

func TestSendWithRetryHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	s, nSend, _ := runScript(t, sendScript{
		sends: []reply{
			func(c call, w http.ResponseWriter) {
				w.Header().Set("Retry-After", "1")
				errEnvelope(w, 429, "req-retry-1", domain.CodeRateLimited, "slow down", nil)
			},
			func(c call, w http.ResponseWriter) { okEnvelope(w, "req-retry-1", sendOK) },
		},
		statuses: []reply{failWith(404, "rq", domain.CodeNotFound, "none")},
	})
	start := time.Now()
	// The default delay: Retry-After (1 s) rather than the 500 ms default for the first retry.
	if _, err := client.New(s.srv.URL, testToken).SendWithRetry(context.Background(), sendReq()); err != nil || nSend.Load() != 2 {
		t.Fatalf("err = %v, sends %d", err, nSend.Load())
	}
	if d := time.Since(start); d < 900*time.Millisecond {
		t.Fatalf("retried after %v, before Retry-After", d)
	}
}
