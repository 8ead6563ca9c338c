//go:build !amd64 && !arm64

package cpu

// dequantPaths: without amd64 assembly the Go loops are the one path.
func dequantPaths() []goldenKernelSet {
	return []goldenKernelSet{{name: "go", enable: func() func() { return func() {} }}}
}
