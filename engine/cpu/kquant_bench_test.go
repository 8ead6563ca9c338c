package cpu

import (
	"fmt"
	"testing"
	"time"

	"anechat/engine/arch/llama"
	"anechat/engine/model/gguf"
)

// smallKOpts is a SmolLM2-135M-like geometry (30 layers, FFN 1536, vocab
// 49152) with the hidden size cut from 576 to 512, since K-format rows
// hold whole blocks of 256 (a real Q4_K_M file of SmolLM2 stores its
// 576-column matrices in other formats).
var smallKOpts = llama.Config{Hidden: 512, FFN: 1536, Layers: 30, Heads: 8, KVHeads: 2, Vocab: 49152, Context: 512}

// BenchmarkForwardBigK is BenchmarkForwardBigQ4_1 with every matrix in a K
// format: the memory-bound 1 GB llama geometry (bigOpts; 0.9 GB in Q4_K,
// 1.3 GB in Q6_K), widths 1, 2, 4, 8 interleaved with a read of 1 GiB
// (w4/w1 is the speculation cost ratio).
func BenchmarkForwardBigK(b *testing.B) {
	for _, typ := range []gguf.Type{gguf.Q4_K, gguf.Q6_K} {
		b.Run(typ.String(), func(b *testing.B) { benchRandomLlama(b, bigOpts, typ, true) })
	}
}

// BenchmarkForwardSmallK: the SmolLM2-sized llama (smallKOpts) in Q4_K and
// Q6_K, which fits this machine's L3.
func BenchmarkForwardSmallK(b *testing.B) {
	for _, typ := range []gguf.Type{gguf.Q4_K, gguf.Q6_K, gguf.Q4_1} {
		o := smallKOpts
		b.Run(typ.String(), func(b *testing.B) { benchRandomLlama(b, o, typ, false) })
	}
}

func benchRandomLlama(b *testing.B, o llama.Config, typ gguf.Type, read bool) {
	data, err := RandomLlama(o, typ, 1)
	if err != nil {
		b.Fatal(err)
	}
	f, err := gguf.Parse("random.gguf", data)
	if err != nil {
		b.Fatal(err)
	}
	m, err := LoadLlama(f, nil)
	if err != nil {
		b.Fatal(err)
	}
	m.file = f
	var buf []uint64
	if read {
		buf = newReadBuffer()
	}
	benchForwardMem(b, m, buf, 64)
}

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
