package cpu

// goldenKernelSets are the kernel sets this CPU can run, switched by the
// flags the kernels read: the SDOT row kernels with the NEON float
// kernels, and the NEON float kernels alone (integer weights on the float
// path). Each is defined to compute the bits of an amd64 set, so it is
// checked against that set's records: arm64-neon against amd64-vnni (the
// canonical integer sum, which amd64-avx2 shares), arm64-go against
// amd64-go (the same float kernels on both).
func goldenKernelSets() []goldenKernelSet {
	set := func(name, same string, sdot bool) goldenKernelSet {
		return goldenKernelSet{name: kernelSetName(name), same: same, enable: func() func() {
			n, s := hasNEON, hasSDOT
			hasSDOT = sdot
			return func() { hasNEON, hasSDOT = n, s }
		}}
	}
	var sets []goldenKernelSet
	if hasSDOT {
		sets = append(sets, set("neon", "amd64-vnni", true))
	}
	if hasNEON {
		sets = append(sets, set("go", "amd64-go", false))
	}
	return sets
}
