//go:build unix

package cputime

import (
	"testing"
	"time"
)

// TestProcessAdvances: spinning for a while shows up as CPU time.
func TestProcessAdvances(t *testing.T) {
	start := Process()
	if start <= 0 {
		t.Fatalf("Process() = %v at start, want > 0 (the test binary has run)", start)
	}
	x := uint64(1)
	deadline := time.Now().Add(10 * time.Second)
	for Process()-start < 5*time.Millisecond {
		if time.Now().After(deadline) {
			t.Fatalf("CPU time went from %v to %v in 10 s of spinning", start, Process())
		}
		for range 1 << 16 {
			x = x*6364136223846793005 + 1
		}
	}
	if x == 0 {
		t.Log(x) // keeps the loop from being optimised away
	}
}
