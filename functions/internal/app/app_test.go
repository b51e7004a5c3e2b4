package app_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
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

// every returns a valid value for every variable of config.Vars that is not an ARN.
func every() map[string]string {
	return map[string]string{
		config.EnvTable: "waypost", config.EnvBucket: "waypost-blobs", config.EnvBlobPrefix: "blobs/",
		config.EnvAdminSecret: "wpa_admin-secret", config.EnvCursorKey: strings.Repeat("k", 32),
		config.EnvInlineBodyMax: "1024", config.EnvLogLevel: "debug", config.EnvVersion: "1.2.3",
		config.EnvDynamoDBEndpoint: "http://127.0.0.1:1", config.EnvS3Endpoint: "http://127.0.0.1:1",
		config.EnvChannelURL: "http://127.0.0.1:1", config.EnvChannelSecret: "wpc_channel-secret-0123",
		config.EnvChannelAddr: "127.0.0.1:0", config.EnvDeliveryQueueURL: "https://sqs.example.test/q",
		config.EnvSQSEndpoint: "http://127.0.0.1:1",
	}
}

// Each role's cold start looks up exactly the variables config.VarsFor lists for it, even with every other
// variable set; the HTTP roles build a handler, and only the MCP role serves /mcp.
func TestInitReadsOnlyItsVariables(t *testing.T) {
	offline(t)
	for _, role := range []app.Role{app.Mailbox, app.Memory, app.Blobs, app.Admin, app.MCP, app.Sweeper, app.Dispatcher, app.Deliverer} {
		var read []string
		lookup := func(name string) (string, bool) {
			read = append(read, name)
			v, ok := every()[name]
			return v, ok
		}
		var logs strings.Builder
		f, err := app.Init(context.Background(), role, lookup, &logs)
		if err != nil {
			t.Fatalf("%s: %v\n%s", role, err, logs.String())
		}
		want, err := config.VarsFor(role.Name())
		if err != nil {
			t.Fatal(err)
		}
		got := slices.Compact(slices.Sorted(slices.Values(read)))
		if w := slices.Sorted(slices.Values(want)); !slices.Equal(got, w) {
			t.Errorf("%s looked up %q, config.VarsFor lists %q", role, got, w)
		}
		if !strings.Contains(logs.String(), `"msg":"ready"`) || !strings.Contains(logs.String(), `"function":"`+role.Name()+`"`) {
			t.Errorf("%s: no ready line naming the function: %s", role, logs.String())
		}
		if role.HTTP() != (f.Handler != nil) {
			t.Fatalf("%s: handler %v", role, f.Handler)
		}
		if f.Handler == nil {
			continue
		}
		// No token: the MCP endpoint answers 401 before touching the store; elsewhere /mcp is no route.
		rec := httptest.NewRecorder()
		f.Handler.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(`{}`)))
		if want := map[bool]int{true: http.StatusUnauthorized, false: http.StatusNotFound}[role == app.MCP]; rec.Code != want {
			t.Errorf("%s: POST /mcp = %d, want %d: %s", role, rec.Code, want, rec.Body)
		}
		if role == app.Admin {
			continue
		}
		// Only the admin role serves the control plane: elsewhere it is disabled, whatever the secret.
		rec = httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "/admin/v0/spaces/sp_x", nil)
		req.Header.Set("Authorization", "Bearer wpa_admin-secret")
		f.Handler.ServeHTTP(rec, req)
		if rec.Code != http.StatusUnauthorized || !strings.Contains(rec.Body.String(), "disabled") {
			t.Errorf("%s: /admin/v0 with the admin secret = %d %s", role, rec.Code, rec.Body)
		}
	}
}

func TestInitRejects(t *testing.T) {
	offline(t)
	var logs strings.Builder
	// A configuration error is logged as a JSON line naming the variable.
	env := every()
	delete(env, config.EnvCursorKey)
	if _, err := app.Init(context.Background(), app.Memory, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, &logs); err == nil ||
		!strings.Contains(logs.String(), `"msg":"configuration"`) || !strings.Contains(logs.String(), config.EnvCursorKey) {
		t.Fatalf("memory without a cursor key: %v\n%s", err, logs.String())
	}
	// A role functions/config does not know never starts; the dispatcher needs its queue.
	lookup := func(k string) (string, bool) { v, ok := every()[k]; return v, ok }
	if _, err := app.Init(context.Background(), app.Role("billing"), lookup, &logs); err == nil {
		t.Fatal("an unknown role started")
	}
	noQueue := every()
	delete(noQueue, config.EnvDeliveryQueueURL)
	if _, err := app.Init(context.Background(), app.Dispatcher, func(k string) (string, bool) { v, ok := noQueue[k]; return v, ok }, &logs); err == nil {
		t.Fatal("the dispatcher started without a delivery queue")
	}
	if _, err := app.Build(context.Background(), app.Sweeper, config.Config{}, slog.New(slog.DiscardHandler)); err == nil {
		t.Fatal("Build of the sweeper returned an HTTP handler")
	}
}

// The AWS deployment publishes the limits its transport imposes (SUPPLEMENT §2).
func TestAWSLimits(t *testing.T) {
	l := app.AWSLimits()
	if l.FeedWaitMaxMS != 25000 {
		t.Errorf("feed_wait_max_ms = %d, want 25000 (API Gateway's 30 s integration limit)", l.FeedWaitMaxMS)
	}
	// A blob of max_blob_bytes, base64-encoded in the invocation event, fits Lambda's 6 MB payload with
	// room for the event around it.
	if enc := (l.MaxBlobBytes + 2) / 3 * 4; enc+64<<10 > 6_000_000 {
		t.Errorf("max_blob_bytes %d encodes to %d bytes: too close to Lambda's 6 MB payload", l.MaxBlobBytes, enc)
	}
}
