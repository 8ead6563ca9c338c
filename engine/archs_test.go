package engine

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"testing"

	"anechat/engine/cpu"
	"anechat/engine/kv"
	"anechat/engine/model"
	"anechat/engine/model/gguf"
	"anechat/engine/spec"
	"anechat/internal/refdecode"
)

// archCase is a random model of one of the GGUF architectures added after
// llama, with weights of one type.
type archCase struct {
	name string
	spec cpu.RandomSpec
	typ  gguf.Type
}

// archCases cover every architecture (qwen2 with its biases, qwen3 with its
// head norms, gemma3 with a window of 8 on 5 of 6 layers) and every weight
// type of the Gemma 3 270M mix and the K-quant work (Q5_0, Q5_1, Q4_K,
// Q5_K, Q6_K, Q8_0; Q2_K and Q3_K have only the Go loops, ~100x slower,
// and are left to engine/cpu's kernel tests), at widths whose
// rows are whole blocks of the type (256 for the K formats).
func archCases() []archCase {
	qwen2 := cpu.RandomSpec{Arch: "qwen2", Hidden: 64, FFN: 128, Layers: 2, Heads: 4, KVHeads: 2, Vocab: 512, Context: 320, RopeBase: 1e6, NoEOS: true}
	qwen3 := cpu.RandomSpec{Arch: "qwen3", Hidden: 256, FFN: 512, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 64, Vocab: 512, Context: 320, RopeBase: 1e6, Tied: true, NoEOS: true}
	gemma3 := cpu.RandomSpec{Arch: "gemma3", Hidden: 256, FFN: 512, Layers: 6, Heads: 4, KVHeads: 1, HeadDim: 64, Vocab: 512, Context: 320, RopeBase: 1e6, Tied: true, Window: 8, NoEOS: true}
	return []archCase{
		{"qwen2-q5_0", qwen2, gguf.Q5_0},
		{"qwen2-q5_1", qwen2, gguf.Q5_1},
		{"qwen3-q6_k", qwen3, gguf.Q6_K},
		{"qwen3-q4_k", qwen3, gguf.Q4_K},
		{"gemma3-q4_k", gemma3, gguf.Q4_K},
		{"gemma3-q5_k", gemma3, gguf.Q5_K},
		{"gemma3-q8_0", gemma3, gguf.Q8_0},
	}
}

// openArch builds the case's model on the CPU, closed when the test ends.
func openArch(t testing.TB, c archCase) model.Backend {
	t.Helper()
	data, err := cpu.RandomGGUF(c.spec, c.typ, 5)
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(c.name+".gguf", data)
	if err != nil {
		t.Fatal(err)
	}
	var m interface {
		model.Backend
		Close() error
	}
	if c.spec.Arch == "gemma3" {
		m, err = cpu.LoadGemma3(f, cpu.NewPool(1))
	} else {
		m, err = cpu.LoadQwen(f, cpu.NewPool(1))
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// TestArchsSpeculationMatchesReference: on every new architecture and
// weight type, the Session generates at every width 1..8 (and auto)
// exactly what decoding without speculation does (refdecode), greedy and
// sampled, turn after turn; drafts are accepted.
func TestArchsSpeculationMatchesReference(t *testing.T) {
	costs := spec.FixedCosts(map[int]float64{1: 1, 2: 1.1, 3: 1.2, 4: 1.3, 5: 1.4, 6: 1.5, 7: 1.6, 8: 1.7})
	for _, c := range archCases() {
		t.Run(c.name, func(t *testing.T) {
			b := openArch(t, c)
			prompt := testPrompt(40, 3)
			// The model's own greedy continuation is the drafting corpus,
			// and the next turns repeat pieces of it, so drafts match.
			first, err := refdecode.Generate(context.Background(), b, prompt, 24, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			corpus := spec.NewCorpus(0)
			corpus.Add(first.IDs)
			turns := [][]int32{prompt, first.IDs[:8], first.IDs[10:18]}
			for _, opts := range []GenerateOptions{{MaxTokens: 24}, {MaxTokens: 16, Temperature: 0.9, Seed: 4}} {
				want, wantSeq := plainTurns(t, b, turns, opts)
				accepted := 0
				for _, w := range []int{1, 2, 3, 4, 5, 6, 7, 8, 0} {
					got, seq := specTurns(t, b, SessionOptions{Costs: costs.Clone(), Corpus: corpus}, w, turns, opts)
					for i := range want {
						if !slices.Equal(tokenIDs(got[i]), want[i]) {
							t.Fatalf("T=%v width %d turn %d:\n got %v\nwant %v", opts.Temperature, w, i, tokenIDs(got[i]), want[i])
						}
						for _, tk := range got[i] {
							accepted += boolInt(tk.Drafted)
						}
					}
					if !slices.Equal(seq, wantSeq) {
						t.Fatalf("width %d: sequences differ", w)
					}
				}
				if opts.Temperature == 0 && accepted == 0 {
					t.Fatal("greedy: no draft accepted at any width: speculation was not exercised")
				}
			}
		})
	}
}

// TestArchsResumeExact: on every new architecture, generation after
// restoring a stored prefix and prefilling the rest in one batched call is
// bit-identical to a fresh prefill. gemma3's sliding layers keep only their
// window, so a stored sequence that goes on past the shared prefix cannot
// serve it: Restore refuses it and a fresh prefill follows.
func TestArchsResumeExact(t *testing.T) {
	prompt := testPrompt(230, 0)
	other := append(append([]int32(nil), prompt[:150]...), testPrompt(90, 5)[1:]...) // shares 150 tokens
	longer := append(slices.Clone(prompt), 5, 6, 7)
	for _, c := range archCases() {
		if c.name != "qwen2-q5_0" && c.name != "qwen3-q6_k" && c.name != "gemma3-q4_k" {
			continue
		}
		b := openArch(t, c)
		sliding := c.spec.Window > 0
		for _, tc := range []struct {
			name     string
			stored   []int32
			restored int
		}{
			{"full prefix", prompt[:192], 192},
			{"whole prompt", prompt, 229},
			{"partial prefix", other, map[bool]int{false: 150, true: 0}[sliding]},
			{"longer stored", longer, map[bool]int{false: 229, true: 0}[sliding]},
		} {
			t.Run(fmt.Sprintf("%s/%s", c.name, tc.name), func(t *testing.T) {
				geo := b.Config().KV
				fresh, _ := kv.New(geo, 64)
				wantIDs, wantBits := run(t, b, fresh, prompt, 0, 12)
				store := newMemStore(t.TempDir())
				var logBuf bytes.Buffer
				r := &Resumer{Store: store, Meta: kv.Meta{Model: b.Config().Fingerprint, Tokenizer: "tok"},
					Log: slog.New(slog.NewTextHandler(io.MultiWriter(&logBuf), nil))}
				src, _ := kv.New(geo, 64)
				run(t, b, src, tc.stored, 0, 0)
				if _, err := r.Save(context.Background(), "conv", tc.stored, src); err != nil {
					t.Fatal(err)
				}
				cache, _ := kv.New(geo, 64)
				n := r.Restore(context.Background(), prompt, cache)
				if n != tc.restored || cache.Len() != n {
					t.Fatalf("restored %d positions (cache %d), want %d; log: %s", n, cache.Len(), tc.restored, logBuf.String())
				}
				gotIDs, gotBits := run(t, b, cache, prompt, n, 12)
				if !slices.Equal(gotIDs, wantIDs) || !bytes.Equal(gotBits, wantBits) {
					t.Fatalf("resumed generation differs from a fresh one:\n got %v\nwant %v", gotIDs, wantIDs)
				}
			})
		}
	}
}
