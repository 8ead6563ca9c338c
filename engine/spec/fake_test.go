package spec

import (
	"context"
	"fmt"
	"math"

	"anechat/engine/kv"
	"anechat/engine/model"
)

// fakeModel is a deterministic model.Backend for testing the verify loop. It
// stores each token's id as its K row in the cache and computes the logits of
// position p from the tokens it reads back from rows 0..p, so a row that was
// committed wrongly (a rejected draft) changes every later output: the tests
// then see a difference from width 1.
//
// Its next-token rule is mostly an order-2 Markov chain (so text repeats and
// prompt lookup has something to find) perturbed by a hash of the whole
// prefix (so the output depends on every earlier token).
type fakeModel struct {
	vocab int
	ctx   int
	// sharp scales the logits: large = nearly deterministic, small = flat
	// (for sampling tests).
	sharp float64
	calls map[int]int // calls per width
}

func newFakeModel(vocab int) *fakeModel {
	return &fakeModel{vocab: vocab, ctx: 4096, sharp: 4, calls: map[int]int{}}
}

func (m *fakeModel) Config() model.Config {
	return model.Config{
		Arch: "fake", VocabSize: m.vocab, ContextLen: m.ctx, BOS: -1,
		KV: kv.Geometry{Context: m.ctx, Layers: []kv.LayerSpec{{KVHeads: 1, HeadDim: 1}}},
	}
}

func (m *fakeModel) Widths() []int { return nil }

func (m *fakeModel) Forward(ctx context.Context, tokens []int32, start int, c *kv.Cache, want model.Output) (model.Result, error) {
	if err := ctx.Err(); err != nil {
		return model.Result{}, err
	}
	if err := c.Reserve(start, len(tokens)); err != nil {
		return model.Result{}, err
	}
	m.calls[len(tokens)]++
	for i, t := range tokens {
		if t < 0 || int(t) >= m.vocab {
			return model.Result{}, fmt.Errorf("fake: token %d out of range", t)
		}
		c.K(0, start+i)[0] = float32(t)
	}
	var res model.Result
	for i := range tokens {
		row := m.logits(c, start+i)
		if want&model.Logits != 0 {
			res.Logits = append(res.Logits, row)
		}
		if want&model.Argmax != 0 {
			best := 0
			for v := range row {
				if row[v] > row[best] {
					best = v
				}
			}
			res.Argmax = append(res.Argmax, int32(best))
		}
	}
	return res, nil
}

// logits of the token after position p, from the tokens in rows 0..p.
func (m *fakeModel) logits(c *kv.Cache, p int) []float32 {
	var h uint64 = 1469598103934665603
	var a, b int
	for q := 0; q <= p; q++ {
		t := int(c.K(0, q)[0])
		h = (h ^ uint64(t)) * 1099511628211
		a, b = b, t
	}
	row := make([]float32, m.vocab)
	// The Markov favourite: a function of the last two tokens.
	fav := (a*31 + b*17 + 7) % m.vocab
	// One step in 8 (by prefix hash) the favourite is another token.
	if h%8 == 0 {
		fav = int(h>>8) % m.vocab
	}
	for v := range row {
		d := (v - fav + m.vocab) % m.vocab
		row[v] = float32(m.sharp * math.Exp(-float64(d)))
	}
	return row
}
