package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"anechat/engine/model/gguf"
)

// fma32Exact is a·b+c rounded once to float32 (what VFMADD231PS and FMLA
// compute): fma32Big's exact big.Float, with zeros, infinities and NaN
// (which big.Float does not take) done in float64.
func fma32Exact(a, b, c float32) float32 {
	p := float64(a) * float64(b) // exact
	if q := float64(c); p == 0 || q == 0 || math.IsInf(p, 0) || math.IsNaN(p) || math.IsInf(q, 0) || math.IsNaN(q) {
		return float32(p + q) // one of them zero or not finite: the sum is exact
	}
	return fma32Big(a, b, c)
}

// dotCanon is the canonical order of Dot where the float kernels run
// (dotAVX2, dotNEON and every fused kernel that claims Dot's bits): the
// first n = len(a)&^31 elements in 32 lanes, lane j taking the elements
// i ≡ j (mod 32) by fused multiply-adds, the lanes summed as
// ((l[j]+l[8+j]) + (l[16+j]+l[24+j])) for j < 8, then v[j]+v[j+4], then
// (x0+x1)+(x2+x3); plus dotGo of the tail. It is written here, with exact
// arithmetic, so that the amd64 and the arm64 kernels are each held to
// one definition.
func dotCanon(a, b []float32) float32 {
	n := len(a) &^ 31
	if n == 0 {
		return dotGo(a, b)
	}
	var l [32]float32
	for i := range n {
		l[i%32] = fma32Exact(a[i], b[i], l[i%32])
	}
	var v [8]float32
	for j := range 8 {
		v[j] = (l[j] + l[8+j]) + (l[16+j] + l[24+j])
	}
	x := [4]float32{v[0] + v[4], v[1] + v[5], v[2] + v[6], v[3] + v[7]}
	s := (x[0] + x[1]) + (x[2] + x[3])
	if n == len(a) {
		return s
	}
	return s + dotGo(a[n:], b[n:len(a)])
}

// axpyCanon is Axpy where the float kernels run: a fused multiply-add for
// the first len(y)&^7 elements, the product rounded first for the rest.
func axpyCanon(y []float32, a float32, x []float32) {
	for i := range y {
		if i < len(y)&^7 {
			y[i] = fma32Exact(a, x[i], y[i])
		} else {
			y[i] += float32(a * x[i])
		}
	}
}

func same32(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) || a != a && b != b }

// TestDotCanonical: where the float kernels run, Dot, Dot3 and every
// float matrix product (F32, F16, BF16 rows, widths 1 to 9, rows with and
// without a tail past the last multiple of 32) give dotCanon's bits, on
// amd64 and on arm64 alike.
func TestDotCanonical(t *testing.T) {
	if !floatSIMD() {
		t.Skip("no float kernels on this CPU: Dot runs the Go loop")
	}
	r := rand.New(rand.NewPCG(61, 62))
	for _, n := range []int{32, 33, 63, 64, 95, 100, 256, 576, 1000, 2048} {
		for _, scale := range []float32{1, 1e-19, 1e19} {
			w, x0, x1, x2 := randVals(r, n, 1), randVals(r, n, scale), randVals(r, n, 1), randVals(r, n, 3)
			want := dotCanon(w, x0)
			if got := Dot(w, x0); !same32(got, want) {
				t.Fatalf("n=%d scale %g: Dot %v, canonical %v", n, scale, got, want)
			}
			got3 := Dot3(w, x0, x1, x2)
			for k, x := range [][]float32{x0, x1, x2} {
				if want := dotCanon(w, x); !same32(got3[k], want) {
					t.Fatalf("n=%d: Dot3 token %d %v, canonical %v", n, k, got3[k], want)
				}
			}
		}
	}
	colses := []int{96, 103, 1024}
	if testing.Short() {
		colses = colses[:2]
	}
	for _, cols := range colses {
		const rows = 11
		vals := randVals(r, rows*cols, 0.2)
		x := randVals(r, 9*cols, 1)
		for _, typ := range []gguf.Type{gguf.F32, gguf.F16, gguf.BF16} {
			data, _ := Quantize(typ, vals, cols)
			m, err := NewMatrix("w", typ, rows, cols, data)
			if err != nil {
				t.Fatal(err)
			}
			row := make([]float32, cols)
			for n := 1; n <= 9; n++ {
				out := make([]float32, n*rows)
				m.MatMul(NewPool(2), out, x[:n*cols])
				for ri := range rows {
					m.Row(row, ri)
					for tk := range n {
						if want := dotCanon(row, x[tk*cols:(tk+1)*cols]); !same32(out[tk*rows+ri], want) {
							t.Fatalf("%s cols %d width %d: token %d row %d = %v, canonical %v", typ, cols, n, tk, ri, out[tk*rows+ri], want)
						}
					}
				}
			}
		}
	}
}

// TestAxpyCanonical: Axpy, and the attention's V sums (wsumSIMD, the same
// fused multiply-adds row after row), give axpyCanon's bits.
func TestAxpyCanonical(t *testing.T) {
	if !floatSIMD() {
		t.Skip("no float kernels on this CPU")
	}
	r := rand.New(rand.NewPCG(63, 64))
	for _, n := range []int{1, 7, 8, 9, 31, 32, 33, 64, 100, 256} {
		y, x := randVals(r, n, 1), randVals(r, n, 1)
		want := append([]float32(nil), y...)
		axpyCanon(want, 0.37, x)
		Axpy(y, 0.37, x)
		for i := range y {
			if !same32(y[i], want[i]) {
				t.Fatalf("n=%d: y[%d] = %v, canonical %v", n, i, y[i], want[i])
			}
		}
	}
	const n, rows, stride = 64, 5, 96
	v, w := randVals(r, rows*stride, 1), randVals(r, rows, 1)
	got, want := randVals(r, n, 1), make([]float32, n)
	copy(want, got)
	if !wsumSIMD(got, v, stride, w) {
		t.Fatal("wsumSIMD declined")
	}
	for ri := range rows {
		axpyCanon(want, w[ri], v[ri*stride:ri*stride+n])
	}
	for i := range got {
		if !same32(got[i], want[i]) {
			t.Fatalf("wsum[%d] = %v, canonical %v", i, got[i], want[i])
		}
	}
	q, k := randVals(r, n, 1), randVals(r, rows*stride, 1)
	scores := make([]float32, rows)
	if !dotRowsSIMD(q, k, stride, 0.125, scores) {
		t.Fatal("dotRowsSIMD declined")
	}
	for ri, s := range scores {
		if want := dotCanon(q, k[ri*stride:ri*stride+n]) * 0.125; !same32(s, want) {
			t.Fatalf("dotRows[%d] = %v, canonical %v", ri, s, want)
		}
	}
}

// TestDequantSIMD: the SIMD dequantisers (F16, BF16, Q8_0, Q4_0, Q4_1)
// give the Go loops' bits for random rows, rows of every length around the
// 8- and 32-element steps, and blocks with extreme scales (subnormal,
// huge, infinite and NaN halves; any NaN stands for any other).
func TestDequantSIMD(t *testing.T) {
	if !floatSIMD() {
		t.Skip("no SIMD dequantisers on this CPU")
	}
	r := rand.New(rand.NewPCG(65, 66))
	for _, typ := range []gguf.Type{gguf.F16, gguf.BF16, gguf.Q8_0, gguf.Q4_0, gguf.Q4_1} {
		for _, cols := range []int{32, 64, 96, 32 * 70} {
			data, _ := Quantize(typ, randVals(r, cols, 1), cols)
			for i := range data { // some random bytes: every pattern of scales and values
				if r.IntN(4) == 0 {
					data[i] = byte(r.Uint32())
				}
			}
			for _, h := range []uint16{0x0001, 0x03ff, 0x7bff, 0x7c00, 0xfc00, 0x7e01, 0x8000} {
				if bs := typ.BlockBytes(); typ != gguf.F16 && typ != gguf.BF16 && len(data) >= 3*bs {
					data[bs], data[bs+1] = byte(h), byte(h>>8) // block 1's scale
					data[len(data)-bs+2], data[len(data)-bs+3] = byte(h), byte(h>>8)
				}
				simd, generic := make([]float32, cols), make([]float32, cols)
				dequantRow(simd, typ, data)
				restore := withoutSIMD()
				dequantRow(generic, typ, data)
				restore()
				for i := range simd {
					// A NaN may differ in its quiet bit (VCVTPH2PS and FCVTL
					// quiet a signalling NaN, the Go conversion keeps it).
					if !same32(simd[i], generic[i]) {
						t.Fatalf("%s cols %d [%d]: SIMD %v (%#x), Go %v (%#x)", typ, cols, i, simd[i], math.Float32bits(simd[i]), generic[i], math.Float32bits(generic[i]))
					}
				}
			}
		}
	}
}

// canonInputs are arguments for the exponential and tanh: random ones of
// every scale, and the borders of each special case.
func canonInputs() []float64 {
	r := rand.New(rand.NewPCG(81, 82))
	xs := []float64{0, math.Copysign(0, -1), 1, -1, math.Inf(1), math.Inf(-1), math.NaN(), math.MaxFloat64, -math.MaxFloat64,
		709.78, 709.782712893384, 7.09782712893384e+02, math.Nextafter(7.09782712893384e+02, 1000), -708.39, -708.4, -745.13, -745.14,
		-744.44, -720, 0.625, -0.625, math.Nextafter(0.625, 0), 44.014845965556527, 44.01484596555653, 5e-324, -5e-324, 1e-300}
	for range 300000 {
		xs = append(xs, (r.Float64()*2-1)*math.Pow(10, float64(r.IntN(6)-3)), (r.Float64()*2-1)*750, math.Float64frombits(r.Uint64()))
	}
	return xs
}
