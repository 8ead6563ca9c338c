package cpu

import (
	"reflect"
	"testing"

	"anechat/engine/model/gguf"
)

// TestKernelsNameTheSelection: with the SDOT kernels on, Kernels names
// KernelsNEON and rowKernels hands out the NEON forms for every integer
// type; with them off, KernelsGo and no integer kernels (the float path).
// A new kernel set chosen in rowKernels without a name of its own fails
// here.
func TestKernelsNameTheSelection(t *testing.T) {
	sdot := hasSDOT
	defer func() { hasSDOT = sdot }()
	ptr := func(k rowKernel) uintptr { return reflect.ValueOf(k).Pointer() }
	want := [3]uintptr{ptr(rowsQ40x1N), ptr(rowsQ41x1N), ptr(rowsQ80x1N)}
	for _, on := range []bool{true, false} {
		hasSDOT = on
		name := Kernels()
		var got [3]uintptr
		for i, typ := range []gguf.Type{gguf.Q4_0, gguf.Q4_1, gguf.Q8_0} {
			if k := rowKernels(typ)[1]; k != nil {
				got[i] = ptr(k)
			}
			if hasIntegerKernels(typ) != (name != KernelsGo) {
				t.Errorf("SDOT %v: %s named, but %s has integer kernels: %v", on, name, typ, hasIntegerKernels(typ))
			}
		}
		switch {
		case on && (name != KernelsNEON || got != want):
			t.Errorf("SDOT on: named %s, rowKernels %v, want %s and the NEON forms", name, got, KernelsNEON)
		case !on && (name != KernelsGo || got != [3]uintptr{}):
			t.Errorf("SDOT off: named %s, rowKernels %v, want %s and none", name, got, KernelsGo)
		}
	}
}
