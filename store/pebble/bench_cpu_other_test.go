//go:build !unix

package pebble_test

import "time"

// processCPU is unavailable here; the cpu-µs/op metric then reads 0.
func processCPU() time.Duration { return 0 }
