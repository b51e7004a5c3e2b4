package e2e

// Browser tests of the web app at /ui/ (issue 29): real headless Chromium (internal/browsertest) against the
// real `waypost serve` binary, with an agent on the other side speaking MCP. internal/browsertest fails a
// test on any console error, exception, CSP refusal, failed request, HTTP status >= 400, request to a host
// other than the server, or JavaScript dialog.

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/waypost/waypost/internal/browsertest"
)

var updateScreenshots = flag.Bool("update-screenshots", false, "write the web app's screenshots to docs/screenshots/")

// uiEnv is a server with a space, a person who reads in the browser and an agent who speaks MCP.
type uiEnv struct {
	s      *server
	adm    *admin
	person participant
	agent  participant
	mcp    *mcp.ClientSession // the agent's
	coll   string             // a collection the agent publishes and the person may read
}

var (
	personScopes = []string{"message.send", "message.read", "receipt.write", "blob.read", "blob.write", "memory.read"}
	agentScopes  = []string{"message.send", "message.read", "receipt.write", "blob.write", "blob.read", "memory.read", "memory.write"}
)

func newUIEnv(t *testing.T, serveArgs ...string) *uiEnv {
	t.Helper()
	s := startServer(t, serveArgs...)
	adm := newSpace(t, s, "ui")
	e := &uiEnv{s: s, adm: adm}
	e.person = participant{actor: adm.actor(t, "person")}
	e.person.consumer = adm.consumer(t, e.person.actor, "inbox")
	e.person.token = adm.token(t, e.person.actor, e.person.consumer, personScopes...).Token
	e.agent = participant{actor: adm.actor(t, "agent")}
	e.agent.consumer = adm.consumer(t, e.agent.actor, "inbox")
	e.agent.token = adm.token(t, e.agent.actor, e.agent.consumer, agentScopes...).Token
	coll, _ := ok[struct {
		CollectionID string `json:"collection_id"`
	}](t, s, request{Method: "POST", Path: adm.path("/collections"), Token: adminSecret,
		Body: map[string]any{"request_id": "coll-1", "source_actor_id": e.agent.actor, "scope": "the agent's notes"}})
	e.coll = coll.CollectionID
	ok[map[string]any](t, s, request{Method: "POST", Path: adm.path("/grants"), Token: adminSecret,
		Body: map[string]any{"request_id": "grant-1", "actor_id": e.person.actor, "permission": "memory.read", "collection_id": e.coll}})
	e.mcp = mcpSession(t, s.base, e.agent.token)
	return e
}

// mcpSession connects the official Go MCP client to the server's /mcp with a bearer token.
func mcpSession(t *testing.T, base, token string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "ui-test-agent", Version: "1"}, nil)
	s, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: base + "/mcp",
		HTTPClient: &http.Client{Transport: bearerRT{token: token, next: newHTTPClient().Transport}}}, nil)
	if err != nil {
		t.Fatalf("connecting to %s/mcp: %v", base, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

type bearerRT struct {
	token string
	next  http.RoundTripper
}

func (b bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// tool calls an MCP tool that must succeed and returns the envelope's data.
func tool(t *testing.T, s *mcp.ClientSession, name string, args map[string]any) map[string]any {
	t.Helper()
	res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	raw, _ := json.Marshal(res.StructuredContent)
	var env struct {
		OK   bool           `json:"ok"`
		Data map[string]any `json:"data"`
	}
	if err := json.Unmarshal(raw, &env); err != nil || res.IsError || !env.OK {
		t.Fatalf("%s: tool error or bad envelope: %s (%v)", name, raw, err)
	}
	return env.Data
}

// feedOf reads p's whole feed over MCP (waypost_inbox).
func feedOf(t *testing.T, s *mcp.ClientSession, consumer string) []map[string]any {
	t.Helper()
	var out []map[string]any
	var cursor any
	for {
		d := tool(t, s, "waypost_inbox", map[string]any{"consumer_id": consumer, "cursor": cursor, "limit": 200})
		for _, it := range d["items"].([]any) {
			out = append(out, it.(map[string]any))
		}
		cursor = d["next_cursor"]
		if d["has_more"] != true {
			return out
		}
	}
}

// upload prepares, uploads and seals a blob with a file name, as the agent.
func (e *uiEnv) upload(t *testing.T, name, contentType string, content []byte) string {
	t.Helper()
	sum := sha256.Sum256(content)
	prep, _ := ok[struct {
		BlobID   string `json:"blob_id"`
		UploadID string `json:"upload_id"`
	}](t, e.s, request{Method: "POST", Path: "/v0/blobs", Token: e.agent.token, Body: map[string]any{"request_id": "bp-" + hex.EncodeToString(sum[:8]),
		"content_type": contentType, "size_bytes": len(content), "sha256": hex.EncodeToString(sum[:]), "filename": name}})
	req, err := http.NewRequest("PUT", e.s.base+"/v0/uploads/"+prep.UploadID+"/content", bytes.NewReader(content))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Authorization", "Bearer "+e.agent.token)
	resp, err := e.s.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("upload: HTTP %d", resp.StatusCode)
	}
	ok[map[string]any](t, e.s, request{Method: "POST", Path: "/v0/blobs/commit", Token: e.agent.token,
		Body: map[string]any{"request_id": "bc-" + prep.UploadID, "upload_id": prep.UploadID}})
	return prep.BlobID
}

// tabTo presses Tab until the element matching sel has the focus (at most 40 times), checking on the way
// that every focused element shows a focus outline.
func tabTo(t *testing.T, b *browsertest.Browser, sel string) {
	t.Helper()
	for i := 0; i < 40; i++ {
		var state string
		do(t, b, chromedp.Evaluate(`(() => { const a = document.activeElement; if (!a || a === document.body || a.id === "main") return "none";
			if (a.matches(`+js(sel)+`)) return "there"; return getComputedStyle(a).outlineStyle === "none" ? "unmarked " + a.outerHTML.slice(0, 80) : "marked"; })()`, &state))
		switch {
		case state == "there":
			return
		case strings.HasPrefix(state, "unmarked"):
			t.Fatalf("the keyboard focus is not visible on %s", state)
		}
		do(t, b, chromedp.KeyEvent(kb.Tab))
	}
	t.Fatalf("Tab never reached %s", sel)
}

// blobBytes reads a blob's bytes over HTTP as the agent.
func (e *uiEnv) blobBytes(t *testing.T, blobID string) []byte {
	t.Helper()
	req, err := http.NewRequest("GET", e.s.base+"/v0/blobs/"+blobID+"/content", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+e.agent.token)
	resp, err := e.s.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("blob %s: HTTP %d, %v", blobID, resp.StatusCode, err)
	}
	return body
}

// do runs chromedp actions in the browser's tab and fails the test on an error.
func do(t *testing.T, b *browsertest.Browser, actions ...chromedp.Action) {
	t.Helper()
	if err := chromedp.Run(b.Ctx, actions...); err != nil {
		t.Fatalf("browser: %v", err)
	}
}

// js quotes s as a JavaScript string literal.
func js(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// waitJS waits (up to 15 s) until the JavaScript expression is true in the page.
func waitJS(t *testing.T, b *browsertest.Browser, what, expr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.Ctx, 15*time.Second)
	defer cancel()
	if err := chromedp.Run(ctx, chromedp.Poll(expr, nil, chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		var body string
		_ = chromedp.Run(b.Ctx, chromedp.Evaluate(`document.body.innerText`, &body))
		t.Fatalf("waiting for %s: %v\npage text:\n%s", what, err, body)
	}
}

// waitText waits until the page shows text.
func waitText(t *testing.T, b *browsertest.Browser, text string) {
	t.Helper()
	waitJS(t, b, fmt.Sprintf("the text %q", text), `document.body.innerText.includes(`+js(text)+`)`)
}

// clickButton clicks the first enabled button whose text is label (inside the CSS scope, "" for all).
func clickButton(t *testing.T, b *browsertest.Browser, scope, label string) {
	t.Helper()
	expr := `(() => { const b = [...document.querySelectorAll(` + js(strings.TrimSpace(scope+" button")) + `)].find((x) => x.textContent.trim() === ` + js(label) + ` && !x.disabled); if (!b) return false; b.click(); return true; })()`
	waitJS(t, b, "the button "+label, expr)
}

// setValue types into a form control, as a person would (input events fire).
func setValue(t *testing.T, b *browsertest.Browser, sel, value string) {
	t.Helper()
	do(t, b, chromedp.WaitVisible(sel, chromedp.ByQuery), chromedp.Focus(sel, chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelector(`+js(sel)+`).value = ""`, nil), chromedp.SendKeys(sel, value, chromedp.ByQuery))
}

// signIn opens the app and signs the person in with their token.
func (e *uiEnv) signIn(t *testing.T, b *browsertest.Browser) {
	t.Helper()
	do(t, b, chromedp.Navigate(e.s.base+"/ui/"))
	waitText(t, b, "Sign in with a token")
	setValue(t, b, `input[name=token]`, e.person.token)
	clickButton(t, b, "form", "Sign in")
	waitJS(t, b, "the inbox", `document.querySelector("h1") && document.querySelector("h1").textContent === "Inbox" && document.querySelector(".live").textContent.startsWith("Live")`)
}

// downloads makes the browser save downloads into a fresh directory.
func downloads(t *testing.T, b *browsertest.Browser) string {
	t.Helper()
	dir := t.TempDir()
	do(t, b, browser.SetDownloadBehavior(browser.SetDownloadBehaviorBehaviorAllow).WithDownloadPath(dir).WithEventsEnabled(true))
	return dir
}

// downloaded waits for a finished download named name in dir and returns its bytes.
func downloaded(t *testing.T, dir, name string) []byte {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err == nil {
			if _, partial := os.Stat(filepath.Join(dir, name+".crdownload")); partial != nil {
				return b
			}
		}
		if time.Now().After(deadline) {
			entries, _ := os.ReadDir(dir)
			var names []string
			for _, en := range entries {
				names = append(names, en.Name())
			}
			t.Fatalf("no download %q in %s (found %v)", name, dir, names)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// loseResponses makes the browser drop the responses of the first n requests whose URL matches pattern
// (after the server answered them: a lost answer), as a connection reset; later ones pass. It returns a
// function that reports how many were dropped.
func loseResponses(t *testing.T, b *browsertest.Browser, pattern string, n int) func() int {
	t.Helper()
	b.Expect("net::ERR_CONNECTION_RESET")
	var mu sync.Mutex
	dropped := 0
	chromedp.ListenTarget(b.Ctx, func(ev any) {
		e, isPaused := ev.(*fetch.EventRequestPaused)
		if !isPaused {
			return
		}
		go func() {
			c := chromedp.FromContext(b.Ctx)
			ctx := cdp.WithExecutor(b.Ctx, c.Target)
			mu.Lock()
			drop := dropped < n
			if drop {
				dropped++
			}
			mu.Unlock()
			if drop {
				_ = fetch.FailRequest(e.RequestID, network.ErrorReasonConnectionReset).Do(ctx)
			} else {
				_ = fetch.ContinueRequest(e.RequestID).Do(ctx)
			}
		}()
	})
	do(t, b, fetch.Enable().WithPatterns([]*fetch.RequestPattern{{URLPattern: pattern, RequestStage: fetch.RequestStageResponse}}))
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		return dropped
	}
}

// onlyDownload waits for the one file the browser saves into dir (whatever name it cleaned the file's
// name into) and returns its name.
func onlyDownload(t *testing.T, dir string) string {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var done []string
		for _, en := range entries {
			if !strings.HasSuffix(en.Name(), ".crdownload") {
				done = append(done, en.Name())
			}
		}
		if len(done) > 1 {
			t.Fatalf("downloads: %v, want one file", done)
		}
		if len(done) == 1 && len(entries) == 1 {
			return done[0]
		}
	}
	t.Fatalf("no download in %s", dir)
	return ""
}

// screenshot captures the viewport (sel == "") or one element; with -update-screenshots it is written to
// docs/screenshots/name.png.
func screenshot(t *testing.T, b *browsertest.Browser, name, sel string) {
	t.Helper()
	var buf []byte
	if sel == "" {
		do(t, b, chromedp.CaptureScreenshot(&buf))
	} else {
		do(t, b, chromedp.ScrollIntoView(sel, chromedp.ByQuery), chromedp.Screenshot(sel, &buf, chromedp.ByQuery))
	}
	img, err := png.Decode(bytes.NewReader(buf))
	if err != nil || img.Bounds().Dx() < 300 || img.Bounds().Dy() < 100 {
		t.Fatalf("screenshot %s: %v (%v)", name, err, func() any {
			if img == nil {
				return nil
			}
			return img.Bounds()
		}())
	}
	if *updateScreenshots {
		root, err := moduleRoot()
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(root, "docs", "screenshots")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".png"), buf, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestUIPersonInbox: the person signs in with their token; a message an agent sends over MCP appears
// without a reload; opened, it is marked received (the agent sees the receipt); its attachment downloads
// byte for byte; the reply reaches the agent over MCP; marked processed, the agent sees that receipt too; a
// double-clicked Send stores one message; a memory collection shows its items and tombstones, older
// revisions, and exports.
func TestUIPersonInbox(t *testing.T) {
	t.Parallel()
	e := newUIEnv(t)
	b := browsertest.New(t, browsertest.Options{})
	dl := downloads(t, b)
	e.signIn(t, b)
	waitText(t, b, "No messages yet")
	do(t, b, chromedp.Evaluate(`window.__samePage = "yes"`, nil))

	// The agent sends a message with a binary attachment over MCP; it appears live.
	content := make([]byte, 70_000)
	if _, err := rand.Read(content); err != nil {
		t.Fatal(err)
	}
	blob := e.upload(t, "figures.bin", "application/octet-stream", content)
	sent := tool(t, e.mcp, "waypost_send", map[string]any{"request_id": "agent-1", "recipient_ids": []string{e.person.actor},
		"subject": "Research notes ready", "body": map[string]any{"text": "Three options are summarized.\nWhich one should I prepare?"},
		"attachment_ids": []string{blob}, "metadata": map[string]any{"project": "atlas", "confidence": 0.8}})
	msgID := sent["message_id"].(string)
	waitText(t, b, "Research notes ready")
	var same string
	do(t, b, chromedp.Evaluate(`window.__samePage || "reloaded"`, &same))
	if same != "yes" {
		t.Fatalf("the page was reloaded (%q): the message must appear live", same)
	}
	waitJS(t, b, "an unread badge", `document.querySelector("li.item.message.unread .badge").textContent === "unread"`)
	screenshot(t, b, "inbox-desktop", "")

	// Open it with the keyboard alone (Tab to the link, Enter): subject, body, metadata, attachment;
	// opening marks it received.
	tabTo(t, b, `a[href="#/message/`+msgID+`"]`)
	do(t, b, chromedp.KeyEvent(kb.Enter))
	waitJS(t, b, "the message view", `document.querySelector("h1.subject") && document.querySelector("h1.subject").textContent === "Research notes ready"`)
	waitJS(t, b, "the body", `document.querySelector("pre.body").textContent === "Three options are summarized.\nWhich one should I prepare?"`)
	waitJS(t, b, "the metadata", `JSON.parse(document.querySelector("pre.metadata").textContent).project === "atlas"`)
	waitJS(t, b, "the received stage", `document.querySelector(".bar .badge").textContent === "received"`)
	waitText(t, b, "figures.bin")
	screenshot(t, b, "message-desktop", "")
	receipts := func(stage string) int {
		n := 0
		for _, it := range feedOf(t, e.mcp, e.agent.consumer) {
			d := it["data"].(map[string]any)
			if it["item_type"] == "receipt" && d["resource_id"] == msgID && d["stage"] == stage && d["consumer_id"] == e.person.consumer {
				n++
			}
		}
		return n
	}
	if n := receipts("received"); n != 1 {
		t.Fatalf("the agent sees %d received receipts of its message; want 1", n)
	}

	// Download the attachment: the same bytes.
	clickButton(t, b, "ul.attachments", "Download")
	if got := downloaded(t, dl, "figures.bin"); !bytes.Equal(got, content) {
		t.Fatalf("downloaded %d bytes that differ from the %d uploaded", len(got), len(content))
	}

	// Reply; the agent reads it over MCP.
	setValue(t, b, "form.reply textarea", "Option 2, please.")
	notes := []byte("my notes on option 2\n")
	notesPath := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(notesPath, notes, 0o600); err != nil {
		t.Fatal(err)
	}
	do(t, b, chromedp.SetUploadFiles(`form.reply input[type=file]`, []string{notesPath}, chromedp.ByQuery))
	clickButton(t, b, "form.reply", "Send reply")
	waitText(t, b, "Reply sent")
	var reply map[string]any
	for _, it := range feedOf(t, e.mcp, e.agent.consumer) {
		if it["item_type"] == "message" && it["data"].(map[string]any)["in_reply_to"] == msgID {
			reply = tool(t, e.mcp, "waypost_get_message", map[string]any{"message_id": it["resource_id"]})
		}
	}
	if reply == nil || reply["body"].(map[string]any)["text"] != "Option 2, please." || reply["thread_id"] != sent["thread_id"] ||
		reply["producer_id"] != e.person.actor {
		t.Fatalf("the agent's view of the reply: %v", reply)
	}
	if atts, _ := reply["attachment_ids"].([]any); len(atts) != 1 || !bytes.Equal(e.blobBytes(t, atts[0].(string)), notes) {
		t.Fatalf("the reply's attachments %v: want notes.txt's bytes", reply["attachment_ids"])
	}

	// Mark processed: the agent sees the receipt, and the person's consumer has a checkpoint.
	clickButton(t, b, "", "Mark processed")
	waitJS(t, b, "the processed stage", `document.querySelector(".bar .badge").textContent === "processed"`)
	if n := receipts("processed"); n != 1 {
		t.Fatalf("the agent sees %d processed receipts; want 1", n)
	}
	if pg := read(t, e.s, e.person, nil, 10); pg.CheckpointCursor == nil || *pg.CheckpointCursor == "" {
		t.Fatalf("no checkpoint stored for the person's consumer after the acknowledgements: %+v", pg)
	}

	// The agent answers the reply; the new message arrives live, and its view shows the thread.
	follow := tool(t, e.mcp, "waypost_send", map[string]any{"request_id": "agent-2", "recipient_ids": []string{e.person.actor},
		"in_reply_to": reply["message_id"], "subject": "Preparing option 2", "body": map[string]any{"text": "On it."}})
	do(t, b, chromedp.Navigate(e.s.base+"/ui/#/inbox"))
	waitText(t, b, "Preparing option 2")
	do(t, b, chromedp.Click(`a[href="#/message/`+follow["message_id"].(string)+`"]`, chromedp.ByQuery))
	waitJS(t, b, "the thread", `[...document.querySelectorAll("ol.thread li")].some((li) => li.textContent.startsWith("Research notes ready")) && `+
		`[...document.querySelectorAll("ol.thread li")].some((li) => li.textContent.startsWith("Preparing option 2 (this message)"))`)

	// Compose with a double click: one message.
	do(t, b, chromedp.Navigate(e.s.base+"/ui/#/compose"))
	waitText(t, b, "New message")
	do(t, b, chromedp.Click(`input[value="`+e.agent.actor+`"]`, chromedp.ByQuery))
	setValue(t, b, `input[name=subject]`, "Double click")
	setValue(t, b, `textarea[name=text]`, "Sent once, whatever the clicks.")
	do(t, b, chromedp.DoubleClick(`form button[type=submit]`, chromedp.ByQuery))
	waitText(t, b, "Sent: ")
	time.Sleep(300 * time.Millisecond) // room for a second send, were there one
	n := 0
	for _, it := range feedOf(t, e.mcp, e.agent.consumer) {
		if it["item_type"] == "message" && it["data"].(map[string]any)["subject"] == "Double click" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("a double-clicked Send stored %d messages; want 1", n)
	}

	// A lost answer: the first send commits but its response never reaches the page; pressing Send again
	// returns the same message instead of storing a second.
	lost := loseResponses(t, b, "*/v0/messages", 1)
	do(t, b, chromedp.Navigate(e.s.base+"/ui/#/inbox"), chromedp.Navigate(e.s.base+"/ui/#/compose"))
	waitText(t, b, "New message")
	do(t, b, chromedp.Click(`input[value="`+e.agent.actor+`"]`, chromedp.ByQuery))
	setValue(t, b, `input[name=subject]`, "Lost answer")
	setValue(t, b, `textarea[name=text]`, "Stored once although sent twice.")
	attachment := bytes.Repeat([]byte("row,value\n1,2\n"), 500)
	attachPath := filepath.Join(t.TempDir(), "table.csv")
	if err := os.WriteFile(attachPath, attachment, 0o600); err != nil {
		t.Fatal(err)
	}
	do(t, b, chromedp.SetUploadFiles(`input[type=file]`, []string{attachPath}, chromedp.ByQuery))
	clickButton(t, b, "form", "Send")
	waitText(t, b, "Press Send again: it is stored once, never twice.")
	if n := lost(); n != 1 {
		t.Fatalf("%d responses lost; want 1", n)
	}
	clickButton(t, b, "form", "Send")
	waitText(t, b, "Sent: ")
	var shown string
	do(t, b, chromedp.Text(`.form-status a`, &shown, chromedp.ByQuery))
	var ids []string
	for _, it := range feedOf(t, e.mcp, e.agent.consumer) {
		if it["item_type"] == "message" && it["data"].(map[string]any)["subject"] == "Lost answer" {
			ids = append(ids, it["resource_id"].(string))
		}
	}
	if len(ids) != 1 || ids[0] != shown {
		t.Fatalf("after a lost answer and a second press the agent has %v; want the one message the page shows, %s", ids, shown)
	}
	// Its attachment, uploaded from the browser once, is the file's bytes.
	got := tool(t, e.mcp, "waypost_get_message", map[string]any{"message_id": shown})
	atts, _ := got["attachment_ids"].([]any)
	if len(atts) != 1 {
		t.Fatalf("the message has attachments %v; want the one file", got["attachment_ids"])
	}
	info := tool(t, e.mcp, "waypost_blob_get", map[string]any{"blob_id": atts[0]})
	if info["filename"] != "table.csv" || info["content_type"] != "text/csv" {
		t.Errorf("attachment %v: want table.csv as text/csv", info)
	}
	if body := e.blobBytes(t, atts[0].(string)); !bytes.Equal(body, attachment) {
		t.Fatalf("the attachment as the agent reads it: %d bytes; want the %d bytes of the file", len(body), len(attachment))
	}

	// Memory: the agent publishes a snapshot, then deletes one item; the person browses both revisions.
	note := e.upload(t, "a.md", "text/markdown", []byte("# A\n"))
	other := e.upload(t, "b.md", "text/markdown", []byte("# B\n"))
	tool(t, e.mcp, "waypost_memory_publish", map[string]any{"request_id": "mem-1", "collection_id": e.coll, "expected_revision": 0, "mode": "snapshot",
		"items": []any{map[string]any{"item_id": "a", "blob_id": note, "path": "notes/a.md"}, map[string]any{"item_id": "b", "blob_id": other, "path": "notes/b.md"}}})
	tool(t, e.mcp, "waypost_memory_publish", map[string]any{"request_id": "mem-2", "collection_id": e.coll, "expected_revision": 1, "mode": "delta",
		"delete_ids": []string{"a"}})
	do(t, b, chromedp.Navigate(e.s.base+"/ui/#/memory"))
	waitJS(t, b, "the collection in the list", `!!document.querySelector('a[href="#/memory/`+e.coll+`"]')`)
	do(t, b, chromedp.Click(`a[href="#/memory/`+e.coll+`"]`, chromedp.ByQuery))
	rowOf := func(path string) string {
		return `[...document.querySelectorAll("tbody tr")].find((r) => r.querySelector(".path") && r.querySelector(".path").textContent === ` + js(path) + `)`
	}
	waitJS(t, b, "revision 2 with its tombstone", rowOf("notes/a.md")+`?.textContent.includes("tombstone (deleted in 2)") && `+rowOf("notes/b.md")+`?.textContent.includes("active")`)
	do(t, b, chromedp.SetValue(`select[name=revision]`, "1", chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelector("select[name=revision]").dispatchEvent(new Event("change"))`, nil))
	waitJS(t, b, "revision 1", `document.querySelector("caption").textContent.startsWith("Revision 1") && `+rowOf("notes/a.md")+`?.textContent.includes("active")`)
	clickButton(t, b, ".actions", "JSON")
	var export struct {
		Data struct {
			CollectionID string `json:"collection_id"`
			Revision     int    `json:"revision"`
			Items        []any  `json:"items"`
		} `json:"data"`
	}
	if err := json.Unmarshal(downloaded(t, dl, e.coll+"-r1.json"), &export); err != nil || export.Data.CollectionID != e.coll || export.Data.Revision != 1 || len(export.Data.Items) != 2 {
		t.Fatalf("export of revision 1: %+v (%v)", export, err)
	}
}

// TestUIConsole: the owner enters the admin secret once, opens a space, reads its stats by stage, creates a
// token (shown once) that works at once and revokes it (refused at once), sees a failed webhook delivery
// and redelivers it, and deletes the space after typing its ID.
func TestUIConsole(t *testing.T) {
	t.Parallel()
	rcv := goneReceiver(t)
	e := newUIEnv(t, "--allow-loopback-webhooks")
	e.failedDelivery(t, rcv)
	b := browsertest.New(t, browsertest.Options{})
	do(t, b, chromedp.Navigate(e.s.base+"/ui/#/console"))
	waitText(t, b, "Enter the admin secret")
	setValue(t, b, `input[name=secret]`, adminSecret)
	clickButton(t, b, "form", "Continue")
	var stored string
	do(t, b, chromedp.Evaluate(`JSON.stringify([localStorage.length, document.cookie, sessionStorage.getItem("waypost.admin.secret") ? "session" : "none"])`, &stored))
	if stored != `[0,"","session"]` {
		t.Fatalf("where the admin secret is kept: %s; want sessionStorage only", stored)
	}
	// The control plane's lists: the space created outside the browser is listed, and so are the OAuth hosts.
	waitJS(t, b, "the space in the list", `document.body.textContent.includes(`+js(e.adm.space.SpaceID)+`)`)
	waitJS(t, b, "the OAuth hosts section", `!!document.querySelector("#oauth-hosts")`)
	setValue(t, b, `input[name=space]`, e.adm.space.SpaceID)
	clickButton(t, b, "form", "Open")
	waitText(t, b, "Stats by stage")
	waitJS(t, b, "the person's actor and token, made outside the browser, listed", `document.querySelector("#tokens").textContent.includes(`+js(e.person.actor)+`)`)
	waitJS(t, b, "a label for every form control", `[...document.querySelectorAll("input, select, textarea")].every((el) => el.labels && el.labels.length > 0 && el.labels[0].textContent.trim() !== "")`)
	waitJS(t, b, "the person's consumer in the stats", `document.querySelector("#stats").textContent.includes(`+js(e.person.consumer)+`)`)
	waitJS(t, b, "the failed delivery", `document.querySelector("#webhooks").textContent.includes("410")`)
	screenshot(t, b, "console-stats-desktop", "#stats")
	screenshot(t, b, "console-deliveries-desktop", "#webhooks")

	// Redeliver: the receiver gets the event again.
	before := rcv.events()
	clickButton(t, b, "#webhooks", "Redeliver")
	waitText(t, b, "was sent again")
	deadline := time.Now().Add(10 * time.Second)
	for rcv.events() <= before {
		if time.Now().After(deadline) {
			t.Fatalf("no new delivery attempt after Redeliver")
		}
		time.Sleep(50 * time.Millisecond)
	}

	// Quotas.
	setValue(t, b, `input[name=max_items]`, "12345")
	clickButton(t, b, "", "Save quotas")
	waitText(t, b, "Quotas saved.")
	sp, _ := ok[struct {
		Quotas struct {
			MaxItems int64 `json:"max_items"`
		} `json:"quotas"`
	}](t, e.s, request{Method: "GET", Path: e.adm.path(""), Token: adminSecret})
	if sp.Quotas.MaxItems != 12345 {
		t.Fatalf("quotas after the console saved them: %+v", sp)
	}

	// An actor and its consumer.
	idIn := func(prefix string) string {
		var id string
		do(t, b, chromedp.Evaluate(`(document.body.innerText.match(/`+prefix+` ([A-Za-z0-9_-]+) created\./) || [])[1] || ""`, &id))
		return id
	}
	setValue(t, b, `input[name=actor_name]`, "helper")
	clickButton(t, b, "", "Create actor")
	waitText(t, b, "created.")
	actor := idIn("Actor")
	clickButton(t, b, "", "Create consumer")
	waitText(t, b, "Consumer ")
	waitJS(t, b, "the new consumer", `/Consumer [A-Za-z0-9_-]+ created\./.test(document.body.innerText)`)
	consumer := idIn("Consumer")
	if actor == "" || consumer == "" {
		t.Fatalf("actor %q, consumer %q from the page", actor, consumer)
	}

	// A token, shown once, that works at once; revoked, refused at once.
	setValue(t, b, `input[name=token_actor]`, actor)
	setValue(t, b, `input[name=token_consumer]`, consumer)
	clickButton(t, b, "#tokens", "Create token")
	waitJS(t, b, "the new token", `!!document.querySelector("#new-token")`)
	var token string
	do(t, b, chromedp.Value(`#new-token`, &token, chromedp.ByQuery))
	me, _ := ok[struct {
		ActorID    string   `json:"actor_id"`
		ConsumerID string   `json:"consumer_id"`
		Scopes     []string `json:"scopes"`
	}](t, e.s, request{Method: "GET", Path: "/v0/describe", Token: token})
	if me.ActorID != actor || me.ConsumerID != consumer || len(me.Scopes) != len(personScopes) {
		t.Fatalf("describe with the console's token: %+v", me)
	}
	clickButton(t, b, "#tokens tbody", "Revoke")
	clickButton(t, b, "#tokens tbody", "Press again to revoke")
	waitText(t, b, "revoked: it is refused from now on")
	fail(t, e.s, request{Method: "GET", Path: "/v0/describe", Token: token}, "UNAUTHENTICATED")
	ok[map[string]any](t, e.s, request{Method: "GET", Path: "/v0/describe", Token: e.person.token}) // others still work

	// Delete the space: the button stays disabled until the ID is typed.
	setValue(t, b, `input[name=confirm_space]`, "not-the-id")
	var disabled bool
	do(t, b, chromedp.Evaluate(`[...document.querySelectorAll("button")].find((x) => x.textContent === "Delete this space").disabled`, &disabled))
	if !disabled {
		t.Fatal("the delete button is enabled before the space ID is typed")
	}
	setValue(t, b, `input[name=confirm_space]`, e.adm.space.SpaceID)
	clickButton(t, b, "", "Delete this space")
	waitText(t, b, "The space is delet")
	fail(t, e.s, request{Method: "GET", Path: "/v0/describe", Token: e.person.token}, "UNAUTHENTICATED")
}

// receiver is a webhook target that answers the verification challenge and refuses every event with 410
// Gone, which makes each delivery a failure at once.
type receiver struct {
	url string
	n   chan struct{}
}

func goneReceiver(t *testing.T) *receiver {
	t.Helper()
	r := &receiver{n: make(chan struct{}, 1000)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		var ch struct {
			Type      string `json:"type"`
			Challenge string `json:"challenge"`
		}
		if json.Unmarshal(body, &ch) == nil && ch.Type == "verification" {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]string{"challenge": ch.Challenge})
			return
		}
		r.n <- struct{}{}
		w.WriteHeader(http.StatusGone)
	}))
	t.Cleanup(srv.Close)
	r.url = srv.URL + "/hook"
	return r
}

func (r *receiver) events() int { return len(r.n) }

// failedDelivery subscribes the person's consumer to r and sends a message whose delivery fails.
func (e *uiEnv) failedDelivery(t *testing.T, r *receiver) {
	t.Helper()
	tok := e.adm.token(t, e.person.actor, e.person.consumer, "message.read", "subscription.manage").Token
	ok[map[string]any](t, e.s, request{Method: "POST", Path: "/v0/subscriptions", Token: tok,
		Body: subscribeBody("ui-sub", e.person.consumer, r.url, newWebhookSecret(t))})
	tool(t, e.mcp, "waypost_send", map[string]any{"request_id": "hook-1", "recipient_ids": []string{e.person.actor},
		"subject": "Build finished", "body": map[string]any{"text": "All green."}})
	deadline := time.Now().Add(10 * time.Second)
	for {
		l, _ := ok[struct {
			Deliveries []map[string]any `json:"deliveries"`
		}](t, e.s, request{Method: "GET", Path: e.adm.path("/deliveries?state=failed"), Token: adminSecret})
		if len(l.Deliveries) == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no failed delivery: %+v", l)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestUIHostileContent: a message and memory items whose subject, body, metadata, file name and paths hold
// script tags, event-handler images, javascript: links and Markdown links run nothing (no dialog, no
// request to any host but the server: internal/browsertest fails the test on either) and show as the very
// text that was sent.
func TestUIHostileContent(t *testing.T) {
	t.Parallel()
	e := newUIEnv(t)
	b := browsertest.New(t, browsertest.Options{})
	dl := downloads(t, b)
	subject := `<script>alert("subject")</script><img src=x onerror="fetch('http://evil.example/s')">`
	body := "<img src=x onerror=alert(1)>\n[click me](javascript:alert(2))\n<a href=\"javascript:alert(3)\">link</a>\n" +
		"<script>fetch(\"http://evil.example/b\")</script>\n[docs](http://evil.example/md) ![pic](http://evil.example/p.png)\n<iframe src=\"javascript:alert(4)\"></iframe>"
	metadata := map[string]any{"<script>alert(5)</script>": "<img src=x onerror=alert(6)>", "link": "javascript:alert(7)", "md": "[x](http://evil.example/m)"}
	filename := `<img src=x onerror=alert(8)>.html`
	page := []byte(`<script>alert(9)</script><img src=x onerror=alert(10)>`)
	blob := e.upload(t, filename, "text/html", page)
	sent := tool(t, e.mcp, "waypost_send", map[string]any{"request_id": "evil-1", "recipient_ids": []string{e.person.actor},
		"subject": subject, "body": map[string]any{"text": body}, "metadata": metadata, "attachment_ids": []string{blob}})
	msgID := sent["message_id"].(string)
	paths := []string{`<script>alert(11)<` + "/" + `script>.md`, `<img src=x onerror=alert(12)>.md`, `[x](javascript:alert(13)).md`}
	var items []any
	for i, p := range paths {
		id := e.upload(t, fmt.Sprintf("m%d.md", i), "text/markdown", []byte(p))
		items = append(items, map[string]any{"item_id": fmt.Sprintf("i%d", i), "blob_id": id, "path": p,
			"metadata": map[string]any{"note": "<img src=x onerror=alert(14)>"}})
	}
	tool(t, e.mcp, "waypost_memory_publish", map[string]any{"request_id": "evil-mem-1", "collection_id": e.coll, "expected_revision": 0, "mode": "snapshot", "items": items})
	tool(t, e.mcp, "waypost_memory_publish", map[string]any{"request_id": "evil-mem-2", "collection_id": e.coll, "expected_revision": 1, "mode": "delta", "delete_ids": []string{"i2"}})

	inert := `document.querySelectorAll("main script, main img, main iframe, main object, main embed, main svg").length === 0 && ` +
		`[...document.querySelectorAll("a[href]")].every((a) => a.getAttribute("href").startsWith("#/"))`
	e.signIn(t, b)
	waitJS(t, b, "the subject as text in the inbox", `[...document.querySelectorAll("li.item .subject")].some((s) => s.textContent === `+js(subject)+`)`)
	waitJS(t, b, "nothing live in the inbox", inert)
	do(t, b, chromedp.Click(`a[href="#/message/`+msgID+`"]`, chromedp.ByQuery))
	waitJS(t, b, "the subject as text", `document.querySelector("h1.subject")?.textContent === `+js(subject))
	waitJS(t, b, "the body as text", `document.querySelector("pre.body").textContent === `+js(body))
	mj, _ := json.Marshal(metadata)
	waitJS(t, b, "the metadata as text", `JSON.stringify(JSON.parse(document.querySelector("pre.metadata").textContent)) === JSON.stringify(`+string(mj)+`)`)
	waitJS(t, b, "the file name as text", `document.querySelector(".filename")?.textContent === `+js(filename))
	waitJS(t, b, "nothing live in the message", inert)
	clickButton(t, b, "ul.attachments", "Download")
	waitText(t, b, "Saved (")
	if got := downloaded(t, dl, onlyDownload(t, dl)); !bytes.Equal(got, page) {
		t.Fatalf("the downloaded page differs: %q", got)
	}

	do(t, b, chromedp.Navigate(e.s.base+"/ui/#/memory/"+e.coll))
	for _, p := range paths {
		waitJS(t, b, "the path "+p+" as text", `[...document.querySelectorAll(".path")].some((s) => s.textContent === `+js(p)+`)`)
	}
	waitText(t, b, "tombstone (deleted in 2)")
	waitJS(t, b, "nothing live in the collection", inert)
	time.Sleep(500 * time.Millisecond) // time for an injected handler to fire, were there one
	if d := b.Dialogs(); len(d) > 0 {
		t.Fatalf("dialogs opened: %v", d)
	}
	for _, u := range b.Requests() {
		if !strings.HasPrefix(u, e.s.base+"/") && !strings.HasPrefix(u, "blob:"+e.s.base+"/") {
			t.Errorf("the page requested %s", u)
		}
	}
}

// TestUIPhone: at a phone's width (390 CSS pixels, touch) the inbox, a message and the console fit the
// screen without sideways scrolling, and times show in the viewer's own zone; the screenshots in docs/screenshots come from here and TestUIConsole.
func TestUIPhone(t *testing.T) {
	t.Parallel()
	rcv := goneReceiver(t)
	e := newUIEnv(t, "--allow-loopback-webhooks")
	e.failedDelivery(t, rcv)
	long := tool(t, e.mcp, "waypost_send", map[string]any{"request_id": "phone-1", "recipient_ids": []string{e.person.actor},
		"subject":  "Deployment report for the staging cluster, with a rather long subject line",
		"body":     map[string]any{"text": "All 14 services are up. A_very_long_unbroken_identifier_that_must_wrap_rather_than_push_the_page_sideways_0123456789."},
		"metadata": map[string]any{"run": "https://ci.example/runs/1234567890/very/long/path/that/should/wrap"}})
	b := browsertest.New(t, browsertest.Options{Width: 390, Height: 844, Mobile: true})
	// The viewer is in India (UTC+05:30, no daylight saving time): times show in that zone.
	do(t, b, emulation.SetTimezoneOverride("Asia/Kolkata"), emulation.SetLocaleOverride().WithLocale("en-US"))
	fits := `document.documentElement.scrollWidth <= window.innerWidth`
	e.signIn(t, b)
	waitText(t, b, "Deployment report")
	waitJS(t, b, "the inbox fits the phone", fits)
	committed, err := time.Parse(time.RFC3339Nano, long["committed_at"].(string))
	if err != nil {
		t.Fatal(err)
	}
	local := committed.In(time.FixedZone("IST", 5*3600+1800)).Format("Jan 2, 2006, 3:04 PM")
	waitJS(t, b, "the time in the viewer's zone ("+local+")", `[...document.querySelectorAll("li.item time")].some((el) => el.textContent.replace(/\s/g, " ") === `+js(local)+`)`)
	screenshot(t, b, "inbox-phone", "")
	do(t, b, chromedp.Click(`a[href="#/message/`+long["message_id"].(string)+`"]`, chromedp.ByQuery))
	waitText(t, b, "All 14 services are up")
	waitJS(t, b, "the message fits the phone", fits)
	screenshot(t, b, "message-phone", "")

	do(t, b, chromedp.Navigate(e.s.base+"/ui/#/console"))
	setValue(t, b, `input[name=secret]`, adminSecret)
	clickButton(t, b, "form", "Continue")
	do(t, b, chromedp.Navigate(e.s.base+"/ui/#/console/"+e.adm.space.SpaceID))
	waitText(t, b, "Stats by stage")
	waitJS(t, b, "the failed delivery", `document.querySelector("#webhooks").textContent.includes("410")`)
	waitJS(t, b, "the console fits the phone", fits)
	screenshot(t, b, "console-stats-phone", "#stats")
	screenshot(t, b, "console-deliveries-phone", "#webhooks")
}

// TestUIErrorStates: the page says what happened and what to do when the token is rate limited (with the
// wait from Retry-After, then works again), revoked (sign in again) or the server is gone.
func TestUIErrorStates(t *testing.T) {
	t.Parallel()
	e := newUIEnv(t)
	b := browsertest.New(t, browsertest.Options{})
	b.Expect("HTTP 429")
	b.Expect("HTTP 401")
	b.Expect("ERR_CONNECTION_REFUSED")
	e.signIn(t, b)
	waitText(t, b, "No messages yet")

	// 429: the credential's bucket is kept empty while the page asks; it says how long to wait.
	e.adm.rateLimits(t, 1, 1)
	stop := make(chan struct{})
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		for {
			select {
			case <-stop:
				return
			default:
			}
			_, _ = e.s.roundTrip(context.Background(), request{Method: "GET", Path: "/v0/describe", Token: e.person.token})
			time.Sleep(20 * time.Millisecond)
		}
	}()
	do(t, b, chromedp.Navigate(e.s.base+"/ui/#/memory/"+e.coll))
	waitText(t, b, "Too many requests.")
	waitText(t, b, "Wait 1 s and try again.")
	close(stop)
	<-drained
	time.Sleep(1500 * time.Millisecond)
	clickButton(t, b, "main", "Try again")
	waitText(t, b, "This collection has no revision yet.")
	e.adm.rateLimits(t, 100, 300)

	// 401: the owner revokes the token; the next call signs the person out and says why.
	tok, _ := ok[struct {
		TokenID string `json:"token_id"`
		Token   string `json:"token"`
	}](t, e.s, request{Method: "POST", Path: e.adm.path("/tokens"), Token: adminSecret, Body: map[string]any{"request_id": "tok-401",
		"actor_id": e.person.actor, "consumer_id": e.person.consumer, "scopes": personScopes}})
	do(t, b, chromedp.Navigate(e.s.base+"/ui/#/inbox"), chromedp.Evaluate(`localStorage.clear()`, nil), chromedp.Reload())
	setValue(t, b, `input[name=token]`, tok.Token)
	clickButton(t, b, "form", "Sign in")
	waitText(t, b, "No messages yet")
	ok[map[string]any](t, e.s, request{Method: "POST", Path: e.adm.path("/tokens/" + tok.TokenID + "/revoke"), Token: adminSecret, Body: map[string]any{}})
	do(t, b, chromedp.Navigate(e.s.base+"/ui/#/memory/"+e.coll))
	waitText(t, b, "Your token was refused: it is wrong, expired or revoked.")
	waitText(t, b, "Sign in again with a valid token.")
	waitText(t, b, "Sign in with a token")
	var kept string
	do(t, b, chromedp.Evaluate(`localStorage.getItem("waypost.person.token") || "gone"`, &kept))
	if kept != "gone" {
		t.Fatal("the refused token is still kept by the browser")
	}

	// The server is gone: signing in says so.
	e.s.stop()
	setValue(t, b, `input[name=token]`, e.person.token)
	clickButton(t, b, "form", "Sign in")
	waitText(t, b, "The Waypost server could not be reached.")
}

// TestUIOAuthSignIn: a person without a token signs in through the server's own OAuth authorization server:
// the app registers itself, the owner approves on the consent page (admin secret, the person's actor and
// consumer), and the app lands in the person's inbox holding an ordinary token; the code never stays in the
// address bar and nothing but the token is kept.
func TestUIOAuthSignIn(t *testing.T) {
	t.Parallel()
	e := newUIEnv(t)
	tool(t, e.mcp, "waypost_send", map[string]any{"request_id": "oauth-ui-1", "recipient_ids": []string{e.person.actor},
		"subject": "for the OAuth sign-in", "body": map[string]any{"text": "hello"}})
	b := browsertest.New(t, browsertest.Options{})
	do(t, b, chromedp.Navigate(e.s.base+"/ui/"))
	waitText(t, b, "Sign in with the owner's approval")
	do(t, b, chromedp.Click("#oauth-sign-in", chromedp.ByID))
	// The consent page: the owner signs in and chooses the person's actor and consumer.
	do(t, b, chromedp.WaitVisible("#secret", chromedp.ByID), chromedp.SendKeys("#secret", adminSecret, chromedp.ByID),
		chromedp.Click("#sign-in", chromedp.ByID), chromedp.WaitVisible("#approve", chromedp.ByID))
	waitText(t, b, "Waypost web app")
	do(t, b, chromedp.SetValue("#actor", e.person.actor, chromedp.ByID), chromedp.SetValue("#consumer", e.person.consumer, chromedp.ByID),
		chromedp.Click("#approve", chromedp.ByID))
	// The approval redirects back to the app (a navigation): wait for the app's page before reading it.
	do(t, b, chromedp.WaitVisible(`.items`, chromedp.ByQuery))
	waitText(t, b, "for the OAuth sign-in")
	var state string
	do(t, b, chromedp.Evaluate(`JSON.stringify([location.search, (localStorage.getItem("waypost.person.token") || "").slice(0, 4),
		sessionStorage.getItem("waypost.oauth.pending")])`, &state))
	if state != `["","wpt_",null]` {
		t.Fatalf("after the OAuth sign-in: [query, token prefix, pending] = %s; want no code in the address, a token, nothing pending", state)
	}
	// The token is the person's, listed with the app's OAuth client.
	var tok string
	do(t, b, chromedp.Evaluate(`localStorage.getItem("waypost.person.token")`, &tok))
	me, _ := ok[struct {
		ActorID    string `json:"actor_id"`
		ConsumerID string `json:"consumer_id"`
	}](t, e.s, request{Method: "GET", Path: "/v0/describe", Token: tok})
	if me.ActorID != e.person.actor || me.ConsumerID != e.person.consumer {
		t.Fatalf("the OAuth token acts as %+v", me)
	}
	list, _ := ok[struct {
		Tokens []struct {
			ActorID       string `json:"actor_id"`
			OAuthClientID string `json:"oauth_client_id"`
		} `json:"tokens"`
	}](t, e.s, request{Method: "GET", Path: e.adm.path("/tokens"), Token: adminSecret})
	held := 0
	for _, tk := range list.Tokens {
		if tk.OAuthClientID != "" && tk.ActorID == e.person.actor {
			held++
		}
	}
	if held != 1 {
		t.Fatalf("%d OAuth tokens of the person listed, want 1: %+v", held, list.Tokens)
	}
}
