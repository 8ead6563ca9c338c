package cpu

// goldenKernelSets are the integer kernel sets this CPU can run, switched
// by the flags the kernels read (as kernels_name_amd64_test does): VNNI
// rows, AVX2 rows, Go loops.
func goldenKernelSets() []goldenKernelSet {
	set := func(name string, vnni, q8 bool) goldenKernelSet {
		return goldenKernelSet{name: kernelSetName(name), enable: func() func() {
			v, q := hasVNNI, hasQ8
			hasVNNI, hasQ8 = vnni, q8
			return func() { hasVNNI, hasQ8 = v, q }
		}}
	}
	var sets []goldenKernelSet
	if hasVNNI {
		sets = append(sets, set("vnni", true, true))
	}
	if hasQ8 {
		sets = append(sets, set("avx2", false, true))
	}
	return append(sets, set("go", false, false))
}
