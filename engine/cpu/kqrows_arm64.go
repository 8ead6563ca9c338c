package cpu

import "unsafe"

// The K-format row kernels on arm64 (kqrows_arm64.s, SDOT): Q4_K, with
// the arguments of the amd64 ones (kqrows_amd64.go) and the canonical sums
// of dotref.go. The other K formats and Q5_0/Q5_1 run the Go loops here.

//go:noescape
func rowsQ4Kx1N(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ4Kx2N(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ4Kx4N(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ4Kx8N(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
