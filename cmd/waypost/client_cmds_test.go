package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/spf13/cobra"

	"github.com/waypost/waypost/client"
	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/server/servertest"
)

const testAdminSecret = servertest.AdminSecret

// cliTest runs the waypost commands in-process against a real embedded server.
type cliTest struct {
	t    *testing.T
	url  string
	home string
}

// newCLITest starts a server and isolates the environment: no WAYPOST_* variables, a fresh HOME and
// working directory.
func newCLITest(t *testing.T) *cliTest {
	t.Helper()
	home := isolateEnv(t)
	_, url := servertest.Start(t)
	return &cliTest{t: t, url: url, home: home}
}

// isolateEnv clears the WAYPOST_* variables and gives the test a fresh HOME (returned) and working
// directory.
func isolateEnv(t *testing.T) (home string) {
	t.Helper()
	for _, k := range []string{envURL, envToken, envAdminSecret, envSpace} {
		t.Setenv(k, "")
	}
	home = t.TempDir()
	t.Setenv("HOME", home)
	t.Chdir(t.TempDir())
	return home
}

// run executes one waypost command line with stdin and returns stdout, stderr and the error.
func (c *cliTest) run(stdin string, args ...string) (string, string, error) {
	root := newRoot()
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetIn(strings.NewReader(stdin))
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	return out.String(), errb.String(), err
}

// ok runs a command that must succeed and returns its trimmed stdout.
func (c *cliTest) ok(args ...string) string {
	c.t.Helper()
	out, errOut, err := c.run("", args...)
	if err != nil {
		c.t.Fatalf("waypost %s: %v\nstderr: %s", strings.Join(args, " "), err, errOut)
	}
	return strings.TrimSpace(out)
}

// okJSON runs a command with --json and decodes its stdout into v.
func (c *cliTest) okJSON(v any, args ...string) {
	c.t.Helper()
	out := c.ok(append(args, "--json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		c.t.Fatalf("waypost %s --json printed invalid JSON: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// fixture is a space with agent A and client B, each with a consumer and a bound token.
type fixture struct {
	space, a, b, ca, cb, ta, tb string
}

func (c *cliTest) setup() fixture {
	c.t.Helper()
	adm := []string{"--url", c.url, "--admin-secret", testAdminSecret}
	var f fixture
	f.space = c.ok(append([]string{"admin", "space", "create", "--name", "test", "-q"}, adm...)...)
	sp := append([]string{"--space", f.space}, adm...)
	f.a = c.ok(append([]string{"admin", "actor", "create", "--name", "agent A", "-q"}, sp...)...)
	f.b = c.ok(append([]string{"admin", "actor", "create", "--name", "client B", "-q"}, sp...)...)
	f.ca = c.ok(append([]string{"admin", "consumer", "create", "--actor", f.a, "-q"}, sp...)...)
	f.cb = c.ok(append([]string{"admin", "consumer", "create", "--actor", f.b, "-q"}, sp...)...)
	scopes := "message.send,message.read,receipt.write"
	f.ta = c.ok(append([]string{"admin", "token", "create", "--actor", f.a, "--consumer", f.ca, "--scope", scopes, "-q"}, sp...)...)
	f.tb = c.ok(append([]string{"admin", "token", "create", "--actor", f.b, "--consumer", f.cb, "--scope", scopes, "-q"}, sp...)...)
	for _, id := range []string{f.space, f.a, f.b, f.ca, f.cb} {
		if !domain.ValidID(id) {
			c.t.Fatalf("-q printed %q, not an ID", id)
		}
	}
	if !strings.HasPrefix(f.ta, "wpt_") || !strings.HasPrefix(f.tb, "wpt_") {
		c.t.Fatalf("token create -q printed %q / %q, not tokens", f.ta, f.tb)
	}
	return f
}

var requestIDLine = regexp.MustCompile(`request_id: (req_[0-9a-f]{32})`)

func TestCLIRoundTrip(t *testing.T) {
	c := newCLITest(t)
	f := c.setup()
	asA := []string{"--url", c.url, "--token", f.ta}
	asB := []string{"--url", c.url, "--token", f.tb}

	// A sends; the generated request ID is on stderr, the committed result on stdout.
	out, errOut, err := c.run("", append([]string{"send", "--to", f.b, "--subject", "report ready", "--text", "Three options."}, asA...)...)
	if err != nil {
		t.Fatalf("send: %v\n%s", err, errOut)
	}
	m := requestIDLine.FindStringSubmatch(errOut)
	if m == nil || !strings.Contains(out, "submission_state: committed") {
		t.Fatalf("send output:\n%s\nstderr:\n%s", out, errOut)
	}
	sendRID := m[1]
	msgID := regexp.MustCompile(`message_id:\s+(msg_\S+)`).FindStringSubmatch(out)[1]

	// B reads through its queue: the item is printed, saved in ~/.waypost/<consumer>.queue, acknowledged.
	out, errOut, err = c.run("", append([]string{"inbox", "--body"}, asB...)...)
	if err != nil {
		t.Fatalf("inbox: %v\n%s", err, errOut)
	}
	if !strings.Contains(out, msgID) || !strings.Contains(out, `subject="report ready"`) || !strings.Contains(out, "    Three options.") {
		t.Fatalf("inbox output:\n%s", out)
	}
	if !strings.Contains(errOut, "1 new item(s) saved and acknowledged as received") {
		t.Fatalf("inbox summary: %s", errOut)
	}
	if _, err := os.Stat(filepath.Join(c.home, ".waypost", f.cb+".queue")); err != nil {
		t.Fatalf("default queue file: %v", err)
	}
	// Nothing new the second time; the item is still pending.
	if out := c.ok(append([]string{"inbox"}, asB...)...); out != "" {
		t.Fatalf("second inbox printed:\n%s", out)
	}
	var pend inboxResult
	c.okJSON(&pend, append([]string{"inbox", "--pending"}, asB...)...)
	if len(pend.Items) != 1 || pend.Items[0].ResourceID != msgID || pend.Pending != 1 {
		t.Fatalf("pending: %+v", pend)
	}

	// B replies, text from a file.
	file := filepath.Join(t.TempDir(), "reply.txt")
	if err := os.WriteFile(file, []byte("Option 2, thanks.\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var reply domain.SendResult
	c.okJSON(&reply, append([]string{"send", "--to", f.a, "--reply-to", msgID, "--file", file, "--kind", "answer"}, asB...)...)
	// And a note read from standard input.
	out, errOut, err = c.run("from stdin", append([]string{"send", "--to", f.a, "--subject", "stdin", "-q"}, asB...)...)
	if err != nil || !strings.HasPrefix(out, "msg_") {
		t.Fatalf("send from stdin: %q %v %s", out, err, errOut)
	}
	noteID := strings.TrimSpace(out)

	// A reads: B's received receipt, the reply, the note; and marks them processed.
	var ra inboxResult
	c.okJSON(&ra, append([]string{"inbox", "--ack-processed"}, asA...)...)
	if len(ra.Items) != 3 || len(ra.Processed) != 3 || ra.Pending != 0 {
		t.Fatalf("A's inbox: %+v", ra)
	}
	var rec domain.ReceiptItemData
	if ra.Items[0].ItemType != domain.ItemReceipt || json.Unmarshal(ra.Items[0].Data, &rec) != nil || rec.Stage != domain.StageReceived ||
		rec.ConsumerID != f.cb || rec.ResourceID != msgID {
		t.Fatalf("first item is not B's received receipt: %+v", ra.Items[0])
	}
	if ra.Items[1].ResourceID != reply.MessageID || ra.Items[2].ResourceID != noteID {
		t.Fatalf("A's items: %+v", ra.Items)
	}
	var got domain.Message
	c.okJSON(&got, append([]string{"get", reply.MessageID}, asA...)...)
	if got.Body.Text != "Option 2, thanks.\n" || got.InReplyTo == nil || *got.InReplyTo != msgID || got.Kind != "answer" || got.ProducerID != f.b {
		t.Fatalf("reply: %+v", got)
	}
	var orig domain.Message
	c.okJSON(&orig, append([]string{"get", msgID}, asA...)...)
	if got.ThreadID != orig.ThreadID {
		t.Fatalf("the reply is in thread %s, the original in %s", got.ThreadID, orig.ThreadID)
	}
	if out := c.ok(append([]string{"get", noteID}, asA...)...); !strings.HasSuffix(out, "\n\nfrom stdin") {
		t.Fatalf("get (text):\n%s", out)
	}

	// status of A's first send, by the request ID printed before sending.
	var st domain.StatusResult
	c.okJSON(&st, append([]string{"status", "--request-id", sendRID}, asA...)...)
	if st.SubmissionState != domain.StateCommitted || st.ResourceID != msgID {
		t.Fatalf("status: %+v", st)
	}
	if out := c.ok(append([]string{"status", "--request-id", sendRID}, asA...)...); !strings.Contains(out, "submission_state: committed") ||
		!strings.Contains(out, `"resource_id": "`+msgID+`"`) {
		t.Fatalf("status (text):\n%s", out)
	}

	var d domain.DescribeResult
	c.okJSON(&d, append([]string{"describe"}, asB...)...)
	if d.ActorID != f.b || d.ConsumerID == nil || *d.ConsumerID != f.cb || d.SpaceID != f.space {
		t.Fatalf("describe: %+v", d)
	}
	if out := c.ok(append([]string{"describe"}, asB...)...); !strings.Contains(out, "consumer_id:") || !strings.Contains(out, f.cb) {
		t.Fatalf("describe (text):\n%s", out)
	}

	// Raw read and raw ack of B's pending item.
	var page domain.Page
	c.okJSON(&page, append([]string{"inbox", "--raw"}, asB...)...)
	// B's feed: A's message, then the receipts of A's acknowledgements of B's two messages.
	var kinds []string
	for _, it := range page.Items {
		kinds = append(kinds, string(it.ItemType))
	}
	if strings.Join(kinds, " ") != "message receipt receipt receipt receipt" || page.Items[0].ResourceID != msgID || page.CheckpointCursor == nil {
		t.Fatalf("raw page: %v %+v", kinds, page)
	}
	c.okJSON(&page, append([]string{"inbox", "--raw", "--cursor", page.NextCursor}, asB...)...)
	if len(page.Items) != 0 {
		t.Fatalf("raw page after the cursor: %+v", page)
	}
	item := pend.Items[0].ItemID
	if out := c.ok(append([]string{"ack", item, "--stage", "processed"}, asB...)...); !strings.Contains(out, item+"\tprocessed\t(changed)") {
		t.Fatalf("ack:\n%s", out)
	}
	if out := c.ok(append([]string{"ack", item, "--stage", "received"}, asB...)...); !strings.Contains(out, item+"\tprocessed\t(unchanged)") {
		t.Fatalf("repeated ack must not move the stage back:\n%s", out)
	}
}

// proxy forwards to target; the first POST /v0/messages is handled by first.
func proxy(t *testing.T, target string, first func(w http.ResponseWriter, r *http.Request, forward http.Handler)) (string, *atomic.Int32) {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	var posts atomic.Int32
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v0/messages" && posts.Add(1) == 1 {
			first(w, r, rp)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs.URL, &posts
}

func hangUp(t *testing.T, w http.ResponseWriter) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
}

// lostResponse forwards the request to the service and then drops the connection: the message is
// committed, the client never hears it.
func lostResponse(t *testing.T) func(w http.ResponseWriter, r *http.Request, forward http.Handler) {
	return func(w http.ResponseWriter, r *http.Request, forward http.Handler) {
		rec := httptest.NewRecorder()
		forward.ServeHTTP(rec, r)
		if rec.Code != http.StatusOK {
			t.Errorf("forwarded send: %d %s", rec.Code, rec.Body)
		}
		hangUp(t, w)
	}
}

func TestCLISendRetriesWithTheSameRequestID(t *testing.T) {
	for _, tc := range []struct {
		name     string
		first    func(t *testing.T) func(http.ResponseWriter, *http.Request, http.Handler)
		posts    int32
		retryMsg bool
	}{
		// The first attempt never reaches the service: status says NOT_FOUND, the retry commits.
		{"connection fails", func(t *testing.T) func(http.ResponseWriter, *http.Request, http.Handler) {
			return func(w http.ResponseWriter, r *http.Request, _ http.Handler) { hangUp(t, w) }
		}, 2, true},
		// The first attempt commits but its response is lost: status returns the committed result.
		{"response lost", lostResponse, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCLITest(t)
			f := c.setup()
			via, posts := proxy(t, c.url, tc.first(t))
			out, errOut, err := c.run("", "send", "--url", via, "--token", f.ta, "--to", f.b, "--text", "once", "--request-id", "req-cli-retry-1", "-q")
			if err != nil {
				t.Fatalf("send: %v\n%s", err, errOut)
			}
			if posts.Load() != tc.posts || strings.Contains(errOut, "retry 1/2") != tc.retryMsg {
				t.Fatalf("%d POSTs, stderr:\n%s", posts.Load(), errOut)
			}
			var page domain.Page
			c.okJSON(&page, "inbox", "--raw", "--url", c.url, "--token", f.tb)
			if len(page.Items) != 1 || page.Items[0].ResourceID != strings.TrimSpace(out) {
				t.Fatalf("B's feed after one send with retries: %+v (send printed %q)", page.Items, out)
			}
		})
	}
}

func TestCLISendPrintsRequestIDBeforeSending(t *testing.T) {
	c := newCLITest(t)
	f := c.setup()
	// Nothing listens at this URL: every attempt fails, yet the request ID was printed first.
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	_, errOut, err := c.run("", "send", "--url", dead.URL, "--token", f.ta, "--text", "x")
	m := requestIDLine.FindStringSubmatch(errOut)
	if err == nil || m == nil || !client.IsTransport(err) || exitCode(err) != 1 {
		t.Fatalf("err = %v, stderr:\n%s", err, errOut)
	}
	if !strings.Contains(err.Error(), "waypost status --request-id "+m[1]) || strings.Count(errOut, "retry ") != client.MaxSendRetries {
		t.Fatalf("err = %v, stderr:\n%s", err, errOut)
	}
}

func TestCLIUsageErrors(t *testing.T) {
	c := newCLITest(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"send", "--text", "x"}, "no token"},
		{[]string{"send", "--bogus"}, "unknown flag"},
		{[]string{"send", "--token", "t", "--text", "x", "--file", "f"}, "not both"},
		{[]string{"send", "--token", "t", "--reply-to", "msg_1", "--text", "x"}, "--to"},
		{[]string{"send", "--token", "t", "--text", "x", "--metadata", "[1]"}, "JSON object"},
		{[]string{"send", "--token", "t", "--text", "x", "--request-id", "bad id"}, "--request-id"},
		{[]string{"ack", "it_1", "--token", "t", "--stage", "done"}, "--stage"},
		{[]string{"ack", "--token", "t", "--stage", "received"}, "ITEM_ID"},
		{[]string{"get", "--token", "t"}, "MESSAGE_ID"},
		{[]string{"status", "--token", "t"}, "--request-id"},
		{[]string{"inbox", "--token", "t", "--cursor", "c"}, "--raw"},
		{[]string{"inbox", "--token", "t", "--raw", "--ack-processed"}, "--raw"},
		{[]string{"admin", "space", "create"}, "no admin secret"},
		{[]string{"admin", "actor", "create", "--admin-secret", "s"}, "no space"},
		{[]string{"admin", "token", "create", "--admin-secret", "s", "--space", "sp_1", "--actor", "act_1"}, "--scope"},
		{[]string{"admin", "token", "create", "--admin-secret", "s", "--space", "sp_1", "--actor", "act_1", "--scope", "message.read",
			"--expires-in", "1h", "--expires-at", "2030-01-01T00:00:00Z"}, "not both"},
		{[]string{"admin", "consumer", "update", "con_1", "--admin-secret", "s", "--space", "sp_1"}, "nothing to change"},
		{[]string{"admin", "grant", "revoke", "--admin-secret", "s", "--space", "sp_1"}, "GRANT_ID"},
	} {
		_, _, err := c.run("", tc.args...)
		if err == nil || exitCode(err) != 2 || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("waypost %s: err = %v (exit %d), want a usage error mentioning %q", strings.Join(tc.args, " "), err, exitCode(err), tc.want)
		}
	}
}

func TestCLIServiceErrors(t *testing.T) {
	c := newCLITest(t)
	f := c.setup()
	asA := []string{"--url", c.url, "--token", f.ta}
	check := func(err error, want string) {
		t.Helper()
		if err == nil || exitCode(err) != 1 || !strings.HasPrefix(err.Error(), want) {
			t.Fatalf("err = %v (exit %d), want %q", err, exitCode(err), want)
		}
	}
	_, _, err := c.run("", append([]string{"get", "msg_missing"}, asA...)...)
	check(err, "NOT_FOUND: no such message")
	_, _, err = c.run("", append([]string{"send", "--to", "act_missing", "--text", "x"}, asA...)...)
	check(err, "NOT_FOUND: ")
	// The same request ID with different content is a conflict, and is not retried.
	c.ok(append([]string{"send", "--to", f.b, "--text", "one", "--request-id", "req-conflict"}, asA...)...)
	_, errOut, err := c.run("", append([]string{"send", "--to", f.b, "--text", "two", "--request-id", "req-conflict"}, asA...)...)
	check(err, "IDEMPOTENCY_CONFLICT: ")
	if strings.Contains(errOut, "retry") {
		t.Fatalf("a conflict was retried: %s", errOut)
	}
	_, _, err = c.run("", "admin", "space", "get", f.space, "--url", c.url, "--admin-secret", "wrong-secret")
	check(err, "UNAUTHENTICATED: ")
	_, _, err = c.run("", "describe", "--url", c.url, "--token", "wpt_not-a-real-token-000000000000000000000000000")
	check(err, "UNAUTHENTICATED: ")
	// B's token cannot read as A's consumer.
	_, _, err = c.run("", "inbox", "--raw", "--consumer", f.ca, "--url", c.url, "--token", f.tb)
	check(err, "NOT_FOUND: ")
}

func TestCLIAdminLifecycle(t *testing.T) {
	c := newCLITest(t)
	f := c.setup()
	// The space from the environment this time.
	t.Setenv(envSpace, f.space)
	t.Setenv(envURL, c.url)
	t.Setenv(envAdminSecret, testAdminSecret)

	var sp domain.SpaceResult
	c.okJSON(&sp, "admin", "space", "get", f.space)
	if sp.SpaceID != f.space || !strings.HasPrefix(sp.SourceURI, "urn:uuid:") || sp.DefaultRecipientID == "" {
		t.Fatalf("space: %+v", sp)
	}
	if out := c.ok("admin", "space", "get", f.space); !strings.Contains(out, "source_uri:") ||
		!regexp.MustCompile(`rate_limits: +100 requests/s per credential, burst 300`).MatchString(out) {
		t.Fatalf("space get:\n%s", out)
	}
	if out := c.ok("admin", "space", "update", f.space, "--rate", "20", "--burst", "60"); !regexp.MustCompile(`rate_limits: +20 requests/s per credential, burst 60`).MatchString(out) {
		t.Fatalf("space update:\n%s", out)
	}
	if _, errOut, err := c.run("", "admin", "space", "update", f.space, "--rate", "20"); err == nil || !strings.Contains(err.Error()+errOut, "--rate and --burst") {
		t.Fatalf("space update without --burst: %v %s", err, errOut)
	}

	// B's queue has a cursor; a view change makes the next inbox resynchronize without showing old items.
	t.Setenv(envToken, f.tb)
	c.ok("send", "--token", f.ta, "--to", f.b, "--text", "before")
	if out := c.ok("inbox"); !strings.Contains(out, "message") {
		t.Fatalf("inbox: %s", out)
	}
	var con domain.ConsumerResult
	c.okJSON(&con, "admin", "consumer", "update", f.cb, "--producer", f.a, "--item-type", "message")
	if con.ViewRevision != 2 || len(con.Filter.ProducerIDs) != 1 || con.Filter.ItemTypes[0] != "message" {
		t.Fatalf("consumer update: %+v", con)
	}
	c.ok("send", "--token", f.ta, "--to", f.b, "--text", "after")
	out, errOut, err := c.run("", "inbox", "--body")
	if err != nil || !strings.Contains(errOut, "resynchronized") || strings.Count(out, " message ") != 1 || !strings.Contains(out, "after") {
		t.Fatalf("inbox after the view change: %v\n%s\n%s", err, out, errOut)
	}

	var col domain.CollectionResult
	c.okJSON(&col, "admin", "collection", "create", "--source-actor", f.a, "--scope", "notes of A", "--id", "notes")
	if col.CollectionID != "notes" || col.CurrentRevision != 0 || col.Scope != "notes of A" {
		t.Fatalf("collection: %+v", col)
	}
	var g domain.GrantResult
	c.okJSON(&g, "admin", "grant", "create", "--actor", f.b, "--permission", "memory.read", "--collection", "notes")
	if g.GrantID == "" || g.Permission != domain.PermMemoryRead {
		t.Fatalf("grant: %+v", g)
	}
	c.okJSON(&g, "admin", "grant", "revoke", g.GrantID)
	if !g.Revoked {
		t.Fatalf("grant revoke: %+v", g)
	}

	// Rotate A's token: the old secret stops working, the new one works, same token ID.
	var tok domain.TokenResult
	c.okJSON(&tok, "admin", "token", "create", "--actor", f.a, "--scope", "message.read", "--expires-in", "1h")
	if tok.Token == "" || tok.ExpiresAt == nil {
		t.Fatalf("token: %+v", tok)
	}
	newSecret := c.ok("admin", "token", "rotate", tok.TokenID, "-q")
	if _, _, err := c.run("", "describe", "--token", tok.Token); !client.IsCode(err, domain.CodeUnauthenticated) {
		t.Fatalf("old secret after rotate: %v", err)
	}
	c.ok("describe", "--token", newSecret)
	if out := c.ok("admin", "token", "revoke", tok.TokenID); !strings.Contains(out, "revoked:") {
		t.Fatalf("token revoke:\n%s", out)
	}
	if _, _, err := c.run("", "describe", "--token", newSecret); !client.IsCode(err, domain.CodeUnauthenticated) {
		t.Fatalf("revoked token: %v", err)
	}

	// Revoking B stops its token.
	if id := c.ok("admin", "actor", "revoke", f.b, "-q"); id != f.b {
		t.Fatalf("actor revoke -q printed %q", id)
	}
	if _, _, err := c.run("", "describe"); !client.IsCode(err, domain.CodeUnauthenticated) {
		t.Fatalf("token of a revoked actor: %v", err)
	}
}

func TestCLIAdminSecretFromDataDir(t *testing.T) {
	c := newCLITest(t)
	if err := os.MkdirAll("waypost-data", 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("waypost-data", "admin-secret"), []byte(testAdminSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := c.run("", "admin", "space", "create", "--url", c.url, "-q")
	if err != nil || !domain.ValidID(strings.TrimSpace(out)) {
		t.Fatalf("space create: %q %v %s", out, err, errOut)
	}
	if !strings.Contains(errOut, "using the admin secret in") || !strings.Contains(errOut, filepath.Join("waypost-data", "admin-secret")) {
		t.Fatalf("stderr does not say where the secret came from: %q", errOut)
	}
	if strings.Contains(out+errOut, testAdminSecret) {
		t.Fatal("the admin secret was printed")
	}
	// The environment wins over the file.
	t.Setenv(envAdminSecret, "wrong-secret")
	if _, _, err := c.run("", "admin", "space", "create", "--url", c.url); !client.IsCode(err, domain.CodeUnauthenticated) {
		t.Fatalf("with a wrong WAYPOST_ADMIN_SECRET: %v", err)
	}
}

// checkHelp checks that every runnable command under the named top-level commands has an example and a
// --help that shows it; it returns how many it checked.
func checkHelp(t *testing.T, names ...string) int {
	t.Helper()
	n := 0
	var walk func(cmd *cobra.Command)
	walk = func(cmd *cobra.Command) {
		if cmd.Runnable() {
			n++
			if cmd.Example == "" {
				t.Errorf("%q has no example", cmd.CommandPath())
			}
			root := newRoot()
			var out bytes.Buffer
			root.SetOut(&out)
			root.SetArgs(append(strings.Fields(strings.TrimPrefix(cmd.CommandPath(), "waypost ")), "--help"))
			if err := root.Execute(); err != nil || !strings.Contains(out.String(), "Examples:") {
				t.Errorf("%s --help: %v\n%s", cmd.CommandPath(), err, out.String())
			}
		}
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
	}
	for _, cmd := range newRoot().Commands() {
		if slices.Contains(names, cmd.Name()) {
			walk(cmd)
		}
	}
	return n
}

// TestCLIHelp checks that every client command has an example and a working --help.
func TestCLIHelp(t *testing.T) {
	if n := checkHelp(t, "admin", "send", "inbox", "ack", "status", "get", "describe"); n != 26 {
		t.Errorf("checked %d runnable client commands, want 26", n)
	}
}

func TestExitCode(t *testing.T) {
	if exitCode(nil) != 0 || exitCode(errors.New("x")) != 1 || exitCode(usagef("bad")) != 2 ||
		exitCode(&client.Error{Code: domain.CodeNotFound}) != 1 {
		t.Fatal("exit codes")
	}
	if exitCode(io.EOF) != 1 {
		t.Fatal("plain errors exit 1")
	}
}

// TestUnknownCommandIsUsageError: an unknown subcommand or flag at the top level exits 2, no arguments prints help.
func TestUnknownCommandIsUsageError(t *testing.T) {
	for _, args := range [][]string{{"nosuchcmd"}, {"--bogus-flag"}} {
		root := newRoot()
		root.SetArgs(args)
		root.SetOut(io.Discard)
		root.SetErr(io.Discard)
		if err := root.Execute(); exitCode(err) != 2 {
			t.Fatalf("%v: exit %d (%v), want 2", args, exitCode(err), err)
		}
	}
	root := newRoot()
	root.SetArgs(nil)
	var out strings.Builder
	root.SetOut(&out)
	if err := root.Execute(); err != nil || !strings.Contains(out.String(), "serve") {
		t.Fatalf("no arguments: %v\n%s", err, out.String())
	}
}
