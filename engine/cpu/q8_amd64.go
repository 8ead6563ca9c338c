package cpu

import "anechat/engine/model/gguf"

//go:noescape
func quantizeQ8AVX2(x *float32, nb int, q *int8, qstride int, d, s *float32, qs *int32, sstride int)

// quantizeQ8IntoSIMD runs quantizeQ8AVX2 with quantizeQ8Into's strides.
func quantizeQ8IntoSIMD(q []int8, qstep int, d, s []float32, qs []int32, sstep int, x []float32) bool {
	nb := len(x) / 32
	if !hasQ8 || nb == 0 {
		return false
	}
	_, _, _, _ = q[(nb-1)*qstep+31], d[(nb-1)*sstep], s[(nb-1)*sstep], qs[(nb-1)*sstep]
	quantizeQ8AVX2(&x[0], nb, &q[0], qstep, &d[0], &s[0], &qs[0], 4*sstep)
	return true
}

// hasQ8 selects the integer kernels for Q4_0, Q4_1 and Q8_0 weights.
var hasQ8 = hasF16C

// matMulQ8 is MatMul for quantised weights with 8-bit activations: each
// token's row of the input is quantised once (Input), then the row kernels
// take 8 weight rows and up to 8 tokens per call (matMulRows; VNNI or AVX2
// forms). It reports false when the CPU or the type has no integer kernel.
func (m *Matrix) matMulQ8(p *Pool, out []float32, in *Input, n int) bool {
	return in.Cols == m.Cols && m.matMulRows(p, out, in, n)
}

// hasIntegerKernels reports whether t's weights have row kernels here (the
// other integer formats run the Go loops of dotref.go, with the same sums).
func hasIntegerKernels(t gguf.Type) bool { return rowKernels(t)[1] != nil }
