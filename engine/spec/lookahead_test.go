package spec_test

import (
	"slices"
	"testing"

	"anechat/engine/sample"
	"anechat/engine/spec"
)

// freeCosts makes every width cost what width 1 does: the Neural Engine's
// case, injected so the CPU backend can stand in for it.
func freeCosts() *spec.Costs {
	sec := map[int]float64{}
	for w := 1; w <= spec.MaxWidth; w++ {
		sec[w] = 1
	}
	return spec.FixedCosts(sec)
}

// linearCosts makes each slot cost a whole call: no slot is ever free.
func linearCosts() *spec.Costs {
	sec := map[int]float64{}
	for w := 1; w <= spec.MaxWidth; w++ {
		sec[w] = float64(w)
	}
	return spec.FixedCosts(sec)
}

// TestLookaheadLossless: with lookahead guesses filling the free width, on
// stories260K and the Gemma 4 fixture (CPU backend, the cost table injected
// so wide calls are free), greedy and sampled output at every width equals
// decoding without speculation (refdecode); every call at width w > 1 is
// full (the guesses fill every slot the sources leave empty), τ with
// lookahead is at least τ without, and guesses are accepted. With linear
// costs no guess is sent.
func TestLookaheadLossless(t *testing.T) {
	for _, tc := range []struct {
		name string
		open func(*testing.T) testModel
	}{{"stories", openStories}, {"gemma4", openGemma4}} {
		t.Run(tc.name, func(t *testing.T) {
			tm := tc.open(t)
			m := tm.b
			prompts := storiesPrompts(t, m, 8)
			var tokens, callsOn, callsOff, lookAccepted, lookDrafted int
			for i, h := range prompts {
				base := reference(t, m, h, 40, nil)
				for _, w := range []int{2, 4, 8, 0} {
					on, st := generate(t, m, &spec.Decoder{Lookahead: true, Costs: freeCosts()}, h, spec.Request{MaxTokens: 40, Width: w})
					if !slices.Equal(on, base) {
						t.Fatalf("prompt %d width %d: ids differ from width 1\n got %v\nwant %v", i, w, on, base)
					}
					width := w
					if w == 0 {
						width = spec.MaxWidth
					}
					// Every call but the last few (MaxTokens allows fewer
					// drafts as it nears) carries width-1 drafts.
					full := st.Calls[width]
					if full < st.TargetCalls-(width-1) {
						t.Fatalf("prompt %d width %d: only %d of %d calls full: %v", i, w, full, st.TargetCalls, st.Calls)
					}
					off, st0 := generate(t, m, &spec.Decoder{Costs: freeCosts()}, h, spec.Request{MaxTokens: 40, Width: w})
					if !slices.Equal(off, base) {
						t.Fatalf("prompt %d width %d without lookahead: ids differ", i, w)
					}
					if w == 8 {
						tokens += st.Tokens
						callsOn += st.TargetCalls
						callsOff += st0.TargetCalls
						lookAccepted += st.Sources[spec.LookaheadName].Accepted
						lookDrafted += st.Sources[spec.LookaheadName].Drafted
					}
				}
				smp := func() *sample.Sampler { return sample.New(0.8, uint64(i), 0, 1) }
				want := reference(t, m, h, 30, smp())
				got, _ := generate(t, m, &spec.Decoder{Lookahead: true, Costs: freeCosts()}, h, spec.Request{MaxTokens: 30, Width: 8, Sampler: smp()})
				if !slices.Equal(got, want) {
					t.Fatalf("prompt %d sampled: ids differ from width 1", i)
				}
				_, st := generate(t, m, &spec.Decoder{Lookahead: true, Costs: linearCosts()}, h, spec.Request{MaxTokens: 30, Width: 8})
				if d := st.Sources[spec.LookaheadName].Drafted; d != 0 {
					t.Fatalf("prompt %d: linear costs, %d lookahead guesses sent", i, d)
				}
			}
			tauOn, tauOff := float64(tokens)/float64(callsOn), float64(tokens)/float64(callsOff)
			t.Logf("width 8, free width: τ %.3f with lookahead, %.3f without; guesses accepted %d of %d", tauOn, tauOff, lookAccepted, lookDrafted)
			if callsOn > callsOff || lookAccepted == 0 {
				t.Fatalf("lookahead made %d calls, %d without; accepted %d guesses", callsOn, callsOff, lookAccepted)
			}
		})
	}
}
