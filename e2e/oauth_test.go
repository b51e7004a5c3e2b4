package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/waypost/waypost/e2e/wire"
	"github.com/waypost/waypost/internal/browsertest"
)

// TestOAuthHostThroughConsentPage is issue 28's end-to-end flow: the official TypeScript MCP SDK's client,
// with its OAuth support, connects to the real `waypost serve` as an OAuth-only host does (401, discovery,
// dynamic registration, PKCE); the owner approves it on the consent page in real headless Chromium (signing
// in with the admin secret, picking the actor and consumer); the host then lists the tools, sends, reads
// its inbox and acknowledges with the issued token, refreshes, and is refused once the owner revoked it.
func TestOAuthHostThroughConsentPage(t *testing.T) {
	node, dir := interopDir(t, "mcp-ts", "@modelcontextprotocol/sdk/package.json")
	s := startServer(t)
	a := newSpace(t, s, "oauth")
	agent := a.participant(t, "agent A")
	person := a.participant(t, "person B")
	// A message waits in B's inbox for the host to read and acknowledge.
	ok[wire.Send](t, s, request{Method: "POST", Path: "/v0/messages", Token: agent.token,
		Body: map[string]any{"request_id": "before-oauth", "recipient_ids": []string{person.actor}, "subject": "hello B", "body": map[string]any{"text": "read me"}}})

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "oauth.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "WAYPOST_URL="+s.base, "WAYPOST_ACTOR_A="+agent.actor, "WAYPOST_REQUEST_ID=oauth-send-1")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			t.Logf("oauth.mjs stderr:\n%s", stderr.String())
		}
	}()
	lines := bufio.NewScanner(stdout)
	lines.Buffer(make([]byte, 1<<20), 1<<20)
	steps := map[string]map[string]any{}
	next := func(want string) map[string]any {
		t.Helper()
		for lines.Scan() {
			var m map[string]any
			if err := json.Unmarshal(lines.Bytes(), &m); err != nil {
				t.Fatalf("oauth.mjs printed %q", lines.Text())
			}
			steps[m["step"].(string)] = m
			if m["step"] == "error" {
				t.Fatalf("oauth.mjs: %v\nstderr:\n%s", m["message"], stderr.String())
			}
			if m["step"] == want {
				return m
			}
		}
		t.Fatalf("oauth.mjs ended before %q (stderr:\n%s)", want, stderr.String())
		return nil
	}

	// The person approves at the consent page, in a real browser.
	authURL := next("authorize")["url"].(string)
	u, err := url.Parse(authURL)
	if err != nil || !strings.HasPrefix(authURL, s.base+"/authorize?") {
		t.Fatalf("authorization URL %q is not this server's /authorize", authURL)
	}
	q := u.Query()
	if q.Get("code_challenge_method") != "S256" || q.Get("resource") != s.base+"/mcp" {
		t.Fatalf("the SDK's authorization request %v lacks S256 or the resource", q)
	}
	cb, _ := url.Parse(q.Get("redirect_uri"))
	b := browsertest.New(t, browsertest.Options{})
	b.Allow(strings.TrimPrefix(s.base, "http://"))
	b.Allow(cb.Host)
	var clientName, redirectHost string
	step, stepDone := context.WithTimeout(b.Ctx, 45*time.Second)
	defer stepDone()
	if err := chromedp.Run(step,
		chromedp.Navigate(authURL),
		chromedp.WaitVisible("#secret", chromedp.ByID),
		chromedp.SendKeys("#secret", adminSecret, chromedp.ByID),
		chromedp.Click("#sign-in", chromedp.ByID),
		chromedp.WaitVisible("#approve", chromedp.ByID),
		chromedp.Text("#client-name", &clientName, chromedp.ByID),
		chromedp.Text("#redirect-host", &redirectHost, chromedp.ByID),
		chromedp.SetValue("#actor", person.actor, chromedp.ByID),
		chromedp.SetValue("#consumer", person.consumer, chromedp.ByID),
	); err != nil {
		t.Fatalf("consent page: %v", err)
	}
	if !strings.Contains(clientName, "Waypost interop host") || redirectHost != cb.Host {
		t.Fatalf("the consent page shows client %q redirecting to %q, want the SDK's client and %s", clientName, redirectHost, cb.Host)
	}
	screenshot(t, b, "oauth-consent", "main")
	if err := chromedp.Run(step, chromedp.Click("#approve", chromedp.ByID), chromedp.WaitVisible("#done", chromedp.ByID)); err != nil {
		t.Fatalf("approving: %v", err)
	}

	registered := steps["registered"]["client_id"].(string)
	if c := next("callback"); c["iss"] != s.base || c["has_code"] != true {
		t.Fatalf("authorization response %v", c)
	}
	if tok := next("tokens"); tok["access_prefix"] != "wpt_" || tok["has_refresh"] != true || !strings.EqualFold(fmt.Sprint(tok["token_type"]), "bearer") {
		t.Fatalf("token response %v", tok)
	}
	if l := next("tools/list"); !strings.Contains(fmt.Sprint(l["names"]), "waypost_send") {
		t.Fatalf("tools/list %v", l)
	}
	if d := next("waypost_describe"); d["actor_id"] != person.actor || d["consumer_id"] != person.consumer || d["oauth"] != true {
		t.Fatalf("the host acts as %v, want actor %s consumer %s with oauth published", d, person.actor, person.consumer)
	}
	sent := next("waypost_send")
	sentData, _ := sent["structured"].(map[string]any)["data"].(map[string]any)
	if sent["isError"] != false || sentData["submission_state"] != "committed" {
		t.Fatalf("waypost_send %v", sent)
	}
	if in := next("waypost_inbox"); in["isError"] != false {
		t.Fatalf("waypost_inbox %v", in)
	}
	if ack := next("waypost_ack"); ack["isError"] != false {
		t.Fatalf("waypost_ack %v", ack)
	}
	if r := next("refresh"); r["rotated"] != true || r["new_access"] != true || r["describe_ok"] != true || r["actor_id"] != person.actor {
		t.Fatalf("refresh %v", r)
	}
	next("await-revoke")

	// One idempotency scope: the same send retried through B's CLI token is the same message.
	retry, _ := ok[wire.Send](t, s, request{Method: "POST", Path: "/v0/messages", Token: person.token,
		Body: map[string]any{"request_id": "oauth-send-1", "recipient_ids": []string{agent.actor}, "subject": "from an OAuth host", "body": map[string]any{"text": "hello over OAuth"}}})
	if retry.ResourceID == "" || retry.ResourceID != sentData["resource_id"] {
		t.Fatalf("the retry through the CLI token made message %s, the OAuth send %v: want one message", retry.ResourceID, sentData["resource_id"])
	}
	// The owner sees which client holds which token, and revokes the client with the CLI.
	list, errOut, err := waypost("admin", "token", "list", "--url", s.base, "--space", a.space.SpaceID)
	if err != nil || !strings.Contains(list, registered) || !strings.Contains(list, "OAUTH_CLIENT") {
		t.Fatalf("waypost admin token list does not name the OAuth client %s (%v):\n%s%s", registered, err, list, errOut)
	}
	if out, errOut, err := waypost("admin", "oauth", "revoke", registered, "--url", s.base); err != nil {
		t.Fatalf("waypost admin oauth revoke: %v\n%s%s", err, out, errOut)
	}
	if _, err := io.WriteString(stdin, "revoked\n"); err != nil {
		t.Fatal(err)
	}
	if r := next("revoked"); r["access_refused"] != true || r["refresh_error"] != "invalid_client" {
		t.Fatalf("after revoking the client: %v (%v)", r, steps["revoked-access"])
	}
	next("done")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("oauth.mjs: %v\n%s", err, stderr.String())
	}
	// The CLI token of the same actor is untouched.
	ok[map[string]any](t, s, request{Method: "GET", Path: "/v0/describe", Token: person.token})
}
