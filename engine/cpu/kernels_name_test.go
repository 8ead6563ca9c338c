package cpu

import (
	"testing"

	"anechat/engine/model"
)

// TestKernelsName: the flags map to the three names, VNNI first, and the
// names differ (a cost table measured with one set is not taken for another).
func TestKernelsName(t *testing.T) {
	for _, tc := range []struct {
		vnni, q8 bool
		want     string
	}{
		{true, true, "cpu/rows-vnni.2"},
		{true, false, "cpu/rows-vnni.2"},
		{false, true, "cpu/avx2.4"},
		{false, false, "cpu/go.3"},
	} {
		if got := kernelsName(tc.vnni, tc.q8); got != tc.want {
			t.Errorf("kernelsName(vnni %v, q8 %v) = %q, want %q", tc.vnni, tc.q8, got, tc.want)
		}
	}
	if got, want := Kernels(), kernelsName(kernelFeatures()); got != want {
		t.Errorf("Kernels() = %q, want %q", got, want)
	}
	var b model.Backend = &Llama{}
	if got := model.KernelsOf(b); got != Kernels() {
		t.Errorf("Llama: KernelsOf = %q, want %q", got, Kernels())
	}
	if got := model.KernelsOf(&Gemma4{}); got != Kernels() {
		t.Errorf("Gemma4: KernelsOf = %q, want %q", got, Kernels())
	}
}
