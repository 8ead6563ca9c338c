package cpu

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// hasAVX2 selects the AVX2/FMA kernels of simd_amd64.s. The choice is made
// once per process, so every call of a kernel on this machine computes the
// same bits (row independence holds within a machine; different machines may
// round differently).
var hasAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA

var hasF16C = hasAVX2 && cpu.X86.HasF16C

//go:noescape
func dotAVX2(a, b *float32, n int) float32

//go:noescape
func dequant4AVX2(dst *float32, qs *byte, stride int, d, m *float32, nblocks int)

//go:noescape
func dequant8AVX2(dst *float32, qs *byte, stride int, d *float32, nblocks int)

//go:noescape
func f16AVX2(dst *float32, src *uint16, n int)

// dotSIMD computes the dot product of the first n - n%32 elements with AVX2,
// reporting how many it did (0 without AVX2).
func dotSIMD(a, b []float32) (float32, int) {
	n := len(a) &^ 31
	if !hasAVX2 || n == 0 {
		return 0, 0
	}
	return dotAVX2(unsafe.SliceData(a), unsafe.SliceData(b), n), n
}

// dequant4SIMD dequantises nblocks 4-bit blocks; ok is false without AVX2.
func dequant4SIMD(dst []float32, src []byte, qoff, stride int, d, m []float32) bool {
	if !hasAVX2 || len(d) == 0 {
		return false
	}
	_ = dst[32*len(d)-1]
	_ = src[stride*(len(d)-1)+qoff+15]
	dequant4AVX2(unsafe.SliceData(dst), &src[qoff], stride, unsafe.SliceData(d), unsafe.SliceData(m), len(d))
	return true
}

// dequant8SIMD dequantises nblocks Q8_0 blocks; ok is false without AVX2.
func dequant8SIMD(dst []float32, src []byte, qoff, stride int, d []float32) bool {
	if !hasAVX2 || len(d) == 0 {
		return false
	}
	_ = dst[32*len(d)-1]
	_ = src[stride*(len(d)-1)+qoff+31]
	dequant8AVX2(unsafe.SliceData(dst), &src[qoff], stride, unsafe.SliceData(d), len(d))
	return true
}

// f16SIMD converts len(dst) - len(dst)%8 halves; it returns how many.
func f16SIMD(dst []float32, src []byte) int {
	n := len(dst) &^ 7
	if !hasF16C || n == 0 {
		return 0
	}
	_ = src[2*n-1]
	f16AVX2(unsafe.SliceData(dst), (*uint16)(unsafe.Pointer(unsafe.SliceData(src))), n)
	return n
}
