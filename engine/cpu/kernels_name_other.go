//go:build !amd64 && !arm64

package cpu

// kernelSet: without assembly only the Go loops run.
func kernelSet() string { return KernelsGo }
