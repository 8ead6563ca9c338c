package cpu

import (
	"fmt"
	"testing"
	"time"

	"anechat/engine/model/gguf"
)

// BenchmarkKRowKernel times the row kernels alone on 8 rows of 8 blocks of
// 256 values (in L1), interleaved: each iteration times 200 calls of each
// width in rotating order, so that the medians' ratios (x4/x1: the
// kernels' own width-4 / width-1 cost) are measured under one load. ns per
// 8 rows and 256 values.
func BenchmarkKRowKernel(b *testing.B) {
	const cols, reps = 256 * 8, 200
	widths := []int{1, 2, 4, 8}
	for _, typ := range []gguf.Type{gguf.Q4_K, gguf.Q6_K, gguf.Q5_0, gguf.Q8_0, gguf.Q4_1} {
		m, err := NewMatrix("w", typ, 8, cols, randomBlocks(newRand(1), typ, 8*cols, 0.02))
		if err != nil {
			b.Fatal(err)
		}
		ks := rowKernels(typ)
		if ks[1] == nil {
			continue
		}
		x := make([]float32, 8*cols)
		for i := range x {
			x[i] = float32(i%7) - 3
		}
		ins := make([]*Input, 9)
		for _, n := range widths {
			ins[n] = NewInput(x[:n*cols], cols)
			m.MatMulInput(NewPool(1), make([]float32, 8*n), ins[n]) // quantise once
		}
		b.Run(typ.String(), func(b *testing.B) {
			out := make([]float32, 64)
			ns := make([][]float64, len(widths))
			for i := 0; b.Loop(); i++ {
				for j := range widths {
					k := (i + j) % len(widths)
					n := widths[k]
					a := m.rowArgs(ins[n])
					t0 := time.Now()
					for range reps {
						ks[n](&m.Data[0], m.rowBytes, a.nb, &a.q[0], (*float32)(a.dx), a.sx, a.dstride, &out[0], 4*8)
					}
					ns[k] = append(ns[k], float64(time.Since(t0).Nanoseconds())/reps/float64(cols/256))
				}
			}
			for k, n := range widths {
				b.ReportMetric(median(ns[k]), fmt.Sprintf("x%d-ns", n))
				if k > 0 {
					b.ReportMetric(median(ns[k])/median(ns[0]), fmt.Sprintf("x%d/x1", n))
				}
			}
		})
	}
}
