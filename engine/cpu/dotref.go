package cpu

import (
	"math"

	"anechat/engine/model/gguf"
)

// The canonical sums of the integer formats: how one weight row times one
// token's quantised activations is computed, whatever the width of the
// call and whatever the kernel (the AVX-512 VNNI and AVX2 row kernels of
// q8rows*_amd64.s, kq*_amd64.s, or these Go loops, which run where there
// are no such kernels and are the definition the assembly is tested
// against bit for bit). Integer parts are exact (int32); the float part is
// one chain of fused multiply-adds per row, each rounded once (fma32), over
// the blocks in order.
//
// 32-value formats (activations: quantizeQ8, d_x and Σq per 32), per block:
//
//	I = Σ w_i·q_i - o·Σq        w the stored value: Q4_0 nibble (o = 8),
//	                            Q5_0 5-bit value (o = 16), Q8_0 int8 (o = 0),
//	                            Q4_1/Q5_1 unsigned value (o = 0)
//	A = fma(d_w·d_x, float(I), A)
//	A = fma(m_w, s_x, A)        Q4_1 and Q5_1 only (s_x = d_x·Σq)
//
// K formats (activations: quantizeQ8K, d_x per 256, sums S32 and S16), per
// block of 256, with P_j the exact Σ w_i·q_i over sub-block j:
//
//	Q2_K  I = Σ_k sc_k·P_k (16 sub-blocks of 16, w 0..3),
//	      M = Σ_k m_k·S16_k
//	Q3_K  I = Σ_k (sc_k-32)·P_k (16 of 16, w -4..3), M = 0
//	Q4_K  I = Σ_j sc_j·P_j (8 sub-blocks of 32, w 0..15),
//	      M = Σ_j m_j·S32_j
//	Q5_K  as Q4_K with w 0..31
//	Q6_K  I = Σ_k sc_k·P_k (16 of 16, sc int8, w = q-32 in -32..31), M = 0
//
//	A = fma(d_w·d_x, float(I), A)
//	A = fma(dmin_w·d_x, -float(M), A)   Q2_K, Q4_K, Q5_K only
//
// |I| < 2^31 in every format; float(I) rounds to nearest even where |I|
// exceeds 2^24 (as VCVTDQ2PS does).

// fma32 returns a·b+c rounded once to float32, as a hardware float32 FMA
// (VFMADD231PS, arm64 FMADD) computes it, in portable Go: the product is
// exact in float64, and rounding the float64 sum s to float32 is the
// correct single rounding unless s sits exactly on a float32 tie (a
// float32 midpoint is a float64, so the exact sum and s can only round
// differently when s is one), or outside float32's normal range; those
// rare cases go to fma32Slow.
func fma32(a, b, c float32) float32 {
	p := float64(a) * float64(b)
	s := p + float64(c)
	bits := math.Float64bits(s)
	if e := bits >> 52 & 0x7ff; e > 1023-126 && e < 1023+127 && bits&(1<<29-1) != 1<<28 {
		return float32(s)
	}
	return fma32Slow(p, float64(c), s)
}

// fma32Slow is fma32 for a float32 tie or a result outside the normal
// range: the sum s = p+c is rounded to odd (if it is not exact, which
// TwoSum's error term tells, its last bit is forced to 1), and rounding
// that to float32 is the correct single rounding (53 ≥ 24+2 bits).
// Infinite and NaN operands give what the float64 sum gives.
func fma32Slow(p, c, s float64) float32 {
	if s-s != 0 { // ±Inf or NaN
		return float32(s)
	}
	bb := s - p
	e := (p - (s - bb)) + (c - bb) // s + e = p + c exactly
	if bits := math.Float64bits(s); e != 0 && bits&1 == 0 {
		if (e > 0) == (s > 0) {
			bits++
		} else {
			bits--
		}
		s = math.Float64frombits(bits)
	}
	return float32(s)
}

// integerType reports whether t's weights multiply quantised activations
// with the canonical sums above.
func integerType(t gguf.Type) bool {
	switch t {
	case gguf.Q4_0, gguf.Q4_1, gguf.Q5_0, gguf.Q5_1, gguf.Q8_0,
		gguf.Q2_K, gguf.Q3_K, gguf.Q4_K, gguf.Q5_K, gguf.Q6_K:
		return true
	}
	return false
}

// kFormat reports whether t is a K format (blocks of 256, Q8_K activations).
func kFormat(t gguf.Type) bool {
	switch t {
	case gguf.Q2_K, gguf.Q3_K, gguf.Q4_K, gguf.Q5_K, gguf.Q6_K:
		return true
	}
	return false
}

// dot32Ref is the canonical sum of a row of a 32-value format (nb blocks)
// with one token's activations: block b's values at q[b*qstep:], its d_x,
// s_x and Σq at d, s, qs[b*sstep].
func dot32Ref(t gguf.Type, row []byte, nb int, q []int8, qstep int, d, s []float32, qs []int32, sstep int) float32 {
	var a float32
	bs := t.BlockBytes()
	var w [32]int32
	for b := range nb {
		blk := row[b*bs : (b+1)*bs : (b+1)*bs]
		x := q[b*qstep : b*qstep+32 : b*qstep+32]
		dw := f16At(blk)
		var ib int32
		switch t {
		case gguf.Q8_0:
			wb := blk[2:34:34]
			for i := 0; i < 32; i += 2 {
				ib += int32(int8(wb[i]))*int32(x[i]) + int32(int8(wb[i+1]))*int32(x[i+1])
			}
		case gguf.Q4_0, gguf.Q4_1:
			nib := blk[2:18:18]
			if t == gguf.Q4_1 {
				nib = blk[4:20:20]
			}
			lo, hi := x[:16:16], x[16:32:32]
			for i, v := range nib {
				ib += int32(v&0xf)*int32(lo[i]) + int32(v>>4)*int32(hi[i])
			}
			if t == gguf.Q4_0 {
				ib -= 8 * qs[b*sstep]
			}
		case gguf.Q5_0, gguf.Q5_1:
			h := 2
			if t == gguf.Q5_1 {
				h = 4
			}
			q5Values(&w, blk[h:h+4], blk[h+4:h+20])
			ib = dotInt(w[:], x)
			if t == gguf.Q5_0 {
				ib -= 16 * qs[b*sstep]
			}
		}
		a = fma32(float32(dw*d[b*sstep]), float32(ib), a)
		if t == gguf.Q4_1 || t == gguf.Q5_1 {
			a = fma32(f16At(blk[2:]), s[b*sstep], a)
		}
	}
	return a
}

// dotKRef is the canonical sum of a row of a K format (nb blocks of 256)
// with one token's Q8_K activations: block b's values at q[b*qstep:], its
// d_x and sums at recs[b*rstep].
func dotKRef(t gguf.Type, row []byte, nb int, q []int8, qstep int, recs []kRec, rstep int) float32 {
	var a float32
	bs := t.BlockBytes()
	var w [qkK]int32
	for b := range nb {
		blk := row[b*bs : (b+1)*bs : (b+1)*bs]
		x := q[b*qstep : b*qstep+qkK : b*qstep+qkK]
		rec := &recs[b*rstep]
		var ib, mb int32
		var dw, dmin float32
		switch t {
		case gguf.Q2_K:
			q2Values(&w, blk[16:80])
			dw, dmin = f16At(blk[80:]), f16At(blk[82:])
			for k := range 16 {
				sc := blk[k]
				ib += int32(sc&0xf) * dotInt(w[16*k:16*k+16], x[16*k:16*k+16])
				mb += int32(sc>>4) * int32(rec.s16[k])
			}
		case gguf.Q3_K:
			q3Values(&w, blk[:32], blk[32:96])
			dw = f16At(blk[108:])
			sc := q3Scales(blk[96:108])
			for k := range 16 {
				ib += sc[k] * dotInt(w[16*k:16*k+16], x[16*k:16*k+16])
			}
		case gguf.Q4_K, gguf.Q5_K:
			if t == gguf.Q4_K {
				q4Values(&w, blk[16:144])
			} else {
				q5kValues(&w, blk[16:48], blk[48:176])
			}
			dw, dmin = f16At(blk), f16At(blk[2:])
			sc, m := kScaleMin(blk[4:16])
			for j := range 8 {
				ib += sc[j] * dotInt(w[32*j:32*j+32], x[32*j:32*j+32])
				mb += m[j] * int32(rec.s32[j])
			}
		case gguf.Q6_K:
			q6Values(&w, blk[:128], blk[128:192])
			dw = f16At(blk[208:])
			for k := range 16 {
				ib += int32(int8(blk[192+k])) * dotInt(w[16*k:16*k+16], x[16*k:16*k+16])
			}
		}
		dx := rec.d
		a = fma32(float32(dw*dx), float32(ib), a)
		if t == gguf.Q2_K || t == gguf.Q4_K || t == gguf.Q5_K {
			a = fma32(float32(dmin*dx), -float32(mb), a)
		}
	}
	return a
}

// dotInt is the exact Σ w_i·x_i.
func dotInt(w []int32, x []int8) int32 {
	var s int32
	for i, v := range x {
		s += w[i] * int32(v)
	}
	return s
}

// matMulRef is MatMulInput for an integer format with the canonical sums
// in Go (dot32Ref, dotKRef), on the same quantised Input as the row
// kernels: the path where there are no row kernels for t.
func (m *Matrix) matMulRef(p *Pool, out []float32, in *Input, n int) {
	t := &in.ref
	*t = refTask{m: m, in: in, out: out, n: n, k: kFormat(m.Type)}
	bsize := 32
	if t.k {
		bsize = qkK
		t.ts = in.q8K().ts
	} else {
		t.ts = in.q8T()
	}
	t.nb = m.Cols / bsize
	t.offs = grow(t.offs, 2*n)
	for tk := range n {
		t.offs[2*tk], t.offs[2*tk+1] = groupOffset(tk, n, t.nb, bsize)
	}
	p.Run(m.Rows, 16, m.Cols*n, t)
}

// refTask is matMulRef's loop over weight rows.
type refTask struct {
	m      *Matrix
	in     *Input
	out    []float32
	n      int
	k      bool  // a K format (Q8_K activations)
	nb, ts int   // blocks per row, the transposed scalars' token stride
	offs   []int // token t's first block and block step in the grouped values
}

// Run implements Task.
func (t *refTask) Run(worker, lo, hi int) {
	m, in := t.m, t.in
	for r := lo; r < hi; r++ {
		row := m.Data[r*m.rowBytes : (r+1)*m.rowBytes]
		for tk := range t.n {
			off, step := t.offs[2*tk], t.offs[2*tk+1]
			var v float32
			if t.k {
				v = dotKRef(m.Type, row, t.nb, in.k.q[off:], step, in.k.recs[tk:], t.ts)
			} else {
				v = dot32Ref(m.Type, row, t.nb, in.qG[off:], step, in.dT[tk:], in.sT[tk:], in.qsT[tk:], t.ts)
			}
			t.out[tk*m.Rows+r] = v
		}
	}
}
