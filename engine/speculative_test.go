package engine

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"anechat/engine/kv"
	"anechat/engine/model"
	"anechat/engine/sample"
	"anechat/engine/spec"
	"anechat/internal/refdecode"
)

// specTurns runs a conversation (each turn's prompt ids, prefilled in turn)
// on a fresh Session built with so, generating at width, and returns every
// turn's tokens and the Session's final sequence.
func specTurns(t *testing.T, b model.Backend, so SessionOptions, width int, turns [][]int32, opts GenerateOptions) ([][]Token, []int32) {
	t.Helper()
	s, err := NewSession(b, so)
	if err != nil {
		t.Fatal(err)
	}
	return sessionTurns(t, s, width, turns, opts), s.Tokens()
}

// sessionTurns is specTurns on a given Session.
func sessionTurns(t *testing.T, s *Session, width int, turns [][]int32, opts GenerateOptions) [][]Token {
	t.Helper()
	var out [][]Token
	for _, p := range turns {
		if err := s.Prefill(context.Background(), p, nil); err != nil {
			t.Fatal(err)
		}
		var got []Token
		opts.Width = width
		st, err := s.Generate(context.Background(), opts, func(tk Token) error {
			got = append(got, tk)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		nd := 0
		for _, tk := range got {
			if tk.Drafted {
				nd++
			}
		}
		if st.Tokens != len(got) || nd != st.Accepted || st.Tokens != st.TargetCalls+st.Accepted+boolInt(st.PrefillTokens > 0) {
			// Every call yields its accepted drafts plus one token; the
			// first token of a turn after a prefill needs no call.
			t.Fatalf("width %d: stats %+v for %d tokens (%d drafted)", width, st, len(got), nd)
		}
		if width == 1 && (st.Drafted != 0 || st.Calls[1] != st.TargetCalls) {
			t.Fatalf("width 1 drafted or made wider calls: %+v", st)
		}
		out = append(out, got)
	}
	return out
}

// plainTurns is the reference for specTurns: the same conversation decoded
// without speculation by refdecode, every turn from scratch over the whole
// sequence so far, with the Session's stop ids and a fresh sampler per turn
// (as Generate makes one per call).
func plainTurns(t *testing.T, b model.Backend, turns [][]int32, opts GenerateOptions) ([][]int32, []int32) {
	t.Helper()
	var out [][]int32
	var seq []int32
	for _, p := range turns {
		seq = append(seq, p...)
		var smp *sample.Sampler
		if opts.Temperature > 0 {
			smp = sample.New(opts.Temperature, opts.Seed, 0, opts.TopP)
		}
		r, err := refdecode.Generate(context.Background(), b, seq, opts.MaxTokens, smp, append(slices.Clone(b.Config().EOS), opts.Stop...))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r.IDs)
		seq = append(seq, r.IDs...)
		if r.Stop >= 0 {
			seq = append(seq, r.Stop)
		}
	}
	return out, seq
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func tokenIDs(ts []Token) []int32 {
	var out []int32
	for _, t := range ts {
		out = append(out, t.ID)
	}
	return out
}

// TestSessionMatchesReference: the Session generates exactly what decoding
// without speculation does (refdecode), turn after turn, at every width
// (width 1 included: the verify loop with no drafts), greedy and sampled
// (with and without top-p).
func TestSessionMatchesReference(t *testing.T) {
	b := openStories(t)
	// Fixed costs that make wide calls pay: measured ones follow the
	// machine's load, and a burst of it could make the gate send nothing.
	costs := spec.FixedCosts(map[int]float64{1: 1, 2: 1.1, 3: 1.2, 4: 1.3, 5: 1.4, 6: 1.5, 7: 1.6, 8: 1.7})
	corpus := spec.NewCorpus(0)
	corpus.Add(storiesWant)
	// Turn 2 repeats text from turn 1, so drafts find matches.
	turns := [][]int32{storiesPrompt, storiesWant[:12], storiesWant[20:30]}
	var wantSeqs [][]int32
	for _, opts := range []GenerateOptions{{MaxTokens: 40}, {MaxTokens: 30, Temperature: 0.9, Seed: 4},
		{MaxTokens: 30, Temperature: 0.9, Seed: 4, TopP: 0.6}} {
		want, wantSeq := plainTurns(t, b, turns, opts)
		wantSeqs = append(wantSeqs, wantSeq)
		accepted := 0
		for _, w := range []int{1, 2, 3, 4, 5, 8, 0} {
			got, seq := specTurns(t, b, SessionOptions{Costs: costs.Clone(), Corpus: corpus}, w, turns, opts)
			for i := range want {
				if !slices.Equal(tokenIDs(got[i]), want[i]) {
					t.Fatalf("T=%v top-p %v width %d turn %d:\n got %v\nwant %v", opts.Temperature, opts.TopP, w, i, tokenIDs(got[i]), want[i])
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
		t.Logf("T=%v top-p %v: %d drafted tokens emitted", opts.Temperature, opts.TopP, accepted)
	}
	if slices.Equal(wantSeqs[1], wantSeqs[2]) {
		t.Fatal("top-p 0.6 sampled what no top-p did with the same seed: the case does not show top-p is applied")
	}
}

// TestSessionContextEnd: speculation never runs past the context; the
// output at the end of the context equals the reference's.
func TestSessionSpecContextEnd(t *testing.T) {
	m := tinyLlama(t, 24, 3)
	prompt := []int32{5, 6, 7, 5, 6, 7, 5, 6}
	want, _ := plainTurns(t, m, [][]int32{prompt}, GenerateOptions{})
	for _, w := range []int{1, 2, 4, 8} {
		got, seq := specTurns(t, m, SessionOptions{Costs: flatCosts()}, w, [][]int32{prompt}, GenerateOptions{})
		if !slices.Equal(tokenIDs(got[0]), want[0]) || len(seq) > 24+1 {
			t.Fatalf("width %d: got %v want %v (sequence %d)", w, tokenIDs(got[0]), want[0], len(seq))
		}
	}
}

// fixedWidths is a backend whose generation calls (every call but a
// prefill's, which asks for the Last row only) run only the listed widths,
// like Core ML's generation functions.
type fixedWidths struct {
	model.Backend
	widths []int
}

func (f fixedWidths) Widths() []int { return f.widths }

func (f fixedWidths) Forward(ctx context.Context, tokens []int32, start int, c *kv.Cache, want model.Output) (model.Result, error) {
	if want&model.Last == 0 && !slices.Contains(f.widths, len(tokens)) {
		return model.Result{}, fmt.Errorf("fixed widths: no call of width %d", len(tokens))
	}
	return f.Backend.Forward(ctx, tokens, start, c, want)
}

// TestSessionMeasuresOnce: without a cost model, a Session measures its
// backend at the first Generate of a width other than 1, every width the
// backend runs (1..8 on the CPU, the listed ones on a fixed-shape backend),
// and never again whatever width is asked later; width 1 measures nothing.
func TestSessionMeasuresOnce(t *testing.T) {
	b := openStories(t)
	opts := GenerateOptions{MaxTokens: 20}
	want, _ := plainTurns(t, b, [][]int32{storiesPrompt}, opts)
	s, err := NewSession(b, SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	check := func(w int) {
		t.Helper()
		s.Reset()
		if got := sessionTurns(t, s, w, [][]int32{storiesPrompt}, opts); !slices.Equal(tokenIDs(got[0]), want[0]) {
			t.Fatalf("width %d: ids %v, want %v", w, tokenIDs(got[0]), want[0])
		}
	}
	check(1)
	if c := s.Costs(); s.Measurements() != 0 || c == nil || c.Seconds(2) != 0 {
		t.Fatalf("width 1: %d measurements, costs %v", s.Measurements(), c.Table())
	}
	check(2)
	c := s.Costs()
	if s.Measurements() != 1 || len(c.Table()) != spec.MaxWidth {
		t.Fatalf("width 2: %d measurements, costs %v (want every width 1..%d)", s.Measurements(), c.Table(), spec.MaxWidth)
	}
	for _, w := range []int{4, 8, 0, 1, 3} {
		check(w)
		if s.Measurements() != 1 || s.Costs() != c {
			t.Fatalf("width %d after width 2: %d measurements, costs replaced: %v", w, s.Measurements(), s.Costs() != c)
		}
	}

	// A fixed-shape backend: only its widths are measured (a call of any
	// other width would fail), and the output is the same.
	fb := fixedWidths{b, []int{1, 2, 4}}
	s, err = NewSession(fb, SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	check(0)
	if got := s.Costs().Table(); s.Measurements() != 1 || len(got) != 3 || got[4] <= 0 {
		t.Fatalf("fixed widths {1,2,4}: %d measurements, costs %v", s.Measurements(), got)
	}
}
