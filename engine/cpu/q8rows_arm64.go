package cpu

import (
	"runtime"
	"unsafe"

	"golang.org/x/sys/cpu"

	"anechat/engine/model/gguf"
)

// hasSDOT selects the integer row kernels (q8rows_arm64.s): they need the
// dot-product extension (SDOT), which every Apple M-series core has
// (macOS 11 lacks the sysctl x/sys/cpu reads, hence the darwin case) and
// most arm64 servers since Neoverse N1.
var hasSDOT = hasNEON && (cpu.ARM64.HasASIMDDP || runtime.GOOS == "darwin")

//go:noescape
func rowsQ40x1N(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ40x2N(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ40x4N(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ40x8N(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ41x1N(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ41x2N(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ41x4N(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ41x8N(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ80x1N(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ80x2N(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ80x4N(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ80x8N(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ50x1N(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ50x2N(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ50x4N(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ50x8N(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ51x1N(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ51x2N(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ51x4N(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ51x8N(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

// rowKernels returns the row kernels for t by group size (index 1, 2, 4,
// 8; nil if none): the SDOT forms, which compute the canonical sum
// (dotQ8Ref) as the amd64 forms do.
func rowKernels(t gguf.Type) (k [9]rowKernel) {
	if !hasSDOT {
		return k
	}
	switch t {
	case gguf.Q4_0:
		k[1], k[2], k[4], k[8] = rowsQ40x1N, rowsQ40x2N, rowsQ40x4N, rowsQ40x8N
	case gguf.Q4_1:
		k[1], k[2], k[4], k[8] = rowsQ41x1N, rowsQ41x2N, rowsQ41x4N, rowsQ41x8N
	case gguf.Q8_0:
		k[1], k[2], k[4], k[8] = rowsQ80x1N, rowsQ80x2N, rowsQ80x4N, rowsQ80x8N
	case gguf.Q4_K:
		k[1], k[2], k[4], k[8] = rowsQ4Kx1N, rowsQ4Kx2N, rowsQ4Kx4N, rowsQ4Kx8N // kqrows_arm64.s
	case gguf.Q5_0:
		k[1], k[2], k[4], k[8] = rowsQ50x1N, rowsQ50x2N, rowsQ50x4N, rowsQ50x8N
	case gguf.Q5_1:
		k[1], k[2], k[4], k[8] = rowsQ51x1N, rowsQ51x2N, rowsQ51x4N, rowsQ51x8N
	case gguf.Q5_K:
		k[1], k[2], k[4], k[8] = rowsQ5Kx1N, rowsQ5Kx2N, rowsQ5Kx4N, rowsQ5Kx8N // kqrows_arm64.s
	case gguf.Q6_K:
		k[1], k[2], k[4], k[8] = rowsQ6Kx1N, rowsQ6Kx2N, rowsQ6Kx4N, rowsQ6Kx8N
	case gguf.Q3_K:
		k[1], k[2], k[4], k[8] = rowsQ3Kx1N, rowsQ3Kx2N, rowsQ3Kx4N, rowsQ3Kx8N // kq23rows_arm64.s
	case gguf.Q2_K:
		k[1], k[2], k[4], k[8] = rowsQ2Kx1N, rowsQ2Kx2N, rowsQ2Kx4N, rowsQ2Kx8N // kq23rows_arm64.s
	}
	return k
}
