package domain

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/waypost/waypost/domain/port"
)

// OpMessageSend is the idempotency operation name of message.send.
const OpMessageSend = "message.send"

// SendRequest is the body of message.send (RFC §6.1).
type SendRequest struct {
	RequestID     string          `json:"request_id"`
	RecipientIDs  []string        `json:"recipient_ids,omitempty"`
	ThreadID      *string         `json:"thread_id,omitempty"`
	InReplyTo     *string         `json:"in_reply_to,omitempty"`
	Kind          string          `json:"kind,omitempty"`
	Subject       string          `json:"subject,omitempty"`
	Body          *MessageBody    `json:"body"`
	Source        *MessageSource  `json:"source,omitempty"`
	AttachmentIDs []string        `json:"attachment_ids,omitempty"`
	Metadata      json.RawMessage `json:"metadata,omitempty"`
}

// SendResult is the stable result of message.send.
type SendResult struct {
	SubmissionState SubmissionState `json:"submission_state"`
	ResourceID      string          `json:"resource_id"`
	MessageID       string          `json:"message_id"`
	ThreadID        string          `json:"thread_id"`
	CommittedAt     time.Time       `json:"committed_at"`
	VisibleSeq      string          `json:"visible_seq"`
}

// normalizedSend is the request with defaults fixed: the input of the fingerprint (RFC §5.1).
type normalizedSend struct {
	RecipientIDs  []string        `json:"recipient_ids"`
	ThreadID      *string         `json:"thread_id"`
	InReplyTo     *string         `json:"in_reply_to"`
	Kind          string          `json:"kind"`
	Subject       string          `json:"subject"`
	Body          MessageBody     `json:"body"`
	Source        MessageSource   `json:"source"`
	AttachmentIDs []string        `json:"attachment_ids"`
	Metadata      json.RawMessage `json:"metadata"`
}

// sendFixed is what a reservation fixes besides the fingerprint: resolved thread and recipients.
type sendFixed struct {
	ThreadID     string   `json:"thread_id"`
	RecipientIDs []string `json:"recipient_ids"`
}

func (s *Service) checkMetadata(field string, raw json.RawMessage, max int) (json.RawMessage, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return json.RawMessage(`{}`), nil
	}
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return nil, Errorf(CodeInvalidRequest, "%s must be a JSON object", field).WithDetails("field", field)
	}
	canon, err := canonicalJSON(raw)
	if err != nil {
		return nil, Errorf(CodeInvalidRequest, "%s is not valid I-JSON", field).WithDetails("field", field)
	}
	if len(canon) > max {
		return nil, Errorf(CodeResourceLimit, "%s is larger than %d bytes in JCS form", field, max).WithDetails("field", field, "limit", max)
	}
	if depth(obj) > 8 {
		return nil, Errorf(CodeResourceLimit, "%s is nested deeper than 8 levels", field).WithDetails("field", field, "limit", 8)
	}
	return canon, nil
}

func depth(v any) int {
	switch t := v.(type) {
	case map[string]any:
		d := 0
		for _, e := range t {
			d = max(d, depth(e))
		}
		return d + 1
	case []any:
		d := 0
		for _, e := range t {
			d = max(d, depth(e))
		}
		return d + 1
	default:
		return 0
	}
}

// validateSend checks the request against the rules and limits and returns its normalized form.
func (s *Service) validateSend(p *Principal, req SendRequest, defaultRecipient string) (normalizedSend, error) {
	var n normalizedSend
	if err := checkRequestID(req.RequestID); err != nil {
		return n, err
	}
	if req.Body == nil {
		return n, Errorf(CodeInvalidRequest, "body is required").WithDetails("field", "body")
	}
	if !utf8.ValidString(req.Body.Text) || !utf8.ValidString(req.Subject) {
		return n, Errorf(CodeInvalidRequest, "subject and body.text must be UTF-8")
	}
	if len(req.Subject) > s.limits.MaxSubjectBytes {
		return n, Errorf(CodeResourceLimit, "subject is longer than %d bytes", s.limits.MaxSubjectBytes).WithDetails("field", "subject", "limit", s.limits.MaxSubjectBytes)
	}
	if len(req.Body.Text) > s.limits.MaxBodyTextBytes {
		return n, Errorf(CodeResourceLimit, "body.text is longer than %d bytes", s.limits.MaxBodyTextBytes).WithDetails("field", "body.text", "limit", s.limits.MaxBodyTextBytes)
	}
	n.Kind = req.Kind
	if n.Kind == "" {
		n.Kind = "message"
	}
	if !validKind(n.Kind) {
		return n, Errorf(CodeInvalidRequest, "kind must match [a-z][a-z0-9_.-]{0,63}").WithDetails("field", "kind")
	}
	for _, id := range req.RecipientIDs {
		if err := checkID("recipient_ids", id); err != nil {
			return n, err
		}
	}
	for _, id := range req.AttachmentIDs {
		if err := checkID("attachment_ids", id); err != nil {
			return n, err
		}
	}
	for field, v := range map[string]*string{"thread_id": req.ThreadID, "in_reply_to": req.InReplyTo} {
		if v != nil {
			if err := checkID(field, *v); err != nil {
				return n, err
			}
		}
	}
	if req.RecipientIDs != nil && len(req.RecipientIDs) == 0 {
		// RFC §4.2: a message that omits recipient_ids goes to the default recipient; an empty list names no one.
		return n, Errorf(CodeInvalidRequest, "recipient_ids must name at least one recipient; omit it for the space's default recipient").WithDetails("field", "recipient_ids")
	}
	if req.InReplyTo != nil && len(req.RecipientIDs) == 0 {
		return n, Errorf(CodeInvalidRequest, "a reply must name its recipients explicitly").WithDetails("field", "recipient_ids")
	}
	n.RecipientIDs = normalizeSet(req.RecipientIDs)
	if len(n.RecipientIDs) == 0 {
		n.RecipientIDs = []string{defaultRecipient}
	}
	if len(n.RecipientIDs) > s.limits.MaxRecipients {
		return n, Errorf(CodeResourceLimit, "more than %d recipients", s.limits.MaxRecipients).WithDetails("field", "recipient_ids", "limit", s.limits.MaxRecipients)
	}
	n.AttachmentIDs = slices.Clone(req.AttachmentIDs)
	if n.AttachmentIDs == nil {
		n.AttachmentIDs = []string{}
	}
	if len(n.AttachmentIDs) > s.limits.MaxAttachments {
		return n, Errorf(CodeResourceLimit, "more than %d attachments", s.limits.MaxAttachments).WithDetails("field", "attachment_ids", "limit", s.limits.MaxAttachments)
	}
	if req.Source != nil {
		if len(req.Source.NativeThreadID) > 256 || len(req.Source.NativeMessageID) > 256 {
			return n, Errorf(CodeInvalidRequest, "source fields are limited to 256 bytes")
		}
		n.Source = *req.Source
	}
	md, err := s.checkMetadata("metadata", req.Metadata, s.limits.MaxMetadataBytes)
	if err != nil {
		return n, err
	}
	n.Metadata = md
	n.ThreadID, n.InReplyTo, n.Subject, n.Body = req.ThreadID, req.InReplyTo, req.Subject, *req.Body
	return n, nil
}

// SendMessage publishes a message (RFC §6, §7.2). The request is validated and authorized, then:
//
//   - a body of at most InlineBodyMax bytes is committed in ONE transaction with everything else: the
//     submission record (guarded by NotExists, so concurrent identical requests produce one message), the
//     authorization generation check, the message record with its body, the feed item, one inbox entry per
//     recipient, and the visible_seq allocation. There is nothing to prepare outside the transaction, so the
//     reservation and the commit coincide;
//   - a larger body takes the full path: reserve the idempotency key with a stable message ID, write the
//     immutable body object (create-only), then commit the same transaction guarded by the reservation.
//     "prepared" is the reserved state with the body object present.
func (s *Service) SendMessage(ctx context.Context, p *Principal, req SendRequest) (SendResult, error) {
	if err := requireScope(p, ScopeMessageSend); err != nil {
		return SendResult{}, err
	}
	sp, err := s.space(ctx, p.SpaceID)
	if err != nil {
		return SendResult{}, err
	}
	n, err := s.validateSend(p, req, sp.DefaultRecipientID)
	if err != nil {
		return SendResult{}, err
	}
	fp, ok := sendFingerprint(n)
	if !ok {
		var err error
		if fp, err = Fingerprint(n); err != nil {
			return SendResult{}, Errorf(CodeInvalidRequest, "the request cannot be canonicalized")
		}
	}
	key := keySubmission(p.SpaceID, p.ActorID, OpMessageSend, req.RequestID)
	inline := len(encode(n.Body)) <= s.inlineBodyMax
	// An inline send first commits without reading its submission: the commit's NotExists condition on the
	// submission decides whether the request_id is new, so a new request (nearly every one) skips a read. A
	// refusal of that first attempt (a precondition, a quota: refused) or its submission's condition sends the
	// request down the checked path, which reads the submission first, so a retried request still answers what
	// its first commit did. A storage failure is answered as it is (the failure matrix: the client retries).
	// A store that reserves sequence values before its transaction always reads first: there a refused
	// attempt would use up a visible_seq, and a retried send must not leave a gap.
	optimistic := inline && !s.store.ReservesSequences()
	for attempt := 0; attempt < s.retries; attempt++ {
		var sub Submission
		if !optimistic {
			var found bool
			var err error
			if sub, _, found, err = getRecord[Submission](ctx, s.store, key); err != nil {
				return SendResult{}, err
			}
			if found {
				if sub.Fingerprint != fp || sub.State == StateCommitted || sub.State == StateFailed {
					return decodeResult[SendResult](replay(sub, fp))
				}
				return s.completeSend(ctx, p, key, sub, n) // resume a reservation of the blob path
			}
		}
		fixed, err := s.sendPreconditions(ctx, p, n)
		if err != nil {
			if optimistic && refused(err) {
				optimistic, attempt = false, attempt-1
				continue
			}
			return SendResult{}, err
		}
		msgID := s.ids.NewID("msg")
		if fixed.ThreadID == "" {
			fixed.ThreadID = newThreadID(msgID)
		}
		sub = Submission{Operation: OpMessageSend, RequestID: req.RequestID, Fingerprint: fp, ResourceID: msgID,
			State: StateReserved, ReservedAt: s.clock.Now().UTC(), Fixed: encode(fixed)}
		if inline {
			res, retry, err := s.commitSend(ctx, p, key, sub, fixed, n, true)
			switch {
			case retry: // an identical request committed first (or a concurrent one): replay its result
				optimistic = false
				continue
			case err != nil && optimistic && refused(err): // check the submission before answering the refusal
				optimistic, attempt = false, attempt-1
				continue
			}
			return res, err
		}
		// A body that cannot fit is refused before anything is written (the commit checks again).
		if err := s.precheckSend(ctx, p.SpaceID, n); err != nil {
			return SendResult{}, err
		}
		// The reservation pins the authorization generation too: a revoked credential (a deleted space)
		// reserves nothing, so no body is written under it.
		err = s.commitOps(ctx, []port.Op{port.Put(item(key, sub, attrState, string(StateReserved)), port.NotExists()), genCheck(p)})
		if err == nil {
			return s.completeSend(ctx, p, key, sub, n)
		}
		idx, ok := port.FailedOp(err)
		if !ok {
			return SendResult{}, fmt.Errorf("reserving %s: %w", OpMessageSend, err)
		}
		if idx == 1 { // authorization changed since authentication: re-check before reserving
			fresh, aerr := s.refresh(ctx, p)
			if aerr != nil {
				return SendResult{}, aerr
			}
			if err := requireScope(fresh, ScopeMessageSend); err != nil {
				return SendResult{}, err
			}
			p = fresh
		}
	}
	return SendResult{}, Errorf(CodeStorageUnavailable, "too much contention; retry with the same request_id")
}

// refused reports whether err is the domain's refusal of a request (a public code other than a storage failure
// or an internal error) rather than a failure to carry it out.
func refused(err error) bool {
	var de *Error
	return errors.As(err, &de) && de.Code != CodeStorageUnavailable && de.Code != CodeInternal
}

func (s *Service) sendPreconditions(ctx context.Context, p *Principal, n normalizedSend) (sendFixed, error) {
	fixed := sendFixed{RecipientIDs: n.RecipientIDs}
	keys := make([]port.Key, len(n.RecipientIDs))
	for i, r := range n.RecipientIDs {
		keys[i] = keyActor(p.SpaceID, r)
	}
	actors, found, err := getRecords[Actor](ctx, s.store, keys) // one round trip for up to 32 recipients
	if err != nil {
		return fixed, err
	}
	for i, r := range n.RecipientIDs {
		if !found[i] || actors[i].Revoked {
			return fixed, Errorf(CodeNotFound, "no such recipient").WithDetails("recipient_id", r)
		}
	}
	if n.InReplyTo != nil {
		orig, err := s.visibleMessage(ctx, p, *n.InReplyTo)
		if err != nil {
			return fixed, err
		}
		if n.ThreadID != nil && *n.ThreadID != orig.ThreadID {
			return fixed, Errorf(CodeInvalidRequest, "thread_id differs from the thread of in_reply_to").WithDetails("field", "thread_id")
		}
		fixed.ThreadID = orig.ThreadID
	} else if n.ThreadID != nil {
		fixed.ThreadID = *n.ThreadID
		// Checked before the reservation too, so that a refusal uses up no request ID.
		if _, err := s.threadOp(ctx, p, fixed.ThreadID, fixed.RecipientIDs, true); err != nil {
			return fixed, err
		}
	} // else a new thread, named after the message ID (newThreadID)
	if _, err := s.referencableBlobs(ctx, p, n.AttachmentIDs); err != nil {
		return fixed, err
	}
	return fixed, nil
}

// precheckSend refuses a send whose body object cannot fit in its space's quotas (precheckQuota).
func (s *Service) precheckSend(ctx context.Context, space string, n normalizedSend) error {
	q, err := s.spaceQuotas(ctx, space)
	if err != nil {
		return err
	}
	body, _ := bodyObject(n)
	return s.precheckQuota(ctx, space, q, 1, int64(len(body)))
}

// bodyObject is the immutable body object of the blob path and its SHA-256.
func bodyObject(n normalizedSend) ([]byte, string) {
	body := encode(n.Body)
	sum := sha256.Sum256(body)
	return body, hex.EncodeToString(sum[:])
}

// completeSend resumes a reservation of the blob path: write the body (prepare), then commit.
func (s *Service) completeSend(ctx context.Context, p *Principal, key port.Key, sub Submission, n normalizedSend) (SendResult, error) {
	var fixed sendFixed
	if err := json.Unmarshal(sub.Fixed, &fixed); err != nil {
		return SendResult{}, fmt.Errorf("decoding reservation: %w", err)
	}
	body, sum := bodyObject(n)
	if _, err := s.blobs.Put(ctx, messageBodyKey(p.SpaceID, sub.ResourceID), int64(len(body)), sum, bytes.NewReader(body)); err != nil && !errors.Is(err, port.ErrBlobExists) {
		return SendResult{}, fmt.Errorf("writing message body: %w", err)
	}
	// An existing object under the service-controlled key was written by an earlier attempt of this same
	// submission (the key embeds the message ID fixed at reservation, and the fingerprint fixes the body).
	for attempt := 0; attempt < s.retries; attempt++ {
		res, retry, err := s.commitSend(ctx, p, key, sub, fixed, n, false)
		if err != nil && !retry {
			s.dropOrphanBody(ctx, p.SpaceID, key, sub.ResourceID)
		}
		if !retry {
			return res, err
		}
		cur, _, found, gerr := getRecord[Submission](ctx, s.store, key)
		if gerr != nil {
			return SendResult{}, gerr
		}
		if !found { // the reservation is gone: its space was deleted
			s.dropOrphanBody(ctx, p.SpaceID, key, sub.ResourceID)
			if _, aerr := s.refresh(ctx, p); aerr != nil {
				return SendResult{}, aerr
			}
			return SendResult{}, Errorf(CodeNotFound, "no such space")
		}
		if cur.State != StateReserved {
			return decodeResult[SendResult](replay(cur, cur.Fingerprint))
		}
	}
	return SendResult{}, Errorf(CodeStorageUnavailable, "too much contention; retry with the same request_id")
}

// commitSend runs the publish transaction (RFC §7.2 step 4). retry is true when the submission op's
// condition failed: another attempt of the same request committed (or reserved) first.
func (s *Service) commitSend(ctx context.Context, p *Principal, key port.Key, sub Submission, fixed sendFixed, n normalizedSend, inline bool) (SendResult, bool, error) {
	msgID := sub.ResourceID
	subCond := port.AttrEquals(attrState, string(StateReserved))
	if inline {
		subCond = port.NotExists()
	}
	joins := n.InReplyTo != nil || n.ThreadID != nil // the message joins a thread it did not start
	bodyRaw, bodySum := bodyObject(n)                // verify checks the body against this digest (inline or object)
	quotas, err := s.spaceQuotas(ctx, p.SpaceID)
	if err != nil {
		return SendResult{}, false, err
	}
	var extra int64 // the body object, stored outside the item store
	if !inline {
		extra = int64(len(bodyRaw))
	}
	for attempt := 0; attempt < s.retries; attempt++ {
		// Attachments are re-checked under the authorization this attempt commits with (the commit pins its
		// generation): a blob.reference grant revoked since the preconditions must not publish (RFC §7.2).
		if _, err := s.referencableBlobs(ctx, p, n.AttachmentIDs); err != nil {
			return SendResult{}, false, err
		}
		// So is the thread: whether p may join it, and the update of its record (op 2, when there is one).
		var threadOp *port.Op
		if joins {
			var err error
			if threadOp, err = s.threadOp(ctx, p, fixed.ThreadID, fixed.RecipientIDs, n.InReplyTo == nil); err != nil {
				return SendResult{}, false, err
			}
		}
		now := s.clock.Now().UTC()
		var result SendResult
		var published port.Published
		_, err := s.store.Commit(ctx, port.Tx{Seq: sequence(p.SpaceID), Count: 1, Max: uint64(s.limits.VisibleSeqMax),
			Quota: quotas.quota(1, extra),
			Build: func(seq uint64) ([]port.Op, error) {
				vs := strconv.FormatUint(seq, 10)
				result = SendResult{SubmissionState: StateCommitted, ResourceID: msgID, MessageID: msgID, ThreadID: fixed.ThreadID, CommittedAt: now, VisibleSeq: vs}
				committed := sub
				committed.State, committed.Result = StateCommitted, encode(result)
				msg := storedMessage{Message: Message{MessageID: msgID, SpaceID: p.SpaceID, ProducerID: p.ActorID, ThreadID: fixed.ThreadID, InReplyTo: n.InReplyTo,
					Kind: n.Kind, Subject: n.Subject, Source: n.Source, RecipientIDs: fixed.RecipientIDs,
					AttachmentIDs: n.AttachmentIDs, Metadata: n.Metadata, CommittedAt: now, EnvelopeVersion: 1, VisibleSeq: vs}, Inline: inline,
					BodySHA256: bodySum, BodySize: int64(len(bodyRaw))}
				if inline {
					msg.Body = n.Body
				}
				thread := fixed.ThreadID
				fi := FeedItem{ItemID: newItemID(seq, msgID), SpaceID: p.SpaceID, VisibleSeq: vs, ItemType: ItemMessage,
					ResourceID: msgID, ResourceVersion: 1, ProducerID: p.ActorID, RecipientIDs: fixed.RecipientIDs,
					ThreadID: &thread, CommittedAt: now,
					Data: encode(MessageItemData{MessageID: msgID, Kind: n.Kind, Subject: n.Subject, InReplyTo: n.InReplyTo, AttachmentCount: len(n.AttachmentIDs)})}
				published = port.Published{SpaceID: p.SpaceID, VisibleSeq: seq, ItemID: fi.ItemID}
				// submission, generation check, thread, message, feed slot, then an op per recipient and attachment
				ops := make([]port.Op, 0, 5+len(fixed.RecipientIDs)+len(n.AttachmentIDs))
				ops = append(ops, port.Put(item(key, committed, attrState, string(StateCommitted)), subCond), genCheck(p))
				if threadOp != nil {
					ops = append(ops, *threadOp)
				}
				fiData := encodeFeedItem(fi) // the feed slot's data, and every inbox entry's where entries hold a copy
				ops = append(ops,
					port.Put(item(keyMessage(p.SpaceID, msgID), msg), port.NotExists()),
					port.Put(port.Item{Key: keyFeed(p.SpaceID, seq), Data: fiData}, port.NotExists()))
				for _, r := range fixed.RecipientIDs {
					ops = append(ops, s.inboxEntryPut(p.SpaceID, r, seq, fiData))
				}
				for i, b := range n.AttachmentIDs {
					if slices.Contains(n.AttachmentIDs[:i], b) {
						continue // one reference per blob, however often the message names it
					}
					// Sealed is final, so the seal checked before the commit still holds; the reference lets
					// the message's readers read the blob.
					ops = append(ops, port.Put(port.Item{Key: keyBlobRef(p.SpaceID, b, "msg#"+msgID)}, port.Cond{}))
				}
				return ops, nil
			}})
		if err == nil {
			s.notify(ctx, []port.Published{published})
			return result, false, nil
		}
		if errors.Is(err, port.ErrCounterExhausted) {
			return SendResult{}, false, Errorf(CodeResourceLimit, "the space reached visible_seq_max")
		}
		if qerr := s.quotaError(ctx, p.SpaceID, quotas, err); qerr != nil {
			return SendResult{}, false, qerr
		}
		idx, ok := port.FailedOp(err)
		if !ok {
			return SendResult{}, false, fmt.Errorf("committing %s: %w", OpMessageSend, err)
		}
		switch {
		case idx == 0:
			return SendResult{}, true, nil
		case idx == 2 && threadOp != nil: // the thread changed concurrently: check it again
		case idx == 1: // authorization changed since authentication: re-check before anything commits
			fresh, aerr := s.refresh(ctx, p)
			if aerr != nil {
				return SendResult{}, false, aerr
			}
			if err := requireScope(fresh, ScopeMessageSend); err != nil {
				return SendResult{}, false, err
			}
			p = fresh
		default:
			return SendResult{}, false, fmt.Errorf("committing %s: unexpected condition failure: %w", OpMessageSend, err)
		}
	}
	return SendResult{}, false, Errorf(CodeStorageUnavailable, "too much contention; retry with the same request_id")
}

// dropOrphanBody removes the body object of a send that failed after writing it, when its reservation is
// gone: only deleting the space removes a reservation, so no retry can use the body, and nothing else would
// ever find it. While the reservation exists the body stays for a retry with the same request_id.
func (s *Service) dropOrphanBody(ctx context.Context, space string, key port.Key, msgID string) {
	if _, found, err := s.store.Get(ctx, key); err != nil || found {
		return
	}
	if err := s.blobs.Delete(ctx, messageBodyKey(space, msgID)); err != nil {
		s.log.LogAttrs(ctx, slog.LevelWarn, "removing the body of a send whose space was deleted", slog.String("error", err.Error()))
	}
}

// storedMessage is the message record: the public message plus where its body lives.
type storedMessage struct {
	Message
	Inline bool `json:"body_inline,omitempty"`
	// BodySHA256 and BodySize identify the body's JSON form ({"text": …}), stored inline or as the body
	// object: Verify checks either against them.
	BodySHA256 string `json:"body_sha256,omitempty"`
	BodySize   int64  `json:"body_size,omitempty"`
}

// newItemID makes a feed item ID that embeds its sequence number so the service can find the item; clients
// must treat it as opaque.
func newItemID(seq uint64, resourceID string) string {
	sum := sha256.Sum256([]byte(resourceID + "#" + strconv.FormatUint(seq, 10)))
	return "it_" + strconv.FormatUint(seq, 36) + "_" + hex.EncodeToString(sum[:8])
}

func parseItemID(id string) (uint64, bool) {
	if len(id) < 6 || id[:3] != "it_" {
		return 0, false
	}
	rest := id[3:]
	i := bytes.IndexByte([]byte(rest), '_')
	if i <= 0 {
		return 0, false
	}
	seq, err := strconv.ParseUint(rest[:i], 36, 64)
	return seq, err == nil && seq > 0
}
