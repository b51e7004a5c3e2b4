// Package queue is the client durable queue of RFC §8.3 and property P17: a local bbolt file that holds one
// consumer's cursor, the items received but not yet processed, and the acknowledgements still owed to the
// service.
//
// The protocol it follows:
//
//   - Fetch reads the next page, then saves every new item as pending together with the new cursor in one
//     local transaction (fsync), and only then acknowledges `received` with that cursor as the checkpoint.
//     A crash before the local commit re-reads the same page; a crash after it re-sends the acknowledgement.
//   - MarkProcessed first records locally, in one transaction, that the items are processed (they leave the
//     pending set for good) and then acknowledges `processed`. Acknowledgements owed to the service live in
//     an outbox in the same file and are re-sent by the next call until the service has them; repeating an
//     acknowledgement is harmless (receipt stages only move forward).
//   - Every item is de-duplicated by item_id: an item already pending or processed is never delivered
//     again, even when the service returns it again after a resynchronization.
//
// So an application that calls MarkProcessed after handling an item sees every item once, across crashes at
// any point, except an item whose MarkProcessed did not commit locally, which is delivered again
// (at-least-once; handle it idempotently by item_id).
package queue

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/waypost/waypost/client"
	"github.com/waypost/waypost/domain"
)

// API is the part of the data-plane client the queue uses; *client.Client implements it.
type API interface {
	ReadInbox(ctx context.Context, req domain.ReadRequest) (domain.Page, error)
	Ack(ctx context.Context, req domain.AckRequest) (domain.AckResult, error)
}

var _ API = (*client.Client)(nil)

// Errors of the queue.
var (
	// ErrUnknownItem is returned by MarkProcessed for an item ID the queue never received.
	ErrUnknownItem = errors.New("queue: unknown item")
	// ErrOtherConsumer is returned by Open when the file belongs to another consumer.
	ErrOtherConsumer = errors.New("queue: the queue file belongs to another consumer")
	// ErrLocked is returned by Open when another process holds the queue file.
	ErrLocked = errors.New("queue: the queue file is in use by another process")
)

// Bucket and key names of the file format (version 1).
var (
	bMeta          = []byte("meta")
	bPending       = []byte("pending")       // order key (8-byte big-endian) → FeedItem JSON
	bItems         = []byte("items")         // item_id → 'p' + order key while pending, 'd' once processed
	bAckReceived   = []byte("ack_received")  // item_id → "" : `received` owed to the service
	bAckProcessed  = []byte("ack_processed") // item_id → "" : `processed` owed to the service
	kFormat        = []byte("format")
	kConsumer      = []byte("consumer_id")
	kCursor        = []byte("cursor")           // where the next read starts
	kCheckpoint    = []byte("checkpoint")       // checkpoint owed to the service
	kAckedCP       = []byte("acked_checkpoint") // last checkpoint the service confirmed
	kLastPage      = []byte("last_page")        // JSON of the last page read
	formatVersion  = []byte("1")
	statePending   = byte('p')
	stateProcessed = byte('d')
)

// Option configures a Queue.
type Option func(*Queue)

// WithAckBatch sets how many items one acknowledgement carries (default 100, the default ack_items_max;
// use describe's limits.ack_items_max when it is smaller).
func WithAckBatch(n int) Option {
	return func(q *Queue) {
		if n > 0 {
			q.ackBatch = n
		}
	}
}

// WithLockTimeout sets how long Open waits for another process to release the file (default 1 s).
func WithLockTimeout(d time.Duration) Option { return func(q *Queue) { q.lockTimeout = d } }

// Queue is one consumer's durable queue. It is safe for concurrent use within one process; the file is
// locked against other processes while open.
type Queue struct {
	mu          sync.Mutex
	db          *bolt.DB
	api         API
	consumerID  string
	ackBatch    int
	lockTimeout time.Duration
	// crash, when set (tests only), is called at each step boundary; an error stops the operation there, as
	// if the process died at that point. Inside a transaction it rolls the transaction back.
	crash func(point string) error
}

// Open opens (creating it on first use, mode 0600, in a 0700 directory) the queue file at path for
// consumerID, reading from and acknowledging to api.
func Open(path string, api API, consumerID string, opts ...Option) (*Queue, error) {
	if !domain.ValidID(consumerID) {
		return nil, fmt.Errorf("queue: invalid consumer ID %q", consumerID)
	}
	q := &Queue{api: api, consumerID: consumerID, ackBatch: 100, lockTimeout: time.Second}
	for _, o := range opts {
		o(q)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("queue: creating directory of %s: %w", path, err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: q.lockTimeout})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("%w: %s", ErrLocked, path)
	}
	if err != nil {
		return nil, fmt.Errorf("queue: opening %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bMeta, bPending, bItems, bAckReceived, bAckProcessed} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		m := tx.Bucket(bMeta)
		if f := m.Get(kFormat); f != nil && !bytes.Equal(f, formatVersion) {
			return fmt.Errorf("queue: unsupported file format %q", f)
		}
		if c := m.Get(kConsumer); c != nil && string(c) != consumerID {
			return fmt.Errorf("%w (%s, not %s)", ErrOtherConsumer, c, consumerID)
		}
		if err := m.Put(kFormat, formatVersion); err != nil {
			return err
		}
		return m.Put(kConsumer, []byte(consumerID))
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("queue: initializing %s: %w", path, err)
	}
	q.db = db
	return q, nil
}

// Close closes the file. Acknowledgements still owed stay in it and are sent after the next Open.
func (q *Queue) Close() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := q.db.Close(); err != nil {
		return fmt.Errorf("queue: closing: %w", err)
	}
	return nil
}

// ConsumerID returns the consumer the queue belongs to.
func (q *Queue) ConsumerID() string { return q.consumerID }

func (q *Queue) at(point string) error {
	if q.crash == nil {
		return nil
	}
	return q.crash(point)
}

// FetchResult reports one Fetch.
type FetchResult struct {
	// New are the items this call added to the pending set, in feed order.
	New []domain.FeedItem
	// Duplicates counts items the page returned that the queue already had (pending or processed).
	Duplicates int
	// HasMore is the page's has_more: more retained items were waiting when it was read.
	HasMore bool
	// Resynced is true when the stored cursor no longer matched the consumer's view or rights
	// (CURSOR_SCOPE_CHANGED) and the queue started again from the beginning of the history.
	Resynced bool
}

// Fetch sends the acknowledgements still owed, reads the next page (limit 0 means the service's default),
// saves its new items as pending and the new cursor in one local transaction, then acknowledges `received`
// for them with the new cursor as checkpoint. When the page was saved but the acknowledgement failed, the
// result is returned together with the error: the items are safely pending and the acknowledgement is sent
// again by the next call.
func (q *Queue) Fetch(ctx context.Context, limit int) (FetchResult, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var res FetchResult
	if err := q.flush(ctx); err != nil {
		return res, fmt.Errorf("queue: sending earlier acknowledgements: %w", err)
	}
	cursor, err := q.meta(kCursor)
	if err != nil {
		return res, err
	}
	read := func(c []byte) (domain.Page, error) {
		req := domain.ReadRequest{ConsumerID: q.consumerID, Limit: limit}
		if c != nil {
			s := string(c)
			req.Cursor = &s
		}
		return q.api.ReadInbox(ctx, req)
	}
	page, err := read(cursor)
	if cursor != nil && client.IsCode(err, domain.CodeCursorScopeChanged) {
		// RFC §4.4: resynchronize from a new starting point and de-duplicate by ID.
		res.Resynced = true
		cursor = nil
		page, err = read(nil)
	}
	if err != nil {
		return res, fmt.Errorf("queue: reading the inbox of %s: %w", q.consumerID, err)
	}
	if page.NextCursor == "" {
		return res, fmt.Errorf("queue: the service returned a page without next_cursor")
	}
	lastPage, err := json.Marshal(page)
	if err != nil {
		return res, fmt.Errorf("queue: encoding the page: %w", err)
	}
	err = q.db.Update(func(tx *bolt.Tx) error {
		pending, items, owed := tx.Bucket(bPending), tx.Bucket(bItems), tx.Bucket(bAckReceived)
		res.New, res.Duplicates = nil, 0
		for _, it := range page.Items {
			if !domain.ValidID(it.ItemID) {
				return fmt.Errorf("queue: the service returned an invalid item_id %q", it.ItemID)
			}
			if items.Get([]byte(it.ItemID)) != nil {
				res.Duplicates++
				continue
			}
			raw, err := json.Marshal(it)
			if err != nil {
				return fmt.Errorf("queue: encoding item %s: %w", it.ItemID, err)
			}
			seq, err := pending.NextSequence()
			if err != nil {
				return err
			}
			key := binary.BigEndian.AppendUint64(nil, seq)
			if err := pending.Put(key, raw); err != nil {
				return err
			}
			if err := items.Put([]byte(it.ItemID), append([]byte{statePending}, key...)); err != nil {
				return err
			}
			if err := owed.Put([]byte(it.ItemID), nil); err != nil {
				return err
			}
			res.New = append(res.New, it)
		}
		m := tx.Bucket(bMeta)
		if !bytes.Equal(cursor, []byte(page.NextCursor)) {
			if err := m.Put(kCursor, []byte(page.NextCursor)); err != nil {
				return err
			}
			// Everything up to the new cursor is now saved: the checkpoint can be declared (RFC §8.3).
			if err := m.Put(kCheckpoint, []byte(page.NextCursor)); err != nil {
				return err
			}
		}
		if err := m.Put(kLastPage, lastPage); err != nil {
			return err
		}
		return q.at("fetch.persist")
	})
	if err != nil {
		res.New, res.Duplicates = nil, 0
		return res, fmt.Errorf("queue: saving the page: %w", err)
	}
	res.HasMore = page.HasMore
	if err := q.at("fetch.persisted"); err != nil {
		return res, err
	}
	if err := q.flush(ctx); err != nil {
		return res, fmt.Errorf("queue: the page is saved; acknowledging it failed and will be retried: %w", err)
	}
	return res, nil
}

// Pending returns the items received and not yet marked processed, in feed order.
func (q *Queue) Pending() ([]domain.FeedItem, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := []domain.FeedItem{}
	err := q.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bPending).ForEach(func(_, v []byte) error {
			var it domain.FeedItem
			if err := json.Unmarshal(v, &it); err != nil {
				return fmt.Errorf("queue: decoding a pending item: %w", err)
			}
			out = append(out, it)
			return nil
		})
	})
	return out, err
}

// MarkProcessed records that the application has handled the items: it removes them from the pending set
// and records the `processed` acknowledgement as owed, in one local transaction, then sends the owed
// acknowledgements. Items already processed are ignored; an ID the queue never received is ErrUnknownItem
// and nothing changes. An error after the local commit (for instance the service being unreachable) leaves
// the items processed locally; the acknowledgement is sent by a later call.
func (q *Queue) MarkProcessed(ctx context.Context, itemIDs []string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	err := q.db.Update(func(tx *bolt.Tx) error {
		pending, items := tx.Bucket(bPending), tx.Bucket(bItems)
		for _, id := range itemIDs {
			st := items.Get([]byte(id))
			if st == nil {
				return fmt.Errorf("%w: %s", ErrUnknownItem, id)
			}
			if st[0] != statePending {
				continue
			}
			if err := pending.Delete(st[1:]); err != nil {
				return err
			}
			if err := items.Put([]byte(id), []byte{stateProcessed}); err != nil {
				return err
			}
			// `processed` implies `received` (RFC §8.3): the received acknowledgement is no longer owed.
			if err := tx.Bucket(bAckReceived).Delete([]byte(id)); err != nil {
				return err
			}
			if err := tx.Bucket(bAckProcessed).Put([]byte(id), nil); err != nil {
				return err
			}
		}
		return q.at("mark.persist")
	})
	if err != nil {
		return fmt.Errorf("queue: marking items processed: %w", err)
	}
	if err := q.at("mark.persisted"); err != nil {
		return err
	}
	if err := q.flush(ctx); err != nil {
		return fmt.Errorf("queue: the items are processed locally; acknowledging them failed and will be retried: %w", err)
	}
	return nil
}

// Flush sends every acknowledgement still owed to the service.
func (q *Queue) Flush(ctx context.Context) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.flush(ctx)
}

// State is a snapshot of the queue file.
type State struct {
	ConsumerID string
	// Cursor is where the next read starts (nil before the first read).
	Cursor *string
	// AckedCheckpoint is the last checkpoint the service confirmed.
	AckedCheckpoint *string
	// Pending counts items received and not yet processed.
	Pending int
	// OwedReceived and OwedProcessed count acknowledgements not yet confirmed by the service.
	OwedReceived, OwedProcessed int
	// OwedCheckpoint is true when a checkpoint is still to be sent.
	OwedCheckpoint bool
	// LastPage is the last page read from the service.
	LastPage *domain.Page
}

// State returns a snapshot of the queue.
func (q *Queue) State() (State, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	st := State{ConsumerID: q.consumerID}
	err := q.db.View(func(tx *bolt.Tx) error {
		m := tx.Bucket(bMeta)
		st.Cursor = strPtr(m.Get(kCursor))
		st.AckedCheckpoint = strPtr(m.Get(kAckedCP))
		st.OwedCheckpoint = m.Get(kCheckpoint) != nil
		st.Pending = tx.Bucket(bPending).Stats().KeyN
		st.OwedReceived = tx.Bucket(bAckReceived).Stats().KeyN
		st.OwedProcessed = tx.Bucket(bAckProcessed).Stats().KeyN
		if raw := m.Get(kLastPage); raw != nil {
			var p domain.Page
			if err := json.Unmarshal(raw, &p); err != nil {
				return fmt.Errorf("queue: decoding the last page: %w", err)
			}
			st.LastPage = &p
		}
		return nil
	})
	return st, err
}

func strPtr(b []byte) *string {
	if b == nil {
		return nil
	}
	s := string(b)
	return &s
}

func (q *Queue) meta(key []byte) ([]byte, error) {
	var out []byte
	err := q.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bMeta).Get(key); v != nil {
			out = bytes.Clone(v)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("queue: reading %s: %w", key, err)
	}
	return out, nil
}

// owed lists the acknowledgements still to send.
func (q *Queue) owed() (received, processed []string, checkpoint []byte, err error) {
	err = q.db.View(func(tx *bolt.Tx) error {
		_ = tx.Bucket(bAckReceived).ForEach(func(k, _ []byte) error { received = append(received, string(k)); return nil })
		_ = tx.Bucket(bAckProcessed).ForEach(func(k, _ []byte) error { processed = append(processed, string(k)); return nil })
		if v := tx.Bucket(bMeta).Get(kCheckpoint); v != nil {
			checkpoint = bytes.Clone(v)
		}
		return nil
	})
	if err != nil {
		err = fmt.Errorf("queue: reading the outbox: %w", err)
	}
	return received, processed, checkpoint, err
}

// flush sends the owed `received` acknowledgements with the owed checkpoint, then the owed `processed`
// ones, removing each from the outbox once the service confirmed it.
func (q *Queue) flush(ctx context.Context) error {
	received, processed, checkpoint, err := q.owed()
	if err != nil {
		return err
	}
	for len(received) > 0 || checkpoint != nil {
		n := min(len(received), q.ackBatch)
		batch := received[:n]
		received = received[n:]
		var cp []byte
		if len(received) == 0 {
			cp = checkpoint // the checkpoint goes with the last batch
			checkpoint = nil
		}
		if err := q.send(ctx, bAckReceived, domain.StageReceived, batch, cp); err != nil {
			return err
		}
	}
	for len(processed) > 0 {
		n := min(len(processed), q.ackBatch)
		if err := q.send(ctx, bAckProcessed, domain.StageProcessed, processed[:n], nil); err != nil {
			return err
		}
		processed = processed[n:]
	}
	return nil
}

// send acknowledges ids at stage (with checkpoint cp when not nil) and then clears them from the outbox.
func (q *Queue) send(ctx context.Context, outbox []byte, stage domain.Stage, ids []string, cp []byte) error {
	cpAccepted, err := q.ack(ctx, stage, ids, cp)
	if err != nil {
		return err
	}
	if err := q.at(string(stage) + ".acked"); err != nil {
		return err
	}
	err = q.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(outbox)
		for _, id := range ids {
			if err := b.Delete([]byte(id)); err != nil {
				return err
			}
		}
		m := tx.Bucket(bMeta)
		if cp != nil && bytes.Equal(m.Get(kCheckpoint), cp) {
			if err := m.Delete(kCheckpoint); err != nil {
				return err
			}
			if cpAccepted {
				return m.Put(kAckedCP, cp)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("queue: clearing acknowledged items: %w", err)
	}
	return nil
}

// ack sends one acknowledgement and reports whether the checkpoint (if any) was accepted. A checkpoint the
// service no longer accepts (the consumer's view or rights changed since it was read) is dropped and the
// items are acknowledged without it. When an item is no longer visible to the consumer (NOT_FOUND naming
// the item), the items are acknowledged one by one and the invisible ones dropped: no retry could ever
// acknowledge them.
func (q *Queue) ack(ctx context.Context, stage domain.Stage, ids []string, cp []byte) (cpAccepted bool, err error) {
	do := func(ids []string, cp []byte) error {
		req := domain.AckRequest{RequestID: client.NewRequestID(), ConsumerID: q.consumerID, Items: make([]domain.AckEntry, 0, len(ids))}
		for _, id := range ids {
			req.Items = append(req.Items, domain.AckEntry{ItemID: id, Stage: stage})
		}
		if cp != nil {
			s := string(cp)
			req.CheckpointCursor = &s
		}
		_, err := q.api.Ack(ctx, req)
		return err
	}
	err = do(ids, cp)
	if err == nil {
		return cp != nil, nil
	}
	if cp != nil && cursorRejected(err) {
		if len(ids) == 0 {
			return false, nil
		}
		return q.ack(ctx, stage, ids, nil)
	}
	if !itemNotFound(err) || len(ids) == 0 {
		return false, fmt.Errorf("queue: acknowledging %d item(s) as %s: %w", len(ids), stage, err)
	}
	for _, id := range ids {
		if e := do([]string{id}, nil); e != nil && !itemNotFound(e) {
			return false, fmt.Errorf("queue: acknowledging %s as %s: %w", id, stage, e)
		}
	}
	if cp == nil {
		return false, nil
	}
	return q.ack(ctx, stage, nil, cp)
}

func cursorRejected(err error) bool {
	return client.IsCode(err, domain.CodeCursorScopeChanged, domain.CodeInvalidCursor, domain.CodeCursorExpired)
}

// itemNotFound reports a NOT_FOUND about one item (not about the consumer).
func itemNotFound(err error) bool {
	var e *client.Error
	if !errors.As(err, &e) || e.Code != domain.CodeNotFound {
		return false
	}
	_, ok := e.Details["item_id"]
	return ok
}
