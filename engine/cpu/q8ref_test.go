package cpu

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"anechat/engine/model/gguf"
)

// dotQ8Ref is the canonical integer dot product that every row kernel
// (q8rows_amd64.s, q8rowsavx2_amd64.s, q8rows_arm64.s) reproduces bit for
// bit: exact int32 block products I_b
// and, block after block, A = fma(d_w*d_x, float(I_b), A), then for Q4_1
// A = fma(m_w, s_x, A).
func dotQ8Ref(typ gguf.Type, row []byte, q []int8, d, s []float32, qs []int32) float32 {
	var a float32
	bs := typ.RowBytes(32)
	for b := range len(q) / 32 {
		blk := row[b*bs : (b+1)*bs]
		x := q[b*32 : b*32+32]
		dw := F16(binary.LittleEndian.Uint16(blk))
		var ib int32
		switch typ {
		case gguf.Q8_0:
			for i := range 32 {
				ib += int32(int8(blk[2+i])) * int32(x[i])
			}
		case gguf.Q4_0, gguf.Q4_1:
			nib := blk[2:]
			if typ == gguf.Q4_1 {
				nib = blk[4:]
			}
			for i := range 16 {
				ib += int32(nib[i]&0xf)*int32(x[i]) + int32(nib[i]>>4)*int32(x[i+16])
			}
			if typ == gguf.Q4_0 {
				ib -= 8 * qs[b]
			}
		}
		a = fma32Big(dw*d[b], float32(ib), a)
		if typ == gguf.Q4_1 {
			a = fma32Big(F16(binary.LittleEndian.Uint16(blk[2:])), s[b], a)
		}
	}
	return a
}

// TestQuantizeQ8SIMD: the SIMD quantiser (AVX2, NEON) gives the Go
// quantiser's bits for
// random blocks and blocks of zeros, ties (x·id at .5), huge, tiny and
// subnormal values, and mixed signs; for blocks holding a NaN (in any of
// the four 8-lane loads) both give NaN scales and the same q.
func TestQuantizeQ8SIMD(t *testing.T) {
	if !quantSIMD() {
		t.Skip("no SIMD quantiser on this CPU")
	}
	r := rand.New(rand.NewPCG(43, 44))
	const nb = 64
	x := randVals(r, nb*32, 3)
	for i := range 32 {
		x[i] = 0                          // block 0: zeros
		x[32+i] = float32(i) - 15.5       // block 1: ties after scaling
		x[64+i] = float32(i%5) * 1e38     // block 2: huge
		x[96+i] = float32(i) * 1e-44      // block 3: subnormal
		x[128+i] = float32(i%3-1) * 1e-30 // block 4: tiny
	}
	x[160] = -3e38                         // block 5: one huge negative value
	for b, i := range []int{0, 7, 8, 31} { // blocks 6..9: a NaN at element i
		x[(6+b)*32+i] = float32(math.NaN())
	}
	var q1, q2 [nb * 32]int8
	var d1, d2, s1, s2 [nb]float32
	var qs1, qs2 [nb]int32
	quantizeQ8(q1[:], d1[:], s1[:], qs1[:], x)
	if !quantizeQ8IntoSIMD(q2[:], 32, d2[:], s2[:], qs2[:], 1, x) {
		t.Fatal("quantizeQ8IntoSIMD declined")
	}
	for b := range nb {
		same := func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) || a != a && b != b }
		if !same(d1[b], d2[b]) || !same(s1[b], s2[b]) || qs1[b] != qs2[b] {
			t.Fatalf("block %d: Go d %v s %v qs %d, SIMD d %v s %v qs %d", b, d1[b], s1[b], qs1[b], d2[b], s2[b], qs2[b])
		}
		for i := b * 32; i < b*32+32; i++ {
			if q1[i] != q2[i] {
				t.Fatalf("block %d element %d (x = %v): Go q %d, SIMD q %d", b, i-b*32, x[i], q1[i], q2[i])
			}
		}
	}
}

// TestQuantizeQ8Into: the strided quantiser (grouped values, transposed
// scalars) writes quantizeQ8's values at its strides, with the SIMD
// quantiser and with the Go loop.
func TestQuantizeQ8Into(t *testing.T) {
	r := rand.New(rand.NewPCG(45, 46))
	const nb, qstep, sstep = 9, 96, 5
	x := randVals(r, nb*32, 2)
	var q [nb * 32]int8
	var d, s [nb]float32
	var qs [nb]int32
	quantizeQ8(q[:], d[:], s[:], qs[:], x)
	for _, simd := range []bool{true, false} {
		restore := func() {}
		if !simd {
			restore = withoutSIMD()
		}
		gq := make([]int8, nb*qstep)
		gd, gs := make([]float32, nb*sstep), make([]float32, nb*sstep)
		gqs := make([]int32, nb*sstep)
		quantizeQ8Into(gq, qstep, gd, gs, gqs, sstep, x)
		restore()
		for b := range nb {
			if gd[b*sstep] != d[b] || gs[b*sstep] != s[b] || gqs[b*sstep] != qs[b] {
				t.Fatalf("SIMD %v block %d: scalars %v %v %d, want %v %v %d", simd, b, gd[b*sstep], gs[b*sstep], gqs[b*sstep], d[b], s[b], qs[b])
			}
			for i := range 32 {
				if gq[b*qstep+i] != q[b*32+i] {
					t.Fatalf("SIMD %v block %d element %d: %d, want %d", simd, b, i, gq[b*qstep+i], q[b*32+i])
				}
			}
		}
	}
}

// TestQuantizeQ8KSIMD: the SIMD Q8_K quantiser (AVX2, NEON) gives the Go
// quantiser's bits (scales, values, both kinds of sums) for random blocks,
// zeros, ties, huge, tiny and subnormal values, ±MaxFloat32, one huge
// value among small ones, a d so small that 1/d is infinite, blocks
// holding ±Inf (d +Inf, q 0 or -127), and for blocks holding a NaN (at
// the start, middle or end, or beside an Inf) NaN scales and the same
// values; and for blocks of random bit patterns, finite over spans of
// exponents up to the whole range, or any bits.
func TestQuantizeQ8KSIMD(t *testing.T) {
	if !quantSIMD() {
		t.Skip("no SIMD quantiser on this CPU")
	}
	r := rand.New(rand.NewPCG(47, 48))
	const nb = 30
	x := randVals(r, nb*qkK, 3)
	inf := float32(math.Inf(1))
	for i := range qkK {
		x[i] = 0                            // block 0: zeros
		x[qkK+i] = float32(i%64) - 31.5     // block 1: ties after scaling
		x[2*qkK+i] = float32(i%5) * 1e38    // block 2: huge
		x[3*qkK+i] = float32(i) * 1e-44     // block 3: subnormal
		x[4*qkK+i] = float32(i%3-1) * 1e-30 // block 4: tiny
		x[5*qkK+i] = float32(i%3-1) * 1e-38 // block 5: d subnormal, 1/d infinite
		x[12*qkK+i] = float32(1-2*(i%2)) * math.MaxFloat32
		x[13*qkK+i] = float32(math.Copysign(0, -1)) // block 13: -0
	}
	x[6*qkK+100] = -3e38                      // block 6: one huge negative value
	for b, i := range []int{0, 7, 128, 255} { // blocks 7..10: a NaN at element i
		x[(7+b)*qkK+i] = float32(math.NaN())
	}
	x[11*qkK+3] = 1e-45  // block 11: the smallest subnormal only
	x[14*qkK+40] = inf   // block 14: +Inf
	x[15*qkK+255] = -inf // block 15: -Inf
	x[16*qkK+8], x[16*qkK+9] = inf, -inf
	x[17*qkK+31], x[17*qkK+200] = inf, float32(math.NaN()) // block 17: Inf and NaN
	for i := range qkK {
		x[18*qkK+i] = float32(i-128) / 128 * 127 // block 18: every q once
	}
	// Blocks 20..27: finite values of random bits over the whole exponent
	// range (each block's own span: 1, 8, 30 or 254 binades); 28, 29: any
	// bits (NaNs with payloads, infinities).
	for b := 20; b < 28; b++ {
		span := []uint32{1, 8, 30, 254}[b%4]
		lo := r.Uint32N(255 - span)
		for i := range qkK {
			e := lo + r.Uint32N(span)
			x[b*qkK+i] = math.Float32frombits(r.Uint32()&0x807fffff | e<<23)
		}
	}
	for i := range 2 * qkK {
		x[28*qkK+i] = math.Float32frombits(r.Uint32())
	}
	q1, q2 := make([]int8, nb*qkK), make([]int8, nb*qkK)
	d1 := make([]float32, nb)
	s1 := make([]int16, nb*kSums)
	quantizeQ8K(q1, d1, s1, x)
	recs := make([]kRec, nb)
	if !quantizeQ8KIntoSIMD(q2, qkK, recs, 1, x) {
		t.Fatal("quantizeQ8KIntoSIMD declined")
	}
	for b := range nb {
		same := math.Float32bits(d1[b]) == math.Float32bits(recs[b].d) || d1[b] != d1[b] && recs[b].d != recs[b].d
		if !same {
			t.Fatalf("block %d: Go d %v, SIMD d %v", b, d1[b], recs[b].d)
		}
		for j := range 8 {
			if s1[b*kSums+j] != recs[b].s32[j] {
				t.Fatalf("block %d: S32[%d] Go %d, SIMD %d", b, j, s1[b*kSums+j], recs[b].s32[j])
			}
		}
		for k := range 16 {
			if s1[b*kSums+8+k] != recs[b].s16[k] {
				t.Fatalf("block %d: S16[%d] Go %d, SIMD %d", b, k, s1[b*kSums+8+k], recs[b].s16[k])
			}
		}
		for i := b * qkK; i < (b+1)*qkK; i++ {
			if q1[i] != q2[i] {
				t.Fatalf("block %d element %d (x = %v): Go q %d, SIMD q %d", b, i-b*qkK, x[i], q1[i], q2[i])
			}
		}
	}
	// The special blocks are what the comments say (so the comparison
	// above is not of two equally wrong results).
	if !math.IsInf(float64(d1[14]), 1) || q1[14*qkK+40] != -127 || q1[14*qkK] != 0 {
		t.Errorf("+Inf block: d %v, q %d %d; want +Inf, -127 at the Inf, 0 elsewhere", d1[14], q1[14*qkK+40], q1[14*qkK])
	}
	if d1[7] == d1[7] || q1[7*qkK+5] != -127 {
		t.Errorf("NaN block: d %v, q %d; want NaN and -127", d1[7], q1[7*qkK+5])
	}
}

// TestQuantizeQ8KInto: the strided Q8_K quantiser (grouped values, records
// rstep apart) writes quantizeQ8K's values, scales and sums at its
// strides, with the SIMD quantiser and with the Go loop, and leaves the
// bytes between its blocks alone.
func TestQuantizeQ8KInto(t *testing.T) {
	r := rand.New(rand.NewPCG(49, 50))
	const nb, qstep, rstep = 5, 3 * qkK, 4
	x := randVals(r, nb*qkK, 2)
	q := make([]int8, nb*qkK)
	d := make([]float32, nb)
	sums := make([]int16, nb*kSums)
	quantizeQ8K(q, d, sums, x)
	for _, simd := range []bool{true, false} {
		restore := func() {}
		if !simd {
			restore = withoutSIMD()
		}
		gq := make([]int8, nb*qstep)
		for i := range gq {
			gq[i] = 99
		}
		recs := make([]kRec, nb*rstep)
		quantizeQ8KInto(gq, qstep, recs, rstep, x)
		restore()
		for b := range nb {
			rec := recs[b*rstep]
			if rec.d != d[b] || [8]int16(sums[b*kSums:b*kSums+8]) != rec.s32 || [16]int16(sums[b*kSums+8:(b+1)*kSums]) != rec.s16 {
				t.Fatalf("SIMD %v block %d: record %+v, want d %v sums %v", simd, b, rec, d[b], sums[b*kSums:(b+1)*kSums])
			}
			if recs[b*rstep+1] != (kRec{}) {
				t.Fatalf("SIMD %v block %d: the record after it was written", simd, b)
			}
			for i := range qstep {
				want := int8(99)
				if i < qkK {
					want = q[b*qkK+i]
				}
				if gq[b*qstep+i] != want {
					t.Fatalf("SIMD %v block %d byte %d: %d, want %d", simd, b, i, gq[b*qstep+i], want)
				}
			}
		}
	}
}
