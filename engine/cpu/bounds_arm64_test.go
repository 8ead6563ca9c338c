package cpu

// boundsKernelSets are the kernel sets TestKernelBounds runs on this CPU:
// the flags as selected (the SDOT row kernels where the CPU has the
// dot-product extension, and the NEON float kernels).
func boundsKernelSets() []goldenKernelSet {
	return []goldenKernelSet{{name: kernelSetName("selected"), enable: func() func() { return func() {} }}}
}
