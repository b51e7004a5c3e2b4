package domain

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
)

// visibleMessage returns a message record if the principal may see it: its producer, one of its
// recipients, or an observer of the space. Anything else is NOT_FOUND, indistinguishable from absent.
func (s *Service) visibleMessage(ctx context.Context, p *Principal, messageID string) (storedMessage, error) {
	notFound := Errorf(CodeNotFound, "no such message").WithDetails("message_id", messageID)
	m, _, found, err := getNamed[storedMessage](ctx, s.store, messageID, keyMessage(p.SpaceID, messageID))
	if err != nil {
		return storedMessage{}, err
	}
	if !found {
		return storedMessage{}, notFound
	}
	if m.ProducerID == p.ActorID || p.CanObserve() ||
		(p.HasScope(ScopeMessageRead) && slices.Contains(m.RecipientIDs, p.ActorID)) {
		return m, nil
	}
	return storedMessage{}, notFound
}

// GetMessage returns a published message with its body (message.get).
func (s *Service) GetMessage(ctx context.Context, p *Principal, messageID string) (Message, error) {
	m, err := s.visibleMessage(ctx, p, messageID)
	if err != nil {
		return Message{}, err
	}
	if m.Inline {
		return m.Message, nil
	}
	rc, _, err := s.blobs.Get(ctx, messageBodyKey(p.SpaceID, m.MessageID))
	if err != nil {
		return Message{}, fmt.Errorf("reading body of %s: %w", m.MessageID, err)
	}
	defer rc.Close()
	raw, err := io.ReadAll(io.LimitReader(rc, int64(s.limits.MaxBodyTextBytes)*7+1024))
	if err != nil {
		return Message{}, fmt.Errorf("reading body of %s: %w", m.MessageID, err)
	}
	if err := json.Unmarshal(raw, &m.Body); err != nil {
		return Message{}, fmt.Errorf("decoding body of %s: %w", m.MessageID, err)
	}
	return m.Message, nil
}
