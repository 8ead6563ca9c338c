package cpu

import "anechat/engine/model/gguf"

//go:noescape
func dotQ41Q8x1(w *byte, nb int, qx *int8, dx, sx *float32, qstride, dstride int, out *float32)

//go:noescape
func dotQ41Q8x4(w *byte, nb int, qx *int8, dx, sx *float32, qstride, dstride int, out *float32)

//go:noescape
func dotQ40Q8x1(w *byte, nb int, qx *int8, dx, sx *float32, qstride, dstride int, out *float32)

//go:noescape
func dotQ40Q8x4(w *byte, nb int, qx *int8, dx, sx *float32, qstride, dstride int, out *float32)

//go:noescape
func dotQ80Q8x1(w *byte, nb int, qx *int8, dx, sx *float32, qstride, dstride int, out *float32)

//go:noescape
func dotQ41Q8x2(w *byte, nb int, qx *int8, dx, sx *float32, qstride, dstride int, out *float32)

//go:noescape
func dotQ40Q8x2(w *byte, nb int, qx *int8, dx, sx *float32, qstride, dstride int, out *float32)

//go:noescape
func dotQ80Q8x2(w *byte, nb int, qx *int8, dx, sx *float32, qstride, dstride int, out *float32)

//go:noescape
func dotQ80Q8x4(w *byte, nb int, qx *int8, dx, sx *float32, qstride, dstride int, out *float32)

//go:noescape
func quantizeQ8AVX2(x *float32, nb int, q *int8, qstride int, d, s *float32, qs *int32, sstride int)

// quantizeQ8SIMD runs quantizeQ8AVX2 where the integer kernels run.
func quantizeQ8SIMD(q []int8, d, s []float32, qs []int32, x []float32) bool {
	nb := len(x) / 32
	if !hasQ8 || nb == 0 {
		return false
	}
	_, _, _, _ = q[nb*32-1], d[nb-1], s[nb-1], qs[nb-1]
	quantizeQ8AVX2(&x[0], nb, &q[0], 32, &d[0], &s[0], &qs[0], 4)
	return true
}

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

// q8Kernel is an integer dot kernel over 1, 2 or 4 tokens.
type q8Kernel func(w *byte, nb int, qx *int8, dx, sx *float32, qstride, dstride int, out *float32)

// q8Kernels returns the 1-, 2- and 4-token integer kernels for t, nil if none.
func q8Kernels(t gguf.Type) (x1, x2, x4 q8Kernel) {
	if !hasQ8 {
		return nil, nil, nil
	}
	switch t {
	case gguf.Q4_0:
		return dotQ40Q8x1, dotQ40Q8x2, dotQ40Q8x4
	case gguf.Q4_1:
		return dotQ41Q8x1, dotQ41Q8x2, dotQ41Q8x4
	case gguf.Q8_0:
		return dotQ80Q8x1, dotQ80Q8x2, dotQ80Q8x4
	}
	return nil, nil, nil
}

// matMulQ8 is MatMul for quantised weights with 8-bit activations: each
// token's row of the input is quantised once (Input). With AVX-512 VNNI the
// row kernels take 8 weight rows and up to 8 tokens per call (matMulRows);
// else the AVX2 kernels take one weight row and up to four tokens per pass.
// It reports false when the CPU or the type has no integer kernel.
func (m *Matrix) matMulQ8(p *Pool, out []float32, in *Input, n int) bool {
	if in.Cols != m.Cols {
		return false
	}
	if m.matMulRows(p, out, in, n) {
		return true
	}
	k1, k2, k4 := q8Kernels(m.Type)
	if k1 == nil {
		return false
	}
	cols, nb := m.Cols, m.Cols/32
	qx, dv, sv := in.q8()
	step, dstride := nb, 4*nb
	const chunk = 16
	// The kernels' 4 results, one cache line per worker: a local array
	// would escape to the heap (its address goes through a func value), one
	// allocation per chunk of rows.
	const line = 16
	results := make([]float32, line*p.Workers())
	p.For(m.Rows, chunk, cols*n/2, func(worker, lo, hi int) {
		res := results[worker*line : worker*line+4 : worker*line+4]
		for r := lo; r < hi; r++ {
			w := &m.Data[r*m.rowBytes]
			t := 0
			for ; t+4 <= n; t += 4 {
				k4(w, nb, &qx[t*cols], &dv[t*step], &sv[t*step], cols, dstride, &res[0])
				for j := range 4 {
					out[(t+j)*m.Rows+r] = res[j]
				}
			}
			if t+2 <= n {
				k2(w, nb, &qx[t*cols], &dv[t*step], &sv[t*step], cols, dstride, &res[0])
				out[t*m.Rows+r], out[(t+1)*m.Rows+r] = res[0], res[1]
				t += 2
			}
			for ; t < n; t++ {
				k1(w, nb, &qx[t*cols], &dv[t*step], &sv[t*step], cols, dstride, &res[0])
				out[t*m.Rows+r] = res[0]
			}
		}
	})
	return true
}
