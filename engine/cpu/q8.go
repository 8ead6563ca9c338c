package cpu

import "math"

// quantizeQ8 quantises x (a multiple of 32 floats) to 8 bits per block of 32
// for the integer kernels: d = max|x|/127, q = x/d rounded to nearest (ties
// to even, by the float32 magic-number add), and s = d·Σq (the block's
// dequantised sum, for Q4 offsets). It depends on x alone, so a token's
// activations quantise the same in any batch.
func quantizeQ8(q []int8, d, s, x []float32) {
	const magic = 12582912 // 1.5·2^23: f+magic holds round(f) in its low mantissa bits
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
			qi := int32(math.Float32bits(v*id+magic)) - 0x4b400000
			qi = max(-127, min(127, qi))
			qb[i] = int8(qi)
			sum += qi
		}
		d[b] = db
		s[b] = db * float32(sum)
	}
}

// Input is the activations of one call: rows of Cols floats, one per token.
// Several matrices that read the same input (q, k and v; gate and up) share
// one Input, so its 8-bit form for the integer kernels is computed once.
type Input struct {
	X    []float32
	Cols int
	q    []int8
	d, s []float32
	// dT, sT are d and s transposed: block b's values for tokens 0..n-1 at
	// [b*tstride:], with 3 zero floats of padding after each block's n, so
	// a kernel may always read 4 tokens' scales with one load (the VNNI
	// kernels; see q8vnni_amd64.s).
	dT, sT  []float32
	tstride int
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
		for t := range n {
			quantizeQ8(in.q[t*in.Cols:(t+1)*in.Cols], in.d[t*nb:(t+1)*nb], in.s[t*nb:(t+1)*nb], in.X[t*in.Cols:(t+1)*in.Cols])
		}
	}
	return in.q, in.d, in.s
}

// q8T returns the 8-bit form of the input with the transposed scales and
// sums, and their block stride in floats.
func (in *Input) q8T() ([]int8, []float32, []float32, int) {
	q, d, s := in.q8()
	if in.dT == nil {
		n, nb := len(in.X)/in.Cols, in.Cols/32
		in.tstride = n + 3
		in.dT = make([]float32, nb*in.tstride)
		in.sT = make([]float32, nb*in.tstride)
		for t := range n {
			for b := range nb {
				in.dT[b*in.tstride+t] = d[t*nb+b]
				in.sT[b*in.tstride+t] = s[t*nb+b]
			}
		}
	}
	return q, in.dT, in.sT, in.tstride
}
