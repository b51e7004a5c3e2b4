package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const stream = `{"Action":"start","Package":"ex/a"}
{"Action":"run","Package":"ex/a","Test":"TestPass"}
{"Action":"output","Package":"ex/a","Test":"TestPass","Output":"=== RUN   TestPass\n"}
{"Action":"output","Package":"ex/a","Test":"TestPass","Output":"--- PASS: TestPass (0.00s)\n"}
{"Action":"pass","Package":"ex/a","Test":"TestPass","Elapsed":0}
{"Action":"run","Package":"ex/a","Test":"TestSkip"}
{"Action":"output","Package":"ex/a","Test":"TestSkip","Output":"--- SKIP: TestSkip (0.00s)\n"}
{"Action":"skip","Package":"ex/a","Test":"TestSkip","Elapsed":0}
{"Action":"run","Package":"ex/a","Test":"TestParent/sub"}
{"Action":"skip","Package":"ex/a","Test":"TestParent/sub","Elapsed":0}
{"Action":"pass","Package":"ex/a","Test":"TestParent","Elapsed":0}
{"Action":"output","Package":"ex/a","Output":"ok  \tex/a\t0.01s\n"}
{"Action":"pass","Package":"ex/a","Elapsed":0.01}
{"Action":"run","Package":"ex/b","Test":"TestFail"}
{"Action":"output","Package":"ex/b","Test":"TestFail","Output":"=== RUN   TestFail\n"}
{"Action":"output","Package":"ex/b","Test":"TestFail","Output":"--- FAIL: TestFail (0.00s)\n"}
{"Action":"output","Package":"ex/b","Test":"TestFail","Output":"    b_test.go:9: boom\n"}
{"Action":"fail","Package":"ex/b","Test":"TestFail","Elapsed":0}
{"Action":"output","Package":"ex/b","Output":"FAIL\tex/b\t0.02s\n"}
{"Action":"fail","Package":"ex/b","Elapsed":0.02}
{"Action":"run","Package":"ex/d","Test":"TestPanics"}
{"Action":"output","Package":"ex/d","Test":"TestPanics","Output":"panic: boom\n"}
{"Action":"output","Package":"ex/d","Output":"FAIL\tex/d\t0.01s\n"}
{"Action":"fail","Package":"ex/d","Elapsed":0.01}
# ex/c
c.go:3:1: syntax error
`

// TestIssue13_TestSummaryCountsSkips (issue 13 item 18): scripts/test's summary names the number of tests
// skipped next to those passed and failed (subtests included), lists the skipped ones, still counts packages
// from the log's ok/FAIL lines (infra/test's included), and the rendered log is what go test prints without
// -json and -v: package lines and the output of failed tests (also of a test that crashed its package).
func TestIssue13_TestSummaryCountsSkips(t *testing.T) {
	var rendered bytes.Buffer
	if err := run([]string{"render"}, strings.NewReader(stream), &rendered); err != nil {
		t.Fatal(err)
	}
	want := "ok  \tex/a\t0.01s\n--- FAIL: TestFail (0.00s)\n    b_test.go:9: boom\nFAIL\tex/b\t0.02s\n" +
		"panic: boom\nFAIL\tex/d\t0.01s\n# ex/c\nc.go:3:1: syntax error\n"
	if rendered.String() != want {
		t.Fatalf("render:\n%s\nwant:\n%s", rendered.String(), want)
	}
	dir := t.TempDir()
	events, log := filepath.Join(dir, "events.json"), filepath.Join(dir, "test.log")
	infra := "ok  \tcdk synth (infra, Waypost.template.json)\t12s\nFAIL\tgithub.com/waypost/waypost/infra\t3s\n"
	if err := os.WriteFile(events, []byte(stream), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(log, append(rendered.Bytes(), infra...), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run([]string{"count", "-events", events, "-log", log}, nil, &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	wantLines := []string{
		"skipped: ex/a TestParent/sub",
		"skipped: ex/a TestSkip",
		"packages: 2 passed, 3 failed (log: " + log + ")",
		"tests: 2 passed, 1 failed, 2 skipped",
	}
	if strings.Join(lines, "\n") != strings.Join(wantLines, "\n") {
		t.Fatalf("count:\n%s\nwant:\n%s", out.String(), strings.Join(wantLines, "\n"))
	}
}

// TestScriptsTestUsesTheSummary checks that scripts/test runs go test with -json and -race through the
// summary and ends with its counts.
func TestScriptsTestUsesTheSummary(t *testing.T) {
	raw, err := os.ReadFile("../../scripts/test")
	if err != nil {
		t.Fatal(err)
	}
	script := string(raw)
	for _, want := range []string{"go test -race -count=1", "-json", "testsummary\" render", "testsummary\" count"} {
		if !strings.Contains(script, want) {
			t.Errorf("scripts/test does not contain %q", want)
		}
	}
}
