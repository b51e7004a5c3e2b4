package domaintest_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/store/mem"
)

// expiringStore is a store that says it deletes items past port.AttrExpires (as DynamoDB with time to live).
type expiringStore struct{ port.ItemStore }

func (expiringStore) ExpiresItems() bool { return true }

// TestDeliveredMarkerExpiry: a delivered marker carries its expiry (port.AttrExpires, 24 h after the
// delivery). On a store that expires items itself it has no due entry (nothing is swept for it); on one
// that does not, its purge entry in the due index removes it after the 24 h.
func TestDeliveredMarkerExpiry(t *testing.T) {
	for _, expiring := range []bool{false, true} {
		t.Run(map[bool]string{false: "swept", true: "expired by the store"}[expiring], func(t *testing.T) {
			st := mem.New()
			h := newHooks(t, func(c *domain.Config) {
				c.Store = st
				if expiring {
					c.Store = expiringStore{st}
				}
			})
			url := "https://hooks.example.com/marker"
			a, b := h.subscribed(t, url, http.StatusNoContent)
			h.f.Send(a.P, "hello", b.ActorID)
			h.work(t)
			if n := len(h.fake.Deliveries(url)); n != 1 {
				t.Fatalf("%d attempts", n)
			}
			delivered := h.f.Clock.Now()
			markers, err := st.Query(context.Background(), port.Query{PK: "DL#" + h.sp.SpaceID})
			if err != nil || len(markers) != 1 {
				t.Fatalf("delivery records: %d, %v", len(markers), err)
			}
			want := strconv.FormatInt(delivered.Add(24*time.Hour).Unix(), 10)
			if got := markers[0].Attr(port.AttrExpires); got != want {
				t.Fatalf("marker expires at %q, want %q (24 h after the delivery)", got, want)
			}
			due := 0
			for _, n := range partitions(t, st, "WQ") {
				due += n
			}
			if expiring {
				if due != 0 {
					t.Fatalf("%d due entries: a marker the store expires needs none", due)
				}
				return
			}
			if due != 1 {
				t.Fatalf("%d due entries, want the marker's purge entry", due)
			}
			h.f.Clock.Advance(25 * time.Hour)
			h.work(t)
			if markers, _ := st.Query(context.Background(), port.Query{PK: "DL#" + h.sp.SpaceID}); len(markers) != 0 {
				t.Fatalf("marker not purged after 24 h")
			}
			if got := partitions(t, st, "WQ"); len(got) != 0 {
				t.Fatalf("due index after the purge: %v", got)
			}
		})
	}
}
