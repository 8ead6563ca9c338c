package spec

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"anechat/engine/kv"
	"anechat/engine/model"
	"anechat/engine/sample"
	"anechat/internal/refdecode"
)

// run generates from history with a fresh cache: the history but its last
// token is prefilled and committed first. It checks the KV afterwards: the
// committed rows must be exactly history + emitted tokens but the pending one.
func run(t *testing.T, m *fakeModel, dec *Decoder, history []int32, req Request) ([]Token, Stats) {
	t.Helper()
	c, err := kv.New(m.Config().KV, max(MaxWidth, len(history)))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(history) - 1; n > 0 {
		if _, err := m.Forward(context.Background(), history[:n], 0, c, model.Argmax); err != nil {
			t.Fatal(err)
		}
		if err := c.Commit(n); err != nil {
			t.Fatal(err)
		}
	}
	req.History = history
	if req.Room == 0 {
		req.Room = m.ctx - c.Len()
	}
	var out []Token
	st, err := dec.Run(context.Background(), BackendTarget{m, c}, req, func(tk Token) error {
		out = append(out, tk)
		return nil
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	// The KV holds history[:len-1], then pending-at-start and the emitted
	// tokens: i.e. the sequence history+emitted (+stop) minus its last token.
	seq := slices.Clone(history)
	for _, tk := range out {
		seq = append(seq, tk.ID)
	}
	if st.Stopped == "stop" {
		seq = append(seq, st.Pending)
	}
	if st.Pending != seq[len(seq)-1] {
		t.Fatalf("Pending %d, sequence ends with %d", st.Pending, seq[len(seq)-1])
	}
	if c.Len() != len(seq)-1 || c.Pending() != 0 {
		t.Fatalf("cache holds %d committed + %d pending rows, want %d + 0", c.Len(), c.Pending(), len(seq)-1)
	}
	for p := range c.Len() {
		if got := int32(c.K(0, p)[0]); got != seq[p] {
			t.Fatalf("KV row %d holds token %d, sequence has %d", p, got, seq[p])
		}
	}
	if st.Tokens != len(out) || st.Committed != len(seq)-len(history) || st.Decode <= 0 || (st.Tokens > 0 && st.TokensPerSecond() <= 0) {
		t.Fatalf("stats %+v for %d tokens", st, len(out))
	}
	return out, st
}

// reference is what decoding without speculation generates after history
// (refdecode, with req's MaxTokens, Sampler and Stop): the output every
// width must reproduce.
func reference(t *testing.T, m model.Backend, history []int32, req Request) []Token {
	t.Helper()
	r, err := refdecode.Generate(context.Background(), m, history, req.MaxTokens, req.Sampler, req.Stop)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]Token, len(r.IDs))
	for i, id := range r.IDs {
		out[i] = Token{ID: id}
	}
	return out
}

func ids(ts []Token) []int32 {
	out := make([]int32, len(ts))
	for i, t := range ts {
		out[i] = t.ID
	}
	return out
}

// prompts returns n deterministic prompts, some with repeated spans (where
// lookup finds matches), some random.
func prompts(n, vocab int) [][]int32 {
	r := rand.New(rand.NewPCG(5, 6))
	var out [][]int32
	for i := range n {
		l := 5 + r.IntN(40)
		p := make([]int32, l)
		for j := range p {
			p[j] = int32(r.IntN(vocab))
		}
		if i%2 == 0 && l > 10 {
			// Repeat a span, as a summarise/edit prompt does.
			p = append(p, p[2:2+r.IntN(l-3)]...)
		}
		out = append(out, p)
	}
	return out
}

// wrongSource always proposes tokens the model will reject: it predicts the
// fake model's greedy choice and proposes the next id instead.
type wrongSource struct {
	m   *fakeModel
	seq []int32
}

func (w *wrongSource) Name() string    { return "wrong" }
func (w *wrongSource) Reset(h []int32) { w.seq = slices.Clone(h) }
func (w *wrongSource) Append(t int32)  { w.seq = append(w.seq, t) }
func (w *wrongSource) Propose(n int) Proposal {
	// Run the fake model on the sequence to know its argmax, then lie.
	c, _ := kv.New(w.m.Config().KV, len(w.seq))
	saved := w.m.calls
	w.m.calls = map[int]int{}
	res, _ := w.m.Forward(context.Background(), w.seq, 0, c, model.Argmax)
	w.m.calls = saved
	y := res.Argmax[len(res.Argmax)-1]
	out := make([]int32, n)
	for i := range out {
		out[i] = (y + 1 + int32(i)) % int32(w.m.vocab)
	}
	return Proposal{Tokens: out, Match: 8}
}

// oracleSource proposes the true continuation (the width-1 output).
type oracleSource struct {
	truth []int32 // history + width-1 output
	n     int     // tokens of the sequence seen so far
}

func (o *oracleSource) Name() string    { return "oracle" }
func (o *oracleSource) Reset(h []int32) { o.n = len(h) }
func (o *oracleSource) Append(int32)    { o.n++ }
func (o *oracleSource) Propose(n int) Proposal {
	end := min(o.n+n, len(o.truth))
	if end <= o.n {
		return Proposal{}
	}
	return Proposal{Tokens: o.truth[o.n:end], Match: 8}
}

var testWidths = []int{1, 2, 3, 4, 5, 8, 0}

func TestGreedyLosslessFake(t *testing.T) {
	const vocab = 40
	corpus := NewCorpus(0)
	for _, p := range prompts(10, vocab) {
		corpus.Add(p)
	}
	// Flat costs: drafting is cheap, so the gate lets drafts through and
	// the test exercises wide calls; the ungated runs force them.
	flat := FixedCosts(map[int]float64{1: 1, 2: 1.01, 3: 1.02, 4: 1.03, 5: 1.04, 6: 1.05, 7: 1.06, 8: 1.07})
	var wide, drafted, accepted int
	for i, h := range prompts(24, vocab) {
		m := newFakeModel(vocab)
		base := reference(t, m, h, Request{MaxTokens: 40})
		one, bst := run(t, m, &Decoder{Sources: DefaultSources(corpus), Costs: flat}, h, Request{MaxTokens: 40, Width: 1})
		if !slices.Equal(ids(one), ids(base)) || bst.Drafted != 0 || bst.TargetCalls != len(base) || bst.Calls[1] != len(base) {
			t.Fatalf("prompt %d width 1: ids %v (stats %+v), want %v", i, ids(one), bst, ids(base))
		}
		for _, w := range testWidths {
			for _, ungated := range []bool{false, true} {
				dec := &Decoder{Sources: DefaultSources(corpus), Costs: flat}
				got, st := run(t, m, dec, h, Request{MaxTokens: 40, Width: w, Ungated: ungated})
				if !slices.Equal(ids(got), ids(base)) {
					t.Fatalf("prompt %d width %d ungated=%v: ids differ\n got %v\nwant %v", i, w, ungated, ids(got), ids(base))
				}
				nd := 0
				for _, tk := range got {
					if tk.Drafted {
						nd++
					}
				}
				if nd != st.Accepted || st.Accepted > st.Drafted {
					t.Fatalf("prompt %d width %d: %d tokens flagged drafted, stats %+v", i, w, nd, st)
				}
				if st.Tokens != st.TargetCalls+st.Accepted {
					t.Fatalf("prompt %d width %d: tokens %d != calls %d + accepted %d", i, w, st.Tokens, st.TargetCalls, st.Accepted)
				}
				wide += st.Wide
				drafted += st.Drafted
				accepted += st.Accepted
			}
		}
	}
	if wide == 0 || accepted == 0 || accepted == drafted {
		t.Fatalf("the test did not exercise both accepted and rejected drafts: wide %d drafted %d accepted %d", wide, drafted, accepted)
	}
}

func TestForcedWrongAndOracle(t *testing.T) {
	const vocab = 40
	for i, h := range prompts(20, vocab) {
		m := newFakeModel(vocab)
		base := reference(t, m, h, Request{MaxTokens: 30})
		for _, w := range []int{2, 3, 4, 5, 8} {
			// Wrong at every position: every draft is rejected, every
			// call still yields the model's own token.
			m.calls = map[int]int{}
			got, st := run(t, m, &Decoder{Sources: []Source{&wrongSource{m: m}}}, h, Request{MaxTokens: 30, Width: w, Ungated: true})
			if !slices.Equal(ids(got), ids(base)) {
				t.Fatalf("prompt %d width %d wrong drafter: ids differ", i, w)
			}
			if st.Accepted != 0 || st.Drafted == 0 || st.TargetCalls != len(base) {
				t.Fatalf("prompt %d width %d wrong drafter: %+v", i, w, st)
			}
			if m.calls[w] == 0 {
				t.Fatalf("prompt %d width %d wrong drafter made no call of width %d: %v", i, w, w, m.calls)
			}
			// Right at every position: every draft is kept, so each call
			// yields w tokens (bar the tail).
			truth := append(slices.Clone(h), ids(base)...)
			got, st = run(t, m, &Decoder{Sources: []Source{&oracleSource{truth: truth}}}, h, Request{MaxTokens: 30, Width: w, Ungated: true})
			if !slices.Equal(ids(got), ids(base)) {
				t.Fatalf("prompt %d width %d oracle: ids differ", i, w)
			}
			if st.Accepted != st.Drafted || st.TargetCalls != (len(base)+w-1)/w {
				t.Fatalf("prompt %d width %d oracle: %+v, want %d calls", i, w, st, (len(base)+w-1)/w)
			}
			for j, tk := range got {
				if want := j%w != w-1 && j != len(got)-1; tk.Drafted != want {
					t.Fatalf("prompt %d width %d oracle: token %d Drafted=%v", i, w, j, tk.Drafted)
				}
			}
		}
	}
}

func TestGatingSilencesWrongSource(t *testing.T) {
	const vocab = 40
	m := newFakeModel(vocab)
	h := prompts(1, vocab)[0]
	// Each extra token costs 0.3 of a call: one draft pays only when its
	// acceptance rate exceeds 0.3.
	cheap := FixedCosts(map[int]float64{1: 1, 2: 1.3, 3: 1.6, 4: 1.9})
	_, st := run(t, m, &Decoder{Sources: []Source{&wrongSource{m: m}}, Costs: cheap}, h, Request{MaxTokens: 200, Width: 4})
	// The prior (0.8 for long matches) lets it try about a dozen times;
	// after that it must stay silent (its shadow score never recovers).
	if st.Drafted == 0 || st.Wide > 15 || st.TargetCalls != 200 {
		t.Fatalf("gated wrong source: %+v", st)
	}
	// With linear costs (no batching gain) drafting never pays: nothing is
	// sent. With cheap wide calls the oracle, always right, drafts fully.
	linear := FixedCosts(map[int]float64{1: 1, 2: 2, 3: 3, 4: 4})
	base := reference(t, m, h, Request{MaxTokens: 100})
	truth := append(slices.Clone(h), ids(base)...)
	_, st = run(t, m, &Decoder{Sources: []Source{&wrongSource{m: m}}, Costs: linear}, h, Request{MaxTokens: 100, Width: 4})
	if st.Drafted != 0 {
		t.Fatalf("linear costs, wrong source drafted: %+v", st)
	}
	_, st = run(t, m, &Decoder{Sources: []Source{&oracleSource{truth: truth}}, Costs: cheap}, h, Request{MaxTokens: 100, Width: 4})
	if st.Accepted != st.Drafted || st.Tau() < 3.5 {
		t.Fatalf("oracle with cheap wide calls: %+v τ=%.2f", st, st.Tau())
	}
}

// flipSource is wrong for its first calls, then right: the gate must let it
// back in once its shadow score recovers.
type flipSource struct {
	wrong  wrongSource
	oracle oracleSource
	steps  int
	flipAt int
}

func (f *flipSource) Name() string { return "flip" }
func (f *flipSource) Reset(h []int32) {
	f.wrong.Reset(h)
	f.oracle.Reset(h)
	f.steps = 0
}
func (f *flipSource) Append(t int32) { f.wrong.Append(t); f.oracle.Append(t) }
func (f *flipSource) Propose(n int) Proposal {
	f.steps++
	if f.steps < f.flipAt {
		return f.wrong.Propose(n)
	}
	return f.oracle.Propose(n)
}

func TestGatingRecovers(t *testing.T) {
	const vocab = 40
	m := newFakeModel(vocab)
	h := prompts(1, vocab)[0]
	base := reference(t, m, h, Request{MaxTokens: 120})
	truth := append(slices.Clone(h), ids(base)...)
	flat := FixedCosts(map[int]float64{1: 1, 2: 1.3, 3: 1.6, 4: 1.9})
	src := &flipSource{wrong: wrongSource{m: m}, oracle: oracleSource{truth: truth}, flipAt: 40}
	got, st := run(t, m, &Decoder{Sources: []Source{src}, Costs: flat}, h, Request{MaxTokens: 120, Width: 4})
	if !slices.Equal(ids(got), ids(base)) {
		t.Fatal("ids differ")
	}
	// About 40 steps while wrong (mostly width 1), then about 80/4 wide
	// ones once the shadow score has recovered.
	if st.Accepted < 50 || st.TargetCalls > 70 || st.Sources["flip"].Accepted != st.Accepted {
		t.Fatalf("source did not recover: %+v", st)
	}
}

func TestSamplingMatchesWidthOne(t *testing.T) {
	const vocab = 12
	corpus := NewCorpus(0)
	for _, p := range prompts(5, vocab) {
		corpus.Add(p)
	}
	flat := FixedCosts(map[int]float64{1: 1, 8: 1.1})
	for i, h := range prompts(20, vocab) {
		m := newFakeModel(vocab)
		m.sharp = 1.5
		for seed := range uint64(3) {
			base := reference(t, m, h, Request{MaxTokens: 30, Sampler: sample.New(0.9, seed, 0, 0.95)})
			for _, w := range testWidths {
				got, _ := run(t, m, &Decoder{Sources: DefaultSources(corpus), Costs: flat}, h,
					Request{MaxTokens: 30, Width: w, Sampler: sample.New(0.9, seed, 0, 0.95), Ungated: w == 8})
				if !slices.Equal(ids(got), ids(base)) {
					t.Fatalf("prompt %d seed %d width %d: sampled ids differ\n got %v\nwant %v", i, seed, w, ids(got), ids(base))
				}
			}
		}
	}
}

// TestSamplingDistribution checks that speculative sampling leaves the
// output distribution unchanged: over many seeds, the first three tokens
// generated with a forced draft (the oracle of one fixed continuation, which
// is right only sometimes) follow the exact distribution of the model.
func TestSamplingDistribution(t *testing.T) {
	const vocab = 4
	m := newFakeModel(vocab)
	m.sharp = 0.8
	h := []int32{1, 2, 3, 1, 2}
	// The model's exact probabilities of each 3-token continuation.
	probs := map[[3]int32]float64{}
	s := sample.New(1, 0, 0, 1)
	c, _ := kv.New(m.Config().KV, 16)
	logitsAfter := func(seq []int32) []float32 {
		c.Reset()
		res, _ := m.Forward(context.Background(), seq, 0, c, model.Logits)
		return res.Logits[len(seq)-1]
	}
	p0 := s.Probs(logitsAfter(h))
	for a := range int32(vocab) {
		p1 := s.Probs(logitsAfter(append(slices.Clone(h), a)))
		for b := range int32(vocab) {
			p2 := s.Probs(logitsAfter(append(slices.Clone(h), a, b)))
			for cc := range int32(vocab) {
				probs[[3]int32{a, b, cc}] = p0[a] * p1[b] * p2[cc]
			}
		}
	}
	const n = 20000
	counts := map[[3]int32]int{}
	var drafted, accepted int
	fixed := append(slices.Clone(h), 0, 1, 2)
	for seed := range uint64(n) {
		out, st := run(t, m, &Decoder{Sources: []Source{&oracleSource{truth: fixed}}}, h,
			Request{MaxTokens: 3, Width: 4, Sampler: sample.New(1, seed, 0, 1), Ungated: true})
		counts[[3]int32{out[0].ID, out[1].ID, out[2].ID}]++
		drafted += st.Drafted
		accepted += st.Accepted
	}
	if accepted == 0 || accepted == drafted {
		t.Fatalf("drafts were all accepted or all rejected (%d of %d): the test checks nothing", accepted, drafted)
	}
	var chi float64
	for k, p := range probs {
		e := p * n
		d := float64(counts[k]) - e
		chi += d * d / e
	}
	// 63 degrees of freedom: the 0.999 quantile of chi-square(63) is 103.4.
	if chi > 103.4 {
		t.Fatalf("chi-square %.1f > 103.4 over 64 outcomes", chi)
	}
}

func TestStopsAndLimits(t *testing.T) {
	const vocab = 40
	h := prompts(3, vocab)[2]
	m := newFakeModel(vocab)
	base := reference(t, m, h, Request{MaxTokens: 40})
	truth := append(slices.Clone(h), ids(base)...)
	stop := base[17].ID
	first := slices.Index(ids(base), stop)
	for _, w := range []int{1, 3, 8} {
		oracle := &Decoder{Sources: []Source{&oracleSource{truth: truth}}}
		got, st := run(t, m, oracle, h, Request{MaxTokens: 40, Width: w, Stop: []int32{stop}, Ungated: true})
		if !slices.Equal(ids(got), ids(base[:first])) || st.Stopped != "stop" || st.Pending != stop {
			t.Fatalf("width %d stop: got %v (%+v), want %v", w, ids(got), st, ids(base[:first]))
		}
		got, st = run(t, m, oracle, h, Request{MaxTokens: 11, Width: w, Ungated: true})
		if !slices.Equal(ids(got), ids(base[:11])) || st.Stopped != "length" {
			t.Fatalf("width %d length: got %v (%+v)", w, ids(got), st)
		}
		got, st = run(t, m, oracle, h, Request{Room: 9, Width: w, Ungated: true})
		// Room 9: the pending token and 8 more fit, so 9 tokens emitted
		// (the last one pending, not in the KV).
		if !slices.Equal(ids(got), ids(base[:9])) || st.Stopped != "context" || st.Committed != 9 {
			t.Fatalf("width %d room: got %v (%+v)", w, ids(got), st)
		}
	}
}

func TestLogitsStart(t *testing.T) {
	// Request.Logits: the whole history is committed and the first token
	// comes from its last logits. Same output as feeding it.
	const vocab = 40
	m := newFakeModel(vocab)
	for _, h := range prompts(6, vocab) {
		base := reference(t, m, h, Request{MaxTokens: 20})
		for _, w := range []int{1, 4} {
			c, _ := kv.New(m.Config().KV, max(MaxWidth, len(h)))
			res, err := m.Forward(context.Background(), h, 0, c, model.Logits)
			if err != nil {
				t.Fatal(err)
			}
			_ = c.Commit(len(h))
			var out []Token
			st, err := (&Decoder{}).Run(context.Background(), BackendTarget{m, c}, Request{
				History: h, Logits: res.Logits[len(h)-1], MaxTokens: 20, Width: w, Room: 1000,
			}, func(tk Token) error { out = append(out, tk); return nil })
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(ids(out), ids(base)) || c.Len() != len(h)+19 || st.Pending != base[19].ID {
				t.Fatalf("width %d: got %v, want %v (cache %d)", w, ids(out), ids(base), c.Len())
			}
		}
	}
}

func TestRunErrors(t *testing.T) {
	m := newFakeModel(10)
	c, _ := kv.New(m.Config().KV, 8)
	dec := &Decoder{}
	noop := func(Token) error { return nil }
	for _, w := range []int{-1, 9} {
		if _, err := dec.Run(context.Background(), BackendTarget{m, c}, Request{History: []int32{1}, Width: w}, noop); !errors.Is(err, ErrRequest) {
			t.Fatalf("width %d: err %v", w, err)
		}
	}
	if _, err := dec.Run(context.Background(), BackendTarget{m, c}, Request{Width: 1}, noop); !errors.Is(err, ErrRequest) {
		t.Fatalf("empty history: err %v", err)
	}
	// emit's error stops generation and is returned; the KV stays
	// consistent (run's checks are not used here, so check by hand).
	boom := errors.New("boom")
	n := 0
	st, err := dec.Run(context.Background(), BackendTarget{m, c}, Request{History: []int32{1, 2, 3}, Width: 4, MaxTokens: 50, Room: 100},
		func(Token) error {
			n++
			if n == 5 {
				return boom
			}
			return nil
		})
	if !errors.Is(err, boom) || st.Tokens != 5 || c.Len() != st.Committed || c.Pending() != 0 {
		t.Fatalf("emit error: %v %+v cache %d", err, st, c.Len())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c.Reset()
	if _, err := dec.Run(ctx, BackendTarget{m, c}, Request{History: []int32{1}, Width: 4, Room: 100}, noop); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: err %v", err)
	}
	// No room left: no call, stopped by the context.
	st, err = dec.Run(context.Background(), badTarget{}, Request{History: []int32{1}, Width: 4}, noop)
	if err != nil || st.Stopped != "context" || st.TargetCalls != 0 || st.Pending != 1 {
		t.Fatalf("no room: %v %+v", err, st)
	}
	// A target returning the wrong number of rows is an error, not a panic.
	if _, err := dec.Run(context.Background(), badTarget{}, Request{History: []int32{1}, Width: 1, Room: 10}, noop); err == nil {
		t.Fatal("bad target: no error")
	}
}

type badTarget struct{}

func (badTarget) Forward(context.Context, []int32, model.Output) (model.Result, error) {
	return model.Result{Argmax: []int32{1, 2}}, nil
}
func (badTarget) Commit(int) error { return nil }

func TestBestDrafts(t *testing.T) {
	any := func(int) bool { return true }
	linear := FixedCosts(map[int]float64{1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 6: 6, 7: 7, 8: 8})
	if d, _ := bestDrafts(linear, 0.95, 7, any); d != 0 {
		t.Fatalf("linear costs, q=0.95: %d drafts", d)
	}
	flat := FixedCosts(map[int]float64{1: 1, 2: 1, 3: 1, 4: 1, 5: 1, 6: 1, 7: 1, 8: 1})
	if d, _ := bestDrafts(flat, 0.1, 7, any); d != 7 {
		t.Fatalf("free width, q=0.1: %d drafts, want 7", d)
	}
	// Cost 1 + 0.2(w-1): q=0.9 pays up to a point, q=0.15 does not.
	mid := map[int]float64{}
	for w := 1; w <= 8; w++ {
		mid[w] = 1 + 0.2*float64(w-1)
	}
	c := FixedCosts(mid)
	d, v := bestDrafts(c, 0.9, 7, any)
	// Brute force the optimum.
	bd, bv := 0, 1.0
	for k := 1; k <= 7; k++ {
		g := 0.0
		for i := 0; i <= k; i++ {
			g += math.Pow(0.9, float64(i))
		}
		if x := g / (1 + 0.2*float64(k)); x > bv {
			bd, bv = k, x
		}
	}
	if d != bd || math.Abs(v-bv) > 1e-9 {
		t.Fatalf("q=0.9: %d (%.4f), want %d (%.4f)", d, v, bd, bv)
	}
	if d, _ := bestDrafts(c, 0.15, 7, any); d != 0 {
		t.Fatalf("q=0.15: %d drafts", d)
	}
	// Only widths 1, 2 and 4 exist (Core ML): 3 drafts or 1.
	only := func(w int) bool { return w == 1 || w == 2 || w == 4 }
	if d, _ := bestDrafts(flat, 0.5, 7, only); d != 3 {
		t.Fatalf("widths {1,2,4}: %d drafts", d)
	}
}

func TestCostsRatio(t *testing.T) {
	c := NewCosts(map[int]float64{1: 2, 3: 4, 8: 9})
	for w, want := range map[int]float64{1: 1, 2: 1.5, 3: 2, 5: 3, 8: 4.5} {
		if got := c.Ratio(w); math.Abs(got-want) > 1e-12 {
			t.Errorf("Ratio(%d) = %v, want %v", w, got, want)
		}
	}
	c = NewCosts(map[int]float64{1: 1, 2: 1.5})
	if got := c.Ratio(4); math.Abs(got-(1.5+2*defaultSlope)) > 1e-12 {
		t.Errorf("extrapolated Ratio(4) = %v", got)
	}
	if got := (&Costs{}).Ratio(3); got != 1+2*defaultSlope {
		t.Errorf("unknown Ratio(3) = %v", got)
	}
	c.Observe(1, 3e9) // 3 s: the average moves toward it
	if s := c.Seconds(1); s <= 1 || s >= 3 {
		t.Errorf("after Observe: %v", s)
	}
}

func TestMeasure(t *testing.T) {
	m := newFakeModel(16)
	c, err := Measure(context.Background(), m, MeasureOptions{Reps: 2})
	if err != nil {
		t.Fatal(err)
	}
	for w := 1; w <= MaxWidth; w++ {
		if c.Seconds(w) <= 0 {
			t.Fatalf("width %d not measured", w)
		}
		if m.calls[w] < 2 {
			t.Fatalf("width %d: %d calls", w, m.calls[w])
		}
	}
	c, err = Measure(context.Background(), m, MeasureOptions{Widths: []int{1, 4}})
	if err != nil || c.Seconds(4) <= 0 || c.Seconds(2) != 0 {
		t.Fatalf("widths {1,4}: %v %v", c, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Measure(ctx, m, MeasureOptions{}); err == nil {
		t.Fatal("cancelled Measure succeeded")
	}
}

func ExampleDecoder_Run() {
	m := newFakeModel(20)
	c, _ := kv.New(m.Config().KV, MaxWidth)
	dec := &Decoder{Sources: DefaultSources(nil)}
	st, _ := dec.Run(context.Background(), BackendTarget{m, c},
		Request{History: []int32{3, 4, 5, 3, 4}, MaxTokens: 12, Width: 4, Room: 100},
		func(tk Token) error { fmt.Print(tk.ID, " "); return nil })
	fmt.Println("|", st.Tokens, "tokens")
	// Output: 15 6 14 11 8 4 3 2 14 7 0 4 | 12 tokens
}

// TestCostsFollowContext: width-1 calls getting slower (a longer context)
// must not make wide calls look cheaper: the ratio stays as measured until a
// wide call is observed, and is then measured against the current width-1 time.
func TestCostsFollowContext(t *testing.T) {
	c := NewCosts(map[int]float64{1: 1e-3, 4: 3e-3})
	for range 200 {
		c.Observe(1, 2*time.Millisecond)
	}
	if r := c.Ratio(4); math.Abs(r-3) > 1e-12 {
		t.Fatalf("ratio drifted to %v without wide calls", r)
	}
	if s := c.Seconds(4); math.Abs(s-6e-3) > 1e-6 {
		t.Fatalf("Seconds(4) = %v, want about 6 ms", s)
	}
	// Wide calls with no width-1 call near them are not compared with an
	// old width-1 time (issue 23: a burst of load made that look 3-4x):
	// only the first freshCalls of these are, and they are forgotten.
	for range 200 {
		c.Observe(4, 4*time.Millisecond)
	}
	if r := c.Ratio(4); math.Abs(r-3) > 0.1 {
		t.Fatalf("ratio moved to %v with no fresh width-1 time", r)
	}
	// With width-1 calls among them, they are.
	for i := range 200 {
		if i%4 == 0 {
			c.Observe(1, 2*time.Millisecond)
		}
		c.Observe(4, 4*time.Millisecond)
	}
	if r := c.Ratio(4); math.Abs(r-2) > 0.2 {
		t.Fatalf("ratio %v, want about 2 (4 ms against 2 ms)", r)
	}
	f := FixedCosts(map[int]float64{1: 1, 2: 1.5})
	f.Observe(2, time.Second)
	if f.Ratio(2) != 1.5 {
		t.Fatal("fixed costs moved")
	}
}

// TestMeasureMonotone: a wide call measured faster than a narrower one (noise,
// or a quirk of the backend) is taken at the narrower one's cost; widths not
// measured stay unknown.
func TestMeasureMonotone(t *testing.T) {
	ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
	got := monotone(map[int]time.Duration{1: ms(1), 2: ms(3), 3: ms(2), 4: ms(2.5), 6: ms(4), 8: ms(3.5)})
	want := map[int]float64{1: 1e-3, 2: 3e-3, 3: 3e-3, 4: 3e-3, 6: 4e-3, 8: 4e-3}
	if len(got) != len(want) {
		t.Fatalf("monotone = %v, want %v", got, want)
	}
	for w, s := range want {
		if math.Abs(got[w]-s) > 1e-12 {
			t.Fatalf("monotone = %v, want %v", got, want)
		}
	}
	// A zero time (a clock too coarse to see the call) is not zero cost.
	if got := monotone(map[int]time.Duration{1: 0}); got[1] <= 0 {
		t.Fatalf("zero time gave %v", got)
	}
}

// fixedWidths is the fake model as a fixed-shape backend: it runs only the
// listed widths, like Core ML's functions.
type fixedWidths struct {
	*fakeModel
	widths []int
}

func (f fixedWidths) Widths() []int { return f.widths }

func (f fixedWidths) Forward(ctx context.Context, tokens []int32, start int, c *kv.Cache, want model.Output) (model.Result, error) {
	if !slices.Contains(f.widths, len(tokens)) {
		return model.Result{}, fmt.Errorf("fixed: no function of width %d", len(tokens))
	}
	return f.fakeModel.Forward(ctx, tokens, start, c, want)
}

// TestFixedWidthBackend: Measure and the verify loop only make calls of the
// widths a fixed-shape backend lists, and the output stays identical.
func TestFixedWidthBackend(t *testing.T) {
	fm := newFakeModel(40)
	b := fixedWidths{fm, []int{1, 2, 4}}
	costs, err := Measure(context.Background(), b, MeasureOptions{Reps: 1})
	if err != nil {
		t.Fatal(err)
	}
	if costs.Seconds(4) <= 0 || costs.Seconds(3) != 0 {
		t.Fatalf("measured %v %v", costs.Seconds(4), costs.Seconds(3))
	}
	for i, h := range prompts(8, 40) {
		base := reference(t, fm, h, Request{MaxTokens: 30})
		truth := append(slices.Clone(h), ids(base)...)
		fm.calls = map[int]int{}
		c, _ := kv.New(fm.Config().KV, max(MaxWidth, len(h)))
		if n := len(h) - 1; n > 0 {
			fm.Forward(context.Background(), h[:n], 0, c, model.Argmax)
			c.Commit(n)
		}
		var out []Token
		dec := &Decoder{Sources: []Source{&oracleSource{truth: truth}}, Costs: costs}
		_, err := dec.Run(context.Background(), BackendTarget{b, c}, Request{
			History: h, MaxTokens: 30, Width: 8, Widths: b.Widths(), Room: 1000, Ungated: true,
		}, func(tk Token) error { out = append(out, tk); return nil })
		if err != nil {
			t.Fatalf("prompt %d: %v", i, err)
		}
		if !slices.Equal(ids(out), ids(base)) {
			t.Fatalf("prompt %d: ids differ", i)
		}
		if fm.calls[4] == 0 {
			t.Fatalf("prompt %d: no width-4 call: %v", i, fm.calls)
		}
	}
}

// TestRatesCarryToNextRequest: a Decoder's next request starts from rates
// halfway between the priors and where the last request ended when it
// continues the last request's sequence (the next turn of a conversation),
// so after a request whose drafts were always right it drafts sooner; a
// request that does not continue it (a new chat, another client) starts
// from the priors, as a fresh Decoder does (issue 23: request-owned state
// resets per request).
func TestRatesCarryToNextRequest(t *testing.T) {
	const vocab = 40
	m := newFakeModel(vocab)
	h := prompts(1, vocab)[0]
	base := ids(reference(t, m, h, Request{MaxTokens: 80}))
	truth := append(slices.Clone(h), base...)
	// The next turn: the first turn's sequence and its continuation.
	h2 := append(slices.Clone(h), base[:40]...)
	// One draft pays only above a rate of 0.7; the long-match prior is 0.65.
	costs := FixedCosts(map[int]float64{1: 1, 2: 1.7, 3: 2.4, 4: 3.1})
	dec := &Decoder{Sources: []Source{&oracleSource{truth: truth}}, Costs: costs}
	_, first := run(t, m, dec, h, Request{MaxTokens: 40, Width: 4})
	got, second := run(t, m, dec, h2, Request{MaxTokens: 40, Width: 4})
	if !slices.Equal(ids(got), base[40:]) {
		t.Fatal("ids differ")
	}
	fresh := func(h []int32) Stats {
		_, st := run(t, m, &Decoder{Sources: []Source{&oracleSource{truth: truth}}, Costs: costs}, h, Request{MaxTokens: 40, Width: 4})
		return st
	}
	if f := fresh(h2); second.TargetCalls >= f.TargetCalls || second.Accepted <= f.Accepted {
		t.Fatalf("next turn no faster than from the priors: fresh %+v, next turn %+v", f, second)
	}
	// The same prompt again does not continue the sequence: the priors,
	// as a fresh Decoder.
	_, again := run(t, m, dec, h, Request{MaxTokens: 40, Width: 4})
	if f := fresh(h); again.TargetCalls != f.TargetCalls || f.TargetCalls != first.TargetCalls {
		t.Fatalf("a new request carried rates: first %+v, again %+v, fresh %+v", first, again, f)
	}
}

// countingTarget counts the model calls made through it.
type countingTarget struct {
	Target
	calls int
}

func (c *countingTarget) Forward(ctx context.Context, tokens []int32, want model.Output) (model.Result, error) {
	c.calls++
	return c.Target.Forward(ctx, tokens, want)
}

func TestTokensCarryCountsSoFar(t *testing.T) {
	// Each token says how many model calls were made, tokens emitted and
	// drafts accepted when it came out, so that τ so far (tokens / calls)
	// and the drafted share are exact while a reply streams, and no caller
	// recounts them; the last token's equal the stats.
	const vocab = 40
	corpus := NewCorpus(0)
	for _, p := range prompts(10, vocab) {
		corpus.Add(p)
	}
	flat := FixedCosts(map[int]float64{1: 1, 2: 1.01, 3: 1.02, 4: 1.03, 5: 1.04, 6: 1.05, 7: 1.06, 8: 1.07})
	var drafted int
	for i, h := range prompts(12, vocab) {
		m := newFakeModel(vocab)
		for _, w := range []int{1, 4, 0} {
			for _, logits := range []bool{false, true} {
				c, _ := kv.New(m.Config().KV, max(MaxWidth, len(h)))
				req := Request{History: h, MaxTokens: 30, Width: w, Room: 1000, Ungated: true}
				n := len(h) - 1
				if logits {
					n = len(h)
				}
				res, err := m.Forward(context.Background(), h[:n], 0, c, model.Logits)
				if err != nil {
					t.Fatal(err)
				}
				_ = c.Commit(n)
				if logits {
					req.Logits = res.Logits[n-1]
				}
				tgt := &countingTarget{Target: BackendTarget{m, c}}
				var got []Token
				st, err := (&Decoder{Sources: DefaultSources(corpus), Costs: flat}).Run(context.Background(), tgt, req, func(tk Token) error {
					if tk.Calls != tgt.calls {
						t.Fatalf("prompt %d width %d: token %d says %d calls, %d were made", i, w, len(got), tk.Calls, tgt.calls)
					}
					// Tokens and Accepted count this token and those before.
					acc := 0
					if len(got) > 0 {
						acc = got[len(got)-1].Accepted
					}
					if tk.Drafted {
						acc++
					}
					if tk.Tokens != len(got)+1 || tk.Accepted != acc {
						t.Fatalf("prompt %d width %d: token %d (drafted %v) counts %d tokens, %d accepted; want %d, %d", i, w, len(got), tk.Drafted, tk.Tokens, tk.Accepted, len(got)+1, acc)
					}
					got = append(got, tk)
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				if logits && got[0].Calls != 0 {
					t.Fatalf("prompt %d width %d: the token picked from the given logits says %d calls", i, w, got[0].Calls)
				}
				if last := got[len(got)-1]; last.Calls > st.TargetCalls || st.TargetCalls != tgt.calls {
					t.Fatalf("prompt %d width %d: last token %d calls, stats %d, target %d", i, w, last.Calls, st.TargetCalls, tgt.calls)
				}
				if last := got[len(got)-1]; last.Tokens != st.Tokens || last.Accepted != st.Accepted {
					t.Fatalf("prompt %d width %d: last token counts %d tokens, %d accepted; stats %d, %d", i, w, last.Tokens, last.Accepted, st.Tokens, st.Accepted)
				}
				drafted += st.Accepted
			}
		}
	}
	if drafted == 0 {
		t.Fatal("no draft was accepted: the test did not see calls yield several tokens")
	}
}
