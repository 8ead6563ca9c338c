package cpu

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"anechat/engine/kv"
	"anechat/engine/model"
	"anechat/internal/testres"
)

// llamaCppReport prints the position-by-position comparison with llama.cpp
// (and, with -float-ideal, with the float-activation reference).
var llamaCppReport = flag.Bool("llamacpp-report", false, "print the comparison with llama.cpp's recorded outputs")

// floatIdeal also runs every prompt through a copy of the model whose
// weights are dequantised to float32, so that no activation is quantised:
// how far each side's logits are from it is the rounding each adds.
var floatIdeal = flag.Bool("float-ideal", false, "compare with a float32-weight copy of the model (slow, ~1 GB for Gemma 3)")

// llamaCppRef is a file of testdata/llamacpp (gen.py): llama.cpp's greedy
// ids after each prompt and the log-probabilities of its top tokens at
// every generated position.
type llamaCppRef struct {
	Version string         `json:"llama.cpp"`
	Model   string         `json:"model"`
	Cases   []llamaCppCase `json:"cases"`
}

type llamaCppCase struct {
	Text   string  `json:"text"`
	Prompt []int32 `json:"prompt"`
	Steps  []struct {
		ID  int32       `json:"id"`
		Top [][]float64 `json:"top"` // [id, logprob], best first
	} `json:"steps"`
}

func readLlamaCpp(t *testing.T, name string) llamaCppRef {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "llamacpp", name))
	if err != nil {
		t.Fatal(err)
	}
	var r llamaCppRef
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return r
}

// ids is llama.cpp's generated sequence.
func (c llamaCppCase) ids() []int32 {
	out := make([]int32, len(c.Steps))
	for i, s := range c.Steps {
		out[i] = s.ID
	}
	return out
}

// top is llama.cpp's argmax at generated position i. It is the generated
// id except where it ends generation (<|im_end|>, <eos>): gen.py asks for
// ignore_eos, which masks those in the sampler, not in the recorded
// log-probabilities.
func (c llamaCppCase) top(i int) int32 { return int32(c.Steps[i].Top[0][0]) }

// end is the first generated position whose argmax ends generation (where
// plain greedy decoding would have stopped), or len(c.Steps).
func (c llamaCppCase) end() int {
	for i, s := range c.Steps {
		if s.ID != c.top(i) {
			return i
		}
	}
	return len(c.Steps)
}

// margin is llama.cpp's top-2 gap in nats at generated position i.
func (c llamaCppCase) margin(i int) float64 { return c.Steps[i].Top[0][1] - c.Steps[i].Top[1][1] }

// logSoftmax returns the float64 log-probabilities of logits.
func logSoftmax(z []float32) []float64 {
	m := float64(slices.Max(z))
	var s float64
	for _, v := range z {
		s += math.Exp(float64(v) - m)
	}
	lse := m + math.Log(s)
	out := make([]float64, len(z))
	for i, v := range z {
		out[i] = float64(v) - lse
	}
	return out
}

// forcedLogProbs runs prompt+ids[:len-1] in one call and returns the
// log-probabilities at the positions that predict each of ids.
func forcedLogProbs(t *testing.T, m model.Backend, c llamaCppCase) [][]float64 {
	t.Helper()
	seq := append(slices.Clone(c.Prompt), c.ids()[:len(c.Steps)-1]...)
	cache, err := kv.New(m.Config().KV, len(seq))
	if err != nil {
		t.Fatal(err)
	}
	r, err := m.Forward(context.Background(), seq, 0, cache, model.Logits)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]float64
	for p := len(c.Prompt) - 1; p < len(seq); p++ {
		out = append(out, logSoftmax(r.Logits[p]))
	}
	return out
}

// llamaCppStats is what one comparison found.
type llamaCppStats struct {
	positions, clearPositions, forcedAgree, clearDisagree int
	cases, fullGreedy                                     int
	firstDiffs, allDiffs                                  []float64 // |Δ log-prob| over llama.cpp's top tokens
	splits                                                []string
}

// compareLlamaCpp compares m with llama.cpp on every case of ref: the
// argmax at every position of llama.cpp's own sequence (teacher-forced),
// the log-probabilities of llama.cpp's top tokens there and, with free,
// the greedy ids decoded freely (up to where llama.cpp's argmax ends
// generation). Where llama.cpp's top-2 gap is at least
// clear, a different pick is an error. first is how many leading
// generated positions count as "the first positions".
func compareLlamaCpp(t *testing.T, m model.Backend, ref llamaCppRef, clear float64, first int, free bool) llamaCppStats {
	var st llamaCppStats
	for ci, c := range ref.Cases {
		if free {
			st.cases++
			want := c.ids()[:c.end()]
			got := greedy(t, m, c.Prompt, len(want))
			d := 0
			for d < len(want) && got[d] == want[d] {
				d++
			}
			if d == len(want) {
				st.fullGreedy++
			} else {
				st.splits = append(st.splits, fmt.Sprintf("case %d splits at %d: ours %d, llama.cpp %d (llama.cpp's top-2 gap %.3f nats)", ci, d, got[d], want[d], c.margin(d)))
				if c.margin(d) >= clear {
					t.Errorf("case %d (%q): greedy ids split at generated token %d (ours %d, llama.cpp %d) where llama.cpp's top-2 gap is %.3f nats (clear: ≥ %.2f)",
						ci, c.Text, d, got[d], want[d], c.margin(d), clear)
				}
			}
		}
		lp := forcedLogProbs(t, m, c)
		for i, s := range c.Steps {
			st.positions++
			a := int32(slices.Index(lp[i], slices.Max(lp[i])))
			if a == c.top(i) {
				st.forcedAgree++
			}
			if c.margin(i) >= clear {
				st.clearPositions++
				if a != c.top(i) {
					st.clearDisagree++
					t.Errorf("case %d position %d: argmax %d, llama.cpp %d with a top-2 gap of %.3f nats (clear: ≥ %.2f)", ci, i, a, c.top(i), c.margin(i), clear)
				}
			}
			for _, top := range s.Top {
				diff := math.Abs(lp[i][int(top[0])] - top[1])
				st.allDiffs = append(st.allDiffs, diff)
				if i < first {
					st.firstDiffs = append(st.firstDiffs, diff)
				}
			}
		}
	}
	return st
}

// quantile of xs (sorted in place), q in [0, 1].
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	sort.Float64s(xs)
	return xs[min(len(xs)-1, int(q*float64(len(xs))))]
}

func (st llamaCppStats) report(t *testing.T, name string) {
	if st.cases > 0 {
		t.Logf("%s: %d of %d cases' greedy ids fully equal", name, st.fullGreedy, st.cases)
	}
	t.Logf("%s: teacher-forced argmax agrees at %d of %d positions, %d of %d clear positions disagree",
		name, st.forcedAgree, st.positions, st.clearDisagree, st.clearPositions)
	t.Logf("%s: |Δ log-prob| of llama.cpp's top tokens, first positions: median %.4f p99 %.4f max %.4f; all: median %.4f p99 %.4f max %.4f",
		name, quantile(st.firstDiffs, 0.5), quantile(st.firstDiffs, 0.99), quantile(st.firstDiffs, 1),
		quantile(st.allDiffs, 0.5), quantile(st.allDiffs, 0.99), quantile(st.allDiffs, 1))
	for _, s := range st.splits {
		t.Logf("%s: %s", name, s)
	}
}

// llamaCppSpread is how far llama.cpp moves from itself between its two
// recorded settings of one model (its defaults, an F16 KV cache and F16
// flash-attention accumulation; and _f32kv, a float32 cache without flash
// attention), on the positions the two runs share (each case up to where
// their greedy ids split, so both saw the same context).
type llamaCppSpread struct {
	firstDiffs []float64 // |Δ log-prob| of tokens in both top lists, first positions
	gapShift   float64   // largest change of the default run's top-2 gap
	cases      int       // cases whose greedy ids are fully equal
}

func selfSpread(t *testing.T, a, b llamaCppRef, first int) llamaCppSpread {
	var sp llamaCppSpread
	if len(a.Cases) != len(b.Cases) {
		t.Fatalf("%s and its _f32kv record hold %d and %d cases", a.Model, len(a.Cases), len(b.Cases))
	}
	for ci, ca := range a.Cases {
		cb := b.Cases[ci]
		if !slices.Equal(ca.Prompt, cb.Prompt) {
			t.Fatalf("%s case %d: the two records' prompts differ", a.Model, ci)
		}
		equal := true
		for i := range min(len(ca.Steps), len(cb.Steps)) {
			pa, pb := map[int32]float64{}, map[int32]float64{}
			for _, x := range ca.Steps[i].Top {
				pa[int32(x[0])] = x[1]
			}
			for _, x := range cb.Steps[i].Top {
				pb[int32(x[0])] = x[1]
			}
			for id, v := range pa {
				if w, ok := pb[id]; ok && i < first {
					sp.firstDiffs = append(sp.firstDiffs, math.Abs(v-w))
				}
			}
			t0, t1 := int32(ca.Steps[i].Top[0][0]), int32(ca.Steps[i].Top[1][0])
			if w0, ok := pb[t0]; ok {
				if w1, ok := pb[t1]; ok {
					sp.gapShift = max(sp.gapShift, math.Abs((pa[t0]-pa[t1])-(w0-w1)))
				}
			}
			if ca.Steps[i].ID != cb.Steps[i].ID {
				equal = false
				break
			}
		}
		if equal {
			sp.cases++
		}
	}
	return sp
}

// Bounds on our |Δ log-prob| from llama.cpp at the first positions, as
// multiples of llama.cpp's own spread between its two settings (the same
// statistic over the same positions): median, 99th percentile and largest.
// Measured (see BENCHMARKS.md, "Logits against llama.cpp"): on both models
// ours is 0.95-1.03x llama.cpp's spread at the median and 1.1-1.4x at the
// tail, and both we and llama.cpp are the same distance from a
// float32-weight copy of the model (-float-ideal); a wrong RoPE base, norm
// or scale puts the median many times higher.
const (
	spreadMedian = 1.25
	spreadP99    = 1.5
	spreadMax    = 1.75
)

// checkLlamaCpp runs the comparison of m with llama.cpp's two records of
// one model (name.json and name_f32kv.json). The tolerance is derived from
// llama.cpp's spread with itself (spread* above); a position is clear when
// llama.cpp's top-2 gap is at least twice the largest change of that gap
// between its own two settings, and there our pick must be llama.cpp's,
// both decoding freely (the first split) and on its sequence.
func checkLlamaCpp(t *testing.T, m model.Backend, name string, first int, float func() model.Backend) {
	def := readLlamaCpp(t, name+".json")
	f32 := readLlamaCpp(t, name+"_f32kv.json")
	if len(def.Cases) < 10 {
		t.Fatalf("%s: %d cases, want at least 10", name, len(def.Cases))
	}
	sp := selfSpread(t, def, f32, first)
	clear := 2 * sp.gapShift
	sm, s99, smax := quantile(sp.firstDiffs, 0.5), quantile(sp.firstDiffs, 0.99), quantile(sp.firstDiffs, 1)
	verbose := *llamaCppReport || testing.Verbose()
	if verbose {
		t.Logf("%s: llama.cpp against itself (default against f32kv): %d of %d cases' greedy ids fully equal; largest top-2 gap change %.3f nats (clear: ≥ %.3f); |Δ log-prob| first positions: median %.4f p99 %.4f max %.4f",
			name, sp.cases, len(def.Cases), sp.gapShift, clear, sm, s99, smax)
	}
	for _, ref := range []struct {
		label string
		r     llamaCppRef
	}{{"default", def}, {"f32kv", f32}} {
		st := compareLlamaCpp(t, m, ref.r, clear, first, ref.label == "default")
		fm, f99, fmax := quantile(st.firstDiffs, 0.5), quantile(st.firstDiffs, 0.99), quantile(st.firstDiffs, 1)
		if fm > spreadMedian*sm || f99 > spreadP99*s99 || fmax > spreadMax*smax {
			t.Errorf("%s (%s): |Δ log-prob| from llama.cpp at the first %d positions: median %.4f p99 %.4f max %.4f; llama.cpp's own spread %.4f, %.4f, %.4f allows %.4f, %.4f, %.4f",
				name, ref.label, first, fm, f99, fmax, sm, s99, smax, spreadMedian*sm, spreadP99*s99, spreadMax*smax)
		}
		if verbose {
			st.report(t, name+" "+ref.label)
		}
		if *floatIdeal {
			reportFloatIdeal(t, m, float(), ref.r)
		}
	}
}

// TestGemma3MatchesLlamaCpp: on the real Gemma 3 270M Q4_K_M file, for
// the 12 prompts of testdata/llamacpp/gemma3_270m*.json (64 greedy tokens
// each, llama.cpp's ids and top-10 log-probabilities recorded by gen.py),
// our logits at the first 8 generated positions are as close to
// llama.cpp's as llama.cpp's two settings are to each other, and our
// greedy pick is llama.cpp's wherever its top token is clear
// (checkLlamaCpp).
func TestGemma3MatchesLlamaCpp(t *testing.T) {
	m, err := OpenGemma3(testres.Gemma3GGUF(t), NewPool(0))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	checkLlamaCpp(t, m, "gemma3_270m", 8, func() model.Backend { return floatCopy(&m.decoder) })
}

// TestSmolLM2MatchesLlamaCpp is TestGemma3MatchesLlamaCpp for
// SmolLM2-135M-Instruct Q4_1 on 20 ChatML instruct prompts (32 greedy
// tokens each): the question of issue 16, whether its greedy splits from
// llama.cpp at top-2 gaps above 0.4 nats are rounding or a bug. They are
// rounding: llama.cpp itself, changing only its KV cache precision, moves
// a top-2 gap by as much and splits from its own ids as often.
func TestSmolLM2MatchesLlamaCpp(t *testing.T) {
	m, err := OpenLlama(testres.SmolLM2GGUF(t), NewPool(0))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	checkLlamaCpp(t, m, "smollm2", 8, func() model.Backend { return floatCopy(&m.decoder) })
}

// reportFloatIdeal logs how far our logits and llama.cpp's are from those
// of the float32-weight copy fm (float activations throughout), at
// llama.cpp's top tokens of every generated position.
func reportFloatIdeal(t *testing.T, m, fm model.Backend, ref llamaCppRef) {
	var ours, theirs []float64
	var margins []string
	for ci, c := range ref.Cases {
		lq := forcedLogProbs(t, m, c)
		lf := forcedLogProbs(t, fm, c)
		for i, s := range c.Steps {
			for _, top := range s.Top {
				id := int(top[0])
				ours = append(ours, math.Abs(lq[i][id]-lf[i][id]))
				theirs = append(theirs, math.Abs(top[1]-lf[i][id]))
			}
			a, b := int(s.Top[0][0]), int(s.Top[1][0])
			if c.margin(i) >= 0.3 && slices.Index(lq[i], slices.Max(lq[i])) != a {
				margins = append(margins, fmt.Sprintf("case %d position %d: top-2 gap (%d over %d) llama.cpp %.3f, ours %.3f, float %.3f",
					ci, i, a, b, c.margin(i), lq[i][a]-lq[i][b], lf[i][a]-lf[i][b]))
			}
		}
	}
	t.Logf("|Δ log-prob| from the float-activation copy: ours median %.4f p99 %.4f max %.4f; llama.cpp median %.4f p99 %.4f max %.4f",
		quantile(ours, 0.5), quantile(ours, 0.99), quantile(ours, 1), quantile(theirs, 0.5), quantile(theirs, 0.99), quantile(theirs, 1))
	for _, s := range margins {
		t.Log(s)
	}
}

// f32Copy is m dequantised to float32.
func f32Copy(m *Matrix) *Matrix {
	vals := make([]float32, m.Rows*m.Cols)
	for r := range m.Rows {
		m.Row(vals[r*m.Cols:], r)
	}
	return FromF32(m.Name, m.Rows, m.Cols, vals)
}

// floatCopy is m with every matrix dequantised to float32 (sharing m's
// norms and pool; its Close is a no-op).
func floatCopy(m *decoder) *decoder {
	c := &decoder{cfg: m.cfg, hidden: m.hidden, eps: m.eps, ids: m.ids, embedScale: m.embedScale, norm: m.norm,
		softcap: m.softcap, ropes: m.ropes, widths: m.widths, pool: m.pool}
	c.embd = f32Copy(m.embd)
	c.out = c.embd
	if m.out != m.embd {
		c.out = f32Copy(m.out)
	}
	for _, l := range m.layers {
		f := *l.(*decoderLayer)
		for _, p := range []**Matrix{&f.attn.wq, &f.attn.wk, &f.attn.wv, &f.attn.wo, &f.mlp.gate, &f.mlp.up, &f.mlp.down} {
			*p = f32Copy(*p)
		}
		c.layers = append(c.layers, &f)
	}
	return c
}
