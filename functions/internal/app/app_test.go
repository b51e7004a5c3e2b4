package app_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/waypost/waypost/functions/config"
	"github.com/waypost/waypost/functions/internal/app"
)

func offline(t *testing.T) {
	t.Setenv("AWS_CONFIG_FILE", "/dev/null")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_ACCESS_KEY_ID", "x")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "y")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

// The admin function refuses to start without the admin secret; the mailbox function starts without it
// (and, given one, drops it: the end-to-end test checks it answers /admin/v0 as disabled).
func TestBuildAdminSecret(t *testing.T) {
	offline(t)
	cfg := config.Config{Table: "t", Bucket: "b", CursorKey: strings.Repeat("k", 32), InlineBodyMax: 4096, Version: "test"}
	log := slog.New(slog.DiscardHandler)
	if _, err := app.Build(context.Background(), app.Admin, cfg, log); err == nil || !strings.Contains(err.Error(), config.EnvAdminSecret) {
		t.Fatalf("admin without a secret: %v", err)
	}
	if _, err := app.Build(context.Background(), app.Mailbox, cfg, log); err != nil {
		t.Fatalf("mailbox: %v", err)
	}
	cfg.AdminSecret = "wpa_secret"
	if _, err := app.Build(context.Background(), app.Admin, cfg, log); err != nil {
		t.Fatalf("admin with a secret: %v", err)
	}
}
