//go:build unix

package cputime_test

import (
	"crypto/sha256"
	"testing"
	"time"

	"github.com/waypost/waypost/internal/cputime"
)

// TestSelfCountsWork: the CPU time of this process grows while it computes.
func TestSelfCountsWork(t *testing.T) {
	before := cputime.Self()
	if before <= 0 {
		t.Fatalf("Self() = %v before any work, want > 0 (the test binary has already run)", before)
	}
	sum := sha256.Sum256(nil)
	for deadline := time.Now().Add(10 * time.Second); cputime.Self() <= before; {
		if time.Now().After(deadline) {
			t.Fatalf("Self() still %v after 10 s of hashing", cputime.Self())
		}
		for range 10000 {
			sum = sha256.Sum256(sum[:])
		}
	}
}
