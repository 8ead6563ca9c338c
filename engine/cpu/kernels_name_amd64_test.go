package cpu

import "testing"

// TestKernelsFollowFlags: Kernels reports the set the flags select now (the
// kernels tests switch hasVNNI and hasQ8 off to run the other sets).
func TestKernelsFollowFlags(t *testing.T) {
	vnni, q8 := hasVNNI, hasQ8
	defer func() { hasVNNI, hasQ8 = vnni, q8 }()
	hasVNNI, hasQ8 = false, true
	if got := Kernels(); got != KernelsAVX2 {
		t.Errorf("hasQ8 only: %q, want %q", got, KernelsAVX2)
	}
	hasVNNI, hasQ8 = false, false
	if got := Kernels(); got != KernelsGo {
		t.Errorf("no integer kernels: %q, want %q", got, KernelsGo)
	}
	hasVNNI, hasQ8 = true, true
	if got := Kernels(); got != KernelsVNNI {
		t.Errorf("VNNI: %q, want %q", got, KernelsVNNI)
	}
}
