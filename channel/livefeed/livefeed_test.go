package livefeed_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/waypost/waypost/channel/chanclient"
	"github.com/waypost/waypost/channel/livefeed"
	"github.com/waypost/waypost/domain/port"
)

// testSecret authenticates the channel service's internal routes in these tests.
const testSecret = "internal-secret-0123456789"

// TestRemoteNotifierWakesWatcher: a committer announcing over HTTP (as a Lambda does) wakes a watcher
// subscribed in the channel service's process.
func TestRemoteNotifierWakesWatcher(t *testing.T) {
	svc := spaceHubs(t)
	hs := httptest.NewServer(svc)
	defer hs.Close()
	api, err := chanclient.New(hs.URL, testSecret)
	if err != nil {
		t.Fatal(err)
	}
	watcher := livefeed.New(svc, nil)
	w, err := watcher.Watch(context.Background(), "sp_1")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	livefeed.NewRemote(api, nil).Notify(context.Background(), []port.Published{{SpaceID: "sp_1", VisibleSeq: 42, ItemID: "it_16_x"}})
	got, st, err := w.Next(context.Background(), 5*time.Second)
	if err != nil || st != port.WatchAnnounced || got.VisibleSeq != 42 || got.ItemID != "it_16_x" {
		t.Fatalf("watch: %+v %v %v", got, st, err)
	}
	// Another space's announcement does not wake it.
	livefeed.NewRemote(api, nil).Notify(context.Background(), []port.Published{{SpaceID: "sp_2", VisibleSeq: 1, ItemID: "it_1_y"}})
	if _, st, _ := w.Next(context.Background(), 50*time.Millisecond); st != port.WatchTimeout {
		t.Fatalf("woken by another space: %v", st)
	}
}

// TestRemoteNotifierIsBestEffort: an unreachable channel service loses the announcement without error.
func TestRemoteNotifierIsBestEffort(t *testing.T) {
	api, err := chanclient.New("http://127.0.0.1:1", testSecret)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	livefeed.NewRemote(api, nil).Notify(context.Background(), []port.Published{{SpaceID: "sp_1", VisibleSeq: 1, ItemID: "it_1_x"}})
	if time.Since(start) > 5*time.Second {
		t.Fatalf("a lost announcement held the committer for %v", time.Since(start))
	}
}
