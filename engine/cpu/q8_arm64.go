package cpu

//go:noescape
func quantizeQ8NEON(x *float32, nb int, q *int8, qstride int, d, s *float32, qs *int32, sstride int)

// quantizeQ8IntoSIMD runs quantizeQ8NEON with quantizeQ8Into's strides.
func quantizeQ8IntoSIMD(q []int8, qstep int, d, s []float32, qs []int32, sstep int, x []float32) bool {
	nb := len(x) / 32
	if !hasNEON || nb == 0 {
		return false
	}
	_, _, _, _ = q[(nb-1)*qstep+31], d[(nb-1)*sstep], s[(nb-1)*sstep], qs[(nb-1)*sstep]
	quantizeQ8NEON(&x[0], nb, &q[0], qstep, &d[0], &s[0], &qs[0], 4*sstep)
	return true
}
