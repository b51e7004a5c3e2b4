package config_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/waypost/waypost/channel/chanservice"
	"github.com/waypost/waypost/functions/config"
	"github.com/waypost/waypost/functions/config/configtest"
)

// The table the CDK app is checked against, written out: a change to VarsFor must change this test too.
func TestVarsFor(t *testing.T) {
	base := []string{"WAYPOST_TABLE", "WAYPOST_BUCKET", "WAYPOST_BLOB_PREFIX"}
	obs := []string{"WAYPOST_LOG_LEVEL", "WAYPOST_VERSION", "WAYPOST_DYNAMODB_ENDPOINT", "WAYPOST_S3_ENDPOINT"}
	cursor := []string{"WAYPOST_CURSOR_KEY", "WAYPOST_CURSOR_KEY_ARN"}
	join := func(parts ...[]string) []string { return slices.Concat(parts...) }
	webhooks := []string{"WAYPOST_WEBHOOK_ALLOW_LOOPBACK"}
	// memory and blobs build no webhook sender; mailbox and mcp do (subscriptions).
	http := join(base, cursor, []string{"WAYPOST_INLINE_BODY_MAX"}, obs,
		[]string{"WAYPOST_CHANNEL_URL", "WAYPOST_CHANNEL_SECRET", "WAYPOST_CHANNEL_SECRET_ARN"})
	admin := join(base, []string{"WAYPOST_ADMIN_SECRET", "WAYPOST_ADMIN_SECRET_ARN"}, cursor, []string{"WAYPOST_INLINE_BODY_MAX"}, obs,
		[]string{"WAYPOST_CHANNEL_URL", "WAYPOST_CHANNEL_SECRET", "WAYPOST_CHANNEL_SECRET_ARN"}, webhooks,
		[]string{"WAYPOST_DELIVERY_QUEUE_URL", "WAYPOST_SQS_ENDPOINT"})
	queue := join(base, obs, []string{"WAYPOST_DELIVERY_QUEUE_URL", "WAYPOST_SQS_ENDPOINT"}, webhooks)
	want := map[string][]string{
		"mailbox":    join(http, webhooks),
		"memory":     http,
		"blobs":      http,
		"mcp":        join(http, webhooks, []string{"WAYPOST_MCP_WAITS_PER_SPACE"}),
		"admin":      admin,
		"sweeper":    join(base, obs),
		"dispatcher": queue,
		"deliverer":  queue,
		"channel":    join(base, cursor, obs, []string{"WAYPOST_CHANNEL_SECRET", "WAYPOST_CHANNEL_SECRET_ARN", "WAYPOST_CHANNEL_ADDR"}),
	}
	fns := config.Functions()
	if len(fns) != len(want) {
		t.Fatalf("Functions() = %q, want the %d of this table", fns, len(want))
	}
	used := map[string]bool{}
	for _, fn := range fns {
		got, err := config.VarsFor(fn)
		if err != nil {
			t.Fatalf("VarsFor(%q): %v", fn, err)
		}
		// Same set, and in the order of Vars.
		w := slices.Clone(want[fn])
		order := config.EnvVars()
		slices.SortFunc(w, func(a, b string) int { return slices.Index(order, a) - slices.Index(order, b) })
		if !slices.Equal(got, w) {
			t.Errorf("VarsFor(%q) =\n  %q\nwant\n  %q", fn, got, w)
		}
		for _, n := range got {
			used[n] = true
		}
	}
	for _, n := range config.EnvVars() {
		if !used[n] {
			t.Errorf("%s is read by no function", n)
		}
	}
	if _, err := config.VarsFor("billing"); err == nil {
		t.Fatal("VarsFor of an unknown function succeeded")
	}
	// Only the admin function ever sees the admin secret.
	for _, fn := range fns {
		names, _ := config.VarsFor(fn)
		if fn != config.Admin && (slices.Contains(names, config.EnvAdminSecret) || slices.Contains(names, config.EnvAdminSecretARN)) {
			t.Errorf("%s reads the admin secret", fn)
		}
	}
}

// arnOf maps each secret variable to its ARN variant.
func arnOf() map[string]string {
	return map[string]string{
		config.EnvAdminSecret: config.EnvAdminSecretARN, config.EnvCursorKey: config.EnvCursorKeyARN,
		config.EnvChannelSecret: config.EnvChannelSecretARN,
	}
}

const arnPrefix = "arn:aws:secretsmanager:us-east-1:123456789012:secret:"

// envOf sets exactly names: each secret as a value, or (arns) as the ARN of a secret named after it.
func envOf(names []string, arns bool) map[string]string {
	v, secrets := configtest.Values(), arnOf()
	env := map[string]string{}
	for _, n := range names {
		if _, isSecret := secrets[n]; isSecret && arns {
			continue
		}
		if val, ok := v[n]; ok {
			env[n] = val
			continue
		}
		for value, arn := range secrets {
			if arn == n && arns {
				env[n] = arnPrefix + value
			}
		}
	}
	return env
}

// recorder is a lookup over env that records every name looked up.
type recorder struct {
	env  map[string]string
	read []string
}

func (r *recorder) lookup(name string) (string, bool) {
	r.read = append(r.read, name)
	v, ok := r.env[name]
	return v, ok
}

// configtest.Values sets every variable that is not an ARN, so "every variable set" below means every one.
func TestValuesSetsEveryVariable(t *testing.T) {
	v := configtest.Values()
	for _, n := range config.EnvVars() {
		if _, set := v[n]; !set && !strings.HasSuffix(n, "_ARN") {
			t.Errorf("configtest.Values sets no %s", n)
		}
	}
}

// Every function loads with exactly its variables set (secrets as values, then as ARNs resolved later), and
// looks up exactly those variables, even when every other variable is set too.
func TestLoadForExactly(t *testing.T) {
	secrets := func(_ context.Context, arn string) (string, error) {
		name, _ := strings.CutPrefix(arn, arnPrefix)
		if v, ok := configtest.Values()[name]; ok {
			return v + "\n", nil
		}
		return "", fmt.Errorf("no secret %s", arn)
	}
	for _, fn := range config.Functions() {
		names, _ := config.VarsFor(fn)
		for _, arns := range []bool{false, true} {
			r := &recorder{env: envOf(names, arns)}
			c, err := config.LoadFor(fn, r.lookup)
			if err != nil {
				t.Fatalf("%s (ARNs %v) with exactly %q: %v", fn, arns, names, err)
			}
			if err := c.Resolve(context.Background(), secrets); err != nil {
				t.Fatalf("%s (ARNs %v): resolving: %v", fn, arns, err)
			}
			read := slices.Compact(slices.Sorted(slices.Values(r.read)))
			if w := slices.Sorted(slices.Values(names)); !slices.Equal(read, w) {
				t.Errorf("%s looked up %q, VarsFor lists %q", fn, read, w)
			}
			if c.Table != "waypost" || c.Bucket != "waypost-blobs" || c.BlobPrefix != "blobs/" || c.Version != "1.2.3" {
				t.Errorf("%s: %+v", fn, c)
			}
			has := func(n string) bool { return slices.Contains(names, n) }
			if (c.CursorKey != "") != has(config.EnvCursorKey) || (c.AdminSecret != "") != has(config.EnvAdminSecret) ||
				(c.ChannelSecret != "") != has(config.EnvChannelSecret) || (c.DeliveryQueueURL != "") != has(config.EnvDeliveryQueueURL) ||
				(c.ChannelURL != "") != has(config.EnvChannelURL) || (c.InlineBodyMax == 1024) != has(config.EnvInlineBodyMax) {
				t.Errorf("%s (ARNs %v): loaded %+v from %q", fn, arns, c, names)
			}
		}
		// Everything set: the variables of other functions are not even looked up.
		all := configtest.Values()
		r := &recorder{env: all}
		c, err := config.LoadFor(fn, r.lookup)
		if err != nil {
			t.Fatalf("%s with every variable set: %v", fn, err)
		}
		for _, n := range r.read {
			if !slices.Contains(names, n) {
				t.Errorf("%s looked up %s, which VarsFor does not list", fn, n)
			}
		}
		if fn != config.Admin && c.AdminSecret != "" {
			t.Errorf("%s loaded the admin secret", fn)
		}
	}
}

// Each required variable of a function is required: without it, LoadFor fails and names it.
func TestLoadForRequires(t *testing.T) {
	required := map[string][]string{
		config.Mailbox:    {config.EnvTable, config.EnvBucket, config.EnvCursorKey},
		config.MCP:        {config.EnvTable, config.EnvBucket, config.EnvCursorKey},
		config.Admin:      {config.EnvTable, config.EnvBucket, config.EnvCursorKey, config.EnvAdminSecret},
		config.Sweeper:    {config.EnvTable, config.EnvBucket},
		config.Dispatcher: {config.EnvTable, config.EnvBucket, config.EnvDeliveryQueueURL},
		config.Deliverer:  {config.EnvTable, config.EnvBucket, config.EnvDeliveryQueueURL},
		config.Channel:    {config.EnvTable, config.EnvBucket, config.EnvCursorKey, config.EnvChannelSecret},
	}
	for fn, reqs := range required {
		names, _ := config.VarsFor(fn)
		for _, req := range reqs {
			env := envOf(names, false)
			delete(env, req)
			if _, err := config.LoadFor(fn, lookup(env)); err == nil || !strings.Contains(err.Error(), req) {
				t.Errorf("%s without %s: %v", fn, req, err)
			}
		}
	}
	// The optional ones are optional (the channel URL goes with its secret).
	env := map[string]string{config.EnvTable: "t", config.EnvBucket: "b"}
	c, err := config.LoadFor(config.Sweeper, lookup(env))
	if err != nil || c.CursorKey != "" || c.LogLevel.String() != "INFO" || c.Version != "dev" {
		t.Fatalf("sweeper with table and bucket only: %+v, %v", c, err)
	}
	env[config.EnvCursorKey] = strings.Repeat("c", 32)
	env[config.EnvChannelSecret] = "wpc_0123456789abcdef"
	c, err = config.LoadFor(config.Channel, lookup(env))
	if err != nil || c.ChannelAddr != config.DefaultChannelAddr {
		t.Fatalf("channel without an address: %+v, %v", c, err)
	}
	for name, change := range map[string]func(map[string]string){
		"channel URL without secret": func(e map[string]string) { delete(e, config.EnvChannelSecret) },
		"channel secret without URL": func(e map[string]string) { delete(e, config.EnvChannelURL) },
		"channel secret twice":       func(e map[string]string) { e[config.EnvChannelSecretARN] = "arn:c" },
		"short channel secret":       func(e map[string]string) { e[config.EnvChannelSecret] = "short" },
		"short cursor key":           func(e map[string]string) { e[config.EnvCursorKey] = "short" },
	} {
		env := envOf(func() []string { n, _ := config.VarsFor(config.Memory); return n }(), false)
		change(env)
		if _, err := config.LoadFor(config.Memory, lookup(env)); err == nil {
			t.Errorf("memory, %s: accepted", name)
		}
	}
	if _, err := config.LoadFor("billing", lookup(configtest.Values())); err == nil {
		t.Fatal("LoadFor of an unknown function succeeded")
	}
}

func TestResolveChannelSecret(t *testing.T) {
	c := config.Config{ChannelSecretARN: "arn:ch"}
	get := func(_ context.Context, arn string) (string, error) { return "short", nil }
	if err := c.Resolve(context.Background(), get); err == nil {
		t.Fatal("a short channel secret from Secrets Manager was accepted")
	}
	get = func(_ context.Context, arn string) (string, error) { return " wpc_0123456789abcdef \n", nil }
	if err := c.Resolve(context.Background(), get); err != nil || c.ChannelSecret != "wpc_0123456789abcdef" {
		t.Fatalf("resolved %q, %v", c.ChannelSecret, err)
	}
	if !c.HasSecretARNs() || (&config.Config{CursorKey: strings.Repeat("k", 32)}).HasSecretARNs() {
		t.Fatal("HasSecretARNs")
	}
}

// The channel secret minimum is the channel service's.
func TestMinChannelSecret(t *testing.T) {
	if config.MinChannelSecretBytes != chanservice.MinSecretBytes {
		t.Fatalf("MinChannelSecretBytes = %d, chanservice.MinSecretBytes = %d", config.MinChannelSecretBytes, chanservice.MinSecretBytes)
	}
}
