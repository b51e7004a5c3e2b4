package app_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/functions/config"
	"github.com/waypost/waypost/functions/config/configtest"
	"github.com/waypost/waypost/functions/internal/app"
	"github.com/waypost/waypost/functions/internal/roles"
)

func build(ctx context.Context, name string, cfg config.Config, log *slog.Logger) (http.Handler, error) {
	served, err := app.Build(ctx, roles.Specs()[name], cfg, os.LookupEnv, log)
	return served.HTTP, err
}

func offline(t *testing.T) {
	t.Setenv("AWS_CONFIG_FILE", "/dev/null")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_ACCESS_KEY_ID", "x")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "y")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

// lookupIn looks a variable up as Lambda's environment would hold it: the runtime's AWS_ variables from the
// process (offline sets them), every other one in env.
func lookupIn(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		if strings.HasPrefix(k, "AWS_") {
			return os.LookupEnv(k)
		}
		v, ok := env[k]
		return v, ok
	}
}

// The admin function refuses to start without the admin secret; the mailbox function starts without it
// (and, given one, drops it: the end-to-end test checks it answers /admin/v0 as disabled).
func TestBuildAdminSecret(t *testing.T) {
	offline(t)
	cfg := config.Config{Table: "t", Bucket: "b", CursorKey: strings.Repeat("k", 32), InlineBodyMax: 4096, Version: "test"}
	log := slog.New(slog.DiscardHandler)
	if _, err := build(context.Background(), config.Admin, cfg, log); err == nil || !strings.Contains(err.Error(), config.EnvAdminSecret) {
		t.Fatalf("admin without a secret: %v", err)
	}
	if _, err := build(context.Background(), config.Mailbox, cfg, log); err != nil {
		t.Fatalf("mailbox: %v", err)
	}
	cfg.AdminSecret = "wpa_secret-0123456789abcdefghijklmnopqrstuvwxyzABCD"
	if _, err := build(context.Background(), config.Admin, cfg, log); err != nil {
		t.Fatalf("admin with a secret: %v", err)
	}
}

// Each role's cold start looks up exactly the variables config.VarsFor lists for it, even with every other
// variable set; the HTTP roles build a handler, and only the MCP role serves /mcp.
func TestInitReadsOnlyItsVariables(t *testing.T) {
	offline(t)
	for _, role := range []string{config.Mailbox, config.Memory, config.Blobs, config.Admin, config.MCP, config.Sweeper, config.Dispatcher, config.Deliverer} {
		var read []string
		env := lookupIn(configtest.Values())
		lookup := func(name string) (string, bool) {
			read = append(read, name)
			return env(name)
		}
		var logs strings.Builder
		f, err := app.Init(context.Background(), roles.Specs()[role], lookup, &logs)
		if err != nil {
			t.Fatalf("%s: %v\n%s", role, err, logs.String())
		}
		want, err := config.VarsFor(role)
		if err != nil {
			t.Fatal(err)
		}
		read = slices.DeleteFunc(read, func(n string) bool { return strings.HasPrefix(n, "AWS_") }) // the runtime's
		got := slices.Compact(slices.Sorted(slices.Values(read)))
		if w := slices.Sorted(slices.Values(want)); !slices.Equal(got, w) {
			t.Errorf("%s looked up %q, config.VarsFor lists %q", role, got, w)
		}
		if !strings.Contains(logs.String(), `"msg":"ready"`) || !strings.Contains(logs.String(), `"function":"`+role+`"`) {
			t.Errorf("%s: no ready line naming the function: %s", role, logs.String())
		}
		if http := role != config.Sweeper && role != config.Dispatcher && role != config.Deliverer; http != (f.Handler != nil) {
			t.Fatalf("%s: handler %v", role, f.Handler)
		}
		if f.Handler == nil {
			continue
		}
		// No token: the MCP endpoint answers 401 before touching the store; elsewhere /mcp is no route.
		rec := httptest.NewRecorder()
		f.Handler.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(`{}`)))
		if want := map[bool]int{true: http.StatusUnauthorized, false: http.StatusNotFound}[role == config.MCP]; rec.Code != want {
			t.Errorf("%s: POST /mcp = %d, want %d: %s", role, rec.Code, want, rec.Body)
		}
		if role == config.Admin {
			continue
		}
		if role == config.MCP { // API Gateway routes only /mcp to it: nothing else is served
			rec = httptest.NewRecorder()
			f.Handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/admin/v0/spaces/sp_x", nil))
			if rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), "NOT_FOUND") || !strings.Contains(logs.String(), `"msg":"request"`) {
				t.Errorf("mcp: /admin/v0 = %d %s", rec.Code, rec.Body)
			}
			continue
		}
		// Only the admin role serves the control plane: elsewhere it is disabled, whatever the secret.
		rec = httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "/admin/v0/spaces/sp_x", nil)
		req.Header.Set("Authorization", "Bearer "+configtest.Values()[config.EnvAdminSecret])
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
	env := configtest.Values()
	delete(env, config.EnvCursorKey)
	if _, err := app.Init(context.Background(), roles.Specs()[config.Memory], lookupIn(env), &logs); err == nil ||
		!strings.Contains(logs.String(), `"msg":"configuration"`) || !strings.Contains(logs.String(), config.EnvCursorKey) {
		t.Fatalf("memory without a cursor key: %v\n%s", err, logs.String())
	}
	// A role functions/config does not know never starts; the dispatcher needs its queue.
	if _, err := app.Init(context.Background(), app.Spec{Name: "billing"}, lookupIn(configtest.Values()), &logs); err == nil {
		t.Fatal("an unknown role started")
	}
	noQueue := configtest.Values()
	delete(noQueue, config.EnvDeliveryQueueURL)
	if _, err := app.Init(context.Background(), roles.Specs()[config.Dispatcher], lookupIn(noQueue), &logs); err == nil {
		t.Fatal("the dispatcher started without a delivery queue")
	}
	// A configuration naming secrets by ARN starts only a role that reads secrets.
	if _, err := app.Build(context.Background(), app.Spec{Name: config.Sweeper, Start: roles.Specs()[config.Sweeper].Start},
		config.Config{Table: "t", Bucket: "b", CursorKeyARN: "arn:aws:secretsmanager:us-east-1:1:secret:k"}, os.LookupEnv, slog.New(slog.DiscardHandler)); err == nil ||
		!strings.Contains(err.Error(), "reads none") {
		t.Fatalf("a role without secrets given a secret ARN: %v", err)
	}
}

// The AWS deployment publishes the limits its transport imposes (SUPPLEMENT §2).
func TestAWSLimits(t *testing.T) {
	l := app.AWSLimits()
	if l.FeedWaitMaxMS != 25000 {
		t.Errorf("feed_wait_max_ms = %d, want 25000 (API Gateway's 30 s integration limit)", l.FeedWaitMaxMS)
	}
	// Blob bytes travel through presigned S3 URLs, never through a function: AWS publishes at least the
	// embedded limit (the emulator end-to-end test moves a blob of that size).
	if l.MaxBlobBytes < domain.DefaultLimits().MaxBlobBytes {
		t.Errorf("max_blob_bytes = %d, less than the embedded %d", l.MaxBlobBytes, domain.DefaultLimits().MaxBlobBytes)
	}
}

// The functions' item store, behind the metrics wrapper, still tells the domain that DynamoDB deletes
// expired items and that its point reads are costly (so that inbox entries keep a copy of their item and an
// inbox page is one Query).
func TestDomainConfigStoreCapabilities(t *testing.T) {
	offline(t)
	e := app.Env{Name: config.Mailbox, Config: config.Config{Table: "t", Bucket: "b", CursorKey: strings.Repeat("k", 32), Version: "test"}}
	dc, err := e.DomainConfig(slog.New(slog.DiscardHandler), app.ServiceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := dc.Store.(port.PointReadCoster); !ok || !c.PointReadsCostly() {
		t.Errorf("the functions' store does not say its point reads are costly")
	}
	if x, ok := dc.Store.(port.Expirer); !ok || !x.ExpiresItems() {
		t.Errorf("the functions' store does not say it expires items")
	}
}
