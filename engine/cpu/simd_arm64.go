package cpu

import (
	"unsafe"

	"golang.org/x/sys/cpu"

	"anechat/engine/model/gguf"
)

// hasNEON selects the NEON float kernels (simd_arm64.s, act_arm64.s):
// Advanced SIMD with its half-precision conversions is part of every arm64
// core, so this is false only where tests switch it off to run the Go
// loops. Each kernel computes the bits of its amd64 twin (simd_amd64.s,
// dot4_amd64.s), so a model gives the same bits on both architectures.
var hasNEON = cpu.ARM64.HasASIMD && cpu.ARM64.HasFP

//go:noescape
func dotNEON(a, b *float32, n int) float32

//go:noescape
func dot3NEON(w, x0, x1, x2 *float32, n int, out *[3]float32)

//go:noescape
func dot2F32N(w *byte, x *float32, xstride, n int, out *[4]float32)

//go:noescape
func dot2F16N(w *byte, x *float32, xstride, n int, out *[4]float32)

//go:noescape
func dot2BF16N(w *byte, x *float32, xstride, n int, out *[4]float32)

//go:noescape
func dot1F16N(w *byte, x *float32, xstride, n int, out *[4]float32)

//go:noescape
func dot1BF16N(w *byte, x *float32, xstride, n int, out *[4]float32)

//go:noescape
func dotRowsNEON(q, k *float32, kstride, rows, n int, scale float32, out *float32)

//go:noescape
func wsumNEON(out, v *float32, vstride int, w *float32, rows, n int)

//go:noescape
func axpyNEON(y, x *float32, a float32, n int)

//go:noescape
func f16NEON(dst *float32, src *uint16, n int)

//go:noescape
func bf16NEON(dst *float32, src *uint16, n int)

//go:noescape
func dequantQ40NEON(dst *float32, src *byte, nblocks int)

//go:noescape
func dequantQ41NEON(dst *float32, src *byte, nblocks int)

//go:noescape
func dequantQ80NEON(dst *float32, src *byte, nblocks int)

// dotSIMD computes the dot product of the first n - n%32 elements with
// NEON, reporting how many it did (0 when switched off).
func dotSIMD(a, b []float32) (float32, int) {
	n := len(a) &^ 31
	if !hasNEON || n == 0 {
		return 0, 0
	}
	_ = b[n-1]
	return dotNEON(unsafe.SliceData(a), unsafe.SliceData(b), n), n
}

// dot3SIMD computes the SIMD part of three Dots of w (see dotSIMD).
func dot3SIMD(w, x0, x1, x2 []float32) ([3]float32, int) {
	var out [3]float32
	n := len(w) &^ 31
	if !hasNEON || n == 0 {
		return out, 0
	}
	_, _, _ = x0[n-1], x1[n-1], x2[n-1]
	dot3NEON(unsafe.SliceData(w), unsafe.SliceData(x0), unsafe.SliceData(x1), unsafe.SliceData(x2), n, &out)
	return out, n
}

// dotNSIMD sets out[j] to the Dot of the first n elements of row (type t,
// cols elements) with token j of x (tokens cols floats apart) for g = 1, 2
// or 4 tokens, n the largest multiple of 32 <= cols, and returns n (0 when
// it declines). The 4-token form is two 2-token passes over the row (NEON
// has room for 16 accumulators, not 32; the second pass reads the row from
// the cache). F32 rows of one token are Dot's own case, read in place.
func dotNSIMD(g int, t gguf.Type, row []byte, x []float32, cols int, out *[4]float32) int {
	n := cols &^ 31
	if !hasNEON || n == 0 {
		return 0
	}
	_ = x[(g-1)*cols+n-1]
	switch t {
	case gguf.F32:
		_ = row[4*n-1]
	case gguf.F16, gguf.BF16:
		_ = row[2*n-1]
	default:
		return 0
	}
	w, xs := unsafe.SliceData(row), unsafe.SliceData(x)
	switch g {
	case 4:
		var hi [4]float32
		dot2N(t, w, xs, 4*cols, n, out)
		dot2N(t, w, &x[2*cols], 4*cols, n, &hi)
		out[2], out[3] = hi[0], hi[1]
	case 2:
		dot2N(t, w, xs, 4*cols, n, out)
	default:
		switch t {
		case gguf.F16:
			dot1F16N(w, xs, 4*cols, n, out)
		case gguf.BF16:
			dot1BF16N(w, xs, 4*cols, n, out)
		default:
			return 0
		}
	}
	return n
}

// dot2N runs the 2-token kernel of type t.
func dot2N(t gguf.Type, w *byte, x *float32, xstride, n int, out *[4]float32) {
	switch t {
	case gguf.F32:
		dot2F32N(w, x, xstride, n, out)
	case gguf.F16:
		dot2F16N(w, x, xstride, n, out)
	default:
		dot2BF16N(w, x, xstride, n, out)
	}
}

// hasRunKernels reports whether dotRowsSIMD and wsumSIMD take rows of
// headDim floats.
func hasRunKernels(headDim int) bool { return hasNEON && headDim > 0 && headDim%32 == 0 }

// dotRowsSIMD sets out[r] = Dot(q, row r of k)·scale for the len(out) rows
// of k (kstride floats apart, len(q) floats each); false (nothing done)
// when switched off or len(q) is not a multiple of 32.
func dotRowsSIMD(q, k []float32, kstride int, scale float32, out []float32) bool {
	n, rows := len(q), len(out)
	if !hasNEON || n == 0 || n%32 != 0 || rows == 0 {
		return false
	}
	_ = k[(rows-1)*kstride+n-1]
	dotRowsNEON(unsafe.SliceData(q), unsafe.SliceData(k), 4*kstride, rows, n, scale, unsafe.SliceData(out))
	return true
}

// wsumSIMD adds w[r]·(row r of v) to out for the len(w) rows of v (vstride
// floats apart) in order, as successive Axpy calls would; false (nothing
// done) when switched off or len(out) is not a multiple of 32.
func wsumSIMD(out, v []float32, vstride int, w []float32) bool {
	n, rows := len(out), len(w)
	if !hasNEON || n == 0 || n%32 != 0 || rows == 0 {
		return false
	}
	_ = v[(rows-1)*vstride+n-1]
	wsumNEON(unsafe.SliceData(out), unsafe.SliceData(v), 4*vstride, unsafe.SliceData(w), rows, n)
	return true
}

// axpySIMD does y += a·x with FMA over the first len(y)-len(y)%8 elements,
// reporting how many.
func axpySIMD(y []float32, a float32, x []float32) int {
	n := len(y) &^ 7
	if !hasNEON || n == 0 {
		return 0
	}
	_ = x[n-1]
	axpyNEON(unsafe.SliceData(y), unsafe.SliceData(x), a, n)
	return n
}

// dequantSIMD dequantises a whole Q4_0, Q4_1 or Q8_0 row with NEON; false
// when switched off or for other types.
func dequantSIMD(dst []float32, t gguf.Type, src []byte) bool {
	nb := len(dst) / 32
	if !hasNEON || nb == 0 {
		return false
	}
	_ = dst[32*nb-1]
	switch t {
	case gguf.Q4_0:
		_ = src[18*nb-1]
		dequantQ40NEON(unsafe.SliceData(dst), unsafe.SliceData(src), nb)
	case gguf.Q4_1:
		_ = src[20*nb-1]
		dequantQ41NEON(unsafe.SliceData(dst), unsafe.SliceData(src), nb)
	case gguf.Q8_0:
		_ = src[34*nb-1]
		dequantQ80NEON(unsafe.SliceData(dst), unsafe.SliceData(src), nb)
	default:
		return false
	}
	return true
}

// f16SIMD converts len(dst) - len(dst)%8 halves; it returns how many.
func f16SIMD(dst []float32, src []byte) int {
	n := len(dst) &^ 7
	if !hasNEON || n == 0 {
		return 0
	}
	_ = src[2*n-1]
	f16NEON(unsafe.SliceData(dst), (*uint16)(unsafe.Pointer(unsafe.SliceData(src))), n)
	return n
}

// bf16SIMD widens len(dst) - len(dst)%8 bfloat16s; it returns how many.
func bf16SIMD(dst []float32, src []byte) int {
	n := len(dst) &^ 7
	if !hasNEON || n == 0 {
		return 0
	}
	_ = src[2*n-1]
	bf16NEON(unsafe.SliceData(dst), (*uint16)(unsafe.Pointer(unsafe.SliceData(src))), n)
	return n
}

//go:noescape
func siluMulNEON(gate, u *float32, n int) int

// siluMulSIMD does g[i] = SiLU(g[i])*u[i] for a prefix of g with
// siluMulNEON and returns its length: up to len(g)&^3, less where a group
// of four needs exp64's special cases (the caller continues there).
func siluMulSIMD(g, u []float32) int {
	n := len(g) &^ 3
	if !hasNEON || n == 0 {
		return 0
	}
	_ = u[n-1]
	return siluMulNEON(unsafe.SliceData(g), unsafe.SliceData(u), n)
}

//go:noescape
func expShiftedNEON(x *float32, m float32, n int) int

// expShiftedSIMD sets x[i] = float32(exp64(float64(x[i]-m))) for a prefix
// of x with expShiftedNEON and returns its length (up to len(x)&^3; less
// where a group needs exp64's special cases).
func expShiftedSIMD(x []float32, m float32) int {
	n := len(x) &^ 3
	if !hasNEON || n == 0 {
		return 0
	}
	return expShiftedNEON(unsafe.SliceData(x), m, n)
}

//go:noescape
func geluMulNEON(gate, u *float32, n int)

// geluMulSIMD does g[i] = GELUTanh(g[i])*u[i] for g[:len(g)&^3] with
// geluMulNEON and returns how many it did.
func geluMulSIMD(g, u []float32) int {
	n := len(g) &^ 3
	if !hasNEON || n == 0 {
		return 0
	}
	_ = u[n-1]
	geluMulNEON(unsafe.SliceData(g), unsafe.SliceData(u), n)
	return n
}
