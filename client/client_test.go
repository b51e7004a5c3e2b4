package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waypost/waypost/client"
	"github.com/waypost/waypost/domain"
)

const testToken = "wpt_secret-token-value-that-must-never-be-printed-000000"

// call is one request seen by the stub.
type call struct {
	Method, Path, Query, Auth, ContentType string
	Body                                   map[string]any
}

// stub is an httptest server that records calls and answers with the next scripted response.
type stub struct {
	t     *testing.T
	srv   *httptest.Server
	mu    sync.Mutex
	calls []call
	reply func(c call, w http.ResponseWriter, r *http.Request)
}

func newStub(t *testing.T, reply func(c call, w http.ResponseWriter, r *http.Request)) *stub {
	s := &stub{t: t, reply: reply}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := call{Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.RawQuery, Auth: r.Header.Get("Authorization"),
			ContentType: r.Header.Get("Content-Type")}
		raw, _ := io.ReadAll(r.Body)
		if len(raw) > 0 {
			if err := json.Unmarshal(raw, &c.Body); err != nil {
				t.Errorf("request body is not a JSON object: %q", raw)
			}
		}
		s.mu.Lock()
		s.calls = append(s.calls, c)
		s.mu.Unlock()
		s.reply(c, w, r)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *stub) seen() []call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]call(nil), s.calls...)
}

func okEnvelope(w http.ResponseWriter, rid string, data any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "request_id": rid, "data": data})
}

func errEnvelope(w http.ResponseWriter, status int, rid string, code domain.Code, msg string, details map[string]any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if details == nil {
		details = map[string]any{}
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"ok": false, "request_id": rid,
		"error": map[string]any{"code": code, "message": msg, "retryable": code.Retryable(), "details": details}})
}

// dropConnection closes the connection without any response: a transport failure for the client.
func dropConnection(t *testing.T, w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		t.Fatal("response writer cannot hijack")
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
}

func TestDataPlaneRoutesAndDecoding(t *testing.T) {
	t.Parallel()
	committed := time.Date(2026, 10, 11, 10, 0, 0, 0, time.UTC)
	s := newStub(t, func(c call, w http.ResponseWriter, r *http.Request) {
		switch c.Method + " " + c.Path {
		case "GET /v0/describe":
			okEnvelope(w, "rq_1", map[string]any{"api_version": "0.1", "space_id": "sp_1", "actor_id": "act_1",
				"consumer_id": "con_1", "default_recipient_id": "act_0", "allowed_recipient_ids": []string{"act_0", "act_1"},
				"capabilities": map[string]any{"mailbox": true}, "future_field": 1})
		case "POST /v0/messages":
			okEnvelope(w, "req-send", map[string]any{"submission_state": "committed", "resource_id": "msg_1", "message_id": "msg_1",
				"thread_id": "thr_1", "committed_at": committed, "visible_seq": "7"})
		case "GET /v0/messages/msg_1":
			okEnvelope(w, "rq_2", map[string]any{"message_id": "msg_1", "producer_id": "act_1", "thread_id": "thr_1",
				"in_reply_to": nil, "kind": "message", "subject": "hi", "body": map[string]any{"text": "hello"},
				"recipient_ids": []string{"act_0"}, "attachment_ids": []string{}, "metadata": map[string]any{"k": "v"}})
		case "POST /v0/inbox/read":
			okEnvelope(w, "rq_3", map[string]any{"items": []any{map[string]any{"item_id": "it_1", "visible_seq": "7",
				"item_type": "message", "resource_id": "msg_1", "data": map[string]any{"subject": "hi"}}},
				"next_cursor": "cur_2", "has_more": true, "checkpoint_cursor": nil})
		case "POST /v0/inbox/ack":
			okEnvelope(w, "req-ack", map[string]any{"receipts": []any{map[string]any{"item_id": "it_1", "stage": "received", "changed": true}},
				"checkpoint_cursor": "cur_2"})
		case "GET /v0/status":
			okEnvelope(w, "rq_4", map[string]any{"operation": "message.send", "request_id": "req-send", "submission_state": "committed",
				"resource_id": "msg_1", "result": map[string]any{"resource_id": "msg_1"}})
		default:
			t.Errorf("unexpected route %s %s", c.Method, c.Path)
			errEnvelope(w, 404, "rq_x", domain.CodeNotFound, "no such route", nil)
		}
	})
	c := client.New(s.srv.URL+"/", testToken)
	ctx := context.Background()

	d, err := c.Describe(ctx)
	if err != nil || d.SpaceID != "sp_1" || d.ConsumerID == nil || *d.ConsumerID != "con_1" || !d.Capabilities.Mailbox || len(d.AllowedRecipientIDs) != 2 {
		t.Fatalf("Describe = %+v, %v", d, err)
	}
	thread := "thr_1"
	sr, err := c.Send(ctx, domain.SendRequest{RequestID: "req-send", RecipientIDs: []string{"act_0"}, ThreadID: &thread,
		Subject: "hi", Body: &domain.MessageBody{Text: "hello"}, Metadata: json.RawMessage(`{"k":"v"}`)})
	if err != nil || sr.ResourceID != "msg_1" || sr.VisibleSeq != "7" || !sr.CommittedAt.Equal(committed) || sr.SubmissionState != domain.StateCommitted {
		t.Fatalf("Send = %+v, %v", sr, err)
	}
	m, err := c.GetMessage(ctx, "msg_1")
	if err != nil || m.Body.Text != "hello" || m.InReplyTo != nil || string(m.Metadata) != `{"k":"v"}` {
		t.Fatalf("GetMessage = %+v, %v", m, err)
	}
	p, err := c.ReadInbox(ctx, domain.ReadRequest{ConsumerID: "con_1", Limit: 10})
	if err != nil || len(p.Items) != 1 || p.Items[0].ItemID != "it_1" || p.NextCursor != "cur_2" || !p.HasMore || p.CheckpointCursor != nil {
		t.Fatalf("ReadInbox = %+v, %v", p, err)
	}
	cur := "cur_2"
	ar, err := c.Ack(ctx, domain.AckRequest{RequestID: "req-ack", ConsumerID: "con_1",
		Items: []domain.AckEntry{{ItemID: "it_1", Stage: domain.StageReceived}}, CheckpointCursor: &cur})
	if err != nil || len(ar.Receipts) != 1 || !ar.Receipts[0].Changed || ar.CheckpointCursor == nil || *ar.CheckpointCursor != "cur_2" {
		t.Fatalf("Ack = %+v, %v", ar, err)
	}
	st, err := c.Status(ctx, domain.OpMessageSend, "req-send")
	if err != nil || st.SubmissionState != domain.StateCommitted || st.ResourceID != "msg_1" {
		t.Fatalf("Status = %+v, %v", st, err)
	}

	calls := s.seen()
	for _, cl := range calls {
		if cl.Auth != "Bearer "+testToken {
			t.Errorf("%s %s: Authorization = %q", cl.Method, cl.Path, cl.Auth)
		}
		if cl.Method == http.MethodPost && !strings.HasPrefix(cl.ContentType, "application/json") {
			t.Errorf("%s %s: Content-Type = %q", cl.Method, cl.Path, cl.ContentType)
		}
	}
	send := calls[1].Body
	if send["request_id"] != "req-send" || send["thread_id"] != "thr_1" || send["subject"] != "hi" ||
		send["body"].(map[string]any)["text"] != "hello" || send["metadata"].(map[string]any)["k"] != "v" {
		t.Errorf("send body = %v", send)
	}
	if _, has := send["in_reply_to"]; has {
		t.Errorf("send body carries an unset in_reply_to: %v", send)
	}
	read := calls[3].Body
	if read["consumer_id"] != "con_1" || read["limit"] != float64(10) {
		t.Errorf("read body = %v", read)
	}
	if _, has := read["cursor"]; has {
		t.Errorf("a nil cursor must be omitted (start of history), got %v", read)
	}
	ack := calls[4].Body
	if ack["checkpoint_cursor"] != "cur_2" || ack["items"].([]any)[0].(map[string]any)["stage"] != "received" {
		t.Errorf("ack body = %v", ack)
	}
	if calls[5].Query != "operation=message.send&request_id=req-send" {
		t.Errorf("status query = %q", calls[5].Query)
	}
}

func TestAdminRoutes(t *testing.T) {
	t.Parallel()
	s := newStub(t, func(c call, w http.ResponseWriter, r *http.Request) {
		okEnvelope(w, "rq", map[string]any{"space_id": "sp_1", "actor_id": "act_1", "consumer_id": "con_1", "view_revision": 2,
			"collection_id": "col_1", "grant_id": "grt_1", "token_id": "tok_1", "token": "wpt_new", "revoked": true})
	})
	a := client.NewAdmin(s.srv.URL, "wpa_admin-secret")
	ctx := context.Background()
	exp := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	steps := []struct {
		method, path string
		run          func() error
		check        func(body map[string]any) bool
	}{
		{"POST", "/admin/v0/spaces", func() error {
			r, err := a.CreateSpace(ctx, domain.CreateSpaceRequest{RequestID: "r1", DisplayName: "home"})
			if err == nil && r.SpaceID != "sp_1" {
				err = fmt.Errorf("space_id %q", r.SpaceID)
			}
			return err
		}, func(b map[string]any) bool { return b["request_id"] == "r1" && b["display_name"] == "home" }},
		{"GET", "/admin/v0/spaces/sp_1", func() error { _, err := a.GetSpace(ctx, "sp_1"); return err }, nil},
		{"POST", "/admin/v0/spaces/sp_1/actors", func() error {
			_, err := a.CreateActor(ctx, "sp_1", domain.CreateActorRequest{RequestID: "r2", DisplayName: "agent A"})
			return err
		}, func(b map[string]any) bool { return b["display_name"] == "agent A" }},
		{"POST", "/admin/v0/spaces/sp_1/actors/act_1/revoke", func() error { _, err := a.RevokeActor(ctx, "sp_1", "act_1"); return err },
			func(b map[string]any) bool { return len(b) == 0 }},
		{"POST", "/admin/v0/spaces/sp_1/consumers", func() error {
			_, err := a.CreateConsumer(ctx, "sp_1", domain.CreateConsumerRequest{RequestID: "r3", ActorID: "act_1", View: domain.ViewInbox,
				Filter: &domain.Filter{ProducerIDs: []string{"b", "a", "b"}}})
			return err
		}, func(b map[string]any) bool {
			f := b["filter"].(map[string]any)
			// The filter goes out normalized: sorted, de-duplicated, and every list an array (never null).
			return fmt.Sprint(f["producer_ids"]) == "[a b]" && f["thread_ids"] != nil && f["item_types"] != nil && f["collection_ids"] != nil
		}},
		{"PATCH", "/admin/v0/spaces/sp_1/consumers/con_1", func() error {
			r, err := a.UpdateConsumer(ctx, "sp_1", "con_1", domain.UpdateConsumerRequest{View: domain.ViewSpaceLog})
			if err == nil && r.ViewRevision != 2 {
				err = fmt.Errorf("view_revision %d", r.ViewRevision)
			}
			return err
		}, func(b map[string]any) bool {
			_, hasFilter := b["filter"]
			return b["view"] == "space_log" && !hasFilter
		}},
		{"POST", "/admin/v0/spaces/sp_1/collections", func() error {
			_, err := a.CreateCollection(ctx, "sp_1", domain.CreateCollectionRequest{RequestID: "r4", SourceActorID: "act_1", Scope: "notes"})
			return err
		}, func(b map[string]any) bool { return b["source_actor_id"] == "act_1" && b["scope"] == "notes" }},
		{"POST", "/admin/v0/spaces/sp_1/grants", func() error {
			_, err := a.CreateGrant(ctx, "sp_1", domain.CreateGrantRequest{RequestID: "r5", ActorID: "act_1", Permission: domain.PermMemoryRead, CollectionID: "col_1"})
			return err
		}, func(b map[string]any) bool { return b["permission"] == "memory.read" && b["collection_id"] == "col_1" }},
		{"POST", "/admin/v0/spaces/sp_1/grants/grt_1/revoke", func() error { _, err := a.RevokeGrant(ctx, "sp_1", "grt_1"); return err }, nil},
		{"POST", "/admin/v0/spaces/sp_1/tokens", func() error {
			r, err := a.CreateToken(ctx, "sp_1", domain.CreateTokenRequest{RequestID: "r6", ActorID: "act_1", ConsumerID: "con_1",
				Scopes: []domain.Scope{domain.ScopeMessageRead}, ExpiresAt: &exp})
			if err == nil && r.Token != "wpt_new" {
				err = fmt.Errorf("token %q", r.Token)
			}
			return err
		}, func(b map[string]any) bool {
			return b["consumer_id"] == "con_1" && b["expires_at"] == "2027-01-01T00:00:00Z" && fmt.Sprint(b["scopes"]) == "[message.read]"
		}},
		{"POST", "/admin/v0/spaces/sp_1/tokens/tok_1/revoke", func() error {
			r, err := a.RevokeToken(ctx, "sp_1", "tok_1")
			if err == nil && !r.Revoked {
				err = errors.New("not revoked")
			}
			return err
		}, nil},
		{"POST", "/admin/v0/spaces/sp_1/tokens/tok_1/rotate", func() error { _, err := a.RotateToken(ctx, "sp_1", "tok_1"); return err }, nil},
	}
	for i, st := range steps {
		if err := st.run(); err != nil {
			t.Fatalf("step %d (%s %s): %v", i, st.method, st.path, err)
		}
		calls := s.seen()
		got := calls[len(calls)-1]
		if got.Method != st.method || got.Path != st.path {
			t.Errorf("step %d: called %s %s, want %s %s", i, got.Method, got.Path, st.method, st.path)
		}
		if got.Auth != "Bearer wpa_admin-secret" {
			t.Errorf("step %d: Authorization = %q", i, got.Auth)
		}
		if st.check != nil && !st.check(got.Body) {
			t.Errorf("step %d (%s): unexpected body %v", i, st.path, got.Body)
		}
	}
}

func TestPathSegmentsAreEscaped(t *testing.T) {
	t.Parallel()
	s := newStub(t, func(c call, w http.ResponseWriter, r *http.Request) {
		errEnvelope(w, 404, "rq", domain.CodeNotFound, "no such message", nil)
	})
	_, err := client.New(s.srv.URL, testToken).GetMessage(context.Background(), "../admin/v0/spaces?x=1")
	if !client.IsCode(err, domain.CodeNotFound) {
		t.Fatalf("err = %v", err)
	}
	if got := s.seen()[0].Path; got != "/v0/messages/..%2Fadmin%2Fv0%2Fspaces%3Fx=1" {
		t.Fatalf("path = %q", got)
	}
}

func TestErrorEnvelopeBecomesError(t *testing.T) {
	t.Parallel()
	s := newStub(t, func(c call, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "3")
		errEnvelope(w, http.StatusConflict, "req-9", domain.CodeSubmissionPending, "the same request is still in flight",
			map[string]any{"resource_id": "msg_9"})
	})
	_, err := client.New(s.srv.URL, testToken).Send(context.Background(), domain.SendRequest{RequestID: "req-9", Body: &domain.MessageBody{Text: "x"}})
	wrapped := fmt.Errorf("outer: %w", err)
	var e *client.Error
	if !errors.As(wrapped, &e) {
		t.Fatalf("errors.As(*client.Error) failed for %T %v", err, err)
	}
	if e.Code != domain.CodeSubmissionPending || !e.Retryable || e.HTTPStatus != http.StatusConflict || e.RequestID != "req-9" ||
		e.Details["resource_id"] != "msg_9" || e.RetryAfter != 3*time.Second || e.Message != "the same request is still in flight" {
		t.Fatalf("error = %+v", e)
	}
	if e.Error() != "SUBMISSION_PENDING: the same request is still in flight" {
		t.Fatalf("Error() = %q", e.Error())
	}
	if !client.IsRetryable(wrapped) || client.CodeOf(wrapped) != domain.CodeSubmissionPending || client.IsTransport(wrapped) {
		t.Fatal("helpers disagree with the error")
	}
}

func TestNonEnvelopeResponseIsTransportError(t *testing.T) {
	t.Parallel()
	s := newStub(t, func(c call, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusBadGateway)
		_, _ = io.WriteString(w, "<html>bad gateway</html>")
	})
	_, err := client.New(s.srv.URL, testToken).Describe(context.Background())
	var te *client.TransportError
	if !errors.As(err, &te) || te.HTTPStatus != http.StatusBadGateway || te.Path != "/v0/describe" {
		t.Fatalf("err = %T %v", err, err)
	}
	if !client.IsRetryable(err) || client.CodeOf(err) != "" {
		t.Fatal("a transport error is retryable and has no code")
	}
}

func TestConnectionFailureIsTransportError(t *testing.T) {
	t.Parallel()
	s := newStub(t, func(c call, w http.ResponseWriter, r *http.Request) { dropConnection(t, w) })
	_, err := client.New(s.srv.URL, testToken).Describe(context.Background())
	if !client.IsTransport(err) {
		t.Fatalf("err = %T %v", err, err)
	}
	s.srv.Close()
	_, err = client.New(s.srv.URL, testToken).Describe(context.Background())
	if !client.IsTransport(err) {
		t.Fatalf("closed server: err = %T %v", err, err)
	}
}

func TestTimeout(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	s := newStub(t, func(c call, w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	start := time.Now()
	_, err := client.New(s.srv.URL, testToken, client.WithTimeout(50*time.Millisecond)).Describe(context.Background())
	if !client.IsTransport(err) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %T %v", err, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("timeout took %v", d)
	}
}

func TestCredentialsNeverPrinted(t *testing.T) {
	t.Parallel()
	s := newStub(t, func(c call, w http.ResponseWriter, r *http.Request) { dropConnection(t, w) })
	c := client.New(s.srv.URL, testToken)
	a := client.NewAdmin(s.srv.URL, testToken)
	_, err1 := c.Describe(context.Background())
	_, err2 := a.GetSpace(context.Background(), "sp_1")
	for _, txt := range []string{fmt.Sprint(c), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", c), fmt.Sprint(a), fmt.Sprintf("%#v", a),
		err1.Error(), err2.Error()} {
		if strings.Contains(txt, testToken) || strings.Contains(txt, "wpt_secret") {
			t.Errorf("credential printed in %q", txt)
		}
	}
}

func TestInvalidBaseURL(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"127.0.0.1:8787", "ftp://host", "http://user:pw@host", "http://host/?q=1"} {
		_, err := client.New(u, testToken).Describe(context.Background())
		if err == nil || client.IsTransport(err) || strings.Contains(err.Error(), "pw") {
			t.Errorf("%q: err = %v", u, err)
		}
	}
	if got := client.New("http://host:1/prefix/", "x").BaseURL(); got != "http://host:1/prefix" {
		t.Errorf("BaseURL = %q", got)
	}
}

func TestNewRequestID(t *testing.T) {
	t.Parallel()
	a, b := client.NewRequestID(), client.NewRequestID()
	if a == b || !domain.ValidRequestID(a) || !domain.ValidRequestID(b) {
		t.Fatalf("request IDs %q %q", a, b)
	}
}
