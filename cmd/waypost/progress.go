package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/pflag"
	"golang.org/x/term"
)

// progressFlag is the --progress flag of the transfer commands: auto (a bar when stderr is a terminal),
// always, or never.
type progressFlag struct{ mode string }

func (p *progressFlag) register(fs *pflag.FlagSet) {
	fs.StringVar(&p.mode, "progress", "auto", "progress bars on stderr: auto (when stderr is a terminal), always or never")
}

func (p *progressFlag) validate() error {
	switch p.mode {
	case "auto", "always", "never":
		return nil
	}
	return usagef("--progress must be auto, always or never")
}

// enabled reports whether bars are drawn on w.
func (p *progressFlag) enabled(w io.Writer) bool {
	switch p.mode {
	case "always":
		return true
	case "never":
		return false
	}
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// meter is a byte progress bar, safe for concurrent use; a nil *meter does nothing.
type meter struct {
	mu  sync.Mutex
	bar *progressbar.ProgressBar
}

// newMeter returns a byte bar of total bytes on w, or nil when progress is off.
func (p *progressFlag) newMeter(w io.Writer, total int64, desc string) *meter {
	if !p.enabled(w) {
		return nil
	}
	bar := progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionShowBytes(true),
		progressbar.OptionShowTotalBytes(true),
		progressbar.OptionShowCount(),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionSetRenderBlankState(true),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }),
	)
	return &meter{bar: bar}
}

// add moves the bar by n bytes (negative to take back an attempt that failed).
func (m *meter) add(n int64) {
	if m == nil || n == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	_ = m.bar.Add64(n)
}

// finish completes the bar (drawing it full and ending its line).
func (m *meter) finish() {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	_ = m.bar.Finish()
}

// meterReader counts the bytes read through it on a meter. n is atomic: the HTTP transport may still be
// reading the body in its own goroutine when the request already returned (an early answer).
type meterReader struct {
	r io.Reader
	m *meter
	n atomic.Int64
}

func (r *meterReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.n.Add(int64(n))
	r.m.add(int64(n))
	return n, err
}
