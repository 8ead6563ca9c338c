package cpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"

	"anechat/engine/model/gguf"
)

// fma32Big is a*b+c rounded once to float32 (what VFMADD231PS computes),
// through an exact big.Float: float64 would round twice.
func fma32Big(a, b, c float32) float32 {
	x := new(big.Float).SetPrec(200).SetFloat64(float64(a))
	x.Mul(x, new(big.Float).SetPrec(200).SetFloat64(float64(b)))
	x.Add(x, new(big.Float).SetPrec(200).SetFloat64(float64(c)))
	f, _ := x.Float32()
	return f
}

// TestFMA32: the portable fused multiply-add gives the single rounding of
// the exact a·b+c (big.Float) for random operands of every magnitude, for
// cases built to sit on or next to a float32 rounding tie (where rounding
// twice goes wrong), subnormal results and overflow.
func TestFMA32(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	rnd := func() float32 {
		switch r.IntN(4) {
		case 0:
			return math.Float32frombits(r.Uint32()&^(0xff<<23) | uint32(r.IntN(254)+1)<<23) // any normal
		case 1:
			return math.Float32frombits(r.Uint32() & 0x807fffff) // subnormal or zero
		}
		return float32(r.NormFloat64()) * float32(math.Pow(2, float64(r.IntN(40)-20)))
	}
	check := func(a, b, c float32) {
		t.Helper()
		got, want := fma32(a, b, c), fma32Big(a, b, c)
		if math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("fma32(%g, %g, %g) = %g (%#08x), want %g (%#08x)", a, b, c, got, math.Float32bits(got), want, math.Float32bits(want))
		}
	}
	for range 200000 {
		check(rnd(), rnd(), rnd())
	}
	for range 100000 {
		// a·b close to -c: cancellation; and a·b with c a half-ulp away.
		a, b := rnd(), rnd()
		p := a * b
		check(a, b, -p)
		check(a, b, -p*(1+1.0/(1<<24)))
		u := math.Float32frombits(math.Float32bits(p)&0x7f800000) / (1 << 24) // half an ulp of p
		check(a, b, u)
		check(a, b, -u)
		check(a, b, u*(1+1.0/(1<<20)))
	}
	// Ties: 1 + 2^-24 is a float32 tie; a small extra term decides it.
	check(1+1.0/(1<<23), 1, 1.0/(1<<24))
	check(1, 1, 1.0/(1<<24)+1.0/(1<<60))
	check(3e38, 3e38, 0)
	check(-3e38, 3e38, 1)
	check(1e-30, 1e-30, 1e-45)
	check(float32(math.Inf(1)), 1, 1)
}

// halfFields are the byte offsets of the f16 fields in one block of each
// quantised format.
var halfFields = map[gguf.Type][]int{
	gguf.Q4_0: {0}, gguf.Q4_1: {0, 2}, gguf.Q5_0: {0}, gguf.Q5_1: {0, 2}, gguf.Q8_0: {0},
	gguf.Q2_K: {80, 82}, gguf.Q3_K: {108}, gguf.Q4_K: {0, 2}, gguf.Q5_K: {0, 2}, gguf.Q6_K: {208},
}

// allIntegerTypes are the formats with integer kernels, 32-value formats first.
var allIntegerTypes = []gguf.Type{gguf.Q8_0, gguf.Q4_0, gguf.Q4_1, gguf.Q5_0, gguf.Q5_1, gguf.Q2_K, gguf.Q3_K, gguf.Q4_K, gguf.Q5_K, gguf.Q6_K}

// TestDequantReference: every format's dequantiser gives the PyPI gguf
// package's reference output (testdata/quants/blocks.gguf, made by
// make_fixtures.py) bit for bit, on random blocks with every kind of f16
// scale, with the SIMD dequantisers and with the Go loops.
func TestDequantReference(t *testing.T) {
	f, err := gguf.Open("testdata/quants/blocks.gguf")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, typ := range append([]gguf.Type{gguf.F16, gguf.BF16}, allIntegerTypes...) {
		ti, ok := f.Tensor(typ.String())
		if !ok {
			t.Fatalf("%s: no fixture tensor", typ)
		}
		if ti.Type != typ {
			t.Fatalf("%s: fixture tensor is %s", typ, ti.Type)
		}
		data, _ := f.TensorData(ti.Name)
		refData, err := f.TensorData(ti.Name + ".ref")
		if err != nil {
			t.Fatal(err)
		}
		cols, rows := ti.Dims[0], ti.Dims[1]
		m, err := NewMatrix(ti.Name, typ, rows, cols, data)
		if err != nil {
			t.Fatal(err)
		}
		for _, simd := range dequantPaths() {
			t.Run(fmt.Sprintf("%s/%s", typ, simd.name), func(t *testing.T) {
				defer simd.enable()()
				row := make([]float32, cols)
				for r := range rows {
					m.Row(row, r)
					for i, v := range row {
						want := binary.LittleEndian.Uint32(refData[4*(r*cols+i):])
						if math.Float32bits(v) != want {
							t.Fatalf("row %d element %d: %g (%#08x), gguf gives %g (%#08x)", r, i, v, math.Float32bits(v), math.Float32frombits(want), want)
						}
					}
				}
			})
		}
	}
}

// TestKQuantRowLength: a K-format tensor whose rows are not whole blocks of
// 256 is a load error naming the tensor (the GGUF reader refuses it, and
// NewMatrix too).
func TestKQuantRowLength(t *testing.T) {
	w := gguf.NewWriter()
	w.Set("general.architecture", "llama")
	w.AddTensor("blk.0.ffn_down.weight", gguf.Q4_K, []int{320, 2}, make([]byte, 2*144+80))
	data, err := w.Bytes()
	if err == nil {
		_, err = gguf.Parse("tail.gguf", data)
	}
	if err == nil || !strings.Contains(err.Error(), "blk.0.ffn_down.weight") || !strings.Contains(err.Error(), "256") {
		t.Errorf("320-value Q4_K rows: %v, want an error naming the tensor and the block size", err)
	}
	if _, err := NewMatrix("blk.0.ffn_down.weight", gguf.Q6_K, 2, 320, make([]byte, 420)); err == nil || !strings.Contains(err.Error(), "blk.0.ffn_down.weight") {
		t.Errorf("NewMatrix of 320-value Q6_K rows: %v", err)
	}
}

// TestQuantizeQ8K: the Q8_K quantiser follows its definition (one scale
// per 256, values rounded to nearest even and clamped, the sums of 16 and
// of 32), on random blocks, zeros, ties, saturating and tiny values.
func TestQuantizeQ8K(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	const nb = 6
	x := randVals(r, nb*qkK, 2)
	for i := range qkK {
		x[i] = 0                            // block 0: zeros
		x[qkK+i] = float32(i%64) - 31.5     // block 1: ties after scaling (amax 31.5 -> id = 127/31.5)
		x[2*qkK+i] = float32(i%5) * 1e37    // block 2: huge
		x[3*qkK+i] = float32(i%3-1) * 1e-38 // block 3: tiny
	}
	x[4*qkK+17] = -1e30 // block 4: one huge value, the rest rounds to 0
	q := make([]int8, nb*qkK)
	d := make([]float32, nb)
	sums := make([]int16, nb*kSums)
	quantizeQ8K(q, d, sums, x)
	for b := range nb {
		var amax float32
		for _, v := range x[b*qkK : (b+1)*qkK] {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		if d[b] != amax/127 {
			t.Fatalf("block %d: d %g, want %g", b, d[b], amax/127)
		}
		var s16 [16]int
		for i := range qkK {
			v := x[b*qkK+i]
			var id float32
			if d[b] != 0 {
				id = 1 / d[b] // +Inf where d is subnormal: then 0·id is NaN
			}
			want := math.RoundToEven(float64(float32(v * id)))
			if !(want >= math.MinInt32 && want <= math.MaxInt32) {
				want = math.MinInt32 // out of range or NaN, as VCVTPS2DQ gives
			}
			want = max(-127, min(127, want))
			if float64(q[b*qkK+i]) != want {
				t.Fatalf("block %d element %d (x %g): q %d, want %v", b, i, v, q[b*qkK+i], want)
			}
			s16[i/16] += int(q[b*qkK+i])
		}
		for k := range 16 {
			if int(sums[b*kSums+8+k]) != s16[k] {
				t.Fatalf("block %d: S16[%d] = %d, want %d", b, k, sums[b*kSums+8+k], s16[k])
			}
		}
		for j := range 8 {
			if int(sums[b*kSums+j]) != s16[2*j]+s16[2*j+1] {
				t.Fatalf("block %d: S32[%d] = %d, want %d", b, j, sums[b*kSums+j], s16[2*j]+s16[2*j+1])
			}
		}
	}
	if q[qkK+1] != int8(math.RoundToEven(float64(float32(-30.5*(1/d[1]))))) {
		t.Error("ties")
	}
}

// testWeights returns rows×cols random blocks of typ with their f16 fields
// set to values of about unit size times scale (randomBlocks), where one
// block in four has all its other bytes 0x00 or 0xff (the formats' extreme
// values: q 0 or 15/31/63, scales and mins 0 or their maximum, Q6_K scales
// -1, Q8_0 weights -1).
func testWeights(r *rand.Rand, typ gguf.Type, rows, cols int, scale float32) []byte {
	data := randomBlocks(r, typ, rows*cols, scale)
	bs := typ.BlockBytes()
	for b := 0; b < len(data); b += bs {
		if r.IntN(4) != 0 {
			continue
		}
		fill := byte(0)
		if r.IntN(2) == 0 {
			fill = 0xff
		}
		half := map[int]bool{}
		for _, off := range halfFields[typ] {
			half[off], half[off+1] = true, true
		}
		for i := range bs {
			if !half[i] {
				data[b+i] = fill
			}
		}
	}
	return data
}

// canonicalRef is the canonical sum (dotref.go's comment) of one row with
// one token's activations, computed from the element values with int64
// sums and big.Float FMAs: the reference the kernels are held to.
type tokenActs struct {
	q    []int8    // the token's values, token-major
	d, s []float32 // per block: d_x, and s_x (32-value formats)
	qs   []int32   // per block Σq (32-value formats)
	sums []int16   // per K block: S32 then S16 (K formats)
}

func quantizeToken(typ gguf.Type, x []float32) tokenActs {
	a := tokenActs{q: make([]int8, len(x))}
	if kFormat(typ) {
		nb := len(x) / qkK
		a.d, a.sums = make([]float32, nb), make([]int16, nb*kSums)
		quantizeQ8K(a.q, a.d, a.sums, x)
		return a
	}
	nb := len(x) / 32
	a.d, a.s, a.qs = make([]float32, nb), make([]float32, nb), make([]int32, nb)
	quantizeQ8(a.q, a.d, a.s, a.qs, x)
	return a
}

func canonicalRef(t *testing.T, typ gguf.Type, row []byte, a tokenActs) float32 {
	var acc float32
	bs := typ.BlockBytes()
	fit := func(v int64) int32 {
		if v != int64(int32(v)) {
			t.Fatalf("%s: integer sum %d out of int32 range", typ, v)
		}
		return int32(v)
	}
	if !kFormat(typ) {
		for b := range len(a.q) / 32 {
			blk := row[b*bs : (b+1)*bs]
			var w [32]int32
			var off int64
			switch typ {
			case gguf.Q8_0:
				for i := range 32 {
					w[i] = int32(int8(blk[2+i]))
				}
			case gguf.Q4_0, gguf.Q4_1:
				nib := blk[2+2*boolInt(typ == gguf.Q4_1):]
				for i := range 16 {
					w[i], w[i+16] = int32(nib[i]&15), int32(nib[i]>>4)
				}
				off = 8 * int64(boolInt(typ == gguf.Q4_0))
			case gguf.Q5_0:
				q5Values(&w, blk[2:6], blk[6:22])
				off = 16
			case gguf.Q5_1:
				q5Values(&w, blk[4:8], blk[8:24])
			}
			var ib int64
			for i := range 32 {
				ib += int64(w[i]) * int64(a.q[b*32+i])
			}
			ib -= off * int64(a.qs[b])
			acc = fma32Big(f16At(blk)*a.d[b], float32(fit(ib)), acc)
			if typ == gguf.Q4_1 || typ == gguf.Q5_1 {
				acc = fma32Big(f16At(blk[2:]), a.s[b], acc)
			}
		}
		return acc
	}
	for b := range len(a.q) / qkK {
		blk := row[b*bs : (b+1)*bs]
		x := a.q[b*qkK : (b+1)*qkK]
		var w [qkK]int32
		var sc, mn [16]int64 // per sub-block scale and min
		sub := 16
		var dw, dmin float32
		switch typ {
		case gguf.Q2_K:
			q2Values(&w, blk[16:80])
			for k := range 16 {
				sc[k], mn[k] = int64(blk[k]&15), int64(blk[k]>>4)
			}
			dw, dmin = f16At(blk[80:]), f16At(blk[82:])
		case gguf.Q3_K:
			q3Values(&w, blk[:32], blk[32:96])
			s := q3Scales(blk[96:108])
			for k := range 16 {
				sc[k] = int64(s[k])
			}
			dw = f16At(blk[108:])
		case gguf.Q4_K, gguf.Q5_K:
			if typ == gguf.Q4_K {
				q4Values(&w, blk[16:144])
			} else {
				q5kValues(&w, blk[16:48], blk[48:176])
			}
			s, m := kScaleMin(blk[4:16])
			for j := range 8 {
				sc[j], mn[j] = int64(s[j]), int64(m[j])
			}
			sub = 32
			dw, dmin = f16At(blk), f16At(blk[2:])
		case gguf.Q6_K:
			q6Values(&w, blk[:128], blk[128:192])
			for k := range 16 {
				sc[k] = int64(int8(blk[192+k]))
			}
			dw = f16At(blk[208:])
		}
		var ib, mb int64
		for e := range qkK {
			ib += sc[e/sub] * int64(w[e]) * int64(x[e])
			mb += mn[e/sub] * int64(x[e])
		}
		dx := a.d[b]
		acc = fma32Big(dw*dx, float32(fit(ib)), acc)
		if typ == gguf.Q2_K || typ == gguf.Q4_K || typ == gguf.Q5_K {
			acc = fma32Big(dmin*dx, -float32(fit(mb)), acc)
		}
	}
	return acc
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestCanonicalSums: for every integer format and every kernel set this
// CPU runs (VNNI row kernels, AVX2 row kernels, the Go loops: as the golden
// test switches them), MatMulInput gives, bit for bit, canonicalRef of
// every row and token, at widths 1 to 13 (groups of 8, 4, 2, 1), for rows
// of 1 to 11 blocks, matrices of 1 to 19 rows (partial groups of 8),
// weights with extreme values and activations with zero and saturated
// blocks.
func TestCanonicalSums(t *testing.T) {
	for _, ks := range goldenKernelSets() {
		t.Run(ks.name, func(t *testing.T) {
			defer ks.enable()()
			for _, typ := range allIntegerTypes {
				t.Run(typ.String(), func(t *testing.T) { testCanonicalSums(t, typ) })
			}
		})
	}
}

func testCanonicalSums(t *testing.T, typ gguf.Type) {
	r := rand.New(rand.NewPCG(11, uint64(typ)))
	bsize := typ.BlockSize()
	nbs := []int{1, 2, 3, 5, 8, 9, 13}
	if kFormat(typ) {
		nbs = []int{1, 2, 3, 4, 7}
	}
	for _, nb := range nbs {
		rows := 1 + (nb*7)%19
		cols := bsize * nb
		data := testWeights(r, typ, rows, cols, 0.1)
		m, err := NewMatrix("w", typ, rows, cols, data)
		if err != nil {
			t.Fatal(err)
		}
		x := randVals(r, 13*cols, 1)
		for i := range bsize {
			x[cols+i] = 0 // token 1's first block is zero
		}
		x[2*cols+3] = 1e30 // token 2's first block saturates around one huge value
		acts := make([]tokenActs, 13)
		for tk := range acts {
			acts[tk] = quantizeToken(typ, x[tk*cols:(tk+1)*cols])
		}
		want := make([]float32, 13*rows)
		for tk := range 13 {
			for ri := range rows {
				want[tk*rows+ri] = canonicalRef(t, typ, data[ri*m.rowBytes:(ri+1)*m.rowBytes], acts[tk])
			}
		}
		for n := 1; n <= 13; n++ {
			out := make([]float32, n*rows)
			m.MatMulInput(NewPool(1), out, NewInput(x[:n*cols], cols))
			for i, got := range out {
				if math.Float32bits(got) != math.Float32bits(want[i]) {
					t.Fatalf("%d blocks, width %d: token %d row %d = %v, canonical %v", nb, n, i/rows, i%rows, got, want[i])
				}
			}
		}
	}
}

// TestIntegerSumsNearFloat: the canonical sums are close to the exact dot
// product of the dequantised row with the float activations: within the
// error the 8-bit activations allow (|x - d_x·q| <= d_x/2 per element, so
// Σ_b d_x,b/2·Σ_{i in b}|w_i|) plus the float roundings of the chain (one
// rounding of 2^-24 per step on partial sums bounded by Σ|w_i·x̂_i|).
func TestIntegerSumsNearFloat(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for _, typ := range allIntegerTypes {
		bsize := typ.BlockSize()
		const rows, cols = 16, 1024
		data := testWeights(r, typ, rows, cols, 0.1)
		m, err := NewMatrix("w", typ, rows, cols, data)
		if err != nil {
			t.Fatal(err)
		}
		x := randVals(r, 3*cols, 1)
		out := make([]float32, 3*rows)
		m.MatMul(NewPool(1), out, x)
		w := make([]float32, cols)
		for tk := range 3 {
			a := quantizeToken(typ, x[tk*cols:(tk+1)*cols])
			for ri := range rows {
				m.Row(w, ri)
				var exact, actErr, mag float64
				for i, wv := range w {
					xv := float64(x[tk*cols+i])
					exact += float64(wv) * xv
					actErr += math.Abs(float64(wv)) * float64(a.d[i/bsize]) / 2
					mag += math.Abs(float64(wv)) * math.Abs(float64(a.d[i/bsize])*float64(a.q[i]))
				}
				steps := 2 * (cols / bsize)
				// The dequantised weights themselves carry the rounding of
				// their scale products (2^-24 relative each, twice).
				bound := actErr*(1+1e-6) + float64(steps+4)*mag*0x1p-23
				if d := math.Abs(float64(out[tk*rows+ri]) - exact); d > bound {
					t.Errorf("%s token %d row %d: %v, exact %v: off by %g > bound %g", typ, tk, ri, out[tk*rows+ri], exact, d, bound)
				}
			}
		}
	}
}

// TestIntegerRowIndependence: for every integer format and kernel set, a
// call of any width up to 17 on 1, 2 or 3 workers gives every token the
// bits a width-1 call gives it, on a matrix big enough for the pool to
// split and with rows not a multiple of 8.
func TestIntegerRowIndependence(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	const rows, cols = 77, 1024
	x := randVals(r, 17*cols, 1)
	for _, ks := range goldenKernelSets() {
		t.Run(ks.name, func(t *testing.T) {
			defer ks.enable()()
			for _, typ := range allIntegerTypes {
				m, err := NewMatrix("w", typ, rows, cols, testWeights(r, typ, rows, cols, 0.05))
				if err != nil {
					t.Fatal(err)
				}
				ref := make([]float32, 17*rows)
				for tk := range 17 {
					m.MatMul(NewPool(1), ref[tk*rows:(tk+1)*rows], x[tk*cols:(tk+1)*cols])
				}
				for _, workers := range []int{1, 2, 3} {
					for n := 1; n <= 17; n++ {
						out := make([]float32, n*rows)
						m.MatMul(NewPool(workers), out, x[:n*cols])
						for i := range out {
							if math.Float32bits(out[i]) != math.Float32bits(ref[i]) {
								t.Fatalf("%s workers %d width %d: token %d row %d = %v, width 1 gives %v", typ, workers, n, i/rows, i%rows, out[i], ref[i])
							}
						}
					}
				}
			}
		})
	}
}
