package spec

import (
	"context"
	"fmt"
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
