package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"anechat/engine/model/gguf"
)

// TestSIMDMatchesGo checks the AVX2 kernels against the Go loops: dequant
// bit-identical for F16, Q8_0 and Q4_0 (Q4_1's FMA rounds once where Go
// rounds twice: within an ulp), Dot within float32 accumulation error.
func TestSIMDMatchesGo(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2/FMA on this CPU: only the Go kernels run")
	}
	r := rand.New(rand.NewPCG(9, 9))
	const cols = 32 * 70 // more than simdBlocks blocks
	vals := randVals(r, cols, 1)
	for _, typ := range []gguf.Type{gguf.F16, gguf.BF16, gguf.Q8_0, gguf.Q4_0, gguf.Q4_1} {
		data, _ := Quantize(typ, vals, cols)
		simd := make([]float32, cols)
		generic := make([]float32, cols)
		dequantRow(simd, typ, data)
		hasAVX2, hasF16C = false, false
		dequantRow(generic, typ, data)
		hasAVX2, hasF16C = true, true
		for i := range simd {
			if typ == gguf.Q4_1 {
				if d := math.Abs(float64(simd[i] - generic[i])); d > 1e-6*math.Abs(float64(generic[i]))+1e-7 {
					t.Fatalf("%s[%d]: simd %v, go %v", typ, i, simd[i], generic[i])
				}
			} else if simd[i] != generic[i] {
				t.Fatalf("%s[%d]: simd %v, go %v", typ, i, simd[i], generic[i])
			}
		}
	}
	for _, n := range []int{0, 3, 8, 37, 64, 100} {
		x, y := randVals(r, n, 1), randVals(r, n, 1)
		y2 := append([]float32(nil), y...)
		Axpy(y, 0.37, x)
		axpyGo(y2, 0.37, x)
		for i := range y {
			if d := math.Abs(float64(y[i] - y2[i])); d > 1e-6*(1+math.Abs(float64(y2[i]))) {
				t.Fatalf("Axpy n=%d [%d]: simd %v, go %v", n, i, y[i], y2[i])
			}
		}
	}
	for _, n := range []int{0, 5, 32, 33, 100, 4096} {
		a, b := randVals(r, n, 1), randVals(r, n, 1)
		var ref float64
		for i := range a {
			ref += float64(a[i]) * float64(b[i])
		}
		if got := Dot(a, b); math.Abs(float64(got)-ref) > 1e-4*math.Sqrt(float64(n)+1) {
			t.Errorf("Dot n=%d: %v, float64 %v", n, got, ref)
		}
	}
}

// TestBF16SIMD: the AVX2 widening of bfloat16 rows gives the Go loop's bits
// for every 16-bit pattern (NaNs, infinities, zeros and subnormals
// included), at lengths that exercise the 32-, 8- and scalar tails.
func TestBF16SIMD(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2 on this CPU: only the Go loop runs")
	}
	all := make([]byte, 2*65536)
	for i := range 65536 {
		all[2*i], all[2*i+1] = byte(i), byte(i>>8)
	}
	check := func(src []byte) {
		t.Helper()
		n := len(src) / 2
		simd, generic := make([]float32, n+1), make([]float32, n+1)
		dequantRow(simd[:n], gguf.BF16, src)
		hasAVX2, hasF16C = false, false
		dequantRow(generic[:n], gguf.BF16, src)
		hasAVX2, hasF16C = true, true
		for i := range simd {
			if math.Float32bits(simd[i]) != math.Float32bits(generic[i]) {
				t.Fatalf("n=%d [%d]: simd %#x, go %#x", n, i, math.Float32bits(simd[i]), math.Float32bits(generic[i]))
			}
		}
		if simd[n] != 0 {
			t.Fatalf("n=%d: wrote past the row", n)
		}
	}
	check(all)
	for _, n := range []int{0, 1, 7, 8, 9, 31, 32, 33, 40, 63, 64, 65, 1000} {
		off := 2 * (n * 37 % 1000)
		check(all[off : off+2*n])
	}
}

// TestAVX2KernelsRowIndependent: where the row kernels run, the AVX2
// integer kernels (what CPUs without AVX-512 VNNI run) are still tested:
// every width gives width 1's bits for every integer type.
func TestAVX2KernelsRowIndependent(t *testing.T) {
	if !hasVNNI {
		t.Skip("the AVX2 kernels are the ones selected here: TestMatMulRowIndependence covers them")
	}
	hasVNNI = false
	defer func() { hasVNNI = true }()
	r := rand.New(rand.NewPCG(31, 32))
	const rows, cols = 37, 32 * 9
	w := randVals(r, rows*cols, 0.1)
	x := randVals(r, 8*cols, 1)
	for _, typ := range []gguf.Type{gguf.Q8_0, gguf.Q4_0, gguf.Q4_1} {
		data, _ := Quantize(typ, w, cols)
		data[2] = 0x80 // a Q8_0 weight of -128 (|w| = 128) or any nibbles
		m, _ := NewMatrix("w", typ, rows, cols, data)
		ref := make([]float32, 8*rows)
		for tk := range 8 {
			m.MatMul(NewPool(1), ref[tk*rows:(tk+1)*rows], x[tk*cols:(tk+1)*cols])
		}
		for n := 1; n <= 8; n++ {
			out := make([]float32, n*rows)
			m.MatMul(NewPool(2), out, x[:n*cols])
			for i := range out {
				if out[i] != ref[i] {
					t.Fatalf("%s width %d: out[%d] = %v, width 1 gives %v", typ, n, i, out[i], ref[i])
				}
			}
		}
	}
}
