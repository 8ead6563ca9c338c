package cpu

import (
	"fmt"
	"testing"
	"unsafe"

	"anechat/engine/model/gguf"
)

// BenchmarkRowKernel times the row kernels alone on 8 rows of 48 blocks (in
// L1), per 8-row block.
func BenchmarkRowKernel(b *testing.B) {
	if !hasVNNI {
		b.Skip("no row kernels here")
	}
	const cols = 32 * 48
	for _, typ := range []gguf.Type{gguf.Q4_1, gguf.Q8_0} {
		data := randomBlocks(newRand(1), typ, 8*cols, 0.02)
		m, _ := NewMatrix("w", typ, 8, cols, data)
		x := make([]float32, 8*cols)
		for i := range x {
			x[i] = float32(i%7) - 3
		}
		in := NewInput(x, cols)
		ts := in.q8T()
		ks := rowKernels(typ)
		var out [64]float32
		for _, c := range []struct {
			g int
			k rowKernel
		}{{1, ks[1]}, {2, ks[2]}, {4, ks[4]}, {8, ks[8]}} {
			b.Run(fmt.Sprintf("%s/x%d", typ, c.g), func(b *testing.B) {
				for b.Loop() {
					c.k(&m.Data[0], m.rowBytes, 48, &in.qG[0], &in.dT[0], unsafe.Pointer(&in.qs8T[0]), 4*ts, &out[0], 32)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/48, "ns/block8")
			})
		}
	}
}
