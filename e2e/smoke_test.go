package e2e

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestSmokeCommand runs `waypost smoke` against `waypost serve`: every step passes and prints its latency,
// the run ends with the count of steps, and the tokens it created are revoked.
func TestSmokeCommand(t *testing.T) {
	s := startServer(t)
	cmd := exec.Command(binPath, "smoke", "--url", s.base, "--blob-bytes", "300000", "--wait-timeout", "5s")
	cmd.Env = append(os.Environ(), "WAYPOST_ADMIN_SECRET="+adminSecret)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("waypost smoke: %v\n%s", err, out)
	}
	text := string(out)
	for _, step := range []string{"admin: space", "describe", "16.1: A sends to B", "16.1: B acks received with its checkpoint",
		"16.1: A reads the receipt and the reply", "blob: upload 300000 bytes", "blob: download and check sha256",
		"memory: B reads it", "feed.wait: B waits, A sends", "cleanup: revoke tokens and actors"} {
		if !regexp.MustCompile(`(?m)^  ok    ` + regexp.QuoteMeta(step) + `.* ms`).MatchString(text) {
			t.Errorf("no passed step %q in:\n%s", step, text)
		}
	}
	if !regexp.MustCompile(`(?m)^smoke: \d+ steps passed in `).MatchString(text) || strings.Contains(text, "FAIL") {
		t.Fatalf("summary:\n%s", text)
	}
	if !strings.Contains(text, "upload to the service") {
		t.Errorf("the embedded server's upload_url is its own route:\n%s", text)
	}
}

// A failing deployment makes `waypost smoke` exit 1 at the first failed step: here the admin secret is wrong.
func TestSmokeCommandFails(t *testing.T) {
	s := startServer(t)
	cmd := exec.Command(binPath, "smoke", "--url", s.base)
	cmd.Env = append(os.Environ(), "WAYPOST_ADMIN_SECRET=wpa_wrong-secret-0123456789")
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("waypost smoke with a wrong secret: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "  FAIL  admin: space") || !strings.Contains(string(out), "UNAUTHENTICATED") {
		t.Fatalf("output:\n%s", out)
	}
}
