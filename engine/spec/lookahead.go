package spec

import (
	"anechat/engine/model"
	"anechat/engine/sample"
)

// Lookahead (Jacobi) guesses use the free width of a call. A call of width
// 1+k computes a row for every token it carries, and each row's pick is
// the model's own guess at the token after that row — from a guessed
// context past the first rejected draft, but the model's guess all the
// same: one Jacobi iteration. The verify loop keeps every row's pick of
// every call of the request and, where the sources (prompt lookup, suffix
// matching) leave slots of the next call empty, fills them with a chain of
// guesses for the positions after the chosen drafts: each next token is
// what the model picked after the same two tokens before (the 3-grams of
// those trajectories), else after the same token (2-grams), else the
// previous call's row for that position, else the last token repeated (a
// seed whose row starts the iteration). They are verified like any draft,
// so the output does not change; they only fill slots.
//
// Whether to fill is the cost model's call (Decoder.Lookahead turns it on):
// when the widest call costs about what the call without the guesses does
// (within freeWidth, as on the Neural Engine, where a width-8 call costs
// what a width-1 call does), every empty slot is filled, since a slot
// costs nothing; otherwise only as many guesses as the expected tokens per
// unit of cost pay for, given the guesses' rolling acceptance rate, which
// on a CPU (each slot costing a share of a call) is usually none.
//
// (Measured on the Gemma 4 fixture and stories260K with free width, the
// trajectory n-grams first gave more than the previous call's rows first:
// τ 1.30 against 1.18 and 1.42 against 1.35, lookahead_test.go's prompts.)

// LookaheadName is the name lookahead drafts are counted under in
// Stats.Sources.
const LookaheadName = "lookahead"

// freeWidth is how much more than the call without guesses the widest
// call may cost and still count as free.
const freeWidth = 0.05

// lookPrior is the guesses' acceptance rate assumed before any is scored:
// low, so that where slots cost something the guesses have to prove
// themselves first (they are scored every step, sent or not).
const lookPrior = 0.1

// lookahead holds what the request's calls produced: the previous call's
// picks for the positions after the sequence's last token (guess[i] for
// the (i+1)-th token after it) and the n-grams of every row's pick.
type lookahead struct {
	guess []int32
	last  int32
	prev  int32 // the token before last (-1: none)
	next2 map[[2]int32]int32
	// next and next2 map a token (a pair of tokens) to what the model
	// last picked after it in any row of any call of the request (a
	// guessed context included): the n-grams of the Jacobi trajectories.
	next map[int32]int32
}

func (l *lookahead) reset(history []int32) {
	l.guess, l.last, l.prev = l.guess[:0], history[len(history)-1], -1
	if len(history) > 1 {
		l.prev = history[len(history)-2]
	}
	if l.next == nil {
		l.next, l.next2 = map[int32]int32{}, map[[2]int32]int32{}
	}
	clear(l.next)
	clear(l.next2)
}

// observe records what each row of a call produced after its token.
func (l *lookahead) observe(tokens, produced []int32) {
	p := l.prev
	for i, t := range tokens[:len(produced)] {
		l.next[t] = produced[i]
		l.next2[[2]int32{p, t}] = produced[i]
		p = t
	}
}

// append follows the sequence by one token.
func (l *lookahead) append(t int32) { l.prev, l.last = l.last, t }

// set makes rows the guesses for the positions after the last token.
func (l *lookahead) set(rows []int32) { l.guess = append(l.guess[:0], rows...) }

// propose appends to dst a chain of limit guesses for the positions after
// the last token (see the top of the file for the order of preference).
func (l *lookahead) propose(dst []int32, limit int) []int32 {
	a, b := l.prev, l.last
	for i := 0; len(dst) < limit; i++ {
		n, ok := l.next2[[2]int32{a, b}]
		if !ok {
			n, ok = l.next[b]
		}
		if !ok {
			n = b
			if i < len(l.guess) {
				n = l.guess[i]
			}
		}
		a, b = b, n
		dst = append(dst, n)
	}
	return dst
}

// fill appends lookahead guesses to the call's tokens after the chosen
// drafts, up to limit drafts in all, as many as pay (every empty slot when
// the width is free; all of them, ungated).
func (r *generation) fill(limit int) {
	room := limit - r.nd
	if room <= 0 {
		return
	}
	r.lprop = r.look.propose(r.lprop[:0], limit)
	cand := r.lprop[r.nd:]
	// The expected tokens of the call without guesses, and the chance that
	// every chosen draft is kept (the guesses count only then).
	gain, reach := 1.0, 1.0
	if r.chosen >= 0 {
		q := r.gate.rate(r.chosen, r.props[r.chosen].Match)
		for range r.nd {
			reach *= q
			gain += reach
		}
	}
	base := 1 + r.nd
	k := 0
	c := r.d.Costs
	if r.req.Ungated || c.Ratio(base+room) <= c.Ratio(base)*(1+freeWidth) {
		k = largestAllowed(room, func(w int) bool { return r.allowed(base - 1 + w) })
	} else {
		best := gain / c.Ratio(base)
		for j := 1; j <= room; j++ {
			reach *= r.lookQ
			gain += reach
			if r.allowed(base+j) && gain/c.Ratio(base+j) > best {
				k, best = j, gain/c.Ratio(base+j)
			}
		}
	}
	if k > 0 {
		r.tokens = append(r.tokens, cand[:k]...)
		r.nfill = k
	}
}

// scoreLookahead updates the guesses' rolling acceptance rate from this
// step's proposal of them and what the model produced (each guess a trial
// until the first mismatch, as the gate scores a source).
func (r *generation) scoreLookahead() {
	for i, t := range r.lprop {
		if i >= len(r.produced) {
			return
		}
		if t != r.produced[i] {
			r.lookQ += rateStep * (0 - r.lookQ)
			return
		}
		r.lookQ += rateStep * (1 - r.lookQ)
	}
}

// rows sets r.full to the pick of every row of the call: the produced
// tokens, then, for the rows past them (computed from a rejected draft or
// guess), the greedy pick — never a sampler draw, which would change what
// width 1 samples.
func (r *generation) rows(res model.Result) {
	r.full = append(r.full[:0], r.produced...)
	for i := len(r.produced); i < len(r.tokens); i++ {
		var y int32
		if res.Argmax != nil {
			y = res.Argmax[i]
		} else {
			y = sample.Greedy(res.Logits[i])
		}
		r.full = append(r.full, y)
	}
}
