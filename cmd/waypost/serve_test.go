package main

import (
	"runtime"
	"runtime/debug"
	"testing"
)

// TestTuneRuntime: `waypost serve` runs the collector at GOGC=400 and the scheduler with one P more than the
// runtime's default, each only when its environment variable is unset.
func TestTuneRuntime(t *testing.T) {
	procs, gc := runtime.GOMAXPROCS(0), debug.SetGCPercent(100)
	debug.SetGCPercent(gc)
	t.Cleanup(func() {
		runtime.GOMAXPROCS(procs)
		debug.SetGCPercent(gc)
	})
	for _, tc := range []struct {
		name      string
		env       map[string]string
		procs, gc int
	}{
		{"both unset", nil, procs + 1, serveGCPercent},
		{"GOGC set", map[string]string{"GOGC": "100"}, procs + 1, 100},
		{"GOMAXPROCS set", map[string]string{"GOMAXPROCS": "1"}, procs, serveGCPercent},
		{"both set", map[string]string{"GOGC": "100", "GOMAXPROCS": "1"}, procs, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runtime.GOMAXPROCS(procs)
			debug.SetGCPercent(100)
			tuneRuntime(func(k string) string { return tc.env[k] })
			if got := runtime.GOMAXPROCS(0); got != tc.procs {
				t.Errorf("GOMAXPROCS = %d, want %d", got, tc.procs)
			}
			if got := debug.SetGCPercent(100); got != tc.gc {
				t.Errorf("GC percent = %d, want %d", got, tc.gc)
			}
		})
	}
}
