package spec

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"anechat/engine/kv"
	"anechat/engine/model"
	"anechat/engine/sample"
)

// modConstraint allows the ids not divisible by 3 and is complete after
// `need` tokens.
type modConstraint struct {
	vocab, n, need int
}

func (c *modConstraint) Mask() []uint64 {
	m := make([]uint64, (c.vocab+63)/64)
	for id := 0; id < c.vocab; id++ {
		if id%3 != 0 {
			m[id/64] |= 1 << (id % 64)
		}
	}
	return m
}
func (c *modConstraint) Complete() bool { return c.n >= c.need }
func (c *modConstraint) Advance(id int32) error {
	if id%3 == 0 {
		return fmt.Errorf("id %d refused", id)
	}
	c.n++
	return nil
}
func (c *modConstraint) Clone() Constraint { d := *c; return &d }

// scriptSource always proposes the same drafts.
type scriptSource struct{ drafts []int32 }

func (s scriptSource) Name() string  { return "script" }
func (s scriptSource) Reset([]int32) {}
func (s scriptSource) Append(int32)  {}
func (s scriptSource) Propose(limit int) Proposal {
	return Proposal{Tokens: s.drafts[:min(limit, len(s.drafts))], Match: 8}
}

// recordTarget records every call's tokens.
type recordTarget struct {
	BackendTarget
	calls [][]int32
}

func (t *recordTarget) Forward(ctx context.Context, tokens []int32, want model.Output) (model.Result, error) {
	t.calls = append(t.calls, slices.Clone(tokens))
	if want&model.Logits == 0 {
		return model.Result{}, fmt.Errorf("a constrained call asked for %v, not logits", want)
	}
	return t.BackendTarget.Forward(ctx, tokens, want)
}

// Drafts are cut at the first token the constraint refuses before the call;
// every emitted token is allowed; stop ids only once complete; the output
// equals width 1's, greedy and sampled.
func TestConstraintCutsDraftsAndMasksPicks(t *testing.T) {
	const vocab = 40
	for _, temp := range []float64{0, 1} {
		run := func(width int) ([]int32, [][]int32, Stats) {
			m := newFakeModel(vocab)
			c, err := kv.New(m.Config().KV, 64)
			if err != nil {
				t.Fatal(err)
			}
			tgt := &recordTarget{BackendTarget: BackendTarget{Backend: m, Cache: c}}
			var smp *sample.Sampler
			if temp > 0 {
				smp = sample.New(temp, 9, 0, 0)
			}
			d := &Decoder{Sources: []Source{scriptSource{[]int32{1, 2, 4, 6, 7, 8}}}}
			var out []int32
			st, err := d.Run(context.Background(), tgt, Request{
				History: []int32{5}, Room: 60, MaxTokens: 30, Width: width, Sampler: smp,
				Stop: []int32{10}, Ungated: true, Constraint: &modConstraint{vocab: vocab, need: 12},
			}, func(tk Token) error {
				out = append(out, tk.ID)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			return out, tgt.calls, st
		}
		want, _, _ := run(1)
		for _, id := range want {
			if id%3 == 0 {
				t.Fatalf("T=%v: emitted %d, which the constraint refuses: %v", temp, id, want)
			}
		}
		if len(want) < 12 {
			t.Fatalf("T=%v: stopped after %d tokens, before the constraint was complete", temp, len(want))
		}
		for w := 2; w <= MaxWidth; w++ {
			got, calls, st := run(w)
			if !slices.Equal(got, want) {
				t.Fatalf("T=%v width %d: %v, want %v", temp, w, got, want)
			}
			for _, call := range calls {
				for _, id := range call[1:] {
					if id%3 == 0 {
						t.Fatalf("width %d: draft %d sent in call %v", w, id, call)
					}
				}
				if len(call) > 4 {
					t.Fatalf("width %d: call %v runs past the refused draft 6", w, call)
				}
			}
			if w >= 4 && st.Drafted == 0 {
				t.Errorf("width %d: no drafts sent", w)
			}
		}
	}
}

// fixedMask is a Constraint with a given mask (for timing pickUnder).
type fixedMask struct{ m []uint64 }

func (c fixedMask) Mask() []uint64         { return c.m }
func (c fixedMask) Complete() bool         { return false }
func (c fixedMask) Advance(id int32) error { return nil }
func (c fixedMask) Clone() Constraint      { return c }

// BenchmarkPickUnder times the masked pick of one row of Gemma's 262k
// logits, greedy: "few" allows 100 ids (a state between JSON tokens),
// "most" all but the quote and backslash tokens (inside a string).
func BenchmarkPickUnder(b *testing.B) {
	const vocab = 262144
	logits := make([]float32, vocab)
	for i := range logits {
		logits[i] = float32(i%977) / 977
	}
	few, most := make([]uint64, vocab/64), make([]uint64, vocab/64)
	for i := 0; i < 100; i++ {
		id := i * 2621
		few[id/64] |= 1 << (id % 64)
	}
	for i := range most {
		most[i] = ^uint64(0)
	}
	most[0] &^= 1<<34 | 1<<92%64
	for name, m := range map[string][]uint64{"few": few, "most": most} {
		b.Run(name, func(b *testing.B) {
			r := &generation{req: Request{Stop: []int32{1, 106}}, greedy: true}
			for b.Loop() {
				if _, err := r.pickUnder(logits, fixedMask{m}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// The greedy masked pick (which reads the allowed ids only) is Greedy of
// the row with every other id NaN: ties to the lowest id, NaN never, stop
// ids only when complete, whether or not the mask holds them.
func TestPickUnderGreedyIsMaskedGreedy(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	for trial := 0; trial < 2000; trial++ {
		n := 1 + rng.IntN(300)
		logits := make([]float32, n)
		for i := range logits {
			switch rng.IntN(10) {
			case 0:
				logits[i] = float32(math.NaN())
			case 1:
				logits[i] = 1 // ties
			default:
				logits[i] = float32(rng.IntN(5)) / 4
			}
		}
		mask := make([]uint64, (n+63)/64+rng.IntN(2))
		for w := range mask {
			switch rng.IntN(3) {
			case 0:
				mask[w] = ^uint64(0)
			case 1:
				mask[w] = rng.Uint64() & rng.Uint64()
			}
		}
		stops := []int32{int32(rng.IntN(n)), int32(rng.IntN(n + 5))}
		complete := rng.IntN(2) == 0
		c := fixedMaskComplete{mask, complete}
		want := make([]float32, n)
		for i := range want {
			in := i/64 < len(mask) && mask[i/64]&(1<<(i%64)) != 0
			if slices.Contains(stops, int32(i)) {
				in = complete
			}
			want[i] = float32(math.NaN())
			if in {
				want[i] = logits[i]
			}
		}
		w := sample.Greedy(want)
		r := &generation{req: Request{Stop: stops}, greedy: true}
		got, err := r.pickUnder(logits, c)
		if (err != nil) != (w < 0) || (err == nil && got != w) {
			t.Fatalf("trial %d: pickUnder %d (%v), masked Greedy %d", trial, got, err, w)
		}
	}
}

type fixedMaskComplete struct {
	m        []uint64
	complete bool
}

func (c fixedMaskComplete) Mask() []uint64         { return c.m }
func (c fixedMaskComplete) Complete() bool         { return c.complete }
func (c fixedMaskComplete) Advance(id int32) error { return nil }
func (c fixedMaskComplete) Clone() Constraint      { return c }
