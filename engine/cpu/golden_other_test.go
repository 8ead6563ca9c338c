//go:build !amd64 && !arm64

package cpu

// goldenKernelSets: without amd64 assembly the Go loops are the one set.
func goldenKernelSets() []goldenKernelSet {
	return []goldenKernelSet{{name: kernelSetName("go"), enable: func() func() { return func() {} }}}
}
