//go:build amd64 || arm64

package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"anechat/engine/model/gguf"
)

// The row kernels exist on amd64 and arm64 only (rows.go): elsewhere the
// Go loops run and there is nothing to hold to dotQ8Ref here.

// TestLaneKernelsCanonical: every width of the row kernels gives, bit for
// bit, the canonical sum of dotQ8Ref of every token, for rows of 1 to 13
// blocks, matrices of 1 to 19 rows (partial groups of 8), weights with
// extreme values (Q8_0 -128, nibbles 0 and 15) and activations with zero
// and saturated blocks: every set of integer kernels this CPU has (amd64:
// the VNNI and the AVX2 forms; arm64: the SDOT forms), each switched on in
// turn (rowKernelSets).
func TestLaneKernelsCanonical(t *testing.T) {
	sets := rowKernelSets()
	if len(sets) == 0 {
		t.Skip("no integer kernels on this CPU: the Go loops run")
	}
	for _, ks := range sets {
		t.Run(ks.name, func(t *testing.T) {
			defer ks.enable()()
			testRowKernelsCanonical(t, []gguf.Type{gguf.Q8_0, gguf.Q4_0, gguf.Q4_1})
		})
	}
}

func testRowKernelsCanonical(t *testing.T, types []gguf.Type) {
	r := rand.New(rand.NewPCG(41, 42))
	for _, typ := range types {
		if rowKernels(typ)[1] == nil {
			t.Fatalf("%s: no row kernels", typ)
		}
		for nb := 1; nb <= 13; nb++ {
			rows := 1 + (nb*7)%19
			cols := 32 * nb
			w := randVals(r, rows*cols, 0.1)
			data, _ := Quantize(typ, w, cols)
			bs := typ.RowBytes(32)
			for i := 0; i < len(data); i += bs {
				if r.IntN(3) == 0 {
					for j := i + bs - 16; j < i+bs; j++ {
						data[j] = byte(r.IntN(256))
					}
				}
			}
			m, err := NewMatrix("w", typ, rows, cols, data)
			if err != nil {
				t.Fatal(err)
			}
			x := randVals(r, 13*cols, 1)
			for i := 0; i < 32 && i < cols; i++ {
				x[cols+i] = 0 // token 1's first block is zero
			}
			x[2*cols] = 1e30 // token 2's first block saturates to ±127 around one huge value
			for n := 1; n <= 13; n++ {
				in := NewInput(x[:n*cols], cols)
				out := make([]float32, n*rows)
				m.MatMulInput(NewPool(1), out, in)
				// The token-major form of the Go quantiser, for the reference.
				q, d, sx, qs := make([]int8, n*cols), make([]float32, n*nb), make([]float32, n*nb), make([]int32, n*nb)
				quantizeQ8(q, d, sx, qs, x[:n*cols])
				for tk := range n {
					for ri := range rows {
						want := dotQ8Ref(typ, data[ri*m.rowBytes:(ri+1)*m.rowBytes], q[tk*cols:(tk+1)*cols],
							d[tk*nb:(tk+1)*nb], sx[tk*nb:(tk+1)*nb], qs[tk*nb:(tk+1)*nb])
						if got := out[tk*rows+ri]; math.Float32bits(got) != math.Float32bits(want) {
							t.Fatalf("%s, %d blocks, width %d: token %d row %d = %v, canonical %v", typ, nb, n, tk, ri, got, want)
						}
					}
				}
			}
		}
	}
}
