//go:build !amd64 && !arm64

package cpu

import "anechat/engine/model/gguf"

// Pure-Go builds: the SIMD entry points decline and the Go loops run.

func dotSIMD(a, b []float32) (float32, int) { return 0, 0 }

func dequantSIMD(dst []float32, t gguf.Type, src []byte) bool { return false }

func dot3SIMD(w, x0, x1, x2 []float32) ([3]float32, int) { return [3]float32{}, 0 }

func dotNSIMD(g int, t gguf.Type, row []byte, x []float32, cols int, out *[4]float32) int { return 0 }

func hasRunKernels(headDim int) bool { return false }

func dotRowsSIMD(q, k []float32, kstride int, scale float32, out []float32) bool { return false }

func wsumSIMD(out, v []float32, vstride int, w []float32) bool { return false }

func siluMulSIMD(g, u []float32) int { return 0 }

func expShiftedSIMD(x []float32, m float32) int { return 0 }

func geluMulSIMD(g, u []float32) int { return 0 }

func f16SIMD(dst []float32, src []byte) int { return 0 }

func bf16SIMD(dst []float32, src []byte) int { return 0 }

func quantizeQ8IntoSIMD(q []int8, qstep int, d, s []float32, qs []int32, sstep int, x []float32) bool {
	return false
}

func (m *Matrix) matMulQ8(p *Pool, out []float32, in *Input, n int) bool { return false }

func axpySIMD(y []float32, a float32, x []float32) int { return 0 }

// rowsTask is the row kernels' loop (q8rows_amd64.go); without them an
// Input carries an empty one.
type rowsTask struct{}

func hasIntegerKernels(t gguf.Type) bool { return false }
