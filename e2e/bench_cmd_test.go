package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestBenchCommand runs `waypost bench` briefly against a real server: it must set up its own space through
// the control plane, commit sends, read pages, read and acknowledge pages, and report no errors. (It checks
// the report, not timings.)
func TestBenchCommand(t *testing.T) {
	s := startServer(t)
	cmd := exec.Command(binPath, "bench", "--url", s.base, "--clients", "4", "--duration", "1s", "--read-duration", "1s", "--ack-duration", "2s", "--ack-clients", "2", "--read-page", "10")
	cmd.Env = append(os.Environ(), "WAYPOST_ADMIN_SECRET="+adminSecret)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("waypost bench: %v\n%s", err, out)
	}
	for _, re := range []string{
		`message\.send: [1-9][0-9]* committed in [0-9.]+s = [0-9.]+ sends/s; latency p50 [0-9.]+ms p90 [0-9.]+ms p99 [0-9.]+ms max [0-9.]+ms; errors: none`,
		`load generator: [0-9]+\.[0-9] µs of CPU a committed send \(this process, user\+system, send phase\)`,
		`inbox\.read\(limit 10\): [1-9][0-9]* pages \((10\.0|[0-9]\.[0-9]) items/page\) in [0-9.]+s = [0-9.]+ pages/s \([0-9.]+ items/s\); latency p50 [0-9.]+ms p99 [0-9.]+ms max [0-9.]+ms; errors: none`,
		`by 2 consumers for 2s`,
		`inbox read\+ack\(limit 10\): [1-9][0-9]* items acknowledged in [1-9][0-9]* pages in [0-9.]+s = [0-9.]+ items/s; read\+ack latency p50 [0-9.]+ms p99 [0-9.]+ms max [0-9.]+ms; errors: none`,
		`read\+ack round trips: inbox\.read p50 [0-9.]+ms p90 [0-9.]+ms, inbox\.ack p50 [0-9.]+ms p90 [0-9.]+ms`,
	} {
		if !regexp.MustCompile(re).Match(out) {
			t.Errorf("the report lacks /%s/:\n%s", re, out)
		}
	}

	// Without the admin secret, and against a non-loopback URL, it refuses to start.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "--url", s.base, "--duration", "1s"}, "the admin secret is required"},
		{[]string{"bench", "--url", "http://192.0.2.1:8787", "--admin-secret", adminSecret, "--duration", "1s"}, "is not a loopback address"},
	} {
		cmd := exec.Command(binPath, tc.args...)
		cmd.Env = append(os.Environ(), "WAYPOST_ADMIN_SECRET=")
		if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("waypost %v: err %v, want a refusal saying %q:\n%s", tc.args, err, tc.want, out)
		}
	}
}

// TestServeRecordsProfileAndTrace: `waypost serve --cpuprofile P --trace T` writes a CPU profile and an
// execution trace of the whole run, closed at a clean stop, that go tool pprof and go tool trace read (the
// trace's scheduling-latency profile is where docs/benchmarks.md looks for what a send waits on).
func TestServeRecordsProfileAndTrace(t *testing.T) {
	dir := t.TempDir()
	prof, tr := filepath.Join(dir, "cpu.prof"), filepath.Join(dir, "exec.trace")
	s := startServer(t, "--cpuprofile", prof, "--trace", tr)
	cmd := exec.Command(binPath, "bench", "--url", s.base, "--clients", "2", "--duration", "1s", "--read-duration", "0", "--ack-duration", "0")
	cmd.Env = append(os.Environ(), "WAYPOST_ADMIN_SECRET="+adminSecret)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("waypost bench: %v\n%s", err, out)
	}
	s.stop()
	for _, args := range [][]string{
		{"tool", "pprof", "-top", prof},
		{"tool", "trace", "-pprof=sched", tr},
	} {
		out, err := exec.Command("go", args...).CombinedOutput()
		if err != nil || len(out) == 0 {
			t.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}
