package cpu

// kernelSet names the kernels the flags select (q8rows_arm64.go), read at
// each call since tests switch them: the SDOT row kernels where the CPU
// has the dot-product extension, else the float path (KernelsGo, as on
// amd64 without AVX2: integer weights are dequantised).
func kernelSet() string {
	if hasSDOT {
		return KernelsNEON
	}
	return KernelsGo
}
