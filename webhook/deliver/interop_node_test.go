package deliver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/waypost/waypost/webhook/deliver"
	"github.com/waypost/waypost/webhook/sign"
)

// TestStandardWebhooksJS verifies captured requests, byte for byte as received, with the official npm
// "standardwebhooks" library (interop/webhooks-js/verify.mjs): events dual-signed during a rotation,
// single-signed after it, and a verification challenge; and checks that it rejects tampered requests.
func TestStandardWebhooksJS(t *testing.T) {
	dir, err := filepath.Abs(filepath.Join("..", "..", "interop", "webhooks-js"))
	if err != nil {
		t.Fatal(err)
	}
	node, lookErr := exec.LookPath("node")
	if _, statErr := os.Stat(filepath.Join(dir, "node_modules", "standardwebhooks", "package.json")); lookErr != nil || statErr != nil {
		if os.Getenv("WAYPOST_REQUIRE_INTEROP") != "" {
			t.Fatalf("node or interop/webhooks-js/node_modules missing (run: npm ci --prefix interop/webhooks-js)")
		}
		t.Skip("node or interop/webhooks-js/node_modules missing; run npm ci --prefix interop/webhooks-js (WAYPOST_REQUIRE_INTEROP=1 makes this a failure)")
	}

	var rec capture
	srv := server(t, func(w http.ResponseWriter, r *http.Request) {
		got := rec.record(r)
		if r.Header.Get("Content-Type") == "application/json" {
			echoChallenge(w, got.Body)
		}
	})
	client := loopbackClient(t, 0)
	ev := testEvent(t)
	oldS, newS := secret(t, oldSecretText), secret(t, newSecretText)

	dual, _ := sign.NewSigner(sign.Keys{Current: oldS}.Rotate(newS, time.Now()))
	single, _ := sign.NewSigner(sign.Keys{Current: oldS}.Rotate(newS, time.Now().Add(-sign.MaxDualWindow)))
	for _, s := range []*sign.Signer{dual, single} {
		if out, err := deliver.Send(context.Background(), client, srv.URL, s, ev); err != nil || out.Class != deliver.Delivered {
			t.Fatalf("send: %+v %v", out, err)
		}
	}
	if err := deliver.Verify(context.Background(), client, srv.URL, newS); err != nil {
		t.Fatal(err)
	}
	reqs := rec.all()
	if len(reqs) != 3 {
		t.Fatalf("%d requests captured", len(reqs))
	}
	dualReq, singleReq, challengeReq := reqs[0], reqs[1], reqs[2]
	tampered := dualReq
	tampered.Body = bytes.Replace(dualReq.Body, []byte(`"visible_seq":"17"`), []byte(`"visible_seq":"18"`), 1)
	if bytes.Equal(tampered.Body, dualReq.Body) {
		t.Fatal("tampering did not change the body")
	}
	otherID := dualReq
	otherID.Header = dualReq.Header.Clone()
	otherID.Header.Set("webhook-id", "it_other")
	unrelated := sign.NewSecret().Reveal()

	cases := []struct {
		name     string
		secret   string
		req      captured
		wantOK   bool
		wantType string
	}{
		{"dual-signed, new secret", newSecretText, dualReq, true, "waypost.message.committed.v1"},
		{"dual-signed, old secret", oldSecretText, dualReq, true, "waypost.message.committed.v1"},
		{"dual-signed, unrelated secret", unrelated, dualReq, false, ""},
		{"after the window, new secret", newSecretText, singleReq, true, "waypost.message.committed.v1"},
		{"after the window, old secret", oldSecretText, singleReq, false, ""},
		{"challenge", newSecretText, challengeReq, true, "verification"},
		{"challenge, old secret", oldSecretText, challengeReq, false, ""},
		{"tampered body", newSecretText, tampered, false, ""},
		{"other webhook-id", newSecretText, otherID, false, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			h := tc.req.Header
			cmd := exec.CommandContext(ctx, node, "verify.mjs", tc.secret,
				h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature"))
			cmd.Dir = dir
			cmd.Stdin = bytes.NewReader(tc.req.Body)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			var res struct {
				OK    bool   `json:"ok"`
				Type  string `json:"type"`
				Error string `json:"error"`
			}
			if jerr := json.Unmarshal(out, &res); jerr != nil {
				t.Fatalf("verify.mjs output %q (%v), stderr %s", out, err, stderr.String())
			}
			exit := 0
			if ee, ok := err.(*exec.ExitError); ok {
				exit = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if tc.wantOK {
				if !res.OK || exit != 0 || res.Type != tc.wantType {
					t.Fatalf("rejected: %+v exit %d, stderr %s", res, exit, stderr.String())
				}
			} else if res.OK || exit != 1 || res.Error == "" {
				t.Fatalf("accepted (or crashed): %+v exit %d, stderr %s", res, exit, stderr.String())
			}
		})
	}
}
