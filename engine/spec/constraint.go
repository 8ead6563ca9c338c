package spec

import (
	"fmt"
	"math"
	"slices"

	"anechat/engine/constrain"
)

// A Constraint restricts the tokens a generation may emit (constrained
// decoding): Request.Constraint, advanced by the loop past every emitted
// token. With one set, every token is picked under its mask at every
// width: drafts are checked against it before the call (cut at the first
// token it refuses) and each row's pick is taken under the mask of the
// state after the drafts before that row, so the accepted text is the text
// constrained decoding at width 1 gives, greedy and sampled (one draw per
// emitted token, as ever).
type Constraint interface {
	// Mask is the set of ids allowed next, one bit per id (read only);
	// stop ids are the loop's concern (see Complete).
	Mask() []uint64
	// Complete reports whether the text so far may end: only then are
	// the request's stop ids allowed, and they are never allowed before.
	Complete() bool
	// Advance moves past id; an error means id is not allowed.
	Advance(id int32) error
	// Clone returns an independent copy, for checking drafts ahead.
	Clone() Constraint
}

// Grammar is the Constraint of a constrain.State (a JSON schema, a tool
// call format), starting where s stands.
func Grammar(s *constrain.State) Constraint { return grammarState{s} }

type grammarState struct{ s *constrain.State }

func (g grammarState) Mask() []uint64         { return g.s.Mask() }
func (g grammarState) Complete() bool         { return g.s.Complete() }
func (g grammarState) Advance(id int32) error { return g.s.Advance(id) }
func (g grammarState) Clone() Constraint      { return grammarState{g.s.Clone()} }

// constrainDrafts cuts the call's drafts at the first one the constraint
// refuses (or a stop id: a draft never runs past the text's end) and to a
// width the backend runs, and keeps the state before each row for verify.
func (r *generation) constrainDrafts() {
	r.states = append(r.states[:0], r.con)
	k := len(r.tokens) - 1
	for i := 1; i < len(r.tokens); i++ {
		c := r.states[i-1].Clone()
		if slices.Contains(r.req.Stop, r.tokens[i]) || c.Advance(r.tokens[i]) != nil {
			k = i - 1
			break
		}
		r.states = append(r.states, c)
	}
	if k < len(r.tokens)-1 {
		k = largestAllowed(k, r.allowed)
		r.tokens = r.tokens[:1+k]
		r.states = r.states[:1+k]
		r.nd = min(r.nd, k)
		r.nfill = k - r.nd
	}
}

// pickUnder chooses a token from logits under c's mask: the others (and
// the stop ids until c is complete) become NaN in a copy, which neither
// Greedy nor the sampler ever picks.
func (r *generation) pickUnder(logits []float32, c Constraint) (int32, error) {
	mask := c.Mask()
	n := len(logits)
	r.maskRow = slices.Grow(r.maskRow[:0], n)[:n]
	nan := float32(math.NaN())
	for w := 0; w*64 < n; w++ {
		lo, hi := w*64, min(n, w*64+64)
		var bits uint64
		if w < len(mask) {
			bits = mask[w]
		}
		switch bits {
		case 0:
			for i := lo; i < hi; i++ {
				r.maskRow[i] = nan
			}
		case ^uint64(0):
			copy(r.maskRow[lo:hi], logits[lo:hi])
		default:
			for i := lo; i < hi; i++ {
				r.maskRow[i] = nan
				if bits&(1<<(i-lo)) != 0 {
					r.maskRow[i] = logits[i]
				}
			}
		}
	}
	complete := c.Complete()
	for _, s := range r.req.Stop {
		if s >= 0 && int(s) < n {
			r.maskRow[s] = nan
			if complete {
				r.maskRow[s] = logits[s]
			}
		}
	}
	id := r.pick(r.maskRow)
	if id < 0 {
		return -1, fmt.Errorf("spec: no token the constraint allows has a number logit (complete: %v)", complete)
	}
	return id, nil
}
