package spec_test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"

	"anechat/engine/constrain"
	"anechat/engine/kv"
	"anechat/engine/model"
	"anechat/engine/sample"
	"anechat/engine/spec"
)

// plainLogprobs is the log-softmax of row written the plain way (every id,
// a stable sort by logit), independent of sample.Logprobs: the logprob of
// id and the n most likely ids.
func plainLogprobs(row []float32, id int32, n int) (float64, []sample.TokenLogprob) {
	m := math.Inf(-1)
	for _, v := range row {
		m = max(m, float64(v))
	}
	var sum float64
	for _, v := range row {
		sum += math.Exp(float64(v) - m)
	}
	all := make([]sample.TokenLogprob, len(row))
	for i, v := range row {
		all[i] = sample.TokenLogprob{ID: int32(i), Logprob: float64(v) - m - math.Log(sum)}
	}
	own := all[id].Logprob
	slices.SortStableFunc(all, func(a, b sample.TokenLogprob) int {
		switch {
		case row[a.ID] > row[b.ID]:
			return -1
		case row[a.ID] < row[b.ID]:
			return 1
		}
		return 0
	})
	return own, all[:n]
}

// widthOneRows runs seq through b one token per call of width 1 and returns
// the logits rows of the positions from len(history)-1 on: the row each
// generated token was picked from.
func widthOneRows(t *testing.T, b model.Backend, seq []int32, history int) [][]float32 {
	t.Helper()
	c, err := kv.New(b.Config().KV, 1)
	if err != nil {
		t.Fatal(err)
	}
	var rows [][]float32
	for p := range seq {
		res, err := b.Forward(context.Background(), seq[p:p+1], p, c, model.Logits)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Commit(1); err != nil {
			t.Fatal(err)
		}
		if p >= history-1 {
			rows = append(rows, slices.Clone(res.Logits[0]))
		}
	}
	return rows
}

// sameLogprobs fails unless a and b are the same tokens with the same
// logprobs, bit for bit.
func sameLogprobs(t *testing.T, what string, a, b []spec.Token) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s: %d tokens, want %d", what, len(a), len(b))
	}
	for k := range a {
		x, y := a[k], b[k]
		if x.ID != y.ID || math.Float64bits(x.Logprob) != math.Float64bits(y.Logprob) || len(x.Top) != len(y.Top) {
			t.Fatalf("%s: token %d = %d (%v, %d top), want %d (%v, %d top)", what, k, x.ID, x.Logprob, len(x.Top), y.ID, y.Logprob, len(y.Top))
		}
		for j := range x.Top {
			if x.Top[j].ID != y.Top[j].ID || math.Float64bits(x.Top[j].Logprob) != math.Float64bits(y.Top[j].Logprob) {
				t.Fatalf("%s: token %d top %d = %+v, want %+v", what, k, j, x.Top[j], y.Top[j])
			}
		}
	}
}

func TestStoriesLogprobsSameAtEveryWidth(t *testing.T) { testLogprobs(t, openStories(t)) }

func TestGemma4LogprobsSameAtEveryWidth(t *testing.T) { testLogprobs(t, openGemma4(t)) }

// testLogprobs: with logprobs on, greedy and sampled, the tokens are those
// of decoding without logprobs, their logprobs and top 20 are the
// log-softmax of the width-1 row they were picked from, and every width
// (gated, ungated, auto) gives the same numbers bit for bit.
func testLogprobs(t *testing.T, tm testModel) {
	m := tm.b
	prompts := storiesPrompts(t, m, 4)
	corpus := spec.NewCorpus(0)
	corpus.Add(prompts[0])
	const maxTokens = 24
	var wide, accepted int
	for i, h := range prompts {
		for _, sampled := range []bool{false, true} {
			mk := func() *sample.Sampler {
				if !sampled {
					return nil
				}
				return sample.New(0.9, uint64(40+i), 0, 0.9)
			}
			want := reference(t, m, h, maxTokens, mk())
			base, _ := generateTokens(t, m, &spec.Decoder{}, h, spec.Request{MaxTokens: maxTokens, Width: 1, Sampler: mk(), Logprobs: true, TopLogprobs: sample.MaxTopLogprobs})
			var ids []int32
			for _, tk := range base {
				ids = append(ids, tk.ID)
			}
			if !slices.Equal(ids, want) {
				t.Fatalf("prompt %d sampled %v: logprobs changed the tokens\n got %v\nwant %v", i, sampled, ids, want)
			}
			rows := widthOneRows(t, m, append(slices.Clone(h), ids...), len(h))
			for k, tk := range base {
				own, top := plainLogprobs(rows[k], tk.ID, sample.MaxTopLogprobs)
				if math.Abs(own-tk.Logprob) > 1e-9 || len(tk.Top) != len(top) {
					t.Fatalf("prompt %d token %d: logprob %v (%d top), want %v (%d)", i, k, tk.Logprob, len(tk.Top), own, len(top))
				}
				for j := range top {
					if tk.Top[j].ID != top[j].ID || math.Abs(tk.Top[j].Logprob-top[j].Logprob) > 1e-9 {
						t.Fatalf("prompt %d token %d: top %d = %+v, want %+v", i, k, j, tk.Top[j], top[j])
					}
				}
				if !sampled && tk.Top[0].ID != tk.ID {
					t.Fatalf("prompt %d token %d: greedy picked %d, not the most likely %d", i, k, tk.ID, tk.Top[0].ID)
				}
			}
			for _, w := range []int{2, 3, 4, 5, 6, 7, 8, 0} {
				for _, ungated := range []bool{false, true} {
					got, st := generateTokens(t, m, &spec.Decoder{Sources: spec.DefaultSources(corpus), Lookahead: true}, h,
						spec.Request{MaxTokens: maxTokens, Width: w, Sampler: mk(), Logprobs: true, TopLogprobs: sample.MaxTopLogprobs, Ungated: ungated})
					sameLogprobs(t, fmt.Sprintf("prompt %d sampled %v width %d ungated %v", i, sampled, w, ungated), got, base)
					wide += st.Wide
					accepted += st.Accepted
				}
			}
		}
		// Fewer alternatives are the first of the 20; none, no slice.
		for _, n := range []int{0, 3} {
			got, _ := generateTokens(t, m, &spec.Decoder{}, h, spec.Request{MaxTokens: 4, Width: 4, Logprobs: true, TopLogprobs: n, Ungated: true})
			full, _ := generateTokens(t, m, &spec.Decoder{}, h, spec.Request{MaxTokens: 4, Width: 1, Logprobs: true, TopLogprobs: sample.MaxTopLogprobs})
			for k := range got {
				if got[k].Logprob != full[k].Logprob || !slices.Equal(got[k].Top, full[k].Top[:n]) {
					t.Fatalf("prompt %d top %d: token %d has %+v, want the first %d of %+v", i, n, k, got[k].Top, n, full[k].Top)
				}
			}
		}
	}
	if wide == 0 || accepted == 0 {
		t.Fatalf("speculation not exercised: %d wide calls, %d drafts accepted", wide, accepted)
	}
	// Without Logprobs, no numbers.
	plain, _ := generateTokens(t, m, &spec.Decoder{}, prompts[0], spec.Request{MaxTokens: 4, Width: 2})
	for _, tk := range plain {
		if tk.Logprob != 0 || tk.Top != nil {
			t.Fatalf("logprobs off: token %+v carries numbers", tk)
		}
	}
}

// TestLogprobsBadRequest: TopLogprobs outside 0..20 is refused before any
// model call.
func TestLogprobsBadRequest(t *testing.T) {
	tm := openStories(t)
	for _, n := range []int{-1, sample.MaxTopLogprobs + 1} {
		_, err := (&spec.Decoder{}).Run(context.Background(), spec.BackendTarget{Backend: tm.b}, spec.Request{History: []int32{1}, Room: 10, Width: 1, Logprobs: true, TopLogprobs: n}, func(spec.Token) error { return nil })
		if err == nil {
			t.Fatalf("top logprobs %d: no error", n)
		}
	}
}

// TestConstrainedLogprobsAreTheModels: under a JSON schema's mask, the
// logprobs are still the unmasked model's (the log-softmax of the width-1
// row, where the mask made the pick differ from the most likely token),
// the same bits at every width, greedy and sampled.
func TestConstrainedLogprobsAreTheModels(t *testing.T) {
	b, _, v := constrainedStories(t)
	g, err := constrain.CompileSchema([]byte(jsonSchemas[0]))
	if err != nil {
		t.Fatal(err)
	}
	m, err := constrain.NewMatcher(g, v)
	if err != nil {
		t.Fatal(err)
	}
	h := storiesPrompts(t, b, 1)[0]
	masked := 0
	for _, temp := range []float64{0, 0.8} {
		mk := func() *sample.Sampler {
			if temp == 0 {
				return nil
			}
			return sample.New(temp, 5, 0, 0)
		}
		req := func(w int) spec.Request {
			return spec.Request{MaxTokens: 40, Width: w, Sampler: mk(), Ungated: true, Constraint: spec.Grammar(m.Start()),
				Logprobs: true, TopLogprobs: 5}
		}
		base, _ := generateTokens(t, b, &spec.Decoder{}, h, req(1))
		var ids []int32
		for _, tk := range base {
			ids = append(ids, tk.ID)
		}
		rows := widthOneRows(t, b, append(slices.Clone(h), ids...), len(h))
		for k, tk := range base {
			own, top := plainLogprobs(rows[k], tk.ID, 5)
			if math.Abs(own-tk.Logprob) > 1e-9 || tk.Top[0].ID != top[0].ID || math.Abs(tk.Top[0].Logprob-top[0].Logprob) > 1e-9 {
				t.Fatalf("T=%v token %d: %v %v, want the unmasked row's %v %v", temp, k, tk.Logprob, tk.Top, own, top)
			}
			if temp == 0 && tk.ID != top[0].ID {
				masked++
			}
		}
		for _, w := range []int{2, 3, 4, 5, 6, 7, 8, 0} {
			got, _ := generateTokens(t, b, &spec.Decoder{Lookahead: w == 0}, h, req(w))
			sameLogprobs(t, fmt.Sprintf("constrained T=%v width %d", temp, w), got, base)
		}
	}
	if masked == 0 {
		t.Fatal("the mask never changed a greedy pick: the case does not tell masked from unmasked logprobs")
	}
}
