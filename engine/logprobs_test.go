package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"anechat/engine/load"
	"anechat/engine/model"
	"anechat/engine/sample"
	"anechat/engine/spec"
	"anechat/internal/backends"
	"anechat/internal/cputime"
	"anechat/internal/testres"
)

// sameTokens fails unless a and b are the same tokens with the same
// logprobs and alternatives, bit for bit.
func sameTokens(t *testing.T, what string, a, b []Token) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s: %d tokens, want %d", what, len(a), len(b))
	}
	for k := range a {
		x, y := a[k], b[k]
		if x.ID != y.ID || x.Text != y.Text || math.Float64bits(x.Logprob) != math.Float64bits(y.Logprob) || !slices.Equal(x.Top, y.Top) {
			t.Fatalf("%s: token %d = %d %q %v %v, want %d %q %v %v", what, k, x.ID, x.Text, x.Logprob, x.Top, y.ID, y.Text, y.Logprob, y.Top)
		}
	}
}

// TestSessionLogprobsSmolLM2: on SmolLM2 (a real vocabulary of 49k), a
// Session's logprobs are the same bits at every width 1..8 and auto, greedy
// and sampled, over two turns (the first token of each comes from the
// prefill's logits, the rest from decode calls), and the first token's
// equal those of the prefill's last row.
func TestSessionLogprobsSmolLM2(t *testing.T) {
	path := testres.SmolLM2GGUF(t)
	lm, err := backends.Registry().Open(context.Background(), path, load.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lm.Close() })
	b := lm.Backend
	tok := lm.Tokenizer
	costs := spec.FixedCosts(map[int]float64{1: 1, 2: 1.1, 3: 1.2, 4: 1.3, 5: 1.4, 6: 1.5, 7: 1.6, 8: 1.7})
	text := "The cat sat on the mat. The dog sat on the log. The cat sat on the"
	turns := [][]int32{append([]int32{}, tok.Encode(text)...), tok.Encode(" The dog sat")}
	for _, opts := range []GenerateOptions{
		{MaxTokens: 10, Logprobs: true, TopLogprobs: sample.MaxTopLogprobs},
		{MaxTokens: 10, Logprobs: true, TopLogprobs: 5, Temperature: 0.9, TopP: 0.9, Seed: 7},
	} {
		var base [][]Token
		accepted := 0
		for _, w := range []int{1, 2, 3, 4, 5, 6, 7, 8, 0} {
			got, _ := specTurns(t, b, SessionOptions{Costs: costs.Clone(), Text: func() TextStream { return tok.NewStream() }}, w, turns, opts)
			if w == 1 {
				base = got
				continue
			}
			for i := range got {
				sameTokens(t, fmt.Sprintf("T=%v width %d turn %d", opts.Temperature, w, i), got[i], base[i])
				for _, tk := range got[i] {
					accepted += boolInt(tk.Drafted)
				}
			}
		}
		if accepted == 0 {
			t.Fatalf("T=%v: no draft accepted at any width: speculation was not exercised", opts.Temperature)
		}
		// The first token of the first turn is picked from the prefill's
		// row of the prompt's last token.
		s, err := NewSession(b, SessionOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Prefill(context.Background(), turns[0], nil); err != nil {
			t.Fatal(err)
		}
		own, top := sample.Logprobs(s.Logits(), base[0][0].ID, opts.TopLogprobs, nil)
		if own != base[0][0].Logprob || !slices.Equal(top, base[0][0].Top) {
			t.Fatalf("T=%v: first token %v %v, want the prefill row's %v %v", opts.Temperature, base[0][0].Logprob, base[0][0].Top, own, top)
		}
		for _, tk := range base[0] {
			if len(tk.Top) != opts.TopLogprobs || tk.Logprob > 0 || tk.Logprob < tk.Top[len(tk.Top)-1].Logprob && opts.Temperature == 0 {
				t.Fatalf("T=%v: token %+v: want %d alternatives and a logprob among them", opts.Temperature, tk, opts.TopLogprobs)
			}
		}
	}
}

// argmaxOnly is a backend that says it returns greedy ids only.
type argmaxOnly struct{ model.Backend }

func (argmaxOnly) ArgmaxOnly() bool { return true }

// TestLogprobsRefusedWithoutLogits: a backend with no logits refuses
// logprobs with ErrNoLogits, and a bad TopLogprobs is refused, each before
// any token.
func TestLogprobsRefusedWithoutLogits(t *testing.T) {
	b := openStories(t)
	for _, c := range []struct {
		b    model.Backend
		opts GenerateOptions
		is   error
	}{
		{argmaxOnly{b}, GenerateOptions{MaxTokens: 4, Logprobs: true}, ErrNoLogits},
		{b, GenerateOptions{MaxTokens: 4, Logprobs: true, TopLogprobs: 21}, spec.ErrRequest},
	} {
		s, err := NewSession(c.b, SessionOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Prefill(context.Background(), storiesPrompt, nil); err != nil {
			t.Fatal(err)
		}
		n := 0
		_, err = s.Generate(context.Background(), c.opts, func(Token) error { n++; return nil })
		if !errors.Is(err, c.is) || n != 0 {
			t.Fatalf("%+v: err %v after %d tokens, want %v before any", c.opts, err, n, c.is)
		}
	}
}

// BenchmarkSmolLM2Logprobs is the decode cost of logprobs on SmolLM2 (49k
// vocabulary): 32 greedy tokens at width 1 and 4, without logprobs and with
// top_logprobs 20 (logits rows instead of argmax, and a log-softmax per
// token). Each sub-benchmark reports tokens per second and CPU ms per
// token; the "interleaved" run makes one generation of every kind per
// iteration, in a rotating order, and reports the median ms per token of
// each and the on/off ratios per width, of wall and of CPU time: on this
// shared machine the ratio of paired medians is far steadier than separate
// runs.
func BenchmarkSmolLM2Logprobs(b *testing.B) {
	lm, err := backends.Registry().Open(context.Background(), testres.SmolLM2GGUF(b), load.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer lm.Close()
	prompt := lm.Tokenizer.Encode("The cat sat on the mat. The dog sat on the log. The cat sat on the")
	costs := spec.FixedCosts(map[int]float64{1: 1, 2: 1.1, 3: 1.2, 4: 1.3})
	type kind struct {
		w  int
		on bool
	}
	var kinds []kind
	for _, w := range []int{1, 4} {
		for _, on := range []bool{false, true} {
			kinds = append(kinds, kind{w, on})
		}
	}
	// generate prefills a new Session (not timed) and times 32 tokens of
	// kind k: it returns the tokens, wall and CPU time.
	generate := func(b *testing.B, k kind) (int, time.Duration, time.Duration) {
		b.StopTimer()
		defer b.StartTimer()
		s, err := NewSession(lm.Backend, SessionOptions{Costs: costs.Clone()})
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Prefill(context.Background(), prompt, nil); err != nil {
			b.Fatal(err)
		}
		t0, cpu0 := time.Now(), cputime.Process()
		b.StartTimer()
		st, err := s.Generate(context.Background(), GenerateOptions{MaxTokens: 32, Width: k.w, Logprobs: k.on, TopLogprobs: 20}, func(Token) error { return nil })
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		return st.Tokens, time.Since(t0), cputime.Process() - cpu0
	}
	b.Run("interleaved", func(b *testing.B) {
		ms, cpu := make([][]float64, len(kinds)), make([][]float64, len(kinds))
		for i := 0; i < b.N; i++ {
			for j := range kinds {
				k := (i + j) % len(kinds)
				n, wall, c := generate(b, kinds[k])
				ms[k] = append(ms[k], wall.Seconds()*1000/float64(n))
				cpu[k] = append(cpu[k], c.Seconds()*1000/float64(n))
			}
		}
		for k, kd := range kinds {
			b.ReportMetric(median(ms[k]), fmt.Sprintf("w%d-logprobs=%v-ms/tok", kd.w, kd.on))
			if kd.on {
				b.ReportMetric(median(ms[k])/median(ms[k-1]), fmt.Sprintf("w%d-on/off", kd.w))
				b.ReportMetric(median(cpu[k])/median(cpu[k-1]), fmt.Sprintf("w%d-cpu-on/off", kd.w))
			}
		}
	})
	for _, k := range kinds {
		b.Run(fmt.Sprintf("width%d/logprobs=%v", k.w, k.on), func(b *testing.B) {
			tokens, cpu := 0, time.Duration(0)
			for i := 0; i < b.N; i++ {
				n, _, c := generate(b, k)
				tokens, cpu = tokens+n, cpu+c
			}
			b.ReportMetric(float64(tokens)/b.Elapsed().Seconds(), "tok/s")
			b.ReportMetric(cpu.Seconds()*1000/float64(tokens), "cpu-ms/tok")
		})
	}
}

// median returns the median of xs (which it sorts).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	if len(xs)%2 == 1 {
		return xs[len(xs)/2]
	}
	return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
}
