package domain

import (
	"context"
	"slices"
	"strings"

	"github.com/waypost/waypost/domain/port"
)

// Threads (RFC §6): a message without thread_id and in_reply_to starts a thread; a reply joins the thread of
// the message it answers (which the sender must see); a client-chosen thread_id that names an existing
// thread may be used only by a principal that can see a message of that thread (its producer, a recipient
// holding message.read, or an observer of the space); otherwise the send is FORBIDDEN and nothing is
// published. A thread_id that names no thread starts a new thread under that ID.
//
// A started thread costs nothing extra: its ID is derived from its first message's ID (newThreadID), so the
// first message proves the thread exists and who can see it. Replies and thread_id sends keep a thread
// record (keyThread) with every producer and recipient, written in the publish transaction with one op.

// threadRecord is the stored record of a thread named by a reply or a thread_id send.
type threadRecord struct {
	ThreadID   string   `json:"thread_id"`
	Producers  []string `json:"producers"`  // sorted
	Recipients []string `json:"recipients"` // sorted
}

// newThreadID is the ID of the thread a message starts: "thr_" and the random part of its message ID.
func newThreadID(messageID string) string { return "thr_" + strings.TrimPrefix(messageID, "msg_") }

// threadFirstMessage inverts newThreadID: the message that would have started the thread.
func threadFirstMessage(thread string) (string, bool) {
	rest, ok := strings.CutPrefix(thread, "thr_")
	return "msg_" + rest, ok && ValidID("msg_"+rest)
}

// threadOp checks the thread a message joins and returns the op that records the message's producer and
// recipients in the thread record (nil when the record already lists them all). named is true for a
// client-chosen thread_id (not a reply): the sender must then be able to see a message of the thread if it
// exists. The op is guarded by the record's version (or its absence), so a concurrent creation or update
// of the same thread fails the commit, which then checks again.
func (s *Service) threadOp(ctx context.Context, p *Principal, thread string, recipients []string, named bool) (*port.Op, error) {
	key := keyThread(p.SpaceID, thread)
	rec, it, found, err := getRecord[threadRecord](ctx, s.store, key)
	if err != nil {
		return nil, err
	}
	if named {
		ok, err := s.canSeeThread(ctx, p, thread, rec, found)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, Errorf(CodeForbidden, "thread_id names an existing thread with no message you can see; omit thread_id to start a new thread, or reply with in_reply_to").
				WithDetails("field", "thread_id", "thread_id", thread)
		}
	}
	next := threadRecord{ThreadID: thread, Producers: slices.Clone(rec.Producers), Recipients: slices.Clone(rec.Recipients)}
	next.Producers = normalizeSet(append(next.Producers, p.ActorID))
	next.Recipients = normalizeSet(append(next.Recipients, recipients...))
	if found && slices.Equal(next.Producers, rec.Producers) && slices.Equal(next.Recipients, rec.Recipients) {
		return nil, nil
	}
	var op port.Op
	if found {
		v := attrInt(it, attrVersion)
		op = port.Put(item(key, next, attrVersion, itoa(v+1)), port.AttrEquals(attrVersion, itoa(v)))
	} else {
		op = port.Put(item(key, next, attrVersion, "1"), port.NotExists())
	}
	return &op, nil
}

// canSeeThread reports whether p can see a message of the thread, or the thread does not exist yet (so
// that naming it starts it): p observes the space, the thread record lists p as a producer (or as a
// recipient, with message.read), or p can see the message that started the thread.
func (s *Service) canSeeThread(ctx context.Context, p *Principal, thread string, rec threadRecord, found bool) (bool, error) {
	if p.CanObserve() {
		return true, nil
	}
	if found && (slices.Contains(rec.Producers, p.ActorID) || p.HasScope(ScopeMessageRead) && slices.Contains(rec.Recipients, p.ActorID)) {
		return true, nil
	}
	first, derived := threadFirstMessage(thread)
	if !derived {
		return !found, nil
	}
	m, _, started, err := getRecord[storedMessage](ctx, s.store, keyMessage(p.SpaceID, first))
	if err != nil {
		return false, err
	}
	if !started || m.ThreadID != thread {
		return !found, nil
	}
	if _, err := s.visibleMessage(ctx, p, first); err == nil {
		return true, nil
	} else if CodeOf(err) != CodeNotFound {
		return false, err
	}
	return false, nil
}
