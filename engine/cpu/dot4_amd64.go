package cpu

import (
	"unsafe"

	"golang.org/x/sys/cpu"

	"anechat/engine/model/gguf"
)

// hasDot4 selects the 4-token float kernels (dot4_amd64.s): they keep 16
// accumulators, so they need AVX-512's 32 vector registers (EVEX, VL).
var hasDot4 = hasF16C && cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL

//go:noescape
func dot4F32(w *byte, x *float32, xstride, n int, out *[4]float32)

//go:noescape
func dot4F16(w *byte, x *float32, xstride, n int, out *[4]float32)

//go:noescape
func dot4BF16(w *byte, x *float32, xstride, n int, out *[4]float32)

//go:noescape
func dot2F32(w *byte, x *float32, xstride, n int, out *[4]float32)

//go:noescape
func dot2F16(w *byte, x *float32, xstride, n int, out *[4]float32)

//go:noescape
func dot2BF16(w *byte, x *float32, xstride, n int, out *[4]float32)

//go:noescape
func dot1F16(w *byte, x *float32, xstride, n int, out *[4]float32)

//go:noescape
func dot1BF16(w *byte, x *float32, xstride, n int, out *[4]float32)

// dotNSIMD is dot4SIMD for g = 1, 2 or 4 tokens: the 1- and 2-token kernels
// need only AVX2 and F16C. F32 rows of one token are read in place by Dot
// already (dotAVX2), so that case declines.
func dotNSIMD(g int, t gguf.Type, row []byte, x []float32, cols int, out *[4]float32) int {
	if g == 4 {
		return dot4SIMD(t, row, x, cols, out)
	}
	n := cols &^ 31
	if !hasF16C || n == 0 {
		return 0
	}
	_ = x[(g-1)*cols+n-1]
	w, xs := unsafe.SliceData(row), unsafe.SliceData(x)
	switch {
	case g == 2 && t == gguf.F32:
		_ = row[4*n-1]
		dot2F32(w, xs, 4*cols, n, out)
	case g == 2 && t == gguf.F16:
		_ = row[2*n-1]
		dot2F16(w, xs, 4*cols, n, out)
	case g == 2 && t == gguf.BF16:
		_ = row[2*n-1]
		dot2BF16(w, xs, 4*cols, n, out)
	case g == 1 && t == gguf.F16:
		_ = row[2*n-1]
		dot1F16(w, xs, 4*cols, n, out)
	case g == 1 && t == gguf.BF16:
		_ = row[2*n-1]
		dot1BF16(w, xs, 4*cols, n, out)
	default:
		return 0
	}
	return n
}

// dot4SIMD sets out[j] to the Dot of the first n elements of row (of type t,
// cols elements) with token j of x (tokens cols floats apart), for the
// largest n <= cols that is a multiple of 32, and returns n; 0 when the CPU
// or the type has no 4-token kernel.
func dot4SIMD(t gguf.Type, row []byte, x []float32, cols int, out *[4]float32) int {
	n := cols &^ 31
	if !hasDot4 || n == 0 {
		return 0
	}
	_ = x[3*cols+n-1]
	w, xs := unsafe.SliceData(row), unsafe.SliceData(x)
	switch t {
	case gguf.F32:
		_ = row[4*n-1]
		dot4F32(w, xs, 4*cols, n, out)
	case gguf.F16:
		_ = row[2*n-1]
		dot4F16(w, xs, 4*cols, n, out)
	case gguf.BF16:
		_ = row[2*n-1]
		dot4BF16(w, xs, 4*cols, n, out)
	default:
		return 0
	}
	return n
}
