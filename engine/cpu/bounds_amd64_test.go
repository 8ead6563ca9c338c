package cpu

// boundsKernelSets are the kernel sets TestKernelBounds runs on this CPU:
// the flags as selected (AVX-512 VNNI row kernels and the 4-token float
// kernels where the CPU has them), then, where those exist, the AVX2 forms
// alone (the AVX2 row kernels, and the 1- and 2-token float kernels with
// Dot3 and Dot where the 4-token ones would run).
func boundsKernelSets() []goldenKernelSet {
	sets := []goldenKernelSet{{name: kernelSetName("selected"), enable: func() func() { return func() {} }}}
	if hasQ8 && (hasVNNI || hasDot4) {
		sets = append(sets, goldenKernelSet{name: kernelSetName("avx2"), enable: func() func() {
			v, d := hasVNNI, hasDot4
			hasVNNI, hasDot4 = false, false
			return func() { hasVNNI, hasDot4 = v, d }
		}})
	}
	return sets
}
