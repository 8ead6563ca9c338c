package spec

import (
	"slices"
	"testing"
)

// TestDraftAcrossStop: a draft run that goes through a stop token (the
// oracle proposes the width-1 continuation and what follows it) stops exactly
// where width 1 stops, emits nothing after the stop, and counts as accepted
// only the drafts it emitted: Stats.Accepted equals the tokens flagged
// Drafted, per source too, so τ and the acceptance rate stay true.
func TestDraftAcrossStop(t *testing.T) {
	const vocab = 40
	for pi, h := range prompts(8, vocab) {
		m := newFakeModel(vocab)
		base := reference(t, m, h, Request{MaxTokens: 40})
		truth := append(slices.Clone(h), ids(base)...)
		// Every position of the reference in turn is the stop token, so the
		// stop falls at every offset inside a draft run.
		for at := 1; at < 12; at++ {
			stop := base[at].ID
			first := slices.Index(ids(base), stop)
			for _, w := range []int{2, 4, 8} {
				dec := &Decoder{Sources: []Source{&oracleSource{truth: truth}}}
				got, st := run(t, m, dec, h, Request{MaxTokens: 40, Width: w, Stop: []int32{stop}, Ungated: true})
				if !slices.Equal(ids(got), ids(base[:first])) || st.Stopped != "stop" || st.Pending != stop {
					t.Fatalf("prompt %d stop at %d width %d: got %v (%+v), want %v", pi, first, w, ids(got), st, ids(base[:first]))
				}
				nd := 0
				for _, tk := range got {
					if tk.Drafted {
						nd++
					}
				}
				if st.Accepted != nd || st.Sources["oracle"].Accepted != nd {
					t.Fatalf("prompt %d stop at %d width %d: %d emitted tokens were drafts, stats count %d accepted (%+v)", pi, first, w, nd, st.Accepted, st)
				}
				// Every call but the last yields its accepted drafts plus
				// the model's own token; the last ends at the stop.
				if st.Tokens != st.TargetCalls-1+st.Accepted {
					t.Fatalf("prompt %d stop at %d width %d: %d tokens, %d calls, %d accepted", pi, first, w, st.Tokens, st.TargetCalls, st.Accepted)
				}
			}
		}
	}
}
