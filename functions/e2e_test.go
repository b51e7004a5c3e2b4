package functions_test

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"

	"github.com/waypost/waypost/e2e/wire"
	"github.com/waypost/waypost/functions/config"
	"github.com/waypost/waypost/functions/internal/emutest"
	"github.com/waypost/waypost/internal/emulator"
	"github.com/waypost/waypost/internal/syncbuf"
	"github.com/waypost/waypost/store/dynamo/dynamotest"
	"github.com/waypost/waypost/store/s3blob/s3test"
)

func TestMain(m *testing.M) { s3test.Main(m) }

const adminSecret = "wpa_e2e-admin-secret-0123456789abcdefghijklmnopqrstuvwxyz"

// buildFunctions builds the named functions' bootstrap binaries for this machine, with the flags of
// scripts/build-functions, in one go build (which links them in parallel).
func buildFunctions(t *testing.T, names ...string) map[string]string {
	t.Helper()
	dir := t.TempDir()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to build the bootstraps with: %v", err)
	}
	built := filepath.Join(dir, "built")
	args := []string{"build", "-tags", "lambda.norpc,nethttpomithttp2", "-trimpath", "-gcflags=all=-l",
		"-gcflags=github.com/santhosh-tekuri/jsonschema/...=", "-gcflags=github.com/waypost/waypost/...=", "-ldflags", "-s -w", "-o", built + string(filepath.Separator)}
	for _, name := range names {
		args = append(args, "./"+name)
	}
	cmd := exec.Command(gobin, args...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building %q: %v\n%s", names, err, b)
	}
	out := map[string]string{}
	for _, name := range names {
		bin := filepath.Join(dir, name, "bootstrap")
		if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(built, name), bin); err != nil {
			t.Fatalf("building %s: %v", name, err)
		}
		out[name] = bin
	}
	return out
}

// lambdaFn is one function running under aws-lambda-rie.
type lambdaFn struct {
	name      string
	invokeURL string // invocation URL
	mu        *sync.Mutex
	logs      *syncbuf.Buffer
	riePID    int // the emulator's process; the bootstrap is its child, started at the first invocation
}

// envFor is the process environment of a function: the AWS SDK's settings for the emulators, and each
// variable config.VarsFor lists for the function that values has (nothing else, so a function reading a
// variable outside its list finds it unset), plus extra "NAME=value" entries.
func envFor(t *testing.T, function string, s3env s3test.Env, values map[string]string, extra ...string) []string {
	t.Helper()
	names, err := config.VarsFor(function)
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "TZ=UTC"}
	for k, v := range emutest.AWSEnv(s3env) {
		env = append(env, k+"="+v)
	}
	for _, n := range names {
		if v, ok := values[n]; ok {
			env = append(env, n+"="+v)
		}
	}
	return append(env, extra...)
}

// startFunction runs bootstrap under its own aws-lambda-rie (distinct runtime API and emulator addresses).
func startFunction(t *testing.T, rie, name, bootstrap string, env []string, invokeMu *sync.Mutex) *lambdaFn {
	t.Helper()
	apiAddr, rieAddr := emulator.FreeAddr(t), emulator.FreeAddr(t)
	cmd := exec.Command(rie, "--runtime-api-address", apiAddr, "--runtime-interface-emulator-address", rieAddr, bootstrap)
	cmd.Env = env
	cmd.Dir = filepath.Dir(bootstrap)
	logs := &syncbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting aws-lambda-rie for %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("%s logs:\n%s", name, logs.String())
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", rieAddr, 100*time.Millisecond)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("aws-lambda-rie for %s not listening on %s:\n%s", name, rieAddr, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return &lambdaFn{name: name, invokeURL: "http://" + rieAddr + "/2015-03-31/functions/function/invocations", mu: invokeMu, logs: logs,
		riePID: cmd.Process.Pid}
}

// cursorKey is the cursor key of the deployments under test.
const cursorKey = "e2e-cursor-key-0123456789abcdef0123456789"

// lambdaEnv is the emulated AWS of one Lambda test: aws-lambda-rie, a fresh DynamoDB table (minidyn, served
// by this process) and S3 bucket (versitygw), and the settings the test's functions share.
type lambdaEnv struct {
	rie           string
	s3            s3test.Env
	ddb           *dynamotest.Server
	table, bucket string
	// values are the config variables by name (envFor); a test adds its own before starting functions.
	values   map[string]string
	invokeMu sync.Mutex // one invocation at a time
}

// newLambdaEnv looks up the emulators (newLambdaEnv skips the test without them, or fails it under
// WAYPOST_REQUIRE_EMULATORS) and makes the table and the bucket; more adds to or overrides the settings.
func newLambdaEnv(t *testing.T, more map[string]string) *lambdaEnv {
	t.Helper()
	e := &lambdaEnv{rie: emutest.RIE(t), s3: s3test.Require(t), ddb: dynamotest.New(t)}
	e.table, e.bucket = e.ddb.Table(t), e.s3.Bucket(t)
	e.values = map[string]string{
		config.EnvTable: e.table, config.EnvBucket: e.bucket, config.EnvCursorKey: cursorKey,
		config.EnvDynamoDBEndpoint: e.ddb.URL, config.EnvS3Endpoint: e.s3.Endpoint, config.EnvVersion: "e2e",
		config.EnvAdminSecret: adminSecret,
	}
	maps.Copy(e.values, more)
	return e
}

// env is the process environment of function with the test's values (envFor), plus extra "NAME=value".
func (e *lambdaEnv) env(t *testing.T, function string, extra ...string) []string {
	return envFor(t, function, e.s3, e.values, extra...)
}

// start starts the named bootstraps of bins, each under its own aws-lambda-rie.
func (e *lambdaEnv) start(t *testing.T, bins map[string]string, names ...string) map[string]*lambdaFn {
	t.Helper()
	fns := map[string]*lambdaFn{}
	for _, name := range names {
		fns[name] = startFunction(t, e.rie, name, bins[name], e.env(t, name), &e.invokeMu)
	}
	return fns
}

// newParty creates, through the admin function, an actor called name in space with an inbox consumer and a
// token of scopes for both; rid names each request.
func newParty(t *testing.T, admin *lambdaFn, space, name string, rid func(string) string, scopes ...string) party {
	t.Helper()
	a, _ := okData[wire.Actor](t, admin, "POST", "/admin/v0/spaces/"+space+"/actors", adminSecret, map[string]any{"request_id": rid("actor"), "display_name": name})
	c, _ := okData[wire.Consumer](t, admin, "POST", "/admin/v0/spaces/"+space+"/consumers", adminSecret, map[string]any{"request_id": rid("con"), "actor_id": a.ActorID, "view": "inbox"})
	tk, _ := okData[wire.Token](t, admin, "POST", "/admin/v0/spaces/"+space+"/tokens", adminSecret, map[string]any{"request_id": rid("tok"),
		"actor_id": a.ActorID, "consumer_id": c.ConsumerID, "scopes": scopes})
	return party{actor: a.ActorID, consumer: c.ConsumerID, token: tk.Token}
}

// invoke sends one API Gateway HTTP API (payload 2.0) event to the function and returns the HTTP response it
// answers with (the body decoded from base64 when it is binary). A body that is not valid UTF-8 travels
// base64-encoded, as API Gateway sends binary media. Invocations are serialized across all functions:
// aws-lambda-rie crashes on parallel invokes.
func (f *lambdaFn) invoke(t *testing.T, method, target string, headers map[string]string, body []byte) (int, http.Header, []byte) {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	ev := events.APIGatewayV2HTTPRequest{
		Version: "2.0", RouteKey: "$default", RawPath: u.Path, RawQueryString: u.RawQuery,
		Headers: map[string]string{"host": "api.example.test", "user-agent": "waypost-e2e"},
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			AccountID: "123456789012", APIID: "e2e", DomainName: "api.example.test", Stage: "$default",
			RequestID: fmt.Sprintf("e2e-%d", time.Now().UnixNano()), RouteKey: "$default",
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: method, Path: u.Path, Protocol: "HTTP/1.1", SourceIP: "192.0.2.1", UserAgent: "waypost-e2e"},
		},
	}
	for k, v := range headers {
		ev.Headers[strings.ToLower(k)] = v
	}
	if body != nil {
		if utf8.Valid(body) {
			ev.Body = string(body)
		} else {
			ev.Body, ev.IsBase64Encoded = base64.StdEncoding.EncodeToString(body), true
		}
		ev.Headers["content-length"] = strconv.Itoa(len(body))
	}
	payload, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	raw := f.invokeRaw(t, payload)
	var out events.APIGatewayV2HTTPResponse
	if err := json.Unmarshal(raw, &out); err != nil || out.StatusCode == 0 {
		t.Fatalf("%s %s %s: not an HTTP API response (%v): %s", f.name, method, target, err, raw)
	}
	respBody := []byte(out.Body)
	if out.IsBase64Encoded {
		if respBody, err = base64.StdEncoding.DecodeString(out.Body); err != nil {
			t.Fatal(err)
		}
	}
	h := http.Header{}
	for k, v := range out.Headers {
		h.Set(k, v)
	}
	return out.StatusCode, h, respBody
}

// invokeErr sends one event payload to the function and returns its raw result (no testing.T: the gateway
// calls it off the test goroutine).
func (f *lambdaFn) invokeErr(payload []byte) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	resp, err := http.Post(f.invokeURL, "application/json", bytes.NewReader(payload))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

// invokeRaw sends one event payload to the function and returns its raw result.
func (f *lambdaFn) invokeRaw(t *testing.T, payload []byte) []byte {
	t.Helper()
	raw, err := f.invokeErr(payload)
	if err != nil {
		t.Fatalf("invoking %s: %v", f.name, err)
	}
	return raw
}

// call sends a request with an optional JSON body and decodes the RFC §5.2 envelope it answers with.
func (f *lambdaFn) call(t *testing.T, method, target, token string, body any) (int, wire.Envelope) {
	t.Helper()
	headers := map[string]string{}
	if token != "" {
		headers["authorization"] = "Bearer " + token
	}
	var b []byte
	if body != nil {
		var err error
		if b, err = json.Marshal(body); err != nil {
			t.Fatal(err)
		}
		headers["content-type"] = "application/json"
	}
	status, _, respBody := f.invoke(t, method, target, headers, b)
	var env wire.Envelope
	if err := json.Unmarshal(respBody, &env); err != nil {
		t.Fatalf("%s %s %s: status %d, body not an envelope: %s", f.name, method, target, status, respBody)
	}
	return status, env
}

func okData[T any](t *testing.T, f *lambdaFn, method, target, token string, body any) (T, wire.Envelope) {
	t.Helper()
	status, env := f.call(t, method, target, token, body)
	var v T
	if !env.OK || status != 200 {
		t.Fatalf("%s %s %s: status %d, envelope %+v", f.name, method, target, status, env.Error)
	}
	if err := json.Unmarshal(env.Data, &v); err != nil {
		t.Fatalf("%s %s: decoding %s: %v", method, target, env.Data, err)
	}
	return v, env
}

type party struct{ actor, consumer, token string }

// TestLambdaAsyncLoop runs the RFC §16.1 loop through the real bootstrap binaries of the admin and mailbox
// functions, each under aws-lambda-rie, with API Gateway HTTP API events, against DynamoDB (minidyn, served on
// loopback by this test process) and S3 (versitygw). Invocations are sequential.
func TestLambdaAsyncLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the Lambda bootstraps; skipped in -short mode")
	}
	e := newLambdaEnv(t, map[string]string{config.EnvInlineBodyMax: "512"})
	bins := buildFunctions(t, "admin", "mailbox")
	admin := e.start(t, bins, "admin")["admin"]
	// The mailbox function also gets the admin secret, which it must not even read.
	mailbox := startFunction(t, e.rie, "mailbox", bins["mailbox"], e.env(t, "mailbox", config.EnvAdminSecret+"="+adminSecret), &e.invokeMu)

	// The mailbox function never serves the control plane.
	if status, e := mailbox.call(t, "POST", "/admin/v0/spaces", adminSecret, map[string]any{"request_id": "nope"}); e.OK || status < 400 {
		t.Fatalf("mailbox served /admin/v0: status %d %+v", status, e)
	}

	// Control plane through the admin function.
	sp, _ := okData[wire.Space](t, admin, "POST", "/admin/v0/spaces", adminSecret, map[string]any{"request_id": "space-1", "display_name": "loop"})
	n := 0
	rid := func(p string) string { n++; return fmt.Sprintf("%s-%d", p, n) }
	scopes := []string{"message.send", "message.read", "receipt.write"}
	a, b := newParty(t, admin, sp.SpaceID, "agent A", rid, scopes...), newParty(t, admin, sp.SpaceID, "client B", rid, scopes...)

	d, _ := okData[struct {
		SpaceID string `json:"space_id"`
		ActorID string `json:"actor_id"`
	}](t, mailbox, "GET", "/v0/describe", a.token, nil)
	if d.SpaceID != sp.SpaceID || d.ActorID != a.actor {
		t.Fatalf("describe of A: %+v", d)
	}

	// A sends while B is offline; a retry with the same request_id returns the same result.
	sendBody := map[string]any{"request_id": "req_report_001", "recipient_ids": []string{b.actor}, "kind": "result",
		"subject": "研究资料已整理", "body": map[string]any{"text": "已整理三个方案，附件包含完整资料。"}}
	sent, _ := okData[wire.Send](t, mailbox, "POST", "/v0/messages", a.token, sendBody)
	if sent.VisibleSeq != "1" || sent.SubmissionState != "committed" {
		t.Fatalf("send: %+v", sent)
	}
	if again, _ := okData[wire.Send](t, mailbox, "POST", "/v0/messages", a.token, sendBody); again != sent {
		t.Fatalf("retry: %+v, first %+v", again, sent)
	}
	st, _ := okData[wire.Status](t, mailbox, "GET", "/v0/status?"+url.Values{"operation": {"message.send"}, "request_id": {"req_report_001"}}.Encode(), a.token, nil)
	if st.SubmissionState != "committed" {
		t.Fatalf("status: %+v", st)
	}

	// B reads later from a null cursor, saves the message, acks received with the checkpoint.
	read := func(p party, cursor *string) wire.Page {
		pg, _ := okData[wire.Page](t, mailbox, "POST", "/v0/inbox/read", p.token, map[string]any{"consumer_id": p.consumer, "cursor": cursor, "limit": 50})
		return pg
	}
	page := read(b, nil)
	if len(page.Items) != 1 || page.HasMore || page.Items[0].ResourceID != sent.ResourceID || page.Items[0].ProducerID != a.actor {
		t.Fatalf("B's first page: %+v", page)
	}
	msgItem := page.Items[0]
	msg, _ := okData[wire.Message](t, mailbox, "GET", "/v0/messages/"+sent.ResourceID, b.token, nil)
	if msg.Body.Text != "已整理三个方案，附件包含完整资料。" || msg.ThreadID != sent.ThreadID {
		t.Fatalf("message.get: %+v", msg)
	}
	ack := func(p party, id string, entries []map[string]string, cp *string) wire.Ack {
		ad, _ := okData[wire.Ack](t, mailbox, "POST", "/v0/inbox/ack", p.token, map[string]any{"request_id": id, "consumer_id": p.consumer,
			"items": entries, "checkpoint_cursor": cp})
		return ad
	}
	bAck := ack(b, "ack_001", []map[string]string{{"item_id": msgItem.ItemID, "stage": "received"}}, &page.NextCursor)
	if len(bAck.Receipts) != 1 || !bAck.Receipts[0].Changed || bAck.CheckpointCursor == nil || *bAck.CheckpointCursor != page.NextCursor {
		t.Fatalf("B's ack: %+v", bAck)
	}
	if rest := read(b, bAck.CheckpointCursor); len(rest.Items) != 0 {
		t.Fatalf("B from its checkpoint: %+v", rest.Items)
	}

	// B replies (in_reply_to, explicit recipient, thread inherited) with a body large enough to go to S3.
	long := strings.Repeat("收到，方案二最合适。", 60) // > WAYPOST_INLINE_BODY_MAX=512 bytes
	reply, _ := okData[wire.Send](t, mailbox, "POST", "/v0/messages", b.token, map[string]any{"request_id": "req_reply_001",
		"recipient_ids": []string{a.actor}, "in_reply_to": sent.ResourceID, "kind": "answer", "subject": "Re", "body": map[string]any{"text": long}})
	if reply.ThreadID != sent.ThreadID || reply.VisibleSeq != "3" {
		t.Fatalf("reply: %+v", reply)
	}

	// A finds B's receipt (seq 2) and the reply (seq 3), reads the reply's body back from S3, acks both.
	aPage := read(a, nil)
	if len(aPage.Items) != 2 || aPage.Items[0].ItemType != "receipt" || aPage.Items[0].VisibleSeq != "2" ||
		aPage.Items[1].ItemType != "message" || aPage.Items[1].ResourceID != reply.ResourceID || !slices.Equal(aPage.Items[1].RecipientIDs, []string{a.actor}) {
		t.Fatalf("A's inbox: %+v", aPage.Items)
	}
	rm, _ := okData[wire.Message](t, mailbox, "GET", "/v0/messages/"+reply.ResourceID, a.token, nil)
	if rm.Body.Text != long || rm.InReplyTo == nil || *rm.InReplyTo != sent.ResourceID {
		t.Fatalf("reply as read by A: in_reply_to %v, %d bytes of body", rm.InReplyTo, len(rm.Body.Text))
	}
	entries := []map[string]string{{"item_id": aPage.Items[0].ItemID, "stage": "processed"}, {"item_id": aPage.Items[1].ItemID, "stage": "processed"}}
	aAck := ack(a, "ack_a_001", entries, &aPage.NextCursor)
	if len(aAck.Receipts) != 2 || !aAck.Receipts[0].Changed || !aAck.Receipts[1].Changed {
		t.Fatalf("A's ack: %+v", aAck)
	}
	// Exactly one receipt reaches B (acking a receipt emits none); a replayed ack changes nothing.
	bNew := read(b, bAck.CheckpointCursor)
	if len(bNew.Items) != 1 || bNew.Items[0].ItemType != "receipt" || bNew.Items[0].VisibleSeq != "4" {
		t.Fatalf("B's new items: %+v", bNew.Items)
	}
	if again := ack(a, "ack_a_001", entries, &aPage.NextCursor); len(again.Receipts) != 2 || again.Receipts[0] != aAck.Receipts[0] {
		t.Fatalf("replayed ack: %+v, first %+v", again, aAck)
	}
	if bAfter := read(b, bAck.CheckpointCursor); len(bAfter.Items) != 1 {
		t.Fatalf("a replayed ack published more items: %+v", bAfter.Items)
	}

	// The functions log JSON lines, one per request, naming the function.
	for _, f := range []*lambdaFn{admin, mailbox} {
		requests := 0
		sc := bufio.NewScanner(strings.NewReader(f.logs.String()))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			if i := bytes.IndexByte(line, '{'); i >= 0 {
				var rec map[string]any
				if json.Unmarshal(line[i:], &rec) == nil && rec["msg"] == "request" && rec["function"] == f.name {
					requests++
				}
			}
		}
		if requests == 0 {
			t.Fatalf("%s: no JSON request log lines in:\n%s", f.name, f.logs.String())
		}
	}
}
