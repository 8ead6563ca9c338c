package cpu

// floatSIMD reports whether the float kernels of simd_amd64.s run here
// (the ones canon_test.go holds to the canonical order).
func floatSIMD() bool { return hasAVX2 && hasF16C }

// withoutSIMD switches every kernel flag off, so the Go loops run, and
// returns what switches them back.
func withoutSIMD() (restore func()) {
	a, f, d, q, v := hasAVX2, hasF16C, hasDot4, hasQ8, hasVNNI
	hasAVX2, hasF16C, hasDot4, hasQ8, hasVNNI = false, false, false, false, false
	return func() { hasAVX2, hasF16C, hasDot4, hasQ8, hasVNNI = a, f, d, q, v }
}

// quantSIMD reports whether the SIMD quantiser (q8_amd64.s) runs.
func quantSIMD() bool { return hasQ8 }

// rowKernelSets are the sets of integer row kernels this CPU has, each
// with what switches the package to it: the VNNI forms, the AVX2 forms.
func rowKernelSets() []goldenKernelSet {
	var sets []goldenKernelSet
	for _, s := range goldenKernelSets() {
		if s.name != kernelSetName("go") {
			sets = append(sets, s)
		}
	}
	return sets
}
