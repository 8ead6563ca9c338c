package cpu

// kernelSet names the integer kernels the flags select (q8rows_amd64.go,
// q8_amd64.go), read at each call since tests switch them: vnni (hasVNNI)
// wins over q8 (hasQ8), and without either the Go loops run.
func kernelSet() string { return kernelsName(hasVNNI, hasQ8) }

func kernelsName(vnni, q8 bool) string {
	switch {
	case vnni:
		return KernelsVNNI
	case q8:
		return KernelsAVX2
	}
	return KernelsGo
}
