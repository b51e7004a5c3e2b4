package config_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/waypost/waypost/functions/config"
)

func lookup(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

func valid() map[string]string {
	return map[string]string{
		config.EnvTable:     "waypost",
		config.EnvBucket:    "waypost-blobs",
		config.EnvCursorKey: strings.Repeat("k", 32),
	}
}

// The list a CDK test compares against: stable, unique, documented, and exactly what Load reads.
func TestEnvVars(t *testing.T) {
	names := config.EnvVars()
	want := []string{"WAYPOST_TABLE", "WAYPOST_BUCKET", "WAYPOST_BLOB_PREFIX", "WAYPOST_ADMIN_SECRET", "WAYPOST_ADMIN_SECRET_ARN",
		"WAYPOST_CURSOR_KEY", "WAYPOST_CURSOR_KEY_ARN", "WAYPOST_INLINE_BODY_MAX", "WAYPOST_LOG_LEVEL", "WAYPOST_VERSION",
		"WAYPOST_DYNAMODB_ENDPOINT", "WAYPOST_S3_ENDPOINT", "WAYPOST_CHANNEL_URL", "WAYPOST_CHANNEL_SECRET",
		"WAYPOST_CHANNEL_SECRET_ARN", "WAYPOST_CHANNEL_ADDR", "WAYPOST_DELIVERY_QUEUE_URL", "WAYPOST_SQS_ENDPOINT", "WAYPOST_MCP_WAITS_PER_SPACE",
		"WAYPOST_WEBHOOK_ALLOW_LOOPBACK"}
	if !slices.Equal(names, want) {
		t.Fatalf("EnvVars() = %q, want %q", names, want)
	}
	for _, v := range config.Vars() {
		if v.Doc == "" {
			t.Errorf("%s is undocumented", v.Name)
		}
	}
	// Load reads every listed variable and no other.
	var read []string
	_, _ = config.LoadFrom(func(k string) (string, bool) { read = append(read, k); return valid()[k], valid()[k] != "" })
	slices.Sort(read)
	read = slices.Compact(read)
	sorted := slices.Clone(names)
	slices.Sort(sorted)
	if !slices.Equal(read, sorted) {
		t.Fatalf("Load reads %q, EnvVars lists %q", read, sorted)
	}
}

func TestLoad(t *testing.T) {
	env := valid()
	env[config.EnvLogLevel] = "debug"
	env[config.EnvInlineBodyMax] = "0"
	env[config.EnvS3Endpoint] = "http://127.0.0.1:7070"
	c, err := config.LoadFrom(lookup(env))
	if err != nil {
		t.Fatal(err)
	}
	if c.Table != "waypost" || c.Bucket != "waypost-blobs" || c.LogLevel != slog.LevelDebug || c.InlineBodyMax != 0 ||
		c.Version != "dev" || c.S3Endpoint != "http://127.0.0.1:7070" || c.AdminSecret != "" {
		t.Fatalf("config %+v", c)
	}
	c, err = config.LoadFrom(lookup(valid()))
	if err != nil || c.InlineBodyMax != config.DefaultInlineBodyMax || c.LogLevel != slog.LevelInfo {
		t.Fatalf("defaults: %+v, %v", c, err)
	}
}

func TestLoadRejects(t *testing.T) {
	for name, change := range map[string]func(map[string]string){
		"no table":          func(e map[string]string) { delete(e, config.EnvTable) },
		"no bucket":         func(e map[string]string) { e[config.EnvBucket] = "  " },
		"no cursor key":     func(e map[string]string) { delete(e, config.EnvCursorKey) },
		"short cursor key":  func(e map[string]string) { e[config.EnvCursorKey] = "short" },
		"cursor key twice":  func(e map[string]string) { e[config.EnvCursorKeyARN] = "arn:aws:secretsmanager:x" },
		"admin twice":       func(e map[string]string) { e[config.EnvAdminSecret] = "a"; e[config.EnvAdminSecretARN] = "arn:b" },
		"bad inline max":    func(e map[string]string) { e[config.EnvInlineBodyMax] = "-1" },
		"inline max not nb": func(e map[string]string) { e[config.EnvInlineBodyMax] = "4k" },
		"bad log level":     func(e map[string]string) { e[config.EnvLogLevel] = "loud" },
	} {
		env := valid()
		change(env)
		if _, err := config.LoadFrom(lookup(env)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// Every problem is reported at once.
	_, err := config.LoadFrom(lookup(map[string]string{}))
	for _, v := range []string{config.EnvTable, config.EnvBucket, config.EnvCursorKey} {
		if err == nil || !strings.Contains(err.Error(), v) {
			t.Fatalf("empty environment: %v, want it to name %s", err, v)
		}
	}
}

func TestResolve(t *testing.T) {
	env := valid()
	delete(env, config.EnvCursorKey)
	env[config.EnvCursorKeyARN] = "arn:cursor"
	env[config.EnvAdminSecretARN] = "arn:admin"
	c, err := config.LoadFrom(lookup(env))
	if err != nil {
		t.Fatal(err)
	}
	secrets := map[string]string{"arn:cursor": strings.Repeat("c", 40) + "\n", "arn:admin": "wpa_admin"}
	get := func(_ context.Context, arn string) (string, error) {
		v, ok := secrets[arn]
		if !ok {
			return "", errors.New("no such secret")
		}
		return v, nil
	}
	if err := c.Resolve(context.Background(), get); err != nil {
		t.Fatal(err)
	}
	if c.CursorKey != strings.Repeat("c", 40) || c.AdminSecret != "wpa_admin" {
		t.Fatalf("resolved %+v", c)
	}
	secrets["arn:cursor"] = "short"
	if err := c.Resolve(context.Background(), get); err == nil {
		t.Fatal("a short cursor key from the secret was accepted")
	}
	delete(secrets, "arn:admin")
	if err := c.Resolve(context.Background(), get); err == nil || !strings.Contains(err.Error(), config.EnvAdminSecretARN) {
		t.Fatalf("missing secret: %v", err)
	}
}

// The tests-only loopback switch is off unless set to a true value; anything unparsable is refused. The
// delivery queue is required by the dispatcher and the deliverer, optional for the admin function.
func TestWebhookSettings(t *testing.T) {
	env := valid()
	env[config.EnvDeliveryQueueURL] = "http://127.0.0.1:9324/100010001000/q"
	for v, want := range map[string]bool{"": false, "0": false, "false": false, "1": true, "true": true, "TRUE": true} {
		env[config.EnvWebhookAllowLoopback] = v
		for _, fn := range []string{config.Mailbox, config.Deliverer} {
			c, err := config.LoadFor(fn, lookup(env))
			if err != nil || c.WebhookAllowLoopback != want {
				t.Errorf("%s with %s=%q: %v, %v", fn, config.EnvWebhookAllowLoopback, v, c.WebhookAllowLoopback, err)
			}
		}
	}
	env[config.EnvWebhookAllowLoopback] = "yes please"
	if _, err := config.LoadFor(config.Deliverer, lookup(env)); err == nil || !strings.Contains(err.Error(), config.EnvWebhookAllowLoopback) {
		t.Errorf("an unparsable %s: %v", config.EnvWebhookAllowLoopback, err)
	}
	// Functions that send no webhook never look at it.
	if c, err := config.LoadFor(config.Sweeper, lookup(env)); err != nil || c.WebhookAllowLoopback {
		t.Errorf("sweeper: %+v, %v", c, err)
	}
	delete(env, config.EnvWebhookAllowLoopback)
	delete(env, config.EnvDeliveryQueueURL)
	env[config.EnvAdminSecret] = "wpa_admin-secret"
	if c, err := config.LoadFor(config.Admin, lookup(env)); err != nil || c.DeliveryQueueURL != "" {
		t.Errorf("admin without a delivery queue: %+v, %v", c, err)
	}
	for _, fn := range []string{config.Dispatcher, config.Deliverer} {
		if _, err := config.LoadFor(fn, lookup(env)); err == nil || !strings.Contains(err.Error(), config.EnvDeliveryQueueURL) {
			t.Errorf("%s without a delivery queue: %v", fn, err)
		}
	}
}
