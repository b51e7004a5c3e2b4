package server_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/internal/volumefs"
	"github.com/waypost/waypost/server"
	"github.com/waypost/waypost/store/pebble"
)

// TestRestartOnFullVolume (issue 33), on a tmpfs as root and on a fault-injecting volume otherwise (the e2e
// TestFullVolumeRestart checks the process itself, as root): a server on a full volume that is closed and
// opened again is refused within seconds with an error naming the directory and the room it needs (the
// caller, `waypost serve`, exits non-zero with that one line); once space is freed it opens with every
// acknowledged send; a volume too small for the store is refused at start the same way.
func TestRestartOnFullVolume(t *testing.T) {
	dir, fsys, _ := volumefs.Volume(t, 16<<20)
	cfg := server.Config{DataDir: filepath.Join(dir, "data"), AdminSecret: m1Admin, ItemFS: fsys, RecoverEvery: 50 * time.Millisecond}
	ctx := context.Background()
	srv, err := server.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	svc := srv.Service()
	sp, err := svc.CreateSpace(ctx, domain.CreateSpaceRequest{RequestID: "sp"})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := svc.CreateToken(ctx, sp.SpaceID, domain.CreateTokenRequest{RequestID: "t", ActorID: sp.DefaultRecipientID, Scopes: domain.AllScopes()})
	if err != nil {
		t.Fatal(err)
	}
	p, err := svc.Authenticate(ctx, tok.Token)
	if err != nil {
		t.Fatal(err)
	}
	filler := volumefs.Fill(t, fsys, dir, srv.Room().NeedBytes+(1<<20))
	acked := map[string]string{}
	for i := 0; ; i++ {
		if i > 100_000 {
			t.Fatal("the volume never filled")
		}
		rid := fmt.Sprintf("r-%06d", i)
		res, err := svc.SendMessage(ctx, p, domain.SendRequest{RequestID: rid, RecipientIDs: []string{sp.DefaultRecipientID},
			Body: &domain.MessageBody{Text: strings.Repeat("z", 600)}})
		if domain.CodeOf(err) == domain.CodeStorageUnavailable {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		acked[rid] = res.MessageID
	}
	if err := srv.Close(); err != nil {
		t.Fatalf("closing on a full volume: %v", err)
	}

	start := time.Now()
	_, err = server.Open(cfg)
	var noRoom *pebble.NoRoomError
	items := filepath.Join(cfg.DataDir, "items")
	if !errors.As(err, &noRoom) || !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), items) ||
		!strings.Contains(err.Error(), "needs at least") || strings.Contains(err.Error(), "\n") || time.Since(start) > 10*time.Second {
		t.Fatalf("open on a full volume after %v: %v", time.Since(start), err)
	}

	if err := fsys.Remove(filler); err != nil {
		t.Fatal(err)
	}
	srv, err = server.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for rid, id := range acked {
		if _, err := srv.Service().GetMessage(ctx, p, id); err != nil {
			t.Fatalf("%s (%s) after the restart: %v", rid, id, err)
		}
	}
	if _, err := srv.Service().SendMessage(ctx, p, domain.SendRequest{RequestID: "after", RecipientIDs: []string{sp.DefaultRecipientID},
		Body: &domain.MessageBody{Text: "room again"}}); err != nil {
		t.Fatal(err)
	}

	tiny, tinyFS, _ := volumefs.Volume(t, 2<<20)
	_, err = server.Open(server.Config{DataDir: filepath.Join(tiny, "data"), AdminSecret: m1Admin, ItemFS: tinyFS})
	if !errors.As(err, &noRoom) || noRoom.Need != 3<<20 || !strings.Contains(err.Error(), filepath.Join(tiny, "data", "items")) {
		t.Fatalf("open on a 2 MiB volume: %v", err)
	}
}
