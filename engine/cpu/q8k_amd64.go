package cpu

//go:noescape
func quantizeQ8KAVX2(x *float32, nb int, q *int8, qstride int, recs *kRec, rstride int)

// quantizeQ8KIntoSIMD runs quantizeQ8KAVX2 with quantizeQ8KInto's strides;
// false (nothing done) without AVX2.
func quantizeQ8KIntoSIMD(q []int8, qstep int, recs []kRec, rstep int, x []float32) bool {
	nb := len(x) / qkK
	if !hasQ8 || nb == 0 {
		return false
	}
	_, _ = q[(nb-1)*qstep+qkK-1], recs[(nb-1)*rstep]
	quantizeQ8KAVX2(&x[0], nb, &q[0], qstep, &recs[0], rstep*kRecBytes)
	return true
}
