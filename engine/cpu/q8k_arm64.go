package cpu

//go:noescape
func quantizeQ8KNEON(x *float32, nb int, q *int8, qstride int, recs *kRec, rstride int)

// quantizeQ8KIntoSIMD runs quantizeQ8KNEON with quantizeQ8KInto's strides;
// false (nothing done) without NEON.
func quantizeQ8KIntoSIMD(q []int8, qstep int, recs []kRec, rstep int, x []float32) bool {
	nb := len(x) / qkK
	if !hasNEON || nb == 0 {
		return false
	}
	_, _ = q[(nb-1)*qstep+qkK-1], recs[(nb-1)*rstep]
	quantizeQ8KNEON(&x[0], nb, &q[0], qstep, &recs[0], rstep*kRecBytes)
	return true
}
