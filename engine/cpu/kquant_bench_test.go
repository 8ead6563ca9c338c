package cpu

import (
	"testing"

	"anechat/engine/arch"
	"anechat/engine/model/gguf"
)

// smallKOpts is a SmolLM2-135M-like geometry (30 layers, FFN 1536, vocab
// 49152) with the hidden size cut from 576 to 512, since K-format rows
// hold whole blocks of 256 (a real Q4_K_M file of SmolLM2 stores its
// 576-column matrices in other formats).
var smallKOpts = arch.Decoder{Hidden: 512, FFN: 1536, Layers: 30, Heads: 8, KVHeads: 2, Vocab: 49152, Context: 512}

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

func benchRandomLlama(b *testing.B, o arch.Decoder, typ gguf.Type, read bool) {
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
	m.own(f)
	var buf []uint64
	if read {
		buf = newReadBuffer()
	}
	benchForwardMem(b, m, buf, 64)
}
