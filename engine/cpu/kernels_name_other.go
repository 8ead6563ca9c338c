//go:build !amd64

package cpu

// kernelFeatures: without amd64 assembly only the Go loops run.
func kernelFeatures() (vnni, q8 bool) { return false, false }
