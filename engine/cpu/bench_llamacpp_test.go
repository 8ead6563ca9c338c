package cpu

import (
	"context"
	"os"
	"strconv"
	"testing"

	"anechat/engine/kv"
	"anechat/engine/model"
	"anechat/engine/model/gguf"
)

// BenchmarkLlamaCppPair is anechat's half of bench/llamacpp.sh, which
// alternates it with llama-bench on the same GGUF ($ANECHAT_BENCH_GGUF)
// and thread count ($ANECHAT_BENCH_THREADS, default all CPUs). It measures
// what llama-bench's default tests do: pp512, a prefill of 512 tokens from
// an empty cache (here in calls of 64, the Session's prefill width), and
// tg128, 128 tokens decoded one call each from an empty cache; each
// reports tok/s.
func BenchmarkLlamaCppPair(b *testing.B) {
	path := os.Getenv("ANECHAT_BENCH_GGUF")
	if path == "" {
		b.Skip("set ANECHAT_BENCH_GGUF (bench/llamacpp.sh)")
	}
	threads, _ := strconv.Atoi(os.Getenv("ANECHAT_BENCH_THREADS"))
	f, err := gguf.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	arch, err := f.String("general.architecture")
	f.Close()
	if err != nil {
		b.Fatal(err)
	}
	pool := NewPool(threads)
	defer pool.Close()
	var m model.Backend
	switch arch {
	case "gemma3":
		m, err = OpenGemma3(path, pool)
	case "qwen2", "qwen3":
		m, err = OpenQwen(path, pool)
	default:
		m, err = OpenLlama(path, pool)
	}
	if err != nil {
		b.Fatal(err)
	}
	if cl, ok := m.(interface{ Close() error }); ok {
		defer cl.Close()
	}
	ctx := context.Background()
	toks := make([]int32, 512)
	for i := range toks {
		toks[i] = int32(3 + i%200)
	}
	c, err := kv.New(m.Config().KV, 640)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("pp512", func(b *testing.B) {
		for b.Loop() {
			c.Reset()
			for pos := 0; pos < len(toks); pos += 64 {
				if _, err := m.Forward(ctx, toks[pos:pos+64], pos, c, model.Logits|model.Last); err != nil {
					b.Fatal(err)
				}
				c.Commit(64)
			}
		}
		b.ReportMetric(float64(len(toks))*float64(b.N)/b.Elapsed().Seconds(), "tok/s")
	})
	b.Run("tg128", func(b *testing.B) {
		for b.Loop() {
			c.Reset()
			next := int32(3)
			for range 128 {
				r, err := m.Forward(ctx, []int32{next}, c.Len(), c, model.Argmax)
				if err != nil {
					b.Fatal(err)
				}
				c.Commit(1)
				next = r.Argmax[0]
			}
		}
		b.ReportMetric(128*float64(b.N)/b.Elapsed().Seconds(), "tok/s")
	})
}
