package cpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The SIMD activations (simd_amd64.s, act_arm64.s) against the canonical
// Go expressions, on every architecture that has them.

// TestSiLUMulSIMD: the packed-double SiLU gives SiLU(g)·u bit for bit, for
// random activations of several scales and for the special cases math.Exp
// handles apart (|x| near and past the exponent range, ±Inf, NaN, zeros,
// subnormals), wherever they fall in a group of four.
func TestSiLUMulSIMD(t *testing.T) {
	r := rand.New(rand.NewPCG(51, 52))
	var g []float32
	for _, scale := range []float32{1e-3, 1, 8, 100, 800} {
		g = append(g, randVals(r, 4000, scale)...)
	}
	special := []float32{0, float32(math.Copysign(0, -1)), 1e-45, -1e-45, 708, -708, 708.4, -708.4, 709, -709, 709.8, -709.8, 710, -710,
		745, -745, 746, -746, 1e20, -1e20, math.MaxFloat32, -math.MaxFloat32,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 88.7, -88.7, 103.9, -103.9}
	for i, v := range special {
		g[37*i+i%4] = v
	}
	u := randVals(r, len(g), 2)
	want := make([]float32, len(g))
	for i := range g {
		want[i] = SiLU(g[i]) * u[i]
	}
	for _, off := range []int{0, 1, 3} { // tails of every length
		got := append([]float32(nil), g[off:]...)
		siluMulRange(got, u[off:])
		for i := range got {
			if w := want[off+i]; math.Float32bits(got[i]) != math.Float32bits(w) && !(got[i] != got[i] && w != w) {
				t.Fatalf("offset %d: element %d (x = %v): %v, SiLU gives %v", off, i, g[off+i], got[i], w)
			}
		}
	}
	got := append([]float32(nil), g...)
	new(gateTask).mul(NewPool(2), got, u, siluMulRange) // as the llama MLP runs it
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
			t.Fatalf("gated SiLU on the pool: element %d (x = %v): %v, SiLU gives %v", i, g[i], got[i], want[i])
		}
	}
	plain := randVals(r, 4000, 8)
	if n := siluMulSIMD(plain, u[:4000]); floatSIMD() && n != 4000 {
		t.Fatalf("the kernel stopped at %d of 4000 ordinary activations", n)
	}
}

// TestSoftmaxSIMD: Softmax with the packed exponentials gives softmaxGo's
// bits, for score rows of many lengths and spreads (differences from the
// maximum past -708 and -745, where math.Exp goes subnormal and then 0),
// rows with -Inf, and rows with NaN.
func TestSoftmaxSIMD(t *testing.T) {
	r := rand.New(rand.NewPCG(53, 54))
	for _, spread := range []float32{0.1, 5, 300, 800, 2000} {
		for n := 1; n <= 67; n += 3 {
			x := randVals(r, n, spread)
			if n > 5 {
				x[n/2] = float32(math.Inf(-1))
			}
			if spread == 2000 && n > 9 {
				x[7] = float32(math.NaN())
			}
			want := append([]float32(nil), x...)
			softmaxGo(want)
			got := append([]float32(nil), x...)
			Softmax(got)
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
					t.Fatalf("spread %v, %d scores: [%d] (x = %v) = %v, softmaxGo gives %v", spread, n, i, x[i], got[i], want[i])
				}
			}
		}
	}
	plain := randVals(r, 400, 3)
	if n := expShiftedSIMD(plain, 10); floatSIMD() && n != 400 {
		t.Fatalf("the kernel stopped at %d of 400 ordinary scores", n)
	}
}

// TestGELUMulSIMD: the packed-double GELU gives GELUTanh(g)·u bit for bit,
// across math.Tanh's three ranges and their borders, signed zeros,
// subnormals, huge values, ±Inf and NaN.
func TestGELUMulSIMD(t *testing.T) {
	r := rand.New(rand.NewPCG(55, 56))
	var g []float32
	for _, scale := range []float32{1e-3, 0.5, 1, 3, 10, 100} {
		g = append(g, randVals(r, 4000, scale)...)
	}
	special := []float32{0, float32(math.Copysign(0, -1)), 1e-45, -1e-45, 1e-20, -1e-20, 0.7, -0.7, 0.75, -0.75,
		5, -5, 55, -55, 56, -56, 1e20, -1e20, math.MaxFloat32, -math.MaxFloat32,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())}
	for i, v := range special {
		g[41*i+i%4] = v
	}
	// Arguments of math.Tanh next to 0.625 and MAXLOG/2: solve for x.
	for _, b := range []float64{0.625, 44.014845965556527} {
		for _, d := range []float64{-1e-9, 0, 1e-9} {
			x := float32(b + d)
			for range 20 { // Newton on c*(x+0.044715x^3) = b+d
				f := 0.7978845608028654*(float64(x)+0.044715*float64(x)*float64(x)*float64(x)) - (b + d)
				x -= float32(f / (0.7978845608028654 * (1 + 3*0.044715*float64(x)*float64(x))))
			}
			g = append(g, x, -x, math.Nextafter32(x, 0), math.Nextafter32(x, 100))
		}
	}
	u := randVals(r, len(g), 2)
	want := make([]float32, len(g))
	for i := range g {
		want[i] = GELUTanh(g[i]) * u[i]
	}
	for _, off := range []int{0, 1, 2, 3} {
		got := append([]float32(nil), g[off:]...)
		geluMulRange(got, u[off:])
		for i := range got {
			if w := want[off+i]; math.Float32bits(got[i]) != math.Float32bits(w) && !(got[i] != got[i] && w != w) {
				t.Fatalf("offset %d: element %d (x = %v): %v, GELUTanh gives %v", off, i, g[off+i], got[i], w)
			}
		}
	}
	got := append([]float32(nil), g...)
	new(gateTask).mul(NewPool(2), got, u, geluMulRange) // as the gemma4 MLP runs it
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
			t.Fatalf("gated GELU on the pool: element %d (x = %v): %v, GELUTanh gives %v", i, g[i], got[i], want[i])
		}
	}
}
