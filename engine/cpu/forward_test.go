package cpu

import (
	"context"
	"slices"
	"sync"
	"testing"

	"anechat/engine/arch"
	"anechat/engine/kv"
	"anechat/engine/model"
	"anechat/engine/model/gguf"
)

// forwardModels are the models of the Forward contract tests: stories260K,
// a random llama large enough that its products are handed to the pool's
// workers, and the Gemma 4 fixture.
func forwardModels(t *testing.T) map[string]model.Backend {
	mid := arch.Decoder{Hidden: 256, FFN: 512, Layers: 2, Heads: 4, KVHeads: 2, Vocab: 512, Context: 128}
	return map[string]model.Backend{
		"stories260K":    loadStories(t),
		"random-q4_1":    loadRandom(t, mid, gguf.Q4_1),
		"random-f16":     loadRandom(t, mid, gguf.F16),
		"gemma4-fixture": loadGemma4Dir(t, "model"),
	}
}

// TestForwardAllocs: a decode step (width 1, or 4 for speculation) asking
// for argmax allocates at most its Result's ids and one more small object:
// the buffers live in the backend's scratch and the pool's workers are
// started once.
func TestForwardAllocs(t *testing.T) {
	ctx := context.Background()
	for name, m := range forwardModels(t) {
		c, err := kv.New(m.Config().KV, 8)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Forward(ctx, []int32{1, 2, 3}, 0, c, model.Argmax); err != nil {
			t.Fatal(err)
		}
		c.Commit(3)
		for _, w := range []int{1, 4} {
			toks := []int32{5, 6, 7, 8}[:w]
			a := testing.AllocsPerRun(10, func() {
				if _, err := m.Forward(ctx, toks, 3, c, model.Argmax); err != nil {
					t.Fatal(err)
				}
				c.Rollback()
			})
			if a > 2 {
				t.Errorf("%s: width %d: %v allocations per Forward, want at most 2", name, w, a)
			}
		}
	}
}

// TestConcurrentForward: model.Backend's rule: Forward calls on distinct
// caches may run at once, and each gives what it gives alone (run with
// -race to check the scratch and the pool are not shared).
func TestConcurrentForward(t *testing.T) {
	for name, m := range forwardModels(t) {
		seqs := [][]int32{{1, 9, 17, 25, 33, 41, 49, 57, 65, 73}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, {1, 100, 200, 300, 400, 500}}
		want := make([][][]float32, len(seqs))
		for i, s := range seqs {
			want[i] = decode(t, m, s, 3, 4)
		}
		var wg sync.WaitGroup
		got := make([][][]float32, len(seqs))
		errs := make([]error, len(seqs))
		for i, s := range seqs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got[i], errs[i] = decodeE(m, s, 3, 4)
			}()
		}
		wg.Wait()
		for i := range seqs {
			if errs[i] != nil {
				t.Fatalf("%s: %v", name, errs[i])
			}
			for p := range want[i] {
				if !slices.Equal(got[i][p], want[i][p]) {
					t.Fatalf("%s: sequence %d position %d: concurrent logits differ from a call alone", name, i, p)
				}
			}
		}
	}
}

// decodeE is decode without a testing.TB (for other goroutines).
func decodeE(m model.Backend, seq []int32, w, maxBatch int) ([][]float32, error) {
	c, err := kv.New(m.Config().KV, maxBatch)
	if err != nil {
		return nil, err
	}
	var out [][]float32
	for p := 0; p < len(seq); p += w {
		toks := seq[p:min(p+w, len(seq))]
		r, err := m.Forward(context.Background(), toks, p, c, model.Logits)
		if err != nil {
			return nil, err
		}
		if err := c.Commit(len(toks)); err != nil {
			return nil, err
		}
		out = append(out, r.Logits...)
	}
	return out, nil
}
