package queue

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/waypost/waypost/client"
	"github.com/waypost/waypost/domain"
)

// fakeAPI serves a fixed feed of n message items; cursors are "c<position>".
type fakeAPI struct {
	items []domain.FeedItem
	acks  []domain.AckRequest
	onAck func(req domain.AckRequest) error
	reads int
}

func newFake(n int) *fakeAPI {
	f := &fakeAPI{}
	for i := 1; i <= n; i++ {
		f.items = append(f.items, domain.FeedItem{ItemID: fmt.Sprintf("it_%d", i), VisibleSeq: fmt.Sprint(i),
			ItemType: domain.ItemMessage, ResourceID: fmt.Sprintf("msg_%d", i)})
	}
	return f
}

func (f *fakeAPI) ReadInbox(_ context.Context, req domain.ReadRequest) (domain.Page, error) {
	f.reads++
	pos := 0
	if req.Cursor != nil {
		if _, err := fmt.Sscanf(*req.Cursor, "c%d", &pos); err != nil {
			return domain.Page{}, &client.Error{Code: domain.CodeInvalidCursor, Message: "bad cursor"}
		}
	}
	limit := req.Limit
	if limit == 0 {
		limit = 50
	}
	end := min(pos+limit, len(f.items))
	return domain.Page{Items: f.items[pos:end], NextCursor: fmt.Sprintf("c%d", end), HasMore: end < len(f.items)}, nil
}

func (f *fakeAPI) Ack(_ context.Context, req domain.AckRequest) (domain.AckResult, error) {
	if f.onAck != nil {
		if err := f.onAck(req); err != nil {
			return domain.AckResult{}, err
		}
	}
	f.acks = append(f.acks, req)
	return domain.AckResult{}, nil
}

func openTest(t *testing.T, api API, opts ...Option) (*Queue, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state", "con_b.queue")
	q, err := Open(path, api, "con_b", opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close() })
	return q, path
}

func TestFetchPersistsBeforeAcknowledging(t *testing.T) {
	api := newFake(3)
	q, path := openTest(t, api)
	var checked bool
	api.onAck = func(req domain.AckRequest) error {
		// At the moment the service hears about the checkpoint, the file must already hold every item of the
		// page and the cursor (read straight from the database: the queue's lock is held by Fetch).
		err := q.db.View(func(tx *bolt.Tx) error {
			if got := string(tx.Bucket(bMeta).Get(kCursor)); req.CheckpointCursor == nil || got != *req.CheckpointCursor {
				return fmt.Errorf("checkpoint %v acknowledged while the saved cursor is %q", req.CheckpointCursor, got)
			}
			for _, e := range req.Items {
				if tx.Bucket(bItems).Get([]byte(e.ItemID)) == nil {
					return fmt.Errorf("item %s acknowledged before it was saved", e.ItemID)
				}
			}
			return nil
		})
		if err != nil {
			t.Error(err)
		}
		checked = true
		return nil
	}
	res, err := q.Fetch(context.Background(), 10)
	if err != nil || len(res.New) != 3 || res.HasMore {
		t.Fatalf("Fetch = %+v, %v", res, err)
	}
	if !checked || len(api.acks) != 1 || len(api.acks[0].Items) != 3 || api.acks[0].Items[0].Stage != domain.StageReceived {
		t.Fatalf("acks = %+v", api.acks)
	}
	if !domain.ValidRequestID(api.acks[0].RequestID) || api.acks[0].ConsumerID != "con_b" {
		t.Fatalf("ack request = %+v", api.acks[0])
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("queue file mode %v, %v", fi.Mode(), err)
	}
	if di, err := os.Stat(filepath.Dir(path)); err != nil || di.Mode().Perm() != 0o700 {
		t.Fatalf("queue directory mode %v, %v", di.Mode(), err)
	}
	st, err := q.State()
	if err != nil || st.Pending != 3 || st.OwedReceived != 0 || st.OwedCheckpoint || st.AckedCheckpoint == nil || *st.AckedCheckpoint != "c3" ||
		st.LastPage == nil || len(st.LastPage.Items) != 3 {
		t.Fatalf("State = %+v, %v", st, err)
	}
}

func TestAckFailureKeepsItemsAndRetriesLater(t *testing.T) {
	api := newFake(2)
	q, _ := openTest(t, api)
	down := &client.TransportError{Method: "POST", Path: "/v0/inbox/ack", Err: errors.New("connection refused")}
	api.onAck = func(domain.AckRequest) error { return down }
	res, err := q.Fetch(context.Background(), 10)
	if !errors.Is(err, down) || len(res.New) != 2 {
		t.Fatalf("Fetch = %+v, %v", res, err)
	}
	st, _ := q.State()
	if st.Pending != 2 || st.OwedReceived != 2 || !st.OwedCheckpoint {
		t.Fatalf("State after failed ack = %+v", st)
	}
	// A mark while the service is down is kept locally and owed.
	if err := q.MarkProcessed(context.Background(), []string{"it_1"}); !errors.Is(err, down) {
		t.Fatalf("MarkProcessed = %v", err)
	}
	if p, _ := q.Pending(); len(p) != 1 || p[0].ItemID != "it_2" {
		t.Fatalf("Pending = %+v", p)
	}
	api.onAck = nil
	if err := q.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	stages := map[string]domain.Stage{}
	var cp string
	for _, a := range api.acks {
		for _, e := range a.Items {
			stages[e.ItemID] = e.Stage
		}
		if a.CheckpointCursor != nil {
			cp = *a.CheckpointCursor
		}
	}
	if stages["it_1"] != domain.StageProcessed || stages["it_2"] != domain.StageReceived || cp != "c2" {
		t.Fatalf("acks after recovery: %v, checkpoint %q", stages, cp)
	}
	if st, _ := q.State(); st.OwedReceived != 0 || st.OwedProcessed != 0 || st.OwedCheckpoint {
		t.Fatalf("State after flush = %+v", st)
	}
}

func TestAcknowledgementsAreBatched(t *testing.T) {
	api := newFake(7)
	q, _ := openTest(t, api, WithAckBatch(3))
	if _, err := q.Fetch(context.Background(), 50); err != nil {
		t.Fatal(err)
	}
	var sizes []int
	for i, a := range api.acks {
		sizes = append(sizes, len(a.Items))
		if (a.CheckpointCursor != nil) != (i == len(api.acks)-1) {
			t.Errorf("ack %d: the checkpoint must ride on the last batch only", i)
		}
	}
	if fmt.Sprint(sizes) != "[3 3 1]" {
		t.Fatalf("batch sizes %v", sizes)
	}
}

func TestMarkProcessedUnknownItemChangesNothing(t *testing.T) {
	api := newFake(2)
	q, _ := openTest(t, api)
	if _, err := q.Fetch(context.Background(), 10); err != nil {
		t.Fatal(err)
	}
	err := q.MarkProcessed(context.Background(), []string{"it_1", "it_nope"})
	if !errors.Is(err, ErrUnknownItem) {
		t.Fatalf("err = %v", err)
	}
	if p, _ := q.Pending(); len(p) != 2 {
		t.Fatalf("a rejected MarkProcessed changed the pending set: %+v", p)
	}
	if err := q.MarkProcessed(context.Background(), []string{"it_1"}); err != nil {
		t.Fatal(err)
	}
	// Repeating it is a no-op.
	n := len(api.acks)
	if err := q.MarkProcessed(context.Background(), []string{"it_1"}); err != nil || len(api.acks) != n {
		t.Fatalf("repeat MarkProcessed: %v, acks %d → %d", err, n, len(api.acks))
	}
}

func TestDuplicatesAreNotDeliveredAgain(t *testing.T) {
	api := newFake(3)
	q, _ := openTest(t, api)
	if _, err := q.Fetch(context.Background(), 10); err != nil {
		t.Fatal(err)
	}
	if err := q.MarkProcessed(context.Background(), []string{"it_2"}); err != nil {
		t.Fatal(err)
	}
	// Forget the cursor, as after a resynchronization: the service returns the same items again.
	if err := q.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bMeta).Delete(kCursor) }); err != nil {
		t.Fatal(err)
	}
	res, err := q.Fetch(context.Background(), 10)
	if err != nil || len(res.New) != 0 || res.Duplicates != 3 {
		t.Fatalf("Fetch = %+v, %v", res, err)
	}
	p, _ := q.Pending()
	if len(p) != 2 || p[0].ItemID != "it_1" || p[1].ItemID != "it_3" {
		t.Fatalf("Pending = %+v", p)
	}
}

func TestResyncAfterCursorScopeChanged(t *testing.T) {
	api := newFake(2)
	q, _ := openTest(t, api)
	// The first page is saved but its acknowledgement fails: checkpoint c1 is owed.
	api.onAck = func(domain.AckRequest) error { return &client.TransportError{Err: errors.New("down")} }
	if _, err := q.Fetch(context.Background(), 1); err == nil {
		t.Fatal("expected the acknowledgement to fail")
	}
	// Then the consumer's view changes: the service rejects c1 both as a read cursor and as a checkpoint.
	q.api = &scopeChangingAPI{fakeAPI: api, reject: "c1"}
	api.onAck = func(req domain.AckRequest) error {
		if req.CheckpointCursor != nil && *req.CheckpointCursor == "c1" {
			return &client.Error{Code: domain.CodeCursorScopeChanged, Message: "view changed"}
		}
		return nil
	}
	res, err := q.Fetch(context.Background(), 10)
	if err != nil || !res.Resynced || len(res.New) != 1 || res.New[0].ItemID != "it_2" || res.Duplicates != 1 {
		t.Fatalf("Fetch = %+v, %v", res, err)
	}
	var got []string
	for _, a := range api.acks {
		cp := "-"
		if a.CheckpointCursor != nil {
			cp = *a.CheckpointCursor
		}
		for _, e := range a.Items {
			got = append(got, e.ItemID+"@"+cp)
		}
	}
	// it_1 is acknowledged without the rejected checkpoint; it_2 with the new one.
	if fmt.Sprint(got) != "[it_1@- it_2@c2]" {
		t.Fatalf("acks %v", got)
	}
	if st, _ := q.State(); st.Cursor == nil || *st.Cursor != "c2" || st.AckedCheckpoint == nil || *st.AckedCheckpoint != "c2" || st.OwedReceived != 0 {
		t.Fatalf("State = %+v", st)
	}
}

// scopeChangingAPI rejects one cursor with CURSOR_SCOPE_CHANGED, as after a consumer view change.
type scopeChangingAPI struct {
	*fakeAPI
	reject string
}

func (s *scopeChangingAPI) ReadInbox(ctx context.Context, req domain.ReadRequest) (domain.Page, error) {
	if req.Cursor != nil && *req.Cursor == s.reject {
		return domain.Page{}, &client.Error{Code: domain.CodeCursorScopeChanged, Message: "view changed"}
	}
	return s.fakeAPI.ReadInbox(ctx, req)
}

func TestInvisibleItemIsDroppedFromTheOutbox(t *testing.T) {
	api := newFake(3)
	q, _ := openTest(t, api)
	api.onAck = func(req domain.AckRequest) error {
		for _, e := range req.Items {
			if e.ItemID == "it_2" {
				return &client.Error{Code: domain.CodeNotFound, Message: "no such item for this consumer", Details: map[string]any{"item_id": "it_2"}}
			}
		}
		return nil
	}
	if _, err := q.Fetch(context.Background(), 10); err != nil {
		t.Fatal(err)
	}
	acked := map[string]bool{}
	var cp bool
	for _, a := range api.acks {
		for _, e := range a.Items {
			acked[e.ItemID] = true
		}
		cp = cp || a.CheckpointCursor != nil
	}
	if !acked["it_1"] || !acked["it_3"] || acked["it_2"] || !cp {
		t.Fatalf("acked %v, checkpoint %v", acked, cp)
	}
	if st, _ := q.State(); st.OwedReceived != 0 || st.OwedCheckpoint {
		t.Fatalf("State = %+v", st)
	}
	// A NOT_FOUND about the consumer itself is not swallowed.
	api.onAck = func(domain.AckRequest) error {
		return &client.Error{Code: domain.CodeNotFound, Message: "no such consumer", Details: map[string]any{"consumer_id": "con_b"}}
	}
	if err := q.MarkProcessed(context.Background(), []string{"it_1"}); !client.IsCode(err, domain.CodeNotFound) {
		t.Fatalf("MarkProcessed = %v", err)
	}
	if st, _ := q.State(); st.OwedProcessed != 1 {
		t.Fatalf("State = %+v", st)
	}
}

func TestOpenChecks(t *testing.T) {
	api := newFake(0)
	q, path := openTest(t, api)
	if _, err := Open(path, api, "con_b", WithLockTimeout(50*time.Millisecond)); !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open while held: %v", err)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path, api, "con_other"); !errors.Is(err, ErrOtherConsumer) {
		t.Fatalf("Open for another consumer: %v", err)
	}
	if _, err := Open(path, api, "bad/id"); err == nil || !strings.Contains(err.Error(), "invalid consumer") {
		t.Fatalf("Open with a bad consumer ID: %v", err)
	}
	q2, err := Open(path, api, "con_b")
	if err != nil {
		t.Fatal(err)
	}
	q2.Close()
}
