package cpu

import (
	"context"
	"testing"

	"anechat/engine/arch/gemma4"
	"anechat/engine/kv"
	"anechat/engine/model"
	"anechat/engine/model/gguf"
)

// BenchmarkGemma4E2B times decode calls of width 1, 2, 4 and 8 on random
// weights in the Gemma 4 E2B geometry cut to 10 layers (the last 5
// KV-shared, with the double-wide MLP) and a 65536-token vocabulary, in BF16
// (what Hugging Face checkpoints ship) and Q8_0, at 64 committed positions.
// MB/s counts the weight bytes one call streams (layers and the tied output
// projection; embedding and PLE tables are only looked up). The
// "interleaved" runs pair the widths and a memory read (benchInterleaved).
func BenchmarkGemma4E2B(b *testing.B) {
	buf := newReadBuffer()
	for _, typ := range []gguf.Type{gguf.BF16, gguf.Q8_0} {
		b.Run(typ.String(), func(b *testing.B) {
			m, err := RandomGemma4(gemma4.E2B(10, 65536), typ, 1, nil)
			if err != nil {
				b.Fatal(err)
			}
			var streamed int64
			for _, l := range m.layers {
				l := l.(*gemma4Layer)
				for _, w := range []*Matrix{l.attn.wq, l.attn.wk, l.attn.wv, l.attn.wo, l.mlp.gate, l.mlp.up, l.mlp.down, l.ple.gate, l.ple.proj} {
					if w != nil {
						streamed += int64(len(w.Data))
					}
				}
			}
			streamed += int64(len(m.out.Data)) + int64(len(m.ple.proj.Data))
			benchGemma4(b, m, streamed, buf)
		})
	}
}

func benchGemma4(b *testing.B, m *Gemma4, streamed int64, buf []uint64) {
	ctx := context.Background()
	c, err := kv.New(m.Config().KV, 64)
	if err != nil {
		b.Fatal(err)
	}
	prompt := make([]int32, 64)
	for i := range prompt {
		prompt[i] = int32(3 + i*7)
	}
	if _, err := m.Forward(ctx, prompt, 0, c, model.Argmax|model.Last); err != nil {
		b.Fatal(err)
	}
	c.Commit(len(prompt))
	benchCalls(b, streamed, buf, func(w int) error {
		_, err := m.Forward(ctx, prompt[:w], c.Len(), c, model.Argmax)
		c.Rollback()
		return err
	})
}
