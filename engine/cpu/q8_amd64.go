package cpu

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
