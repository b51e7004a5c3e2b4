package domaintest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/domain/domaintest"
)

// nested returns a metadata object nested depth levels deep (the object itself is level 1).
func nested(depth int) string {
	s := "{}"
	for range depth - 1 {
		s = `{"a":` + s + `}`
	}
	return s
}

// TestSendRules checks the validation rules and limits of message.send (SUPPLEMENT §5.3, RFC §4.1, §6.1):
// each violation returns its documented code and leaves no side effect — no feed item, no submission
// (status NOT_FOUND), so the key is not used up and a corrected request with the same request_id succeeds.
// Values at the limit are accepted.
func TestSendRules(t *testing.T) {
	f := domaintest.New(t, domaintest.MemBackend, nil)
	c := f.With(t)
	ctx := context.Background()
	sp := c.Space().SpaceID
	a, b := c.Party(sp), c.Party(sp)
	feed := c.Feed(sp)
	crowd := make([]string, 33) // 33 distinct existing actors
	crowd[0] = b.ActorID
	for i := 1; i < len(crowd); i++ {
		crowd[i] = c.Actor(sp)
	}
	revoked := c.Actor(sp)
	if _, err := c.Svc.RevokeActor(ctx, sp, revoked); err != nil {
		t.Fatal(err)
	}
	prior := c.Send(a.P, "prior", b.ActorID)
	ids := func(n int, prefix string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("%s_%d", prefix, i)
		}
		return out
	}
	str := func(s string) *string { return &s }
	jcs8192 := `{"k":"` + strings.Repeat("x", 8192-8) + `"}` // exactly 8192 bytes in JCS form

	for _, tc := range []struct {
		name string
		mod  func(r *domain.SendRequest)
		code domain.Code // "" means accepted
	}{
		{"subject_512_bytes", func(r *domain.SendRequest) { r.Subject = strings.Repeat("é", 256) }, ""},
		{"subject_513_bytes", func(r *domain.SendRequest) { r.Subject = strings.Repeat("é", 256) + "a" }, domain.CodeResourceLimit},
		{"subject_not_utf8", func(r *domain.SendRequest) { r.Subject = "\xff" }, domain.CodeInvalidRequest},
		{"body_49152_bytes", func(r *domain.SendRequest) { r.Body.Text = strings.Repeat("b", 49152) }, ""},
		{"body_49153_bytes", func(r *domain.SendRequest) { r.Body.Text = strings.Repeat("b", 49153) }, domain.CodeResourceLimit},
		{"body_missing", func(r *domain.SendRequest) { r.Body = nil }, domain.CodeInvalidRequest},
		{"metadata_8192_jcs_bytes_with_whitespace", func(r *domain.SendRequest) {
			r.Metadata = json.RawMessage(" {  \"k\" :\n " + jcs8192[5:] + "  ")
		}, ""},
		{"metadata_8193_jcs_bytes", func(r *domain.SendRequest) {
			r.Metadata = json.RawMessage(`{"k":"` + strings.Repeat("x", 8192-7) + `"}`)
		}, domain.CodeResourceLimit},
		{"metadata_depth_8", func(r *domain.SendRequest) { r.Metadata = json.RawMessage(nested(8)) }, ""},
		{"metadata_depth_9", func(r *domain.SendRequest) { r.Metadata = json.RawMessage(nested(9)) }, domain.CodeResourceLimit},
		{"metadata_depth_9_through_arrays", func(r *domain.SendRequest) {
			r.Metadata = json.RawMessage(`{"a":[[[[[[[["deep"]]]]]]]]}`)
		}, domain.CodeResourceLimit},
		{"metadata_array", func(r *domain.SendRequest) { r.Metadata = json.RawMessage(`[1]`) }, domain.CodeInvalidRequest},
		{"metadata_string", func(r *domain.SendRequest) { r.Metadata = json.RawMessage(`"x"`) }, domain.CodeInvalidRequest},
		{"recipients_32_after_dedup", func(r *domain.SendRequest) {
			r.RecipientIDs = append(append([]string{}, crowd[:32]...), crowd[:8]...)
		}, ""},
		{"recipients_33", func(r *domain.SendRequest) { r.RecipientIDs = crowd }, domain.CodeResourceLimit},
		{"attachments_33", func(r *domain.SendRequest) { r.AttachmentIDs = ids(33, "blob") }, domain.CodeResourceLimit},
		{"attachments_32_not_found_blobs_are_m1", func(r *domain.SendRequest) { r.AttachmentIDs = ids(32, "blob") }, domain.CodeNotFound},
		{"attachment_not_found_blobs_are_m1", func(r *domain.SendRequest) { r.AttachmentIDs = []string{"blob_x"} }, domain.CodeNotFound},
		{"recipient_id_with_space", func(r *domain.SendRequest) { r.RecipientIDs = []string{"act x"} }, domain.CodeInvalidRequest},
		{"recipient_id_97_bytes", func(r *domain.SendRequest) { r.RecipientIDs = []string{strings.Repeat("a", 97)} }, domain.CodeInvalidRequest},
		{"recipient_id_empty", func(r *domain.SendRequest) { r.RecipientIDs = []string{""} }, domain.CodeInvalidRequest},
		{"recipient_id_with_dot", func(r *domain.SendRequest) { r.RecipientIDs = []string{"act.x"} }, domain.CodeInvalidRequest},
		{"thread_id_invalid", func(r *domain.SendRequest) { r.ThreadID = str("t/1") }, domain.CodeInvalidRequest},
		{"thread_id_96_bytes", func(r *domain.SendRequest) { r.ThreadID = str(strings.Repeat("t", 96)) }, ""},
		{"in_reply_to_invalid", func(r *domain.SendRequest) { r.InReplyTo = str("msg:1") }, domain.CodeInvalidRequest},
		{"attachment_id_invalid", func(r *domain.SendRequest) { r.AttachmentIDs = []string{"blob#1"} }, domain.CodeInvalidRequest},
		{"kind_invalid", func(r *domain.SendRequest) { r.Kind = "Result" }, domain.CodeInvalidRequest},
		{"source_field_257_bytes", func(r *domain.SendRequest) {
			r.Source = &domain.MessageSource{NativeThreadID: strings.Repeat("s", 257)}
		}, domain.CodeInvalidRequest},
		{"reply_without_explicit_recipients", func(r *domain.SendRequest) { r.RecipientIDs, r.InReplyTo = nil, str(prior.MessageID) }, domain.CodeInvalidRequest},
		{"reply_with_recipients", func(r *domain.SendRequest) { r.InReplyTo = str(prior.MessageID) }, ""},
		{"reply_to_unknown_message", func(r *domain.SendRequest) { r.InReplyTo = str("msg_unknown") }, domain.CodeNotFound},
		{"reply_naming_another_thread", func(r *domain.SendRequest) { r.InReplyTo, r.ThreadID = str(prior.MessageID), str("other") }, domain.CodeInvalidRequest},
		{"unknown_recipient", func(r *domain.SendRequest) { r.RecipientIDs = []string{b.ActorID, "act_unknown"} }, domain.CodeNotFound},
		{"revoked_recipient", func(r *domain.SendRequest) { r.RecipientIDs = []string{revoked} }, domain.CodeNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := f.With(t)
			rid := c.RID("rule")
			valid := domain.SendRequest{RequestID: rid, RecipientIDs: []string{b.ActorID}, Subject: "ok", Body: &domain.MessageBody{Text: "ok"}}
			req := valid
			req.Body = &domain.MessageBody{Text: "ok"}
			tc.mod(&req)
			before := len(feed.All())
			_, err := c.Svc.SendMessage(ctx, a.P, req)
			if tc.code == "" {
				if err != nil {
					t.Fatalf("a request at the limit was refused: %v", err)
				}
				if n := len(feed.All()); n != before+1 {
					t.Fatalf("feed has %d items, want %d", n, before+1)
				}
				return
			}
			domaintest.WantCode(t, "send", err, tc.code)
			if n := len(feed.All()); n != before {
				t.Fatalf("a refused send changed the feed: %d items, before %d", n, before)
			}
			_, err = c.Svc.Status(ctx, a.P, domain.OpMessageSend, rid)
			domaintest.WantCode(t, "status after a refused send (the key must not be used up)", err, domain.CodeNotFound)
			res, err := c.Svc.SendMessage(ctx, a.P, valid)
			if err != nil || res.SubmissionState != domain.StateCommitted {
				t.Fatalf("the corrected request with the same request_id: %+v %v", res, err)
			}
		})
	}

	t.Run("request_id", func(t *testing.T) {
		c := f.With(t)
		for _, tc := range []struct {
			rid  string
			code domain.Code
		}{
			{strings.Repeat("r", 128), ""},
			{"a.b:c-d_e", ""},
			{strings.Repeat("r", 129), domain.CodeInvalidRequest},
			{"", domain.CodeInvalidRequest},
			{"a/b", domain.CodeInvalidRequest},
			{"a b", domain.CodeInvalidRequest},
		} {
			before := len(feed.All())
			_, err := c.Svc.SendMessage(ctx, a.P, domain.SendRequest{RequestID: tc.rid, RecipientIDs: []string{b.ActorID}, Body: &domain.MessageBody{Text: "x"}})
			if tc.code == "" {
				if err != nil {
					t.Fatalf("request_id %q refused: %v", tc.rid, err)
				}
				continue
			}
			domaintest.WantCode(t, fmt.Sprintf("request_id %q", tc.rid), err, tc.code)
			if n := len(feed.All()); n != before {
				t.Fatalf("request_id %q: a refused send changed the feed", tc.rid)
			}
		}
	})
}
