package cpu

import (
	"unsafe"

	"anechat/engine/model/gguf"
)

// The row kernels of the formats added after Q4_0/Q4_1/Q8_0: Q5_0 and
// Q5_1 (q5rows_amd64.s with AVX-512 VNNI, q5rowsavx2_amd64.s with AVX2)
// and the K formats (kqrows_amd64.s, kqrowsavx2_amd64.s), each computing
// the canonical sums of dotref.go. Their arguments are rowKernel's; for
// the K formats qx is the Q8_K values (inputK.q), dx the group's first
// record of inputK.recs (tokens 64 bytes apart: d_x, then the sums) and sx
// unused.

//go:noescape
func rowsQ50x1(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ50x2(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ50x4(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ50x8(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ51x1(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ51x2(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ51x4(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ51x8(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ50x1A(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ50x2A(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ50x4A(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ50x8A(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ51x1A(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ51x2A(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ51x4A(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ51x8A(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ4Kx1A(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ4Kx2A(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ4Kx4A(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ4Kx8A(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ6Kx1A(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ6Kx2A(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ6Kx4A(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ6Kx8A(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ5Kx1(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ5Kx2(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ5Kx4(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ5Kx8(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ5Kx1A(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ5Kx2A(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ5Kx4A(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ5Kx8A(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

// moreRowKernels returns the row kernels of this file's formats on this
// CPU (ok false for the other formats, which q8rows_amd64.go handles); a
// format without kernels here gets none (the Go loops run).
func moreRowKernels(t gguf.Type) (k [9]rowKernel, ok bool) {
	switch t {
	case gguf.Q5_0, gguf.Q5_1, gguf.Q2_K, gguf.Q3_K, gguf.Q4_K, gguf.Q5_K, gguf.Q6_K:
	default:
		return k, false
	}
	if hasVNNI {
		switch t {
		case gguf.Q5_0:
			k[1], k[2], k[4], k[8] = rowsQ50x1, rowsQ50x2, rowsQ50x4, rowsQ50x8
		case gguf.Q5_1:
			k[1], k[2], k[4], k[8] = rowsQ51x1, rowsQ51x2, rowsQ51x4, rowsQ51x8
		case gguf.Q4_K:
			k[1], k[2], k[4], k[8] = rowsQ4Kx1, rowsQ4Kx2, rowsQ4Kx4, rowsQ4Kx8
		case gguf.Q5_K:
			k[1], k[2], k[4], k[8] = rowsQ5Kx1, rowsQ5Kx2, rowsQ5Kx4, rowsQ5Kx8
		case gguf.Q6_K:
			k[1], k[2], k[4], k[8] = rowsQ6Kx1, rowsQ6Kx2, rowsQ6Kx4, rowsQ6Kx8
		}
	}
	if !hasVNNI && hasQ8 {
		// The AVX2 forms (q5rowsavx2_amd64.s, kqrowsavx2_amd64.s).
		switch t {
		case gguf.Q5_0:
			k[1], k[2], k[4], k[8] = rowsQ50x1A, rowsQ50x2A, rowsQ50x4A, rowsQ50x8A
		case gguf.Q5_1:
			k[1], k[2], k[4], k[8] = rowsQ51x1A, rowsQ51x2A, rowsQ51x4A, rowsQ51x8A
		case gguf.Q4_K:
			k[1], k[2], k[4], k[8] = rowsQ4Kx1A, rowsQ4Kx2A, rowsQ4Kx4A, rowsQ4Kx8A
		case gguf.Q5_K:
			k[1], k[2], k[4], k[8] = rowsQ5Kx1A, rowsQ5Kx2A, rowsQ5Kx4A, rowsQ5Kx8A
		case gguf.Q6_K:
			k[1], k[2], k[4], k[8] = rowsQ6Kx1A, rowsQ6Kx2A, rowsQ6Kx4A, rowsQ6Kx8A
		}
	}
	return k, true
}

//go:noescape
func rowsQ4Kx1(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ4Kx2(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ4Kx4(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ4Kx8(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ6Kx1(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ6Kx2(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ6Kx4(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ6Kx8(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
