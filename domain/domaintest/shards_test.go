package domaintest_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/domain/domaintest"
	"github.com/waypost/waypost/domain/port"
)

// partitions returns how many entries each partition of a deployment-wide index holds: base#00 … base#15
// and the unsharded base (docs/storage-keys.md).
func partitions(t *testing.T, st port.ItemStore, base string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for i := -1; i < 16; i++ {
		pk := base
		if i >= 0 {
			pk = fmt.Sprintf("%s#%02d", base, i)
		}
		items, err := st.Query(context.Background(), port.Query{PK: pk, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if len(items) > 0 {
			out[pk] = len(items)
		}
	}
	return out
}

// moveToUnsharded moves every entry of an index into its unsharded partition, as a store written before the
// sharding holds them.
func moveToUnsharded(t *testing.T, st port.ItemStore, base string) int {
	t.Helper()
	n := 0
	for i := range 16 {
		items, err := st.Query(context.Background(), port.Query{PK: fmt.Sprintf("%s#%02d", base, i), Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range items {
			moved := it
			moved.PK = base
			if _, err := st.Commit(context.Background(), port.Tx{Build: func(uint64) ([]port.Op, error) {
				return []port.Op{port.Delete(it.Key, port.Cond{}), port.Put(moved, port.NotExists())}, nil
			}}); err != nil {
				t.Fatal(err)
			}
			n++
		}
	}
	return n
}

// TestIndexesAreSharded: upload expiries, delivery due entries and dispatch positions are spread over the
// shards of their index (none is one partition for the whole deployment), and sweeping works through all
// of them.
func TestIndexesAreSharded(t *testing.T) {
	h := newHooks(t, nil)
	f := h.f
	const spaces = 12
	for range spaces {
		sp := f.Space()
		a, b := f.Party(sp.SpaceID), f.Party(sp.SpaceID)
		url := "https://hooks.example.com/" + sp.SpaceID
		h.upsert(t, b.P, h.req(b.ConsumerID, url, 0))
		h.fake.Default(url, domaintest.WebhookAnswer{Status: http.StatusServiceUnavailable})
		f.PrepareText(a.P, "never uploaded "+sp.SpaceID)
		f.Send(a.P, "hello", b.ActorID)
	}
	st := f.Backend.Store
	if _, err := f.Svc.DispatchPending(h.ctx); err != nil {
		t.Fatal(err)
	}
	for _, base := range []string{"UX", "WQ", "WD"} {
		got := partitions(t, st, base)
		total := 0
		for _, n := range got {
			total += n
		}
		if total != spaces || got[base] != 0 || len(got) < 4 {
			t.Fatalf("index %s: %v; want %d entries over several shards, none unsharded", base, got, spaces)
		}
	}
	if refs, err := f.Svc.DueDeliveries(h.ctx, 100); err != nil || len(refs) != spaces {
		t.Fatalf("due deliveries: %d, %v; want %d from every shard", len(refs), err, spaces)
	}
	if refs, _ := f.Svc.DueDeliveries(h.ctx, 5); len(refs) != 5 {
		t.Fatalf("due deliveries with limit 5: %d", len(refs))
	}
	f.Clock.Advance(2 * time.Hour) // past upload_ttl_seconds
	n, err := f.Svc.SweepUploads(h.ctx, 5)
	if err != nil || n != 5 {
		t.Fatalf("sweep with limit 5: %d, %v", n, err)
	}
	if n, err := f.Svc.SweepUploads(h.ctx, 100); err != nil || n != spaces-5 {
		t.Fatalf("second sweep: %d, %v; want %d", n, err, spaces-5)
	}
	if got := partitions(t, st, "UX"); len(got) != 0 {
		t.Fatalf("upload expiry index after the sweep: %v", got)
	}
}

// TestUnshardedIndexesStillWorked: entries a store holds from before the sharding (the unsharded UX, WQ and
// WD partitions) are still swept, attempted and dispatched, and removed in the end.
func TestUnshardedIndexesStillWorked(t *testing.T) {
	h := newHooks(t, nil)
	f := h.f
	st := f.Backend.Store
	url := "https://hooks.example.com/legacy"
	a, b := h.subscribed(t, url, http.StatusNoContent)
	prep := f.PrepareText(a.P, "never uploaded")
	if moveToUnsharded(t, st, "UX") != 1 || moveToUnsharded(t, st, "WD") != 1 {
		t.Fatal("nothing to move")
	}
	// A subscription upsert finds the space's unsharded dispatch position and creates no second one.
	h.upsert(t, b.P, h.req(b.ConsumerID, url+"/2", 0))
	if got := partitions(t, st, "WD"); len(got) != 1 || got["WD"] != 1 {
		t.Fatalf("dispatch positions: %v", got)
	}
	f.Send(a.P, "hello", b.ActorID)
	if _, err := f.Svc.DispatchPending(h.ctx); err != nil { // through the unsharded position
		t.Fatal(err)
	}
	if moveToUnsharded(t, st, "WQ") != 2 { // one delivery per subscription
		t.Fatal("no due entries")
	}
	h.fake.Default(url+"/2", domaintest.WebhookAnswer{Status: http.StatusNoContent})
	h.driveDue(t, 10)
	if n := len(h.fake.Deliveries(url)) + len(h.fake.Deliveries(url+"/2")); n != 2 {
		t.Fatalf("%d attempts from unsharded due entries, want 2", n)
	}
	f.Clock.Advance(25 * time.Hour) // delivered markers and their entries go
	h.driveDue(t, 10)
	if got := partitions(t, st, "WQ"); len(got) != 0 {
		t.Fatalf("due index after delivery and purge: %v", got)
	}
	f.Clock.Advance(2 * time.Hour)
	if n, err := f.Svc.SweepUploads(h.ctx, 100); err != nil || n != 1 {
		t.Fatalf("sweep of the unsharded expiry entry: %d, %v", n, err)
	}
	if got := partitions(t, st, "UX"); len(got) != 0 {
		t.Fatalf("upload expiry index after the sweep: %v", got)
	}
	if _, err := f.Svc.Upload(h.ctx, a.P, prep.UploadID, "text/plain", 14, nil); domaintest.CodeOf(err) != domain.CodeUploadExpired {
		t.Fatalf("upload after the sweep: %v, want UPLOAD_EXPIRED", err)
	}
}

// TestDispatchSpaces: dispatching the spaces a commit was announced in derives the deliveries of those
// spaces only (another space's items wait for their own announcement or the full pass), costs nothing for a
// space without subscriptions, and finds a dispatch position kept where it was before the sharding.
func TestDispatchSpaces(t *testing.T) {
	h := newHooks(t, nil)
	f := h.f
	type party struct {
		sp   domain.SpaceResult
		a, b domaintest.Party
		url  string
	}
	var ps []party
	for i := range 3 {
		sp := f.Space()
		ps = append(ps, party{sp: sp, a: f.Party(sp.SpaceID), b: f.Party(sp.SpaceID), url: fmt.Sprintf("https://hooks.example.com/%d", i)})
	}
	subscribe := func(p party) {
		h.upsert(t, p.b.P, h.req(p.b.ConsumerID, p.url, 0))
		h.fake.Default(p.url, domaintest.WebhookAnswer{Status: http.StatusNoContent})
	}
	// The second space's position is kept where it was before the sharding; the third has no subscription.
	subscribe(ps[1])
	if moveToUnsharded(t, f.Backend.Store, "WD") != 1 {
		t.Fatal("dispatch position not moved")
	}
	subscribe(ps[0])
	for _, p := range ps {
		f.Send(p.a.P, "hello", p.b.ActorID)
		f.Send(p.a.P, "again", p.b.ActorID)
	}
	dispatch := func(spaces ...string) domain.DispatchResult {
		t.Helper()
		r, err := f.Svc.DispatchSpaces(h.ctx, spaces)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := dispatch(ps[2].sp.SpaceID, "sp_unknown"); r != (domain.DispatchResult{}) {
		t.Fatalf("spaces without subscriptions: %+v", r)
	}
	if r := dispatch(ps[0].sp.SpaceID, ps[0].sp.SpaceID); r.Items != 2 || r.Deliveries != 2 {
		t.Fatalf("first space: %+v, want 2 items and 2 deliveries", r)
	}
	if r := dispatch(ps[0].sp.SpaceID); r != (domain.DispatchResult{}) {
		t.Fatalf("first space again: %+v, want nothing new", r)
	}
	if r := dispatch(ps[1].sp.SpaceID); r.Items != 2 || r.Deliveries != 2 {
		t.Fatalf("second space (unsharded position): %+v, want 2 items and 2 deliveries", r)
	}
	if r, err := f.Svc.DispatchPending(h.ctx); err != nil || r != (domain.DispatchResult{}) {
		t.Fatalf("full pass after both: %+v, %v; want nothing left", r, err)
	}
}
