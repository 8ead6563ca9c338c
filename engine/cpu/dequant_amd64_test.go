package cpu

// dequantPaths are the dequantisers this CPU can run: the AVX2/F16C ones
// (where it has them) and the Go loops, switched by hasF16C and hasAVX2.
func dequantPaths() []goldenKernelSet {
	set := func(name string, on bool) goldenKernelSet {
		return goldenKernelSet{name: name, enable: func() func() {
			f, a := hasF16C, hasAVX2
			hasF16C, hasAVX2 = f && on, a && on
			return func() { hasF16C, hasAVX2 = f, a }
		}}
	}
	if hasF16C {
		return []goldenKernelSet{set("simd", true), set("go", false)}
	}
	return []goldenKernelSet{set("go", false)}
}
