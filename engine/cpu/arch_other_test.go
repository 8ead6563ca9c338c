//go:build !amd64 && !arm64

package cpu

// floatSIMD: without assembly no float kernel runs.
func floatSIMD() bool { return false }

// withoutSIMD: nothing to switch off.
func withoutSIMD() (restore func()) { return func() {} }

// quantSIMD: no SIMD quantiser.
func quantSIMD() bool { return false }

// rowKernelSets: no integer row kernels.
func rowKernelSets() []goldenKernelSet { return nil }
