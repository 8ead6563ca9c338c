package cpu

import (
	"unsafe"

	"golang.org/x/sys/cpu"

	"anechat/engine/model/gguf"
)

// hasVNNI selects the row kernels (q8rows_amd64.s): VPDPBUSD with embedded
// broadcasts on YMM registers, so they need AVX-512 VNNI, VL, BW and F.
var hasVNNI = hasQ8 && cpu.X86.HasAVX512VNNI && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512F

//go:noescape
func rowsQ41x1(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ41x2(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ41x4(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ40x1(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ40x2(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ40x4(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ80x1(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ80x2(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ80x4(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ41x8(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ40x8(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ80x8(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ41x1A(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ41x2A(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ41x4A(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ41x8A(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ40x1A(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ40x2A(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ40x4A(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ40x8A(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ80x1A(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ80x2A(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ80x4A(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ80x8A(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

// rowKernels returns the row kernels for t on this CPU by group size
// (index 1, 2, 4, 8; nil if none): the VNNI forms, or the AVX2 forms. Both
// compute the canonical sum (dotQ8Ref).
func rowKernels(t gguf.Type) (k [9]rowKernel) {
	if k, ok := moreRowKernels(t); ok {
		return k // Q5_0, Q5_1 and the K formats (kqrows_amd64.go)
	}
	if hasVNNI {
		switch t {
		case gguf.Q4_0:
			k[1], k[2], k[4], k[8] = rowsQ40x1, rowsQ40x2, rowsQ40x4, rowsQ40x8
		case gguf.Q4_1:
			k[1], k[2], k[4], k[8] = rowsQ41x1, rowsQ41x2, rowsQ41x4, rowsQ41x8
		case gguf.Q8_0:
			k[1], k[2], k[4], k[8] = rowsQ80x1, rowsQ80x2, rowsQ80x4, rowsQ80x8
		}
		return k
	}
	if hasQ8 {
		// The AVX2 forms (q8rowsavx2_amd64.s).
		switch t {
		case gguf.Q4_0:
			k[1], k[2], k[4], k[8] = rowsQ40x1A, rowsQ40x2A, rowsQ40x4A, rowsQ40x8A
		case gguf.Q4_1:
			k[1], k[2], k[4], k[8] = rowsQ41x1A, rowsQ41x2A, rowsQ41x4A, rowsQ41x8A
		case gguf.Q8_0:
			k[1], k[2], k[4], k[8] = rowsQ80x1A, rowsQ80x2A, rowsQ80x4A, rowsQ80x8A
		}
	}
	return k
}
