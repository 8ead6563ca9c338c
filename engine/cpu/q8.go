package cpu

import "math"

// quantizeQ8 quantises x (a multiple of 32 floats) to 8 bits per block of 32
// for the integer kernels: d = max|x|/127, q = x·(1/d) rounded to nearest
// (ties to even) and clamped to ±127, qs = Σq and s = d·qs (the block's
// dequantised sum, for Q4 offsets). It depends on x alone, so a token's
// activations quantise the same in any batch. This is the definition;
// quantizeQ8Into writes the kernels' layouts, with quantizeQ8AVX2 where it
// runs, which gives the same bits for finite input (for a block holding a
// NaN both give NaN d and s and q all -127). A product out of int32 range
// (only when d underflows) or NaN becomes INT_MIN before the clamp, as
// VCVTPS2DQ does.
func quantizeQ8(q []int8, d, s []float32, qs []int32, x []float32) {
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

// quantizeQ8Into is quantizeQ8 of one token's x (nb blocks) written with
// strides: block b's values at q[b*qstep:], its scalars at d, s, qs[b*sstep]
// (steps in elements).
func quantizeQ8Into(q []int8, qstep int, d, s []float32, qs []int32, sstep int, x []float32) {
	if quantizeQ8IntoSIMD(q, qstep, d, s, qs, sstep, x) {
		return
	}
	var bq [32]int8
	var bd, bs [1]float32
	var bqs [1]int32
	for b := range len(x) / 32 {
		quantizeQ8(bq[:], bd[:], bs[:], bqs[:], x[b*32:b*32+32])
		copy(q[b*qstep:b*qstep+32], bq[:])
		d[b*sstep], s[b*sstep], qs[b*sstep] = bd[0], bs[0], bqs[0]
	}
}

// Input is the activations of one call: rows of Cols floats, one per token.
// Several matrices that read the same input (q, k and v; gate and up) share
// one Input, so its 8-bit form for the integer kernels is computed once. An
// Input kept in a Forward's scratch is Reset for each use and keeps its
// buffers, so the matrix products of a decode step allocate nothing.
type Input struct {
	X    []float32
	Cols int
	// dT, sT, qsT, qs8T, qs16T and qs128T are quantizeQ8's block scales d,
	// dequantised block sums s and integer block sums qs (plain, and times
	// 8, 16 and 128: the offsets of Q4_0, Q5_0 and Q8_0 weights), transposed:
	// block b's values for tokens 0..n-1 at [b*tstride:], with 3 zero
	// values of padding after each block's n. The row kernels
	// (q8rows_amd64.s) read them per block, a token at a fixed offset.
	dT, sT                   []float32
	qsT, qs8T, qs16T, qs128T []int32
	tstride                  int
	// qG is the 8-bit values with each kernel group's tokens interleaved
	// per block: groups of 8 tokens, then one of 4, 2, 1 (rowGroupSize), as
	// matMulRows calls the kernels; a group starting at token t holds token
	// t+j's block b at qG[(t*nb+b*g+j)*32:].
	qG []int8
	// quantised is true once the fields above hold X's 8-bit form;
	// fbuf and ibuf back dT, sT and qsT, qs8T, qs16T, qs128T.
	quantised bool
	fbuf      []float32
	ibuf      []int32
	// work is the per-worker scratch of the products that read this input
	// (dequantised rows, padded rows' results), one product at a time.
	work []float32
	// mm and rows are the loop bodies of those products (Pool.Run).
	mm   matTask
	rows rowsTask
	ref  refTask
	// k is the Q8_K form for the K formats (q8K), valid when kQuantised.
	k          inputK
	kQuantised bool
}

// NewInput wraps x (tokens of cols floats each).
func NewInput(x []float32, cols int) *Input { return &Input{X: x, Cols: cols} }

// Reset makes in the input x (tokens of cols floats), keeping its buffers.
func (in *Input) Reset(x []float32, cols int) {
	in.X, in.Cols, in.quantised, in.kQuantised = x, cols, false, false
}

// scratch returns n floats of in's per-worker scratch.
func (in *Input) scratch(n int) []float32 {
	if cap(in.work) < n {
		in.work = make([]float32, n)
	}
	return in.work[:n]
}

// q8T computes the row kernels' form of the input on first use: the
// 8-bit values grouped (qG) and the scalars transposed, quantised straight
// into that layout (the token-major q8 form is not needed for them); it
// returns the block stride of the transposed copies in values.
func (in *Input) q8T() int {
	if !in.quantised {
		n, nb := len(in.X)/in.Cols, in.Cols/32
		ts := n + 3
		in.tstride = ts
		in.fbuf, in.ibuf = grow(in.fbuf, 2*nb*ts), grow(in.ibuf, 4*nb*ts)
		f, q := in.fbuf, in.ibuf
		clear(f) // the padding after each block's n stays zero
		clear(q)
		in.dT, in.sT = f[:nb*ts:nb*ts], f[nb*ts:]
		in.qsT, in.qs8T, in.qs16T, in.qs128T = q[:nb*ts:nb*ts], q[nb*ts:2*nb*ts:2*nb*ts], q[2*nb*ts:3*nb*ts:3*nb*ts], q[3*nb*ts:]
		qsT := in.qsT
		in.qG = grow(in.qG, n*in.Cols)
		for t := 0; t < n; {
			g := rowGroupSize(n - t)
			for j := range g {
				// Token t+j's block b goes to qG[(t*nb + b*g + j)*32].
				quantizeQ8Into(in.qG[(t*nb+j)*32:], g*32, in.dT[t+j:], in.sT[t+j:], qsT[t+j:], ts, in.X[(t+j)*in.Cols:(t+j+1)*in.Cols])
			}
			t += g
		}
		for i, v := range qsT {
			in.qs8T[i], in.qs16T[i], in.qs128T[i] = 8*v, 16*v, 128*v
		}
		in.quantised = true
	}
	return in.tstride
}

// grow returns buf[:n], reallocated when its capacity is short (contents
// then lost).
func grow[T any](buf []T, n int) []T {
	if cap(buf) < n {
		return make([]T, n)
	}
	return buf[:n]
}

// rowGroupSize is the number of tokens the next row-kernel call takes when
// left tokens remain: 8 while there are 8, then 4, 2, 1.
func rowGroupSize(left int) int {
	if left >= 8 {
		return 8
	}
	return groupSize(left)
}

// groupSize is the number of tokens the next fused float kernel call takes
// when left tokens remain: 4 while there are 4, then 2, then 1.
func groupSize(left int) int {
	switch {
	case left >= 4:
		return 4
	case left >= 2:
		return 2
	}
	return 1
}
