package chanservice

import (
	"testing"

	"github.com/waypost/waypost/channel"
)

// Operations from committers must not create hubs: only subscribers do.
func TestOperationsDoNotCreateHubs(t *testing.T) {
	svc, err := New("test-secret-0123456789abcdef", channel.Limits{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := svc.Publish("sp_x", "feed", "m"); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Close("sp_y", "feed", "r"); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Count("sp_z", "feed"); err != nil {
			t.Fatal(err)
		}
		if n := len(svc.hubs); n != 0 {
			t.Fatalf("round %d: %d hubs created", i, n)
		}
	}
	svc.HubFor("sp_x")
	if n := len(svc.hubs); n != 1 {
		t.Fatalf("HubFor created %d hubs, want 1", n)
	}
}
