package cpu

import (
	"unsafe"

	"golang.org/x/sys/cpu"

	"anechat/engine/model/gguf"
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
func dequantQ40AVX2(dst *float32, src *byte, nblocks int)

//go:noescape
func dequantQ41AVX2(dst *float32, src *byte, nblocks int)

//go:noescape
func dequantQ80AVX2(dst *float32, src *byte, nblocks int)

//go:noescape
func dot3AVX2(w, x0, x1, x2 *float32, n int, out *[3]float32)

//go:noescape
func bf16AVX2(dst *float32, src *uint16, n int)

//go:noescape
func axpyAVX2(y, x *float32, a float32, n int)

//go:noescape
func dotRowsAVX2(q, k *float32, kstride, rows, n int, scale float32, out *float32)

//go:noescape
func wsumAVX2(out, v *float32, vstride int, w *float32, rows, n int)

// hasRunKernels reports whether dotRowsSIMD and wsumSIMD take rows of
// headDim floats.
func hasRunKernels(headDim int) bool { return hasAVX2 && headDim > 0 && headDim%32 == 0 }

// dotRowsSIMD sets out[r] = Dot(q, row r of k)·scale for the len(out) rows
// of k (kstride floats apart, len(q) floats each) with dotRowsAVX2; false
// (nothing done) when the CPU lacks AVX2 or len(q) is not a multiple of 32.
func dotRowsSIMD(q, k []float32, kstride int, scale float32, out []float32) bool {
	n, rows := len(q), len(out)
	if !hasAVX2 || n == 0 || n%32 != 0 || rows == 0 {
		return false
	}
	_ = k[(rows-1)*kstride+n-1]
	dotRowsAVX2(unsafe.SliceData(q), unsafe.SliceData(k), 4*kstride, rows, n, scale, unsafe.SliceData(out))
	return true
}

// wsumSIMD adds w[r]·(row r of v) to out for the len(w) rows of v (vstride
// floats apart) in order, as successive Axpy calls would, with wsumAVX2;
// false (nothing done) when the CPU lacks AVX2 or len(out) is not a
// multiple of 32.
func wsumSIMD(out, v []float32, vstride int, w []float32) bool {
	n, rows := len(out), len(w)
	if !hasAVX2 || n == 0 || n%32 != 0 || rows == 0 {
		return false
	}
	_ = v[(rows-1)*vstride+n-1]
	wsumAVX2(unsafe.SliceData(out), unsafe.SliceData(v), 4*vstride, unsafe.SliceData(w), rows, n)
	return true
}

//go:noescape
func siluMulAVX2(gate, u *float32, n int) int

// siluMulSIMD does g[i] = SiLU(g[i])*u[i] for a prefix of g with
// siluMulAVX2 and returns its length: up to len(g)&^3, less where a group
// of four needs exp64's special cases (the caller continues there).
func siluMulSIMD(g, u []float32) int {
	n := len(g) &^ 3
	if !hasAVX2 || n == 0 {
		return 0
	}
	_ = u[n-1]
	return siluMulAVX2(unsafe.SliceData(g), unsafe.SliceData(u), n)
}

//go:noescape
func expShiftedAVX2(x *float32, m float32, n int) int

// expShiftedSIMD sets x[i] = float32(exp64(float64(x[i]-m))) for a
// prefix of x with expShiftedAVX2 and returns its length (up to
// len(x)&^3; less where a group needs exp64's special cases).
func expShiftedSIMD(x []float32, m float32) int {
	n := len(x) &^ 3
	if !hasAVX2 || n == 0 {
		return 0
	}
	return expShiftedAVX2(unsafe.SliceData(x), m, n)
}

//go:noescape
func geluMulAVX2(gate, u *float32, n int)

// geluMulSIMD does g[i] = GELUTanh(g[i])*u[i] for g[:len(g)&^3] with
// geluMulAVX2 and returns how many it did.
func geluMulSIMD(g, u []float32) int {
	n := len(g) &^ 3
	if !hasAVX2 || n == 0 {
		return 0
	}
	_ = u[n-1]
	geluMulAVX2(unsafe.SliceData(g), unsafe.SliceData(u), n)
	return n
}

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

// dequantSIMD dequantises a whole Q4_0, Q4_1 or Q8_0 row with AVX2 and
// F16C; ok is false when the CPU lacks them.
func dequantSIMD(dst []float32, t gguf.Type, src []byte) bool {
	nb := len(dst) / 32
	if !hasF16C || nb == 0 {
		return false
	}
	_ = dst[32*nb-1]
	switch t {
	case gguf.Q4_0:
		_ = src[18*nb-1]
		dequantQ40AVX2(unsafe.SliceData(dst), unsafe.SliceData(src), nb)
	case gguf.Q4_1:
		_ = src[20*nb-1]
		dequantQ41AVX2(unsafe.SliceData(dst), unsafe.SliceData(src), nb)
	case gguf.Q8_0:
		_ = src[34*nb-1]
		dequantQ80AVX2(unsafe.SliceData(dst), unsafe.SliceData(src), nb)
	default:
		return false
	}
	return true
}

// dot3SIMD computes the SIMD part of three Dots of w (see dotSIMD).
func dot3SIMD(w, x0, x1, x2 []float32) ([3]float32, int) {
	var out [3]float32
	n := len(w) &^ 31
	if !hasAVX2 || n == 0 {
		return out, 0
	}
	_, _, _ = x0[n-1], x1[n-1], x2[n-1]
	dot3AVX2(unsafe.SliceData(w), unsafe.SliceData(x0), unsafe.SliceData(x1), unsafe.SliceData(x2), n, &out)
	return out, n
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

// bf16SIMD widens len(dst) - len(dst)%8 bfloat16s with AVX2; it returns how
// many (0 without AVX2).
func bf16SIMD(dst []float32, src []byte) int {
	n := len(dst) &^ 7
	if !hasAVX2 || n == 0 {
		return 0
	}
	_ = src[2*n-1]
	bf16AVX2(unsafe.SliceData(dst), (*uint16)(unsafe.Pointer(unsafe.SliceData(src))), n)
	return n
}

// axpySIMD does y += a·x with FMA over the first len(y)-len(y)%8 elements,
// reporting how many.
func axpySIMD(y []float32, a float32, x []float32) int {
	n := len(y) &^ 7
	if !hasAVX2 || n == 0 {
		return 0
	}
	_ = x[n-1]
	axpyAVX2(unsafe.SliceData(y), unsafe.SliceData(x), a, n)
	return n
}
