package cpu

import "testing"

// TestKernelsNamesDistinct: the names of the kernel sets differ from each
// other, so a cost table measured with one set is never taken for
// another's.
func TestKernelsNamesDistinct(t *testing.T) {
	names := map[string]bool{KernelsVNNI: true, KernelsAVX2: true, KernelsNEON: true, KernelsGo: true}
	if len(names) != 4 {
		t.Errorf("kernel set names collide: %q %q %q %q", KernelsVNNI, KernelsAVX2, KernelsNEON, KernelsGo)
	}
}
