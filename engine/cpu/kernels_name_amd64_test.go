package cpu

import (
	"reflect"
	"testing"

	"anechat/engine/model/gguf"
)

// TestKernelsNameTheSelection: for each setting of the flags the kernels
// tests switch, Kernels names the integer kernels the matrices actually
// run: KernelsVNNI exactly when rowKernels hands out the VNNI forms,
// KernelsAVX2 when the AVX2 forms, KernelsGo when no type has an integer
// kernel. A new kernel set chosen in rowKernels without a name of its own
// fails here, since cost tables measured with one set would be reused for
// the other.
func TestKernelsNameTheSelection(t *testing.T) {
	vnni, q8 := hasVNNI, hasQ8
	defer func() { hasVNNI, hasQ8 = vnni, q8 }()
	ptr := func(k rowKernel) uintptr { return reflect.ValueOf(k).Pointer() }
	forms := map[string][3]uintptr{ // the 1-token kernel of Q4_0, Q4_1, Q8_0
		KernelsVNNI: {ptr(rowsQ40x1), ptr(rowsQ41x1), ptr(rowsQ80x1)},
		KernelsAVX2: {ptr(rowsQ40x1A), ptr(rowsQ41x1A), ptr(rowsQ80x1A)},
	}
	for _, flags := range [][2]bool{{true, true}, {false, true}, {false, false}} {
		hasVNNI, hasQ8 = flags[0], flags[1]
		name := Kernels()
		var got [3]uintptr
		for i, typ := range []gguf.Type{gguf.Q4_0, gguf.Q4_1, gguf.Q8_0} {
			if k := rowKernels(typ)[1]; k != nil {
				got[i] = ptr(k)
			}
			if hasIntegerKernels(typ) != (name != KernelsGo) {
				t.Errorf("flags %v: %s named, but %s has integer kernels: %v", flags, name, typ, hasIntegerKernels(typ))
			}
		}
		if want, ok := forms[name]; ok && got != want {
			t.Errorf("flags %v: named %s, but rowKernels selects other kernels", flags, name)
		}
		if name == KernelsGo && got != [3]uintptr{} {
			t.Errorf("flags %v: named %s, but rowKernels selects integer kernels", flags, name)
		}
	}
}
