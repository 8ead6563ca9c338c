package cpu

import (
	"golang.org/x/sys/cpu"

	"anechat/engine/model/gguf"
)

// hasVNNI selects the VPDPBUSD variants of the integer kernels
// (q8vnni_amd64.s): EVEX-encoded on YMM registers, so they need AVX-512 VNNI
// and VL. Their results are bit-identical to the AVX2 kernels.
var hasVNNI = hasQ8 && cpu.X86.HasAVX512VNNI && cpu.X86.HasAVX512VL

//go:noescape
func dotQ41Q8x1V(w *byte, nb int, qx *int8, dx, sx *float32, qstride, dstride int, out *float32)

//go:noescape
func dotQ41Q8x2V(w *byte, nb int, qx *int8, dx, sx *float32, qstride, dstride int, out *float32)

//go:noescape
func dotQ41Q8x4V(w *byte, nb int, qx *int8, dx, sx *float32, qstride, dstride int, out *float32)

//go:noescape
func dotQ40Q8x1V(w *byte, nb int, qx *int8, dx, sx *float32, qstride, dstride int, out *float32)

//go:noescape
func dotQ40Q8x2V(w *byte, nb int, qx *int8, dx, sx *float32, qstride, dstride int, out *float32)

//go:noescape
func dotQ40Q8x4V(w *byte, nb int, qx *int8, dx, sx *float32, qstride, dstride int, out *float32)

//go:noescape
func dotQ80Q8x1V(w *byte, nb int, qx *int8, dx, sx *float32, qstride, dstride int, out *float32)

//go:noescape
func dotQ80Q8x2V(w *byte, nb int, qx *int8, dx, sx *float32, qstride, dstride int, out *float32)

//go:noescape
func dotQ80Q8x4V(w *byte, nb int, qx *int8, dx, sx *float32, qstride, dstride int, out *float32)

// vnniKernels returns the VNNI kernels for t (nil if none).
func vnniKernels(t gguf.Type) (x1, x2, x4 q8Kernel) {
	switch t {
	case gguf.Q4_0:
		return dotQ40Q8x1V, dotQ40Q8x2V, dotQ40Q8x4V
	case gguf.Q4_1:
		return dotQ41Q8x1V, dotQ41Q8x2V, dotQ41Q8x4V
	case gguf.Q8_0:
		return dotQ80Q8x1V, dotQ80Q8x2V, dotQ80Q8x4V
	}
	return nil, nil, nil
}
