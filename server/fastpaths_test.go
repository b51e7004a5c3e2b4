package server

import (
	"slices"
	"testing"
)

// TestFastPathsFromTheCatalog: the paths the server's own loop answers are the catalog's routes of
// message.send, inbox.read and inbox.ack — a route moved in the catalog moves here too, none drops out.
func TestFastPathsFromTheCatalog(t *testing.T) {
	got := fastPaths()
	slices.Sort(got)
	if want := []string{"/v0/inbox/ack", "/v0/inbox/read", "/v0/messages"}; !slices.Equal(got, want) {
		t.Fatalf("fastPaths() = %q, want %q", got, want)
	}
}
