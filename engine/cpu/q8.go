package cpu

import "math"

// quantizeQ8 quantises x (a multiple of 32 floats) to 8 bits per block of 32
// for the integer kernels: d = max|x|/127, q = x·(1/d) rounded to nearest
// (ties to even) and clamped to ±127, qs = Σq and s = d·qs (the block's
// dequantised sum, for Q4 offsets). It depends on x alone, so a token's
// activations quantise the same in any batch. quantizeQ8AVX2 gives the same
// bits; a product out of int32 range (only when d underflows) or NaN
// becomes INT_MIN before the clamp, as VCVTPS2DQ does.
func quantizeQ8(q []int8, d, s []float32, qs []int32, x []float32) {
	if quantizeQ8SIMD(q, d, s, qs, x) {
		return
	}
	quantizeQ8Go(q, d, s, qs, x)
}

func quantizeQ8Go(q []int8, d, s []float32, qs []int32, x []float32) {
	for b := range len(x) / 32 {
		blk := x[b*32 : b*32+32 : b*32+32]
		qb := q[b*32 : b*32+32 : b*32+32]
		var amax float32
		for _, v := range blk {
			amax = max(amax, math.Float32frombits(math.Float32bits(v)&^(1<<31)))
		}
		db := amax / 127
		var id float32
		if db != 0 {
			id = 1 / db
		}
		var sum int32
		for i, v := range blk {
			p := float32(v * id) // a conversion: never fused with what follows
			qi := int32(math.MinInt32)
			if p >= -(1<<31) && p < 1<<31 {
				qi = int32(math.RoundToEven(float64(p)))
			}
			qi = max(-127, min(127, qi))
			qb[i] = int8(qi)
			sum += qi
		}
		d[b] = db
		qs[b] = sum
		s[b] = db * float32(sum)
	}
}

// Input is the activations of one call: rows of Cols floats, one per token.
// Several matrices that read the same input (q, k and v; gate and up) share
// one Input, so its 8-bit form for the integer kernels is computed once.
type Input struct {
	X    []float32
	Cols int
	// q, d, s: the 8-bit values, block scales and dequantised block sums
	// of quantizeQ8, token-major (token t's block b at t*nb+b); qs the
	// integer block sums Σq.
	q    []int8
	d, s []float32
	qs   []int32
	// dT, sT, qs8T and qs128T are d, s, 8·qs and 128·qs transposed:
	// block b's values for tokens 0..n-1 at [b*tstride:], with 3 zero
	// values of padding after each block's n. The row kernels
	// (q8rows_amd64.s) read them per block, a token at a fixed offset.
	dT, sT       []float32
	qs8T, qs128T []int32
	tstride      int
	// qG is q with each kernel group's tokens interleaved per block (see
	// groupQ8): groups of 4 tokens, then one of 2, then one of 1, as
	// matMulRows calls the kernels.
	qG []int8
}

// NewInput wraps x (tokens of cols floats each).
func NewInput(x []float32, cols int) *Input { return &Input{X: x, Cols: cols} }

// q8 returns the 8-bit form of the input, computing it on first use.
func (in *Input) q8() ([]int8, []float32, []float32) {
	if in.q == nil {
		n, nb := len(in.X)/in.Cols, in.Cols/32
		in.q = make([]int8, n*in.Cols)
		in.d = make([]float32, n*nb)
		in.s = make([]float32, n*nb)
		in.qs = make([]int32, n*nb)
		for t := range n {
			quantizeQ8(in.q[t*in.Cols:(t+1)*in.Cols], in.d[t*nb:(t+1)*nb], in.s[t*nb:(t+1)*nb], in.qs[t*nb:(t+1)*nb], in.X[t*in.Cols:(t+1)*in.Cols])
		}
	}
	return in.q, in.d, in.s
}

// q8T computes the transposed scalars and the grouped values on first use
// and returns the block stride of the transposed copies in values.
func (in *Input) q8T() int {
	q, d, s := in.q8()
	if in.dT == nil {
		n, nb := len(in.X)/in.Cols, in.Cols/32
		ts := n + 3
		in.tstride = ts
		in.dT = make([]float32, nb*ts)
		in.sT = make([]float32, nb*ts)
		in.qs8T = make([]int32, nb*ts)
		in.qs128T = make([]int32, nb*ts)
		for t := range n {
			for b := range nb {
				in.dT[b*ts+t] = d[t*nb+b]
				in.sT[b*ts+t] = s[t*nb+b]
				in.qs8T[b*ts+t] = 8 * in.qs[t*nb+b]
				in.qs128T[b*ts+t] = 128 * in.qs[t*nb+b]
			}
		}
		in.qG = make([]int8, len(q))
		for t := 0; t < n; {
			g := groupSize(n - t)
			groupQ8(in.qG[t*in.Cols:(t+g)*in.Cols], q[t*in.Cols:(t+g)*in.Cols], g, in.Cols)
			t += g
		}
	}
	return in.tstride
}

// groupSize is the number of tokens the next kernel call takes when left
// tokens remain: 4 while there are 4, then 2, then 1.
func groupSize(left int) int {
	switch {
	case left >= 4:
		return 4
	case left >= 2:
		return 2
	}
	return 1
}

// groupQ8 interleaves the 8-bit values of g tokens (src, token-major, cols
// each) by block: block b of token t goes to dst[(b*g+t)*32:], so a kernel
// reads the g tokens' blocks from one advancing pointer.
func groupQ8(dst, src []int8, g, cols int) {
	for b := range cols / 32 {
		for t := range g {
			copy(dst[(b*g+t)*32:(b*g+t)*32+32], src[t*cols+b*32:t*cols+b*32+32])
		}
	}
}
