//go:build !amd64.v3

package cpu

import (
	"math"
	"testing"

	"golang.org/x/sys/cpu"
)

// TestTanh64MatchesAMD64: tanh64 is math.Tanh as amd64 computes it (Go's
// pure-Go tanh, compiled without fused multiply-adds below GOAMD64=v3,
// calling math.Exp), bit for bit.
func TestTanh64MatchesAMD64(t *testing.T) {
	if !cpu.X86.HasAVX || !cpu.X86.HasFMA {
		t.Skip("math.Exp takes its non-FMA path on this CPU")
	}
	for _, x := range canonInputs() {
		if got, want := tanh64(x), math.Tanh(x); math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("tanh64(%v) = %v (%#x), math.Tanh %v (%#x)", x, got, math.Float64bits(got), want, math.Float64bits(want))
		}
	}
}
