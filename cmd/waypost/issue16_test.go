package main

import (
	"strings"
	"testing"

	"github.com/waypost/waypost/client"
	"github.com/waypost/waypost/domain"
)

// TestCLIAdminStatsAndSpaceDelete: `waypost admin stats` counts a space's stages (text and --json),
// `waypost admin space update --max-items/--max-bytes` sets the quotas, and `waypost admin space delete`
// answers "deleting" and stops the space's tokens at once.
func TestCLIAdminStatsAndSpaceDelete(t *testing.T) {
	c := newCLITest(t)
	f := c.setup()
	c.ok("send", "--to", f.b, "--text", "one", "--url", c.url, "--token", f.ta)
	c.ok("send", "--to", f.b, "--text", "two", "--url", c.url, "--token", f.ta)
	adm := []string{"--url", c.url, "--admin-secret", testAdminSecret}

	var st domain.SpaceStats
	c.okJSON(&st, append([]string{"admin", "stats", "--space", f.space}, adm...)...)
	if st.SubmissionsByOperation[domain.OpMessageSend].Committed != 2 || len(st.Consumers) != 2 || !st.Complete {
		t.Errorf("stats: %+v", st)
	}
	for _, cs := range st.Consumers {
		if cs.ConsumerID == f.cb && cs.NotReceived != 2 {
			t.Errorf("b's consumer: %+v, want 2 not received", cs)
		}
	}
	// The embedded server's storage volume (issue 33).
	if v := st.Storage; v == nil || v.WritesRefused || v.FreeBytes <= 0 || v.NeededBytes <= 0 || v.Dir == "" {
		t.Errorf("stats storage: %+v", v)
	}
	text := c.ok(append([]string{"admin", "stats", "--space", f.space}, adm...)...)
	for _, want := range []string{"message.send", "committed 2", "consumer " + f.cb, "not received 2", "checkpoint none", "storage", "writes taken"} {
		if !strings.Contains(text, want) {
			t.Errorf("stats text has no %q:\n%s", want, text)
		}
	}

	// Quotas: two items used; a limit of two refuses the third send; --max-bytes alone keeps max-items.
	got := c.ok(append([]string{"admin", "space", "update", f.space, "--max-items", "2"}, adm...)...)
	if !strings.Contains(got, "quotas:") || !strings.Contains(got, "2 items") || !strings.Contains(got, "usage:") {
		t.Errorf("space update --max-items:\n%s", got)
	}
	if _, _, err := c.run("", "send", "--to", f.b, "--text", "three", "--url", c.url, "--token", f.ta); !client.IsCode(err, domain.CodeResourceLimit) {
		t.Errorf("a send over the item quota: %v", err)
	}
	var upd domain.SpaceResult
	c.okJSON(&upd, append([]string{"admin", "space", "update", f.space, "--max-bytes", "1000000"}, adm...)...)
	if upd.Quotas == nil || *upd.Quotas != (domain.Quotas{MaxStoredBytes: 1000000, MaxItems: 2}) || upd.Usage == nil || upd.Usage.Items != 2 {
		t.Errorf("space update --max-bytes: quotas %+v usage %+v", upd.Quotas, upd.Usage)
	}

	var sp domain.SpaceResult
	c.okJSON(&sp, append([]string{"admin", "space", "delete", f.space}, adm...)...)
	if sp.State != domain.SpaceDeleting || sp.Deletion == nil {
		t.Fatalf("delete: %+v", sp)
	}
	if _, _, err := c.run("", "inbox", "--consumer", f.cb, "--url", c.url, "--token", f.tb); !client.IsCode(err, domain.CodeUnauthenticated) {
		t.Errorf("inbox with a token of the deleted space: %v", err)
	}
	got = c.ok(append([]string{"admin", "space", "get", f.space}, adm...)...)
	if !strings.Contains(got, "state:") || !strings.Contains(got, "deleting") || !strings.Contains(got, "deletion_requested_at") {
		t.Errorf("space get after delete:\n%s", got)
	}
	if _, _, err := c.run("", append([]string{"admin", "actor", "create", "--space", f.space}, adm...)...); !client.IsCode(err, domain.CodeNotFound) {
		t.Errorf("actor create in a deleting space: %v", err)
	}
}
