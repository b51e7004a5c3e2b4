package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/waypost/waypost/internal/syncbuf"
)

// TestIssue13_ReadmeOpeningStatesPrerequisites (issue 13 item 17): README.md starts a new user with exactly
// two commands, `go run ./cmd/waypost serve` and `scripts/test`, and states before them what they need: Go
// 1.26, Node 20+ with npm, about 4 GB of disk, and that the walk-through assumes port 8787 (--addr otherwise).
func TestIssue13_ReadmeOpeningStatesPrerequisites(t *testing.T) {
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	opening, _, found := strings.Cut(readme, "\n## ")
	if !found {
		t.Fatal("README.md has no second-level heading")
	}
	blocks := regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatchIndex(opening, -1)
	var commands []string
	for _, b := range blocks {
		commands = append(commands, strings.TrimSpace(opening[b[2]:b[3]]))
	}
	if len(commands) != 2 || commands[0] != "go run ./cmd/waypost serve" || commands[1] != "scripts/test" {
		t.Fatalf("the opening's commands are %q, want exactly [go run ./cmd/waypost serve, scripts/test]", commands)
	}
	before := opening[:blocks[0][0]]
	for _, want := range []string{"Go 1.26", "Node.js 20 or later", "npm", "4 GB", "8787", "--addr"} {
		if !strings.Contains(before, want) {
			t.Errorf("the text before the first command does not state %q", want)
		}
	}
}

// TestIssue13_ServeHintIsAbsolute (issue 13 item 17): the admin-secret hint `serve` prints gives an absolute
// path, so that it works from any directory, even when --data is relative.
func TestIssue13_ServeHintIsAbsolute(t *testing.T) {
	t.Chdir(t.TempDir())
	t.Setenv("WAYPOST_ADMIN_SECRET", "")
	cmd := newServeCmd()
	var out syncbuf.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&syncbuf.Buffer{})
	cmd.SetArgs([]string{"--addr", "127.0.0.1:0", "--data", "rel-data", "--unsafe-no-fsync", "--log-level", "error"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(out.String(), "admin secret:") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v", err)
	}
	m := regexp.MustCompile(`admin secret: (\S+) \(export WAYPOST_ADMIN_SECRET=\$\(cat (\S+)\)\)`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no admin-secret hint in:\n%s", out.String())
	}
	wd, _ := os.Getwd()
	want := filepath.Join(wd, "rel-data", "admin-secret")
	if m[1] != want || m[2] != want {
		t.Fatalf("hint %q / %q, want the absolute path %s", m[1], m[2], want)
	}
	if _, err := os.Stat(m[1]); err != nil {
		t.Fatalf("the hinted file: %v", err)
	}
}
