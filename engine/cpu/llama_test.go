package cpu

import (
	"context"
	"strings"
	"testing"

	"anechat/engine/arch"
	"anechat/engine/kv"
	"anechat/engine/model"
	"anechat/engine/model/gguf"
	"anechat/internal/testres"
)

// Reference from models/README.md (llama2.c run.c, greedy).
var (
	storiesPrompt = testres.StoriesPrompt()
	storiesWant   = testres.StoriesGreedy()
)

func loadStories(t testing.TB) *Llama {
	f, err := gguf.Open(testres.Stories(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	m, err := LoadLlama(f, NewPool(0))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// greedy decodes max tokens after prompt, prefilling the prompt in one call.
func greedy(t testing.TB, b model.Backend, prompt []int32, maxTokens int) []int32 {
	t.Helper()
	ctx := context.Background()
	c, err := kv.New(b.Config().KV, 64)
	if err != nil {
		t.Fatal(err)
	}
	r, err := b.Forward(ctx, prompt, 0, c, model.Argmax)
	if err != nil {
		t.Fatal(err)
	}
	c.Commit(len(prompt))
	next := r.Argmax[len(prompt)-1]
	var out []int32
	for len(out) < maxTokens {
		out = append(out, next)
		r, err = b.Forward(ctx, []int32{next}, c.Len(), c, model.Argmax)
		if err != nil {
			t.Fatal(err)
		}
		c.Commit(1)
		next = r.Argmax[0]
	}
	return out
}

func TestStories260KReference(t *testing.T) {
	m := loadStories(t)
	got := greedy(t, m, storiesPrompt, len(storiesWant))
	for i := range storiesWant {
		if got[i] != storiesWant[i] {
			t.Fatalf("id %d: got %v\nwant %v", i, got, storiesWant)
		}
	}
}

var tinyOpts = arch.Decoder{Hidden: 64, FFN: 96, Layers: 2, Heads: 4, KVHeads: 2, Vocab: 128, Context: 256}

func loadRandom(t testing.TB, o arch.Decoder, typ gguf.Type) *Llama {
	t.Helper()
	data, err := RandomLlama(o, typ, 7)
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse("random.gguf", data)
	if err != nil {
		t.Fatal(err)
	}
	m, err := LoadLlama(f, NewPool(0))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestRowIndependence: invariant 1. Logits of a sequence decoded at width K
// (chunks of K tokens per Forward) equal width-1 decoding bit for bit, for
// K = 1, 2, 3, 4, 8; also when only part of each wide call is committed (as
// the verify loop does) and the rest is recomputed.
func TestRowIndependence(t *testing.T) {
	models := map[string]func(t *testing.T) *Llama{
		"stories260K": func(t *testing.T) *Llama { return loadStories(t) },
		"random-f32":  func(t *testing.T) *Llama { return loadRandom(t, tinyOpts, gguf.F32) },
		"random-q4_1": func(t *testing.T) *Llama { return loadRandom(t, tinyOpts, gguf.Q4_1) },
		"random-q8_0": func(t *testing.T) *Llama { return loadRandom(t, tinyOpts, gguf.Q8_0) },
		"random-f16":  func(t *testing.T) *Llama { return loadRandom(t, tinyOpts, gguf.F16) },
	}
	for name, load := range models {
		t.Run(name, func(t *testing.T) {
			m := load(t)
			ctx := context.Background()
			seq := append(append([]int32(nil), storiesPrompt...), storiesWant[:27]...) // 32 tokens
			for i := range seq {
				seq[i] %= int32(m.Config().VocabSize)
			}
			ref := make([][]float32, len(seq))
			c, _ := kv.New(m.Config().KV, 8)
			for i, id := range seq {
				r, err := m.Forward(ctx, []int32{id}, i, c, model.Logits)
				if err != nil {
					t.Fatal(err)
				}
				c.Commit(1)
				ref[i] = r.Logits[0]
			}
			for _, width := range []int{1, 2, 3, 4, 8} {
				for _, partial := range []bool{false, true} {
					c, _ := kv.New(m.Config().KV, 8)
					for pos := 0; pos < len(seq); {
						n := min(width, len(seq)-pos)
						r, err := m.Forward(ctx, seq[pos:pos+n], pos, c, model.Logits|model.Argmax)
						if err != nil {
							t.Fatal(err)
						}
						keep := n
						if partial && n > 1 {
							keep = (n + 1) / 2
						}
						for j := range keep {
							for v, x := range r.Logits[j] {
								if x != ref[pos+j][v] {
									t.Fatalf("width %d partial %v: position %d logit %d = %v, width 1 gave %v", width, partial, pos+j, v, x, ref[pos+j][v])
								}
							}
							if r.Argmax[j] != Argmax(ref[pos+j]) {
								t.Fatalf("argmax differs at %d", pos+j)
							}
						}
						c.Commit(keep)
						pos += keep
					}
				}
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	good, err := RandomLlama(tinyOpts, gguf.F32, 1)
	if err != nil {
		t.Fatal(err)
	}
	// Rebuild variants through the writer to get well-formed GGUF with bad content.
	edit := func(fn func(w *gguf.Writer, name string, ti gguf.TensorInfo, data []byte) bool, meta func(w *gguf.Writer, key string, v any) bool) []byte {
		f, _ := gguf.Parse("x", good)
		w := gguf.NewWriter()
		for _, k := range f.Keys() {
			v, _ := f.Value(k)
			if meta == nil || meta(w, k, v) {
				w.Set(k, v)
			}
		}
		for _, ti := range f.Tensors() {
			d, _ := f.TensorData(ti.Name)
			if fn == nil || fn(w, ti.Name, ti, d) {
				w.AddTensor(ti.Name, ti.Type, ti.Dims, d)
			}
		}
		b, _ := w.Bytes()
		return b
	}
	cases := []struct {
		name, want string
		data       []byte
	}{
		{"unknown arch", `architecture "mamba"`, edit(nil, func(w *gguf.Writer, k string, v any) bool {
			if k == "general.architecture" {
				w.Set(k, "mamba")
				return false
			}
			return true
		})},
		{"missing tensor", `missing tensor "blk.1.ffn_up.weight"`, edit(func(w *gguf.Writer, name string, _ gguf.TensorInfo, _ []byte) bool {
			return name != "blk.1.ffn_up.weight"
		}, nil)},
		{"wrong shape", `tensor "blk.0.attn_k.weight" has shape [64 16]`, edit(func(w *gguf.Writer, name string, ti gguf.TensorInfo, d []byte) bool {
			if name == "blk.0.attn_k.weight" {
				w.AddTensor(name, ti.Type, []int{64, 16}, d[:64*16*4])
				return false
			}
			return true
		}, nil)},
		{"unsupported quant", `tensor "blk.0.ffn_gate.weight": type IQ4_NL is not supported`, edit(func(w *gguf.Writer, name string, ti gguf.TensorInfo, d []byte) bool {
			if name == "blk.0.ffn_gate.weight" {
				w.AddTensor(name, gguf.IQ4_NL, []int{256, 24}, make([]byte, 24*8*18))
				return false
			}
			return true
		}, nil)},
		{"missing key", `"llama.block_count"`, edit(nil, func(w *gguf.Writer, k string, v any) bool { return k != "llama.block_count" })},
		{"bad heads", `kv heads`, edit(nil, func(w *gguf.Writer, k string, v any) bool {
			if k == "llama.attention.head_count_kv" {
				w.Set(k, uint32(3))
				return false
			}
			return true
		})},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := gguf.Parse("bad.gguf", c.data)
			if err != nil {
				t.Fatal(err)
			}
			_, err = LoadLlama(f, nil)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "bad.gguf") {
				t.Fatalf("error %v; want one naming bad.gguf and containing %q", err, c.want)
			}
		})
	}
}

func TestForwardErrors(t *testing.T) {
	m := loadRandom(t, tinyOpts, gguf.F32)
	c, _ := kv.New(m.Config().KV, 4)
	ctx := context.Background()
	if _, err := m.Forward(ctx, []int32{1000}, 0, c, model.Argmax); err == nil {
		t.Error("token outside the vocabulary accepted")
	}
	if _, err := m.Forward(ctx, []int32{1, 2}, 3, c, model.Argmax); err == nil {
		t.Error("gap in positions accepted")
	}
	if _, err := m.Forward(ctx, make([]int32, 5), 0, c, model.Argmax); err == nil {
		t.Error("call wider than the cache accepted")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := m.Forward(cctx, []int32{1}, 0, c, model.Argmax); err == nil || c.Pending() != 0 {
		t.Errorf("cancelled forward: %v, %d pending", err, c.Pending())
	}
}

func TestForwardLast(t *testing.T) {
	m := loadRandom(t, tinyOpts, gguf.Q4_0)
	ctx := context.Background()
	c1, _ := kv.New(m.Config().KV, 8)
	c2, _ := kv.New(m.Config().KV, 8)
	toks := []int32{1, 5, 9, 33, 7}
	all, err := m.Forward(ctx, toks, 0, c1, model.Logits|model.Argmax)
	if err != nil {
		t.Fatal(err)
	}
	last, err := m.Forward(ctx, toks, 0, c2, model.Logits|model.Argmax|model.Last)
	if err != nil {
		t.Fatal(err)
	}
	if len(last.Logits) != 1 || len(last.Argmax) != 1 || last.Argmax[0] != all.Argmax[4] {
		t.Fatalf("last: %d rows, argmax %v vs %v", len(last.Logits), last.Argmax, all.Argmax)
	}
	for i, v := range last.Logits[0] {
		if v != all.Logits[4][i] {
			t.Fatalf("logit %d differs", i)
		}
	}
}
