package engine

import (
	"context"
	"slices"
	"testing"

	"anechat/engine/arch/llama"
	"anechat/engine/cpu"
	"anechat/engine/model"
	"anechat/engine/model/gguf"
	"anechat/engine/spec"
)

// specTurns runs a three-turn conversation on a fresh Session with dec and
// returns every turn's tokens and the Session's final sequence.
func specTurns(t *testing.T, b model.Backend, dec Decoder, width int, turns [][]int32, opts GenerateOptions) ([][]Token, []int32) {
	t.Helper()
	s, err := NewSession(b, SessionOptions{Decoder: dec})
	if err != nil {
		t.Fatal(err)
	}
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
		out = append(out, got)
	}
	return out, s.Tokens()
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

// TestSpecDecoderMatchesPlain: the Session with the speculative decoder
// generates exactly what plain decoding does, turn after turn, at every
// width, greedy and sampled.
func TestSpecDecoderMatchesPlain(t *testing.T) {
	b := openStories(t)
	costs, err := spec.Measure(context.Background(), b, spec.MeasureOptions{Reps: 1})
	if err != nil {
		t.Fatal(err)
	}
	corpus := spec.NewCorpus(0)
	corpus.Add(storiesWant)
	// Turn 2 repeats text from turn 1, so drafts find matches.
	turns := [][]int32{storiesPrompt, storiesWant[:12], storiesWant[20:30]}
	for _, opts := range []GenerateOptions{{MaxTokens: 40}, {MaxTokens: 30, Temperature: 0.9, Seed: 4}} {
		want, wantSeq := specTurns(t, b, PlainDecoder{}, 1, turns, opts)
		drafted := 0
		for _, w := range []int{1, 2, 3, 4, 5, 8, 0} {
			dec := NewSpecDecoder(costs, corpus)
			got, seq := specTurns(t, b, dec, w, turns, opts)
			for i := range want {
				if !slices.Equal(tokenIDs(got[i]), tokenIDs(want[i])) {
					t.Fatalf("T=%v width %d turn %d:\n got %v\nwant %v", opts.Temperature, w, i, tokenIDs(got[i]), tokenIDs(want[i]))
				}
			}
			if !slices.Equal(seq, wantSeq) {
				t.Fatalf("width %d: sequences differ", w)
			}
			drafted += dec.LastStats().Drafted
		}
		t.Logf("T=%v: %d drafts in the last turns", opts.Temperature, drafted)
	}
}

// TestSpecDecoderContextEnd: speculation never runs past the context; the
// output at the end of the context equals plain decoding's.
func TestSpecDecoderContextEnd(t *testing.T) {
	data, err := cpu.RandomLlama(llama.Config{Hidden: 32, FFN: 48, Layers: 1, Heads: 2, KVHeads: 1, Vocab: 64, Context: 24}, gguf.F32, 3)
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse("ctx.gguf", data)
	if err != nil {
		t.Fatal(err)
	}
	m, err := cpu.LoadLlama(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	flat := spec.FixedCosts(map[int]float64{1: 1, 2: 1, 3: 1, 4: 1, 5: 1, 6: 1, 7: 1, 8: 1})
	prompt := []int32{5, 6, 7, 5, 6, 7, 5, 6}
	want, _ := specTurns(t, m, PlainDecoder{}, 1, [][]int32{prompt}, GenerateOptions{})
	for _, w := range []int{2, 4, 8} {
		dec := NewSpecDecoder(flat, nil)
		got, seq := specTurns(t, m, dec, w, [][]int32{prompt}, GenerateOptions{})
		if !slices.Equal(tokenIDs(got[0]), tokenIDs(want[0])) || len(seq) > 24+1 {
			t.Fatalf("width %d: got %v want %v (sequence %d)", w, tokenIDs(got[0]), tokenIDs(want[0]), len(seq))
		}
		t.Logf("width %d: %d tokens, stopped %q, %+v", w, len(got[0]), dec.LastStats().Stopped, dec.LastStats())
	}
}

// TestSpecDecoderMeasuresAtFirstUse: without a cost model the decoder
// measures the Session's backend at the first speculative Decode, for the
// widths up to the one requested, and again only when a wider one is.
func TestSpecDecoderMeasuresAtFirstUse(t *testing.T) {
	b := openStories(t)
	dec := NewSpecDecoder(nil, nil)
	want, _ := specTurns(t, b, PlainDecoder{}, 1, [][]int32{storiesPrompt}, GenerateOptions{MaxTokens: 20})
	got, _ := specTurns(t, b, dec, 1, [][]int32{storiesPrompt}, GenerateOptions{MaxTokens: 20})
	if c := dec.Costs(); c != nil && c.Seconds(8) > 0 {
		t.Fatal("width 1 measured costs")
	}
	if !slices.Equal(tokenIDs(got[0]), tokenIDs(want[0])) {
		t.Fatalf("width 1: ids %v, want %v", tokenIDs(got[0]), tokenIDs(want[0]))
	}
	got, _ = specTurns(t, b, dec, 4, [][]int32{storiesPrompt}, GenerateOptions{MaxTokens: 20})
	c := dec.Costs()
	if c == nil || c.Seconds(1) <= 0 || c.Seconds(4) <= 0 || c.Seconds(5) != 0 {
		t.Fatalf("costs not measured for widths 1..4 only: %v", c)
	}
	if !slices.Equal(tokenIDs(got[0]), tokenIDs(want[0])) {
		t.Fatal("ids differ")
	}
	specTurns(t, b, dec, 4, [][]int32{storiesPrompt}, GenerateOptions{MaxTokens: 20})
	specTurns(t, b, dec, 2, [][]int32{storiesPrompt}, GenerateOptions{MaxTokens: 20})
	if dec.Costs() != c {
		t.Fatal("costs measured twice for widths already measured")
	}
	// Auto (up to 8) is wider: measured again, every width.
	got, _ = specTurns(t, b, dec, 0, [][]int32{storiesPrompt}, GenerateOptions{MaxTokens: 20})
	c = dec.Costs()
	if c.Seconds(8) <= 0 || !slices.Equal(tokenIDs(got[0]), tokenIDs(want[0])) {
		t.Fatalf("auto width: costs %v, ids %v", c, tokenIDs(got[0]))
	}
	specTurns(t, b, dec, 8, [][]int32{storiesPrompt}, GenerateOptions{MaxTokens: 20})
	if dec.Costs() != c {
		t.Fatal("width 8 after auto measured again")
	}
}
