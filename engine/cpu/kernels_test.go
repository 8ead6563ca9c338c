package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"anechat/engine/kv"
	"anechat/engine/model/gguf"
)

func TestF16(t *testing.T) {
	for h := range 1 << 16 {
		f := F16(uint16(h))
		if f != f { // NaN
			if back := ToF16(f); back&0x7c00 != 0x7c00 || back&0x3ff == 0 {
				t.Fatalf("NaN %#04x -> %#04x", h, back)
			}
			continue
		}
		if back := ToF16(f); back != uint16(h) {
			t.Fatalf("F16 %#04x -> %v -> %#04x", h, f, back)
		}
	}
	cases := map[uint16]float32{0x3c00: 1, 0xc000: -2, 0x7bff: 65504, 0x0001: 5.960464477539063e-08, 0x0400: 6.103515625e-05, 0x3555: 0.33325195}
	for h, want := range cases {
		if got := F16(h); got != want {
			t.Errorf("F16(%#04x) = %v, want %v", h, got, want)
		}
	}
	if ToF16(1+1.0/2048) != 0x3c00 || ToF16(1+3.0/2048) != 0x3c02 || ToF16(1+3.0/4096) != 0x3c01 { // ties to even
		t.Error("F16 rounding is not to nearest even")
	}
	if BF16(0x3f80) != 1 || ToBF16(1) != 0x3f80 || ToBF16(-2.5) != 0xc020 {
		t.Error("BF16 conversion wrong")
	}
}

func randVals(r *rand.Rand, n int, scale float32) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64()) * scale
	}
	return v
}

// TestDequant checks each quantised encoding against its defining formula
// on hand-built blocks, and the round-trip error of Quantize.
func TestDequant(t *testing.T) {
	// Q8_0: d = 0.5 (0x3800), q = i-16.
	q8 := []byte{0x00, 0x38}
	for i := range 32 {
		q8 = append(q8, byte(int8(i-16)))
	}
	// Q4_0: d = 2 (0x4000); byte i holds q=i (low) and q=15-i (high).
	q40 := []byte{0x00, 0x40}
	for i := range 16 {
		q40 = append(q40, byte(i)|byte(15-i)<<4)
	}
	// Q4_1: d = 0.25 (0x3400), m = -1 (0xbc00); same nibbles.
	q41 := append([]byte{0x00, 0x34, 0x00, 0xbc}, q40[2:]...)
	got := make([]float32, 32)
	dequantRow(got, gguf.Q8_0, q8)
	for i := range 32 {
		if got[i] != 0.5*float32(i-16) {
			t.Fatalf("Q8_0[%d] = %v", i, got[i])
		}
	}
	dequantRow(got, gguf.Q4_0, q40)
	for i := range 16 {
		if got[i] != 2*float32(i-8) || got[i+16] != 2*float32(15-i-8) {
			t.Fatalf("Q4_0[%d] = %v, [%d] = %v", i, got[i], i+16, got[i+16])
		}
	}
	dequantRow(got, gguf.Q4_1, q41)
	for i := range 16 {
		if got[i] != 0.25*float32(i)-1 || got[i+16] != 0.25*float32(15-i)-1 {
			t.Fatalf("Q4_1[%d] = %v", i, got[i])
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	vals := randVals(r, 4*64, 1)
	for _, c := range []struct {
		typ gguf.Type
		tol float64 // max error relative to the row's max magnitude
	}{{gguf.F32, 0}, {gguf.F16, 1e-3}, {gguf.BF16, 8e-3}, {gguf.Q8_0, 8e-3}, {gguf.Q4_0, 0.13}, {gguf.Q4_1, 0.07}} {
		data, err := Quantize(c.typ, vals, 64)
		if err != nil {
			t.Fatal(err)
		}
		m, err := NewMatrix("w", c.typ, 4, 64, data)
		if err != nil {
			t.Fatal(err)
		}
		row := make([]float32, 64)
		var worst float64
		for ri := range 4 {
			m.Row(row, ri)
			for i, v := range row {
				worst = max(worst, math.Abs(float64(v-vals[ri*64+i])))
			}
		}
		if worst > c.tol*4 { // normal values reach ~4
			t.Errorf("%s: worst round-trip error %v", c.typ, worst)
		}
	}
}

// TestMatMulRowIndependence: every output equals the plain Dot of the
// dequantised row with the token, bit for bit, for any number of tokens and
// any number of workers.
func TestMatMulRowIndependence(t *testing.T) {
	t.Run("cols=96", func(t *testing.T) {
		testMatMulRowIndependence(t, 96, []gguf.Type{gguf.F32, gguf.F16, gguf.BF16, gguf.Q8_0, gguf.Q4_0, gguf.Q4_1})
	})
	// A row tail past the last multiple of 32 (the float kernels' tail).
	t.Run("cols=103", func(t *testing.T) {
		testMatMulRowIndependence(t, 103, []gguf.Type{gguf.F32, gguf.F16, gguf.BF16})
	})
	t.Run("wide", testMatMulRowIndependenceWide)
}

// testMatMulRowIndependenceWide: widths up to 17 (groups of 8, 4, 2, 1 in
// every combination) on matrices big enough for the pool to split them,
// with rows that are not a multiple of 8, on 1, 2 and 3 workers.
func testMatMulRowIndependenceWide(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	const rows, cols = 77, 1024
	w := randVals(r, rows*cols, 0.05)
	x := randVals(r, 17*cols, 1)
	for _, typ := range []gguf.Type{gguf.F32, gguf.BF16, gguf.Q8_0, gguf.Q4_0, gguf.Q4_1} {
		data, _ := Quantize(typ, w, cols)
		m, err := NewMatrix("w", typ, rows, cols, data)
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
						t.Fatalf("%s workers %d width %d: out[%d] (token %d row %d) = %v, width 1 gives %v", typ, workers, n, i, i/rows, i%rows, out[i], ref[i])
					}
				}
			}
		}
	}
}

func testMatMulRowIndependence(t *testing.T, cols int, types []gguf.Type) {
	r := rand.New(rand.NewPCG(3, 4))
	const rows = 100
	w := randVals(r, rows*cols, 0.1)
	x := randVals(r, 8*cols, 1)
	for _, typ := range types {
		data, _ := Quantize(typ, w, cols)
		m, err := NewMatrix("w", typ, rows, cols, data)
		if err != nil {
			t.Fatal(err)
		}
		// The reference is width-1 calls; they must agree with the plain
		// Dot of the dequantised row: exactly on the float path, within the
		// error of 8-bit activations on the integer path (Q4_0, Q4_1, Q8_0
		// with AVX2).
		ref := make([]float32, 8*rows)
		for tk := range 8 {
			m.MatMul(NewPool(1), ref[tk*rows:(tk+1)*rows], x[tk*cols:(tk+1)*cols])
		}
		row := make([]float32, cols)
		integer := integerType(typ)
		for ri := range rows {
			m.Row(row, ri)
			for tk := range 8 {
				want := Dot(row, x[tk*cols:(tk+1)*cols])
				if !integer && ref[tk*rows+ri] != want {
					t.Fatalf("%s: row %d token %d: %v, Dot gives %v", typ, ri, tk, ref[tk*rows+ri], want)
				}
				var norm float64
				for i, w := range row {
					norm += math.Abs(float64(w * x[tk*cols+i]))
				}
				if d := math.Abs(float64(ref[tk*rows+ri] - want)); d > 0.01*norm+1e-6 {
					t.Fatalf("%s: row %d token %d: %v, Dot gives %v (norm %v)", typ, ri, tk, ref[tk*rows+ri], want, norm)
				}
			}
		}
		for _, workers := range []int{1, 2, 3, 7} {
			p := NewPool(workers)
			for _, n := range []int{1, 2, 3, 4, 5, 6, 7, 8} {
				out := make([]float32, n*rows)
				m.MatMul(p, out, x[:n*cols])
				for i := range out {
					if out[i] != ref[i] {
						t.Fatalf("%s workers %d width %d: out[%d] = %v, want %v", typ, workers, n, i, out[i], ref[i])
					}
				}
			}
		}
	}
}

func TestNewMatrixErrors(t *testing.T) {
	if _, err := NewMatrix("blk.0.x", gguf.Q8_K, 1, 256, make([]byte, 292)); err == nil {
		t.Error("Q8_K weights accepted")
	}
	if _, err := NewMatrix("blk.0.x", gguf.F32, 2, 4, make([]byte, 31)); err == nil {
		t.Error("short data accepted")
	}
	if _, err := NewMatrix("blk.0.x", gguf.Q4_0, 1, 31, make([]byte, 18)); err == nil {
		t.Error("partial block accepted")
	}
}

func TestKernels(t *testing.T) {
	x := []float32{1, 2, 3, 4}
	out := make([]float32, 4)
	RMSNorm(out, x, []float32{1, 1, 2, 2}, 0)
	s := float32(1 / math.Sqrt(7.5))
	for i, want := range []float32{s, 2 * s, 6 * s, 8 * s} {
		if math.Abs(float64(out[i]-want)) > 1e-6 {
			t.Fatalf("rmsnorm %v", out)
		}
	}
	sm := []float32{1, 2, 3}
	Softmax(sm)
	e := []float64{math.Exp(-2), math.Exp(-1), 1}
	for i := range sm {
		if math.Abs(float64(sm[i])-e[i]/(e[0]+e[1]+e[2])) > 1e-6 {
			t.Fatalf("softmax %v", sm)
		}
	}
	if Argmax([]float32{1, 3, 3, 2}) != 1 {
		t.Error("argmax tie must go to the lowest id")
	}
	if d := Dot([]float32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, []float32{1, 1, 1, 1, 1, 1, 1, 1, 1, 2}); d != 65 {
		t.Errorf("dot %v", d)
	}
}

// TestAttendMask checks invariant 2 at the attention level: a query at pos
// depends on exactly the rows Visible returns (full and sliding layers), and
// matches a float64 reference over those rows.
func TestAttendMask(t *testing.T) {
	const hd, heads = 8, 2
	for _, window := range []int{0, 1, 3, 5} {
		geo := kv.Geometry{Context: 64, Layers: []kv.LayerSpec{{KVHeads: heads, HeadDim: hd, Window: window, Source: 0}}}
		c, err := kv.New(geo, 8)
		if err != nil {
			t.Fatal(err)
		}
		r := rand.New(rand.NewPCG(5, uint64(window)))
		// Fill 20 committed positions and 4 pending ones.
		for start := 0; start < 24; start += 4 {
			if err := c.Reserve(start, 4); err != nil {
				t.Fatal(err)
			}
			for p := start; p < start+4; p++ {
				copy(c.K(0, p), randVals(r, heads*hd, 1))
				copy(c.V(0, p), randVals(r, heads*hd, 1))
			}
			if start < 20 {
				c.Commit(4)
			}
		}
		q := randVals(r, hd, 1)
		scores := make([]float32, 64)
		for pos := 20; pos < 24; pos++ {
			lo, hi := c.Visible(0, pos)
			wantLo := 0
			if window > 0 {
				wantLo = max(0, pos-window+1)
			}
			if lo != wantLo || hi != pos {
				t.Fatalf("window %d pos %d: visible %d..%d", window, pos, lo, hi)
			}
			out := make([]float32, hd)
			Attend(c, 0, pos, q, 1, hd, 0.5, scores, out)
			// float64 reference over the visible rows only.
			ref := make([]float64, hd)
			var w []float64
			var sum float64
			for p := lo; p <= hi; p++ {
				var s float64
				for i := range hd {
					s += float64(q[i]) * float64(c.K(0, p)[hd+i])
				}
				w = append(w, math.Exp(s*0.5))
				sum += w[len(w)-1]
			}
			for p := lo; p <= hi; p++ {
				for i := range hd {
					ref[i] += w[p-lo] / sum * float64(c.V(0, p)[hd+i])
				}
			}
			for i := range hd {
				if math.Abs(float64(out[i])-ref[i]) > 1e-5 {
					t.Fatalf("window %d pos %d: out %v, ref %v", window, pos, out, ref)
				}
			}
			// Rows outside the visible range (including later pending rows)
			// must not change a single bit; a row inside must.
			for p := 0; p < 24; p++ {
				if window > 0 && pos-p >= window+8-1 {
					continue // slot reused by the ring: not addressable
				}
				k, v := c.K(0, p), c.V(0, p)
				savedK, savedV := k[hd], v[hd]
				k[hd] += 10
				v[hd] += 10
				got := make([]float32, hd)
				Attend(c, 0, pos, q, 1, hd, 0.5, scores, got)
				k[hd], v[hd] = savedK, savedV
				changed := false
				for i := range hd {
					changed = changed || got[i] != out[i]
				}
				if visible := p >= lo && p <= hi; changed != visible {
					t.Fatalf("window %d query %d: row %d visible=%v but changed=%v", window, pos, p, visible, changed)
				}
			}
		}
	}
}

// TestDot3: the three-token kernel equals three Dots bit for bit, for lengths
// with and without a tail past the SIMD part.
func TestDot3(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, n := range []int{1, 5, 31, 32, 64, 100, 576, 1000} {
		w := randVals(r, n, 1)
		x := [3][]float32{randVals(r, n, 1), randVals(r, n, 1), randVals(r, n, 1)}
		got := Dot3(w, x[0], x[1], x[2])
		for i := range 3 {
			if want := Dot(w, x[i]); got[i] != want {
				t.Fatalf("n=%d token %d: Dot3 %v, Dot %v", n, i, got[i], want)
			}
		}
	}
	// A matrix whose rows have a tail (F32, 100 columns), widths 1..8.
	w := randVals(r, 7*100, 1)
	m := FromF32("w", 7, 100, w)
	x := randVals(r, 8*100, 1)
	for n := 1; n <= 8; n++ {
		out := make([]float32, n*7)
		m.MatMul(NewPool(2), out, x[:n*100])
		for tk := range n {
			for ri := range 7 {
				if want := Dot(w[ri*100:(ri+1)*100], x[tk*100:(tk+1)*100]); out[tk*7+ri] != want {
					t.Fatalf("width %d token %d row %d differs", n, tk, ri)
				}
			}
		}
	}
}

// TestAttendGroup: grouped attention equals per-head Attend bit for bit.
func TestAttendGroup(t *testing.T) {
	const hd, group = 16, 3
	geo := kv.Geometry{Context: 64, Layers: []kv.LayerSpec{{KVHeads: 2, HeadDim: hd, Window: 5, Source: 0}, {KVHeads: 2, HeadDim: hd, Source: 1}}}
	c, _ := kv.New(geo, 16)
	r := rand.New(rand.NewPCG(13, 14))
	c.Reserve(0, 12)
	for l := range 2 {
		for p := range 12 {
			copy(c.K(l, p), randVals(r, 2*hd, 1))
			copy(c.V(l, p), randVals(r, 2*hd, 1))
		}
	}
	q := randVals(r, group*hd, 1)
	for l := range 2 {
		for pos := range 12 {
			got := make([]float32, group*hd)
			AttendGroup(c, l, pos, q, group, 1, hd, 0.3, make([]float32, group*(pos+1)), got)
			for g := range group {
				want := make([]float32, hd)
				Attend(c, l, pos, q[g*hd:(g+1)*hd], 1, hd, 0.3, make([]float32, pos+1), want)
				for i := range hd {
					if got[g*hd+i] != want[i] {
						t.Fatalf("layer %d pos %d head %d differs", l, pos, g)
					}
				}
			}
		}
	}
}

// TestMatMulZeroTokens: an all-zero token (every activation block has scale
// 0) gives exactly zero on every path, and a token of huge values stays finite.
func TestMatMulZeroTokens(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	const rows, cols = 5, 64
	w := randVals(r, rows*cols, 0.1)
	for _, typ := range []gguf.Type{gguf.F32, gguf.F16, gguf.Q8_0, gguf.Q4_0, gguf.Q4_1} {
		data, _ := Quantize(typ, w, cols)
		m, _ := NewMatrix("w", typ, rows, cols, data)
		x := make([]float32, 2*cols)
		for i := cols; i < 2*cols; i++ {
			x[i] = 1e30 * float32(i%3-1)
		}
		out := make([]float32, 2*rows)
		m.MatMul(NewPool(1), out, x)
		for i := range rows {
			if out[i] != 0 || math.IsNaN(float64(out[rows+i])) {
				t.Fatalf("%s: zero token gives %v, huge token %v", typ, out[i], out[rows+i])
			}
		}
	}
}

// TestAttendBlock: attention over blocks of tokens and heads equals Attend
// on every (token, head) alone, bit for bit, on a sliding-window layer whose
// ring wraps inside the window and on a full layer, at head dims 16 (the Go
// loops) and 64 (the run kernels), for every block shape attnTask may
// choose, and for attnTask itself with several worker counts.
func TestAttendBlock(t *testing.T) {
	for _, hd := range []int{16, 64} {
		t.Run(fmt.Sprintf("hd=%d", hd), func(t *testing.T) { testAttendBlock(t, hd) })
	}
}

func testAttendBlock(t *testing.T, hd int) {
	const heads, group, n = 4, 2, 11
	// maxBatch 4: the sliding layer's ring holds 5+4 = 9 positions, so
	// after 11 the window of positions 6..10 wraps around the ring's end.
	geo := kv.Geometry{Context: 64, Layers: []kv.LayerSpec{{KVHeads: 2, HeadDim: hd, Window: 5, Source: 0}, {KVHeads: 2, HeadDim: hd, Source: 1}}}
	c, _ := kv.New(geo, 4)
	r := rand.New(rand.NewPCG(15, 16))
	for p0 := 0; p0 < n; p0 += 4 {
		m := min(4, n-p0)
		if err := c.Reserve(p0, m); err != nil {
			t.Fatal(err)
		}
		for l := range 2 {
			for p := p0; p < p0+m; p++ {
				copy(c.K(l, p), randVals(r, 2*hd, 1))
				copy(c.V(l, p), randVals(r, 2*hd, 1))
			}
		}
		c.Commit(m)
	}
	q := randVals(r, n*heads*hd, 1)
	for l, first := range []int{6, 0} { // the sliding layer's live positions start at 2
		want := make([]float32, n*heads*hd)
		for tk := first; tk < n; tk++ {
			for h := range heads {
				o := tk*heads*hd + h*hd
				Attend(c, l, tk, q[o:o+hd], h/group, hd, 0.3, make([]float32, tk+1), want[o:o+hd])
			}
		}
		check := func(what string, got []float32) {
			t.Helper()
			for i := first * heads * hd; i < len(got); i++ {
				if got[i] != want[i] {
					t.Fatalf("layer %d, %s: out[%d] (token %d) = %v, Attend gives %v", l, what, i, i/(heads*hd), got[i], want[i])
				}
			}
		}
		for start := first; start < first+4; start++ {
			for nt := 1; start+nt <= n; nt++ {
				for nh := 1; nh <= group; nh++ {
					got := append([]float32(nil), want...)
					for kvh := range heads / group {
						for h0 := kvh * group; h0 < (kvh+1)*group; h0 += nh {
							o := start*heads*hd + h0*hd
							AttendBlock(c, l, start, nt, q[o:], heads*hd, nh, kvh, hd, 0.3, make([]float32, nt*nh*(start+nt)), got[o:])
						}
					}
					check(fmt.Sprintf("block of %d tokens from %d, %d heads", nt, start, nh), got)
				}
			}
		}
		for _, workers := range []int{1, 2, 3, 8} {
			got := make([]float32, n*heads*hd)
			o := first * heads * hd
			new(attnTask).attend(NewPool(workers), c, l, first, n-first, q[o:], heads, group, hd, 0.3, got[o:])
			check(fmt.Sprintf("attnTask on %d workers", workers), got)
		}
	}
}
