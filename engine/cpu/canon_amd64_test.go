package cpu

import (
	"math"
	"testing"

	"golang.org/x/sys/cpu"
)

// TestExp64MatchesAMD64: exp64 is math.Exp on amd64 CPUs with FMA (Go's
// math/exp_amd64.s), bit for bit, so the canonical exponential that every
// architecture computes is the one amd64 outputs were recorded with.
func TestExp64MatchesAMD64(t *testing.T) {
	if !cpu.X86.HasAVX || !cpu.X86.HasFMA {
		t.Skip("math.Exp takes its non-FMA path on this CPU")
	}
	for _, x := range canonInputs() {
		if got, want := exp64(x), math.Exp(x); math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("exp64(%v) = %v (%#x), math.Exp %v (%#x)", x, got, math.Float64bits(got), want, math.Float64bits(want))
		}
	}
}
