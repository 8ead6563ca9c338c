package cpu

import (
	"math"
	"unsafe"
)

// Q8_K: the 8-bit activations the K formats (Q2_K..Q6_K) multiply, as
// llama.cpp's CPU path quantises them for those weights (block_q8_K): one
// float32 scale per 256 values, and the sums of q per 16 and per 32 values,
// which the K formats' mins and offsets multiply.
const (
	qkK = 256 // values per K block
	// kSums is the number of int16 sums per token per K block: the 8 sums
	// of 32 values (S32), then the 16 sums of 16 (S16).
	kSums = 24
)

// quantizeQ8K quantises x (a multiple of 256 floats) per block of 256 as
// quantizeQ8 does per block of 32: d = max|x|/127, q = x·(1/d) rounded to
// nearest (ties to even) and clamped to ±127 (a product out of int32 range
// or NaN becomes INT_MIN before the clamp), then the block's sums of q:
// sums[b*kSums+j] = Σ q[32j..32j+31] (j < 8), sums[b*kSums+8+k] =
// Σ q[16k..16k+15]. It depends on x alone, so a token quantises the same in
// any batch.
func quantizeQ8K(q []int8, d []float32, sums []int16, x []float32) {
	for b := range len(x) / qkK {
		blk := x[b*qkK : (b+1)*qkK : (b+1)*qkK]
		qb := q[b*qkK : (b+1)*qkK : (b+1)*qkK]
		var amax float32
		for _, v := range blk {
			amax = max(amax, math.Float32frombits(math.Float32bits(v)&^(1<<31)))
		}
		db := amax / 127
		var id float32
		if db != 0 {
			id = 1 / db
		}
		for i, v := range blk {
			p := float32(v * id) // a conversion: never fused with what follows
			qi := int32(math.MinInt32)
			if p >= -(1<<31) && p < 1<<31 {
				qi = int32(math.RoundToEven(float64(p)))
			}
			qb[i] = int8(max(-127, min(127, qi)))
		}
		d[b] = db
		s := sums[b*kSums : (b+1)*kSums : (b+1)*kSums]
		for k := range 16 {
			var sum int16
			for _, v := range qb[16*k : 16*k+16] {
				sum += int16(v)
			}
			s[8+k] = sum
		}
		for j := range 8 {
			s[j] = s[8+2*j] + s[8+2*j+1]
		}
	}
}

// kRec is one token's scalars of one Q8_K block as the row kernels read
// them: 64 bytes, d_x at 0, the sums of 32 at 16, the sums of 16 at 32.
type kRec struct {
	d   float32
	_   [3]int32
	s32 [8]int16
	s16 [16]int16
}

// kRecBytes is the size of a kRec (the kernels' token stride).
const kRecBytes = int(unsafe.Sizeof(kRec{}))

// quantizeQ8KInto is quantizeQ8K of one token's x (nb blocks of 256)
// written with strides: block b's values at q[b*qstep:], its scale and
// sums at recs[b*rstep] (steps in elements).
func quantizeQ8KInto(q []int8, qstep int, recs []kRec, rstep int, x []float32) {
	if quantizeQ8KIntoSIMD(q, qstep, recs, rstep, x) {
		return // quantizeQ8KAVX2 or quantizeQ8KNEON: the same bits
	}
	var bd [1]float32
	var bs [kSums]int16
	for b := range len(x) / qkK {
		quantizeQ8K(q[b*qstep:b*qstep+qkK], bd[:], bs[:], x[b*qkK:(b+1)*qkK])
		r := &recs[b*rstep]
		r.d = bd[0]
		copy(r.s32[:], bs[:8])
		copy(r.s16[:], bs[8:])
	}
}

// inputK is an Input's Q8_K form for the K formats, laid out as the row
// kernels read it (as Input's 8-bit form for the 32-value formats): the
// values grouped by kernel call (groups of 8 tokens, then 4, 2, 1; token
// t+j of a group starting at t has block b at q[(t*nb+b*g+j)*256:]), the
// scalars transposed (block b of token t at recs[b*ts+t]), ts = tokens + 3.
type inputK struct {
	q    []int8
	recs []kRec
	ts   int
}

// q8K computes the Q8_K form of the input on first use (after NewInput or
// Reset), in buffers it keeps for the next use.
func (in *Input) q8K() *inputK {
	if !in.kQuantised {
		n, nb := len(in.X)/in.Cols, in.Cols/qkK
		k := &in.k
		k.ts = n + 3
		k.q = grow(k.q, n*in.Cols)
		k.recs = grow(k.recs, nb*k.ts)
		clear(k.recs) // the padding after each block's n stays zero
		for t := 0; t < n; {
			g := rowGroupSize(n - t)
			for j := range g {
				quantizeQ8KInto(k.q[(t*nb+j)*qkK:], g*qkK, k.recs[t+j:], k.ts, in.X[(t+j)*in.Cols:(t+j+1)*in.Cols])
			}
			t += g
		}
		in.kQuantised = true
	}
	return &in.k
}

// groupOffset returns where token t's first block sits in a grouped
// layout of n tokens with blocks of bsize values and nb blocks per token
// (Input.qG, inputK.q), and the step between its blocks.
func groupOffset(t, n, nb, bsize int) (off, step int) {
	for t0 := 0; t0 < n; {
		g := rowGroupSize(n - t0)
		if t < t0+g {
			return (t0*nb + t - t0) * bsize, g * bsize
		}
		t0 += g
	}
	panic("cpu: token out of range")
}
