package cpu

// The names of the kernel sets this package selects on the running CPU
// (model.KernelNamer). The trailing number is the set's version: bump it
// when a set's kernels change speed (a rewrite, a new blocking), so that
// speeds measured by an older build are not taken for this one's.
const (
	// KernelsVNNI: the AVX-512 VNNI row kernels (q8rows_amd64.s) for
	// quantised weights.
	KernelsVNNI = "cpu/rows-vnni.2"
	// KernelsAVX2: the AVX2 forms of the row kernels (q8rowsavx2_amd64.s).
	KernelsAVX2 = "cpu/avx2.4"
	// KernelsNEON: the arm64 row kernels with the dot-product extension
	// (q8rows_arm64.s; Q5_0, Q5_1, and kqrows_arm64.s for Q4_K and Q6_K, since .2;
	// kq23rows_arm64.s for Q3_K and Q2_K and the NEON Q8_K quantiser, since .3;
	// Q5_K since .4; Q4_K's width 1 takes two sub-blocks per weight load,
	// since .5: the same bits, fewer instructions), with the NEON float
	// kernels.
	KernelsNEON = "cpu/neon-sdot.5"
	// KernelsGo: the portable Go loops (go.3: the integer formats multiply
	// quantised activations with the canonical sums of dotref.go, as the
	// row kernels do, instead of dequantising the rows to floats).
	KernelsGo = "cpu/go.3"
)

// Kernels names the kernel set selected on this CPU (KernelsVNNI or
// KernelsAVX2 on amd64, KernelsNEON on arm64, else KernelsGo: no integer
// kernels); every CPU backend of the process runs it.
func Kernels() string { return kernelSet() }
