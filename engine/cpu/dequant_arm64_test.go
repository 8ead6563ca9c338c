package cpu

// dequantPaths are the dequantisers this CPU can run: the NEON ones and
// the Go loops, switched by hasNEON.
func dequantPaths() []goldenKernelSet {
	set := func(name string, on bool) goldenKernelSet {
		return goldenKernelSet{name: name, enable: func() func() {
			n := hasNEON
			hasNEON = n && on
			return func() { hasNEON = n }
		}}
	}
	if hasNEON {
		return []goldenKernelSet{set("simd", true), set("go", false)}
	}
	return []goldenKernelSet{set("go", false)}
}
