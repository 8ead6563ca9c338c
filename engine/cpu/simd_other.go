//go:build !amd64

package cpu

// Pure-Go builds: the SIMD entry points decline and the Go loops run.

func dotSIMD(a, b []float32) (float32, int) { return 0, 0 }

func dequant4SIMD(dst []float32, src []byte, qoff, stride int, d, m []float32) bool { return false }

func dequant8SIMD(dst []float32, src []byte, qoff, stride int, d []float32) bool { return false }

func f16SIMD(dst []float32, src []byte) int { return 0 }
