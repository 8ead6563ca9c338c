package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"anechat/engine/model/gguf"
)

// TestRowKernelsPresent: the formats that have row kernels get them with
// each kernel set (so TestCanonicalSums holds the assembly, not the Go
// loops, to the canonical sums), and the others fall back to the Go loops.
func TestRowKernelsPresent(t *testing.T) {
	vnni, q8 := hasVNNI, hasQ8
	defer func() { hasVNNI, hasQ8 = vnni, q8 }()
	for _, c := range []struct {
		name       string
		vnni, q8   bool
		have, none []gguf.Type
	}{
		{"vnni", true, true, []gguf.Type{gguf.Q4_0, gguf.Q4_1, gguf.Q8_0, gguf.Q5_0, gguf.Q5_1, gguf.Q4_K, gguf.Q5_K, gguf.Q6_K}, []gguf.Type{gguf.Q2_K, gguf.Q3_K}},
		{"avx2", false, true, []gguf.Type{gguf.Q4_0, gguf.Q4_1, gguf.Q8_0, gguf.Q5_0, gguf.Q5_1, gguf.Q4_K, gguf.Q5_K, gguf.Q6_K}, []gguf.Type{gguf.Q2_K, gguf.Q3_K}},
		{"go", false, false, nil, allIntegerTypes},
	} {
		if c.vnni && !vnni || c.q8 && !q8 {
			continue
		}
		hasVNNI, hasQ8 = c.vnni, c.q8
		for _, typ := range c.have {
			if ks := rowKernels(typ); ks[1] == nil || ks[2] == nil || ks[4] == nil || ks[8] == nil {
				t.Errorf("%s: %s has no row kernels", c.name, typ)
			}
		}
		for _, typ := range c.none {
			if rowKernels(typ)[1] != nil {
				t.Errorf("%s: %s has row kernels", c.name, typ)
			}
		}
	}
}

// TestQuantizeQ8KSIMD: the AVX2 Q8_K quantiser gives the Go quantiser's
// bits (scales, values, both kinds of sums) for random blocks, zeros, ties,
// huge, tiny and subnormal values, one huge value among small ones, and
// for blocks holding a NaN (at the start, middle or end) NaN scales and
// the same values.
func TestQuantizeQ8KSIMD(t *testing.T) {
	if !hasQ8 {
		t.Skip("no AVX2 quantiser on this CPU")
	}
	r := rand.New(rand.NewPCG(47, 48))
	const nb = 12
	x := randVals(r, nb*qkK, 3)
	for i := range qkK {
		x[i] = 0                            // block 0: zeros
		x[qkK+i] = float32(i%64) - 31.5     // block 1: ties after scaling
		x[2*qkK+i] = float32(i%5) * 1e38    // block 2: huge
		x[3*qkK+i] = float32(i) * 1e-44     // block 3: subnormal
		x[4*qkK+i] = float32(i%3-1) * 1e-30 // block 4: tiny
		x[5*qkK+i] = float32(i%3-1) * 1e-38 // block 5: d subnormal, 1/d infinite
	}
	x[6*qkK+100] = -3e38                      // block 6: one huge negative value
	for b, i := range []int{0, 7, 128, 255} { // blocks 7..10: a NaN at element i
		x[(7+b)*qkK+i] = float32(math.NaN())
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
			t.Fatalf("block %d: Go d %v, AVX2 d %v", b, d1[b], recs[b].d)
		}
		for j := range 8 {
			if s1[b*kSums+j] != recs[b].s32[j] {
				t.Fatalf("block %d: S32[%d] Go %d, AVX2 %d", b, j, s1[b*kSums+j], recs[b].s32[j])
			}
		}
		for k := range 16 {
			if s1[b*kSums+8+k] != recs[b].s16[k] {
				t.Fatalf("block %d: S16[%d] Go %d, AVX2 %d", b, k, s1[b*kSums+8+k], recs[b].s16[k])
			}
		}
		for i := b * qkK; i < (b+1)*qkK; i++ {
			if q1[i] != q2[i] {
				t.Fatalf("block %d element %d (x = %v): Go q %d, AVX2 q %d", b, i-b*qkK, x[i], q1[i], q2[i])
			}
		}
	}
}
