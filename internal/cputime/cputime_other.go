//go:build !unix

package cputime

import "time"

// Self is unavailable here: it returns 0 (a cpu-µs/op metric then reads 0).
func Self() time.Duration { return 0 }
