package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/waypost/waypost/api/apitest"
	"github.com/waypost/waypost/client"
	"github.com/waypost/waypost/domain"
)

// hookCLI runs the commands against a stack with webhook_events on (loopback and http admitted).
type hookCLI struct {
	*cliTest
	stack *apitest.Stack
	w     apitest.World
}

func newHookCLI(t *testing.T) *hookCLI {
	t.Helper()
	home := isolateEnv(t)
	st := apitest.New(t, apitest.Options{Webhooks: apitest.Sender(t, true)})
	return &hookCLI{cliTest: &cliTest{t: t, url: st.URL, home: home}, stack: st, w: st.World(t)}
}

func (h *hookCLI) asB(args ...string) []string {
	return append(args, "--url", h.url, "--token", h.w.TokB)
}
func (h *hookCLI) asAdmin(args ...string) []string {
	return append(args, "--url", h.url, "--admin-secret", apitest.AdminSecret, "--space", h.w.SpaceID)
}

func (h *hookCLI) work() {
	h.t.Helper()
	if _, err := h.stack.Svc.WorkDeliveries(h.t.Context(), 100); err != nil {
		h.t.Fatalf("WorkDeliveries: %v", err)
	}
}

// TestCLISubscriptions walks subscribe (secret file and --new-secret), subscriptions, status, unsubscribe and
// the admin delivery commands against a real receiver; the secret never appears in the output except where
// --new-secret prints the one it generated.
func TestCLISubscriptions(t *testing.T) {
	h := newHookCLI(t)
	recv := apitest.NewReceiver(t)
	secret := apitest.NewSecret(t)
	if err := os.WriteFile("hook.secret", []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	noSecret := func(what, out string) {
		t.Helper()
		if strings.Contains(out, strings.TrimPrefix(secret, domain.SecretPrefix)) {
			t.Fatalf("%s prints the secret:\n%s", what, out)
		}
	}

	out, errOut, err := h.run("", h.asB("subscribe", "--event", domain.EventMessageCommitted, "--webhook-url", recv.URL+"/one",
		"--secret-file", "hook.secret", "--ttl", "2h", "-q")...)
	if err != nil {
		t.Fatalf("subscribe: %v\n%s", err, errOut)
	}
	subID := strings.TrimSpace(out)
	rid := requestIDLine.FindStringSubmatch(errOut)
	if !strings.HasPrefix(subID, "sub_") || rid == nil || recv.Challenges() != 1 {
		t.Fatalf("subscribe printed %q, stderr %q, %d challenges", out, errOut, recv.Challenges())
	}
	noSecret("subscribe", out+errOut)
	if st := h.ok(h.asB("status", "--operation", "subscription.upsert", "--request-id", rid[1])...); !strings.Contains(st, "submission_state: committed") {
		t.Fatalf("status:\n%s", st)
	}
	// The same request again (secret from standard input): the same subscription, no second challenge.
	out, errOut, err = h.run(secret, h.asB("subscribe", "--event", domain.EventMessageCommitted, "--webhook-url", recv.URL+"/one",
		"--secret-file", "-", "--ttl", "2h", "--request-id", rid[1])...)
	if err != nil || !strings.Contains(out, "subscription_id: "+subID) || !strings.Contains(out, "state:") || recv.Challenges() != 1 {
		t.Fatalf("repeated subscribe: %v\n%s%s", err, out, errOut)
	}
	noSecret("subscribe", out+errOut)

	// --new-secret: the secret comes first on stdout, once, and is the one the subscription uses: the same
	// subscribe with it from a file renews without a new challenge.
	out, errOut, err = h.run("", h.asB("subscribe", "--event", domain.EventMessageCommitted, "--webhook-url", recv.URL+"/two", "--new-secret", "-q")...)
	if err != nil {
		t.Fatalf("subscribe --new-secret: %v\n%s", err, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "whsec_") || !strings.HasPrefix(lines[1], "sub_") || !strings.Contains(errOut, "shown only once") {
		t.Fatalf("subscribe --new-secret printed:\n%s\nstderr:\n%s", out, errOut)
	}
	generated, sub2 := lines[0], lines[1]
	if err := os.WriteFile("new.secret", []byte(generated), 0o600); err != nil {
		t.Fatal(err)
	}
	challenges := recv.Challenges()
	if again := h.ok(h.asB("subscribe", "--event", domain.EventMessageCommitted, "--webhook-url", recv.URL+"/two", "--secret-file", "new.secret", "-q")...); again != sub2 || recv.Challenges() != challenges {
		t.Fatalf("renewal with the generated secret: %q (challenges %d → %d)", again, challenges, recv.Challenges())
	}

	var list domain.SubscriptionList
	h.okJSON(&list, h.asB("subscriptions")...)
	if len(list.Subscriptions) != 2 || list.Subscriptions[0].Health == nil {
		t.Fatalf("subscriptions: %+v", list)
	}
	text := h.ok(h.asB("subscriptions")...)
	if !strings.Contains(text, subID) || !strings.Contains(text, sub2) || !strings.Contains(text, "active") {
		t.Fatalf("subscriptions:\n%s", text)
	}
	noSecret("subscriptions", text)

	if id := h.ok(h.asB("unsubscribe", subID, "-q")...); id != subID {
		t.Fatalf("unsubscribe -q printed %q", id)
	}
	h.okJSON(&list, h.asB("subscriptions")...)
	for _, s := range list.Subscriptions {
		if (s.SubscriptionID == subID) != (s.State == domain.SubscriptionStopped) {
			t.Fatalf("after unsubscribe: %+v", list)
		}
	}

	// A receiver answering 410 leaves a failure record; the admin commands list and redeliver it.
	recv.SetStatus(http.StatusGone)
	h.ok("send", "--url", h.url, "--token", h.w.TokA, "--to", h.w.B, "--text", "hello")
	h.work()
	ids := h.ok(h.asAdmin("admin", "deliveries", "list", "-q")...)
	if len(strings.Fields(ids)) != 1 || !strings.HasPrefix(ids, "dl_") {
		t.Fatalf("admin deliveries list -q: %q", ids)
	}
	var dl domain.DeliveryList
	h.okJSON(&dl, h.asAdmin("admin", "deliveries", "list", "--state", "failed")...)
	if len(dl.Deliveries) != 1 || dl.Deliveries[0].SubscriptionID != sub2 || dl.Deliveries[0].State != domain.DeliveryFailed {
		t.Fatalf("admin deliveries list --json: %+v", dl)
	}
	if table := h.ok(h.asAdmin("admin", "deliveries", "list")...); !strings.Contains(table, ids) || !strings.Contains(table, "failed") {
		t.Fatalf("admin deliveries list:\n%s", table)
	}
	if id := h.ok(h.asAdmin("admin", "deliveries", "redeliver", ids, "-q")...); id != ids {
		t.Fatalf("redeliver -q printed %q", id)
	}
	if p := h.ok(h.asAdmin("admin", "deliveries", "list", "--state", "pending", "-q")...); p != ids {
		t.Fatalf("pending after redeliver: %q", p)
	}
	recv.SetStatus(http.StatusNoContent)
	h.work()
	if n := len(recv.Events()); n != 2 {
		t.Fatalf("%d events, want the failed one and its redelivery", n)
	}
	_, errOut, _ = h.run("", h.asAdmin("admin", "deliveries", "list")...)
	if !strings.Contains(errOut, "no failed deliveries") {
		t.Fatalf("empty list: %q", errOut)
	}

	// Service errors exit 1 with the code.
	recv.SetEcho(false)
	_, _, err = h.run("", h.asB("subscribe", "--event", domain.EventReceiptUpdated, "--webhook-url", recv.URL+"/three", "--secret-file", "hook.secret")...)
	if exitCode(err) != 1 || !strings.HasPrefix(err.Error(), "WEBHOOK_VERIFICATION_FAILED: ") {
		t.Fatalf("mute receiver: %v", err)
	}
	_, _, err = h.run("", h.asB("subscribe", "--event", domain.EventReceiptUpdated, "--webhook-url", "https://10.0.0.1/x", "--secret-file", "hook.secret")...)
	if exitCode(err) != 1 || !strings.HasPrefix(err.Error(), "FORBIDDEN_TARGET: ") {
		t.Fatalf("private target: %v", err)
	}
	_, _, err = h.run("", h.asB("unsubscribe", "sub_absent")...)
	if !client.IsCode(err, domain.CodeNotFound) {
		t.Fatalf("unsubscribe of an unknown subscription: %v", err)
	}
	_, _, err = h.run("", h.asAdmin("admin", "deliveries", "redeliver", "dl_absent")...)
	if !client.IsCode(err, domain.CodeNotFound) {
		t.Fatalf("redeliver of an unknown delivery: %v", err)
	}
}

func TestCLISubscriptionUsageErrors(t *testing.T) {
	h := newHookCLI(t)
	if err := os.WriteFile("plain.txt", []byte("not a secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("ok.secret", []byte(apitest.NewSecret(t)), 0o600); err != nil {
		t.Fatal(err)
	}
	ev := []string{"--event", domain.EventMessageCommitted}
	url := []string{"--webhook-url", "https://hooks.example.com/"}
	join := func(parts ...[]string) []string {
		var out []string
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{join([]string{"subscribe"}, url, []string{"--secret-file", "ok.secret"}), "--event"},
		{join([]string{"subscribe", "--event", "message.committed", "--new-secret"}, url), "not an event type"},
		{join([]string{"subscribe"}, ev, []string{"--secret-file", "ok.secret"}), "--webhook-url"},
		{join([]string{"subscribe"}, ev, url), "no secret"},
		{join([]string{"subscribe"}, ev, url, []string{"--secret-file", "ok.secret", "--new-secret"}), "not both"},
		{join([]string{"subscribe"}, ev, url, []string{"--new-secret", "--json"}), "--json"},
		{join([]string{"subscribe"}, ev, url, []string{"--secret-file", "ok.secret", "--ttl", "1500ms"}), "--ttl"},
		{join([]string{"subscribe"}, ev, url, []string{"--secret-file", "ok.secret", "--request-id", "bad id"}), "--request-id"},
		{join([]string{"subscribe", "--token", "t", "--consumer", "con_1"}, ev, url, []string{"--secret-file", "plain.txt"}), "whsec_"},
		{join([]string{"subscribe", "--token", "t", "--consumer", "con_1"}, ev, url, []string{"--secret-file", "absent.secret"}), "--secret-file"},
		{join([]string{"subscribe"}, ev, url, []string{"--secret-file", "ok.secret"}), "no token"},
		{[]string{"subscribe", "extra"}, "unexpected argument"},
		{[]string{"subscriptions", "--token", "t", "extra"}, "unexpected argument"},
		{[]string{"unsubscribe", "--token", "t"}, "SUBSCRIPTION_ID"},
		{[]string{"unsubscribe", "sub_1", "--token", "t", "--request-id", "bad id"}, "--request-id"},
		{[]string{"admin", "deliveries", "list", "--admin-secret", "s"}, "no space"},
		{[]string{"admin", "deliveries", "list", "--admin-secret", "s", "--space", "sp_1", "--state", "delivered"}, "--state"},
		{[]string{"admin", "deliveries", "redeliver", "--admin-secret", "s", "--space", "sp_1"}, "DELIVERY_ID"},
	} {
		out, errOut, err := h.run("", tc.args...)
		if err == nil || exitCode(err) != 2 || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("waypost %s: err = %v (exit %d), want a usage error mentioning %q", strings.Join(tc.args, " "), err, exitCode(err), tc.want)
		}
		if err != nil && strings.Contains(out+errOut+err.Error(), "whsec_") && !strings.Contains(tc.want, "whsec_") {
			t.Errorf("waypost %s printed a secret: %s %s %v", strings.Join(tc.args, " "), out, errOut, err)
		}
	}
	// The secret file's content is never echoed, even when it is refused.
	if err := os.WriteFile(filepath.Join(".", "bad.secret"), []byte("whsec_but not valid\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err := h.run("", join([]string{"subscribe", "--token", "t", "--consumer", "con_1"}, ev, url, []string{"--secret-file", "bad.secret"})...)
	if exitCode(err) != 2 || strings.Contains(err.Error(), "but not valid") {
		t.Fatalf("bad secret file: %v", err)
	}
}

// TestSubscriptionCLIHelp checks that the subscription commands have examples and a working --help.
func TestSubscriptionCLIHelp(t *testing.T) {
	if n := checkHelp(t, "subscribe", "subscriptions", "unsubscribe"); n != 3 {
		t.Errorf("found %d subscription commands, want 3", n)
	}
}
