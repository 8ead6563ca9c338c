package cpu

// floatSIMD reports whether the NEON float kernels run (the ones
// canon_test.go holds to the canonical order).
func floatSIMD() bool { return hasNEON }

// withoutSIMD switches every kernel flag off, so the Go loops run, and
// returns what switches them back.
func withoutSIMD() (restore func()) {
	n, s := hasNEON, hasSDOT
	hasNEON, hasSDOT = false, false
	return func() { hasNEON, hasSDOT = n, s }
}

// quantSIMD reports whether the NEON quantiser (q8_arm64.s) runs.
func quantSIMD() bool { return hasNEON }

// rowKernelSets are the sets of integer row kernels this CPU has: the
// SDOT forms.
func rowKernelSets() []goldenKernelSet {
	var sets []goldenKernelSet
	for _, s := range goldenKernelSets() {
		if s.name == kernelSetName("neon") {
			sets = append(sets, s)
		}
	}
	return sets
}
