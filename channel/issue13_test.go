package channel_test

import (
	"os"
	"strings"
	"testing"

	"github.com/waypost/waypost/channel"
)

// TestIssue13_ChannelReasonsUseSpecText (issue 13 item 15): the end reasons the hub itself produces carry
// the texts the seed channel spec gives literally: an eviction for backlog contains 积压, and waiting on an
// unsubscribed handle gives 订阅已取消 (each followed by an English gloss).
func TestIssue13_ChannelReasonsUseSpecText(t *testing.T) {
	spec, err := os.ReadFile("../../shared/seeds/channel-spec-0.1.0.zh.txt")
	if err == nil { // the words checked below are the spec's own (the seeds sit next to the repository)
		for _, words := range []string{"积压", "订阅已取消"} {
			if !strings.Contains(string(spec), words) {
				t.Fatalf("the channel spec no longer says %q", words)
			}
		}
	}
	hub := channel.NewHub(channel.Limits{MaxBacklogBytes: 4})
	sc := addScope(t, hub)

	gone := mustSubscribe(t, sc, "c")
	if err := sc.Unsubscribe(gone); err != nil {
		t.Fatal(err)
	}
	got := wait(t, sc, gone, 0)
	if got.st != channel.StatusEnded || !strings.HasPrefix(got.text, "订阅已取消") {
		t.Fatalf("waiting on an unsubscribed handle: (%d, %q), want (2, 订阅已取消 …)", got.st, got.text)
	}

	slow := mustSubscribe(t, sc, "c")
	mustPublish(t, hub, "c", "1234")
	mustPublish(t, hub, "c", "5") // over the 4-byte backlog: evicted
	got = wait(t, sc, slow, 0)
	if got.st != channel.StatusEnded || !strings.Contains(got.text, "积压") || got.text != hub.Limits().BacklogReason() {
		t.Fatalf("evicted for backlog: (%d, %q), want (2, …积压…)", got.st, got.text)
	}
}
