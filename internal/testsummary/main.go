// Command testsummary turns `go test -json` output into what scripts/test shows and keeps.
//
//	go test -json ./... 2>&1 | tee events.json | testsummary render | tee test.log
//	testsummary count -events events.json -log test.log
//
// render writes the text `go test` would have printed without -json and -v (the package lines, and the
// output of failed tests; lines that are not test events, such as build errors, pass through unchanged), so
// the screen and the log read as before. count prints the closing summary:
// packages passed and failed, counted from the log's "ok"/"FAIL" lines (so other go-test-style lines
// appended to the log, like infra/test's, count too), then tests (subtests included) passed, failed and
// skipped, counted from the events, and the names of the skipped ones, so that a reader sees at a glance
// whether anything was skipped.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(2)
	}
}

func run(args []string, stdin io.Reader, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: testsummary render | testsummary count -events FILE -log FILE")
	}
	switch args[0] {
	case "render":
		return render(stdin, stdout)
	case "count":
		fs := flag.NewFlagSet("count", flag.ContinueOnError)
		events := fs.String("events", "", "the `go test -json` output")
		log := fs.String("log", "", "the rendered log (package lines are counted from it)")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if *events == "" || *log == "" {
			return errors.New("count needs -events and -log")
		}
		ev, err := os.Open(*events)
		if err != nil {
			return err
		}
		defer ev.Close()
		lg, err := os.Open(*log)
		if err != nil {
			return err
		}
		defer lg.Close()
		s, err := summarize(ev, lg)
		if err != nil {
			return err
		}
		_, err = io.WriteString(stdout, s.String(*log))
		return err
	default:
		return fmt.Errorf("unknown command %q", args[0])
	}
}

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

// parse decodes a line as a test event; ok is false for any other line.
func parse(line []byte) (event, bool) {
	var e event
	if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil || e.Action == "" {
		return event{}, false
	}
	return e, true
}

// render writes what `go test` without -v prints, as the events arrive: package lines ("ok", "FAIL", "?"),
// everything printed outside a test, and the output of failed tests (withheld until the test ends; the
// output of tests that pass or skip is dropped, as are the "=== RUN" lines -json adds). Lines that are not
// events (a build error, a crash of the go command) pass through unchanged.
func render(in io.Reader, out io.Writer) error {
	type key struct{ pkg, test string }
	held := map[key][]string{} // output of running top-level tests (subtests included)
	write := func(text string) error {
		_, err := io.WriteString(out, text)
		return err
	}
	flush := func(k key) error {
		for _, text := range held[k] {
			if err := write(text); err != nil {
				return err
			}
		}
		delete(held, k)
		return nil
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for sc.Scan() {
		e, ok := parse(sc.Bytes())
		if !ok {
			if err := write(sc.Text() + "\n"); err != nil {
				return err
			}
			continue
		}
		if e.Test == "" {
			// Output a test never got to report (a panic, a timeout) belongs to its package's failure: it
			// comes before the package's result line.
			if e.Action == "fail" || strings.HasPrefix(e.Output, "FAIL") || strings.HasPrefix(e.Output, "ok") {
				var left []key
				for k := range held {
					if k.pkg == e.Package {
						left = append(left, k)
					}
				}
				slices.SortFunc(left, func(a, b key) int { return strings.Compare(a.test, b.test) })
				for _, k := range left {
					if err := flush(k); err != nil {
						return err
					}
				}
			}
			if e.Output != "" && e.Output != "PASS\n" {
				if err := write(e.Output); err != nil {
					return err
				}
			}
			continue
		}
		top, _, _ := strings.Cut(e.Test, "/")
		k := key{e.Package, top}
		switch {
		case e.Output != "":
			if !isFramingLine(e.Output) {
				held[k] = append(held[k], e.Output)
			}
		case e.Test != top: // a subtest ended: its output stays with its top-level test
		case e.Action == "fail":
			if err := flush(k); err != nil {
				return err
			}
		case e.Action == "pass" || e.Action == "skip":
			delete(held, k)
		}
	}
	return sc.Err()
}

// isFramingLine reports the lines -json adds around a test's own output ("=== RUN", "=== PAUSE", …).
func isFramingLine(text string) bool {
	for _, p := range []string{"=== RUN", "=== PAUSE", "=== CONT", "=== NAME"} {
		if strings.HasPrefix(text, p) {
			return true
		}
	}
	return false
}

// summary is what count reports.
type summary struct {
	packagesOK, packagesFailed          int
	testsPassed, testsFailed, testsSkip int
	skipped                             []string // "package TestName"
}

func summarize(events, log io.Reader) (summary, error) {
	var s summary
	sc := bufio.NewScanner(events)
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for sc.Scan() {
		e, ok := parse(sc.Bytes())
		if !ok || e.Test == "" {
			continue
		}
		switch e.Action {
		case "pass":
			s.testsPassed++
		case "fail":
			s.testsFailed++
		case "skip":
			s.testsSkip++
			s.skipped = append(s.skipped, e.Package+" "+e.Test)
		}
	}
	if err := sc.Err(); err != nil {
		return s, err
	}
	lc := bufio.NewScanner(log)
	lc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for lc.Scan() {
		switch line := lc.Text(); {
		case strings.HasPrefix(line, "ok "), strings.HasPrefix(line, "ok\t"):
			s.packagesOK++
		case strings.HasPrefix(line, "FAIL"):
			s.packagesFailed++
		}
	}
	slices.Sort(s.skipped)
	return s, lc.Err()
}

// maxListed bounds how many skipped tests are named.
const maxListed = 30

func (s summary) String(log string) string {
	var b strings.Builder
	for i, name := range s.skipped {
		if i == maxListed {
			fmt.Fprintf(&b, "skipped: … and %d more (see %s)\n", len(s.skipped)-maxListed, log)
			break
		}
		fmt.Fprintf(&b, "skipped: %s\n", name)
	}
	fmt.Fprintf(&b, "packages: %d passed, %d failed (log: %s)\n", s.packagesOK, s.packagesFailed, log)
	fmt.Fprintf(&b, "tests: %d passed, %d failed, %d skipped\n", s.testsPassed, s.testsFailed, s.testsSkip)
	return b.String()
}
