package cpu

import (
	"reflect"
	"testing"

	"anechat/engine/model/gguf"
)

// TestKernelsNameTheSelection: with the SDOT kernels on, Kernels names
// KernelsNEON and rowKernels hands out the NEON forms (Q4_0, Q4_1, Q8_0
// and Q4_K checked by pointer; every form by TestRowKernelsPresentNEON) (the other formats run the Go loops' canonical sums); with them off, KernelsGo and no integer kernels (the float path).
// A new kernel set chosen in rowKernels without a name of its own fails
// here.
func TestKernelsNameTheSelection(t *testing.T) {
	sdot := hasSDOT
	defer func() { hasSDOT = sdot }()
	ptr := func(k rowKernel) uintptr { return reflect.ValueOf(k).Pointer() }
	want := [4]uintptr{ptr(rowsQ40x1N), ptr(rowsQ41x1N), ptr(rowsQ80x1N), ptr(rowsQ4Kx1N)}
	for _, on := range []bool{true, false} {
		hasSDOT = on
		name := Kernels()
		var got [4]uintptr
		for i, typ := range []gguf.Type{gguf.Q4_0, gguf.Q4_1, gguf.Q8_0, gguf.Q4_K} {
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
		case !on && (name != KernelsGo || got != [4]uintptr{}):
			t.Errorf("SDOT off: named %s, rowKernels %v, want %s and none", name, got, KernelsGo)
		}
	}
}

// TestRowKernelsPresentNEON: with SDOT, the formats with NEON row kernels
// get all four widths (so TestCanonicalSums and TestIntegerRowIndependence
// hold the assembly, not the Go loops, to the canonical sums), and the
// others none.
func TestRowKernelsPresentNEON(t *testing.T) {
	if !hasSDOT {
		t.Skip("no SDOT on this CPU")
	}
	have := map[gguf.Type]bool{gguf.Q4_0: true, gguf.Q4_1: true, gguf.Q8_0: true, gguf.Q5_0: true, gguf.Q5_1: true, gguf.Q4_K: true, gguf.Q5_K: true, gguf.Q6_K: true, gguf.Q3_K: true, gguf.Q2_K: true}
	for _, typ := range allIntegerTypes {
		ks := rowKernels(typ)
		full := ks[1] != nil && ks[2] != nil && ks[4] != nil && ks[8] != nil
		if have[typ] != full || !have[typ] && ks[1] != nil {
			t.Errorf("%s: row kernels %v, want %v", typ, ks[1] != nil, have[typ])
		}
	}
}
