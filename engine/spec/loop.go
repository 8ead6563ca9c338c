package spec

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"anechat/engine/model"
	"anechat/engine/sample"
)

// Request is one generation: where the sequence stands and how to continue.
type Request struct {
	// History is the whole sequence so far (prompt and earlier turns), in
	// order. The drafters search it.
	History []int32
	// Logits, when set, are the logits of History's last token, which is
	// then already committed in the target's KV: the first new token is
	// picked from them without a model call. When nil, History's last token
	// is not in the KV yet and is fed as the first token of the first call.
	Logits []float32
	// Room is the number of positions still free in the target's context
	// (ContextLen minus the committed length). With no room left (0), no
	// model call is made.
	Room int

	// MaxTokens caps the generated tokens (<= 0: until a stop or Room).
	MaxTokens int
	// Width is the speculation width: 1 = off (one token per call, no
	// drafts), 2..8 = at most Width-1 drafts per call, 0 = auto (up to
	// MaxWidth, as far as the cost model says it pays).
	Width int
	// Widths lists the call widths the backend runs (model.Backend.Widths);
	// nil = any.
	Widths []int
	// Sampler picks tokens; nil or greedy means argmax decoding.
	Sampler *sample.Sampler
	// Stop lists ids that end generation. A stop token is not emitted.
	Stop []int32
	// Ungated sends every proposal, as long as allowed, whatever its
	// acceptance rate: for tests that force drafts to be rejected.
	Ungated bool
	// Constraint, when set, restricts every emitted token (constrained
	// decoding, constraint.go); the loop advances it. The calls then ask
	// for logits even when greedy.
	Constraint Constraint
	// Logprobs gives every emitted token its log-probability and the
	// TopLogprobs (0..sample.MaxTopLogprobs) most likely ids at its
	// position (Token.Logprob, Token.Top): the model asks for logits rows
	// instead of argmax, and each costs a log-softmax over the vocabulary.
	Logprobs    bool
	TopLogprobs int
}

// Stats describes one generation. Its JSON (the counts and why it stopped,
// not the per-width and per-source detail) is a reply's figures as the app
// stores and shows them (engine.Stats, app.GenerateStats): a figure added
// here with a tag reaches the window without another copy.
type Stats struct {
	// Tokens is the number of tokens emitted.
	Tokens int `json:"tokens"`
	// TargetCalls is the number of model calls (Forward) made.
	TargetCalls int `json:"targetCalls"`
	// Drafted is the number of draft tokens sent to the model; Accepted,
	// how many of them it kept.
	Drafted  int `json:"drafted"`
	Accepted int `json:"accepted"`
	// Wide is the number of calls that carried at least one draft.
	Wide int `json:"-"`
	// Declined is the number of calls the gate sent without the drafts it
	// had because wide calls cost more lately than measured at load (the
	// drafts would have paid at the measured costs); Probes, how many calls
	// sent such drafts all the same to measure the cost afresh (one after
	// every probeEvery declined calls).
	Declined int `json:"declined,omitempty"`
	Probes   int `json:"probes,omitempty"`
	// DraftNote says, for a reply of a width other than 1, why it drafted
	// less than it could ("drafting paused: wide calls measured 3.1x width
	// 1"), or "" when nothing held drafting back: so that "width 4, drafted
	// 0" is never a mystery. The window shows it on the stats line.
	DraftNote string `json:"draftNote,omitempty"`
	// Calls counts the model calls by width (Calls[w] for width w).
	Calls [MaxWidth + 1]int `json:"-"`
	// Sources has Drafted/Accepted per source name.
	Sources map[string]SourceStats `json:"-"`
	// Decode is the wall time of the loop, model calls included.
	Decode time.Duration `json:"-"`
	// Stopped says why generation ended: "stop" (a stop token), "length"
	// (MaxTokens), "context" (Room used up); the app adds "cancelled" and
	// "error".
	Stopped string `json:"stopped"`
	// Pending is the sequence's last token (the last emitted one, or the
	// stop token), which is NOT in the KV: the next call must feed it
	// first. The KV holds History plus every emitted token but the last
	// (or every one when stopped by a stop token), and nothing else.
	Pending int32 `json:"-"`
	// Committed is the number of KV rows this generation committed.
	Committed int `json:"-"`
}

// Tau is the number of tokens per model call (τ).
func (s Stats) Tau() float64 {
	if s.TargetCalls == 0 {
		return 0
	}
	return float64(s.Tokens) / float64(s.TargetCalls)
}

// TokensPerSecond is the decode throughput in wall time.
func (s Stats) TokensPerSecond() float64 {
	if s.Decode <= 0 {
		return 0
	}
	return float64(s.Tokens) / s.Decode.Seconds()
}

// SourceStats counts one source's drafts.
type SourceStats struct {
	Drafted, Accepted int
}

// Decoder runs the verify loop. It holds what outlives a request: the
// drafting sources (reset at the start of every request) and the backend's
// cost model. A Decoder serves one request at a time.
type Decoder struct {
	// Sources propose drafts; nil means DefaultSources(nil): prompt
	// lookup, and the forced text of a constrained request.
	Sources []Source
	// Costs is the backend's cost model (Measure); nil means an assumed
	// one that learns from the calls made.
	Costs *Costs
	// Lookahead fills the call slots the sources leave empty with Jacobi
	// guesses (Lookahead, lookahead.go) where the cost model says they pay:
	// every slot when a wide call costs about what a narrow one does (the
	// Neural Engine), none when each slot costs its share (a CPU, unless
	// the guesses prove good).
	Lookahead bool

	// carry holds the acceptance rates a request ended with; the next
	// request on this Decoder starts halfway between them and the priors
	// when it continues that request's sequence (the next turn of the same
	// conversation), so a conversation that copies drafts sooner and one
	// that does not wastes fewer. The rates describe one text: a request
	// that does not continue it (a new chat, another API client) starts
	// from the priors.
	carry [][buckets]float64
	// lookRate is the lookahead guesses' acceptance rate a request ended
	// with (0: none yet); carried like carry.
	lookRate float64
	// seqLen and seqHash identify the sequence the last drafting request
	// ended with (its history and emitted tokens), whose continuation
	// inherits carry and lookRate.
	seqLen  int
	seqHash uint64
	// declined counts the calls declined on cost since the last probe,
	// across requests: the cost model belongs to the model load, not to
	// a request, so short replies still reach a probe.
	declined int

	// now is the clock the loop times its calls with (nil: time.Now);
	// tests inject call costs through it.
	now func() time.Time
}

// clock returns the current time on the Decoder's clock.
func (d *Decoder) clock() time.Time {
	if d.now != nil {
		return d.now()
	}
	return time.Now()
}

// probeEvery is how many calls the gate declines on cost before it
// sends the drafts all the same (a probe), so the cost of a wide call is
// measured afresh: without it, a cost model that overrates wide calls is
// never corrected, since no wide call is made.
const probeEvery = 32

// declineMargin is how much the drafts must be expected to gain at the
// measured costs (tokens per unit of cost, over a width-1 call's 1) for
// holding them back to count as declined on cost: a draft that would only
// just pay at one estimate and only just not at the other is a close call,
// not a pause worth a probe or a note.
const declineMargin = 1.1

// ErrRequest marks a request that cannot run (bad width, empty history).
var ErrRequest = errors.New("spec: bad request")

// Run generates tokens for req against t, calling emit for each one in
// order. emit returning an error stops generation with that error. Run checks
// ctx between model calls.
//
// Each step proposes drafts (none at width 1), makes one model call of
// width 1+len(drafts), verifies the drafts against the model's picks, emits
// the kept tokens and commits their KV rows.
func (d *Decoder) Run(ctx context.Context, t Target, req Request, emit func(Token) error) (Stats, error) {
	r, err := d.start(req, emit)
	if err != nil {
		return r.st, err
	}
	err = r.loop(ctx, t)
	r.finish()
	return r.st, err
}

// loop runs the steps until a stop token, the length limit, the end of the
// room, an error or ctx ends it.
func (r *generation) loop(ctx context.Context, t Target) error {
	if done, err := r.first(); done || err != nil {
		return err
	}
	for {
		switch {
		case r.remaining <= 0:
			r.st.Stopped = "length"
			return nil
		case r.room <= 0:
			r.st.Stopped = "context"
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		r.propose()
		if r.con != nil {
			r.constrainDrafts()
		}
		res, err := r.call(ctx, t)
		if err != nil {
			return err
		}
		accepted, err := r.verify(res)
		if err != nil {
			return err
		}
		rows, stopped, emitErr := r.emit(accepted)
		if r.draft && r.d.Lookahead {
			// The rows past the kept ones predicted the positions after
			// the new pending token from guessed inputs: next call's
			// Jacobi guesses.
			r.look.set(r.full[rows:])
		}
		if err := t.Commit(rows); err != nil {
			return errors.Join(emitErr, fmt.Errorf("spec: commit %d rows: %w", rows, err))
		}
		r.st.Committed += rows
		r.room -= rows
		if emitErr != nil {
			return emitErr
		}
		if stopped {
			r.st.Stopped = "stop"
			return nil
		}
	}
}

// generation is the state of one Run.
type generation struct {
	d      *Decoder
	req    Request
	emitFn func(Token) error
	width  int  // the widest call: 1..MaxWidth
	draft  bool // width > 1: the sources and the gate take part
	greedy bool
	want   model.Output
	gate   *gate
	began  time.Time
	st     Stats
	// accepted counts the emitted tokens that came from accepted drafts
	// (Token.Accepted); st.Accepted is added per call, after its tokens.
	accepted int
	// room is the free positions left, remaining the tokens MaxTokens
	// still allows; pending is the sequence's last token, not in the KV.
	room, remaining int
	pending         int32

	// The current step: every source's proposal, the call's tokens (the
	// pending one, then nd drafts from source chosen, -1 for none) and the
	// tokens the model produced for them.
	props    []Proposal
	tokens   []int32
	chosen   int
	nd       int
	produced []int32

	// Why drafts were held back, for Stats.DraftNote: the cost ratio of
	// the last call declined on cost, whether any source proposed, and
	// whether any call drafted.
	declinedRatio float64
	proposed      bool
	probing       bool // this step's call is a probe
	// hash follows the sequence (history, then every emitted token): at
	// the end it identifies the sequence for the next request's carry.
	hash uint64
	n    int

	// Lookahead: the guesses for the positions after the pending token
	// (the previous call's outputs past the accepted ones), their rolling
	// acceptance rate, this step's proposal of them and how many of it
	// fill the call after the chosen drafts.
	look  lookahead
	full  []int32 // every row's greedy pick of the last call
	nfill int
	lprop []int32
	lookQ float64

	// Constrained decoding: the state after the emitted tokens, the state
	// before each row of the call, and a scratch row of masked logits.
	con     Constraint
	states  []Constraint
	maskRow []float32
	// logits are the rows of the last call (with Request.Logprobs: the
	// emitted tokens' logprobs come from them).
	logits [][]float32
}

// start checks req and sets up the request's state: sources reset to the
// history, the gate's rates from the priors (and the last request's, when
// req continues its sequence), and no width-1 time from an earlier request
// taken as fresh.
func (d *Decoder) start(req Request, emit func(Token) error) (*generation, error) {
	r := &generation{d: d, req: req, emitFn: emit, began: d.clock(), width: req.Width}
	r.st = Stats{Sources: map[string]SourceStats{}, Pending: -1}
	switch {
	case r.width == 0:
		r.width = MaxWidth
	case r.width < 1 || r.width > MaxWidth:
		return r, fmt.Errorf("%w: width %d, want 1..%d or 0 for auto", ErrRequest, req.Width, MaxWidth)
	}
	if req.TopLogprobs < 0 || req.TopLogprobs > sample.MaxTopLogprobs {
		return r, fmt.Errorf("%w: top logprobs %d, want 0..%d", ErrRequest, req.TopLogprobs, sample.MaxTopLogprobs)
	}
	if len(req.History) == 0 {
		return r, fmt.Errorf("%w: empty history (a generation continues at least one token)", ErrRequest)
	}
	if d.Sources == nil {
		d.Sources = DefaultSources(nil)
	}
	if d.Costs == nil {
		d.Costs = &Costs{}
	}
	d.Costs.newRequest()
	r.greedy = req.Sampler == nil || req.Sampler.IsGreedy()
	r.want = model.Logits
	if r.greedy && !req.Logprobs {
		r.want = model.Argmax
	}
	if r.con = req.Constraint; r.con != nil {
		r.want = model.Logits
	}
	r.room = req.Room
	r.remaining = req.MaxTokens
	if r.remaining <= 0 {
		r.remaining = int(^uint(0) >> 1)
	}
	r.pending = req.History[len(req.History)-1]
	r.tokens = make([]int32, 0, MaxWidth)
	r.produced = make([]int32, 0, MaxWidth)
	// Width 1 drafts nothing: the sources need not follow the sequence,
	// and the rates carried to the next request stay as they are.
	r.draft = r.width > 1
	if r.draft {
		for _, s := range d.Sources {
			s.Reset(req.History)
			if c, ok := s.(constrained); ok {
				c.Constrain(req.Constraint)
			}
		}
		r.props = make([]Proposal, len(d.Sources))
		r.gate = newGate(len(d.Sources))
		r.hash, r.n = seqHash(hashSeed, req.History), len(req.History)
		continues := d.seqLen > 0 && len(req.History) >= d.seqLen && seqHash(hashSeed, req.History[:d.seqLen]) == d.seqHash
		if continues && len(d.carry) == len(d.Sources) {
			for i := range r.gate.q {
				for b := range r.gate.q[i] {
					r.gate.q[i][b] = (priorRate[b] + d.carry[i][b]) / 2
				}
			}
		}
		r.lookQ = lookPrior
		if continues && d.lookRate > 0 {
			r.lookQ = (lookPrior + d.lookRate) / 2
		}
		r.look.reset(req.History)
	}
	return r, nil
}

// finish records the loop's wall time, why drafting was held back and the
// rates to carry to a continuation of the sequence.
func (r *generation) finish() {
	r.st.Decode = r.d.clock().Sub(r.began)
	if !r.draft {
		return
	}
	r.d.carry = slices.Clone(r.gate.q)
	if r.d.Lookahead {
		r.d.lookRate = r.lookQ
	}
	r.d.seqLen, r.d.seqHash = r.n, r.hash
	switch {
	case r.st.Declined > 0:
		r.st.DraftNote = fmt.Sprintf("drafting paused: wide calls measured %.1fx width 1", r.declinedRatio)
	case r.st.Drafted > 0 || r.req.Ungated || r.st.TargetCalls == 0:
	case r.proposed:
		r.st.DraftNote = "no drafts: none was likely enough to be accepted to pay for a wider call"
	default:
		r.st.DraftNote = "no drafts: nothing in the text to copy from"
	}
}

// hashSeed starts seqHash (FNV-1a's offset basis).
const hashSeed uint64 = 14695981039346656037

// seqHash folds ids into h (FNV-1a over each id's 4 bytes).
func seqHash(h uint64, ids []int32) uint64 {
	for _, id := range ids {
		for s := 0; s < 32; s += 8 {
			h = (h ^ uint64(uint8(id>>s))) * 1099511628211
		}
	}
	return h
}

// pick chooses a token from one row of logits.
func (r *generation) pick(logits []float32) int32 {
	if r.greedy {
		return sample.Greedy(logits)
	}
	return r.req.Sampler.Sample(logits)
}

// first handles a request whose history is committed with its logits: the
// first token comes from them without a model call. done is true when that
// token ends the generation (a stop id, or an emit error).
func (r *generation) first() (done bool, err error) {
	r.st.Pending = r.pending
	if r.req.Logits == nil {
		return false, nil
	}
	var id int32
	if r.con != nil {
		if id, err = r.pickUnder(r.req.Logits, r.con); err != nil {
			return true, err
		}
	} else {
		id = r.pick(r.req.Logits)
	}
	if id < 0 {
		return true, fmt.Errorf("spec: the logits of the last history token: %w", model.ErrDamaged)
	}
	r.pending, r.st.Pending = id, id
	if slices.Contains(r.req.Stop, id) {
		r.st.Stopped = "stop"
		return true, nil
	}
	if err := r.out(id, false, r.req.Logits); err != nil {
		return true, err
	}
	return false, nil
}

// out emits a generated token (not a stop token), counts it and feeds it to
// the sources; row is the logits row it was picked from, for its logprobs.
func (r *generation) out(id int32, drafted bool, row []float32) error {
	if r.con != nil {
		if err := r.con.Advance(id); err != nil {
			return fmt.Errorf("spec: emitted token %d: %w", id, err)
		}
	}
	if r.draft {
		for _, s := range r.d.Sources {
			s.Append(id)
		}
		r.look.append(id)
		r.hash, r.n = seqHash(r.hash, []int32{id}), r.n+1
	}
	r.st.Tokens++
	r.remaining--
	if drafted {
		r.accepted++
	}
	tk := Token{ID: id, Drafted: drafted, Tokens: r.st.Tokens, Accepted: r.accepted, Calls: r.st.TargetCalls}
	if r.req.Logprobs {
		// The row's own numbers, whatever the width of the call: a wide
		// call's row equals a width-1 call's (DESIGN.md invariant 1). They
		// are the model's as it returned them: whatever restricts the
		// choice (a sampler's filters, a mask) must not change row in place.
		tk.Logprob, tk.Top = sample.Logprobs(row, id, r.req.TopLogprobs, nil)
	}
	return r.emitFn(tk)
}

// allowed reports whether the backend runs calls of width w.
func (r *generation) allowed(w int) bool {
	return r.req.Widths == nil || slices.Contains(r.req.Widths, w)
}

// propose sets the call's tokens: the pending token, then the drafts of the
// source whose proposal is expected to pay most (or, ungated, the longest
// allowed one), within the width and the room left.
func (r *generation) propose() {
	r.tokens = append(r.tokens[:0], r.pending)
	r.chosen, r.nd, r.nfill, r.lprop, r.probing = -1, 0, 0, r.lprop[:0], false
	if !r.draft {
		return
	}
	// A call of width 1+k emits up to k+1 tokens and needs k+1 free
	// positions: never draft past either limit.
	limit := min(r.width-1, r.remaining-1, r.room-1)
	if limit <= 0 {
		clear(r.props)
		return
	}
	bestV, measuredV := 1.0, declineMargin
	probe, probeK := -1, 0 // what the measured costs would send
	for i, s := range r.d.Sources {
		r.props[i] = s.Propose(MaxWidth - 1)
		p := r.props[i]
		if len(p.Tokens) == 0 {
			continue
		}
		r.proposed = true
		m := min(len(p.Tokens), limit)
		if r.req.Ungated {
			if k := largestAllowed(m, r.allowed); k > r.nd || (k == r.nd && k > 0 && p.Match > r.props[r.chosen].Match) {
				r.chosen, r.nd = i, k
			}
			continue
		}
		q := r.gate.rate(i, p.Match)
		k, v := bestDrafts(r.d.Costs, q, m, r.allowed)
		if k > 0 && v > bestV {
			r.chosen, r.nd, bestV = i, k, v
		}
		if k, v := bestDrafts(measuredRatios{r.d.Costs}, q, m, r.allowed); k > 0 && v > measuredV {
			probe, probeK, measuredV = i, k, v
		}
	}
	if r.chosen < 0 && probe >= 0 {
		// Declined on cost alone: the drafts would pay at the measured
		// costs, not at what wide calls cost lately. Every probeEvery such
		// calls, send them all the same to measure a wide call afresh.
		r.d.declined++
		if r.d.declined <= probeEvery {
			r.st.Declined++
			r.declinedRatio = r.d.Costs.Ratio(1 + probeK)
		} else {
			r.d.declined = 0
			r.st.Probes++
			r.chosen, r.nd, r.probing = probe, probeK, true
		}
	}
	if r.chosen >= 0 {
		r.tokens = append(r.tokens, r.props[r.chosen].Tokens[:r.nd]...)
	}
	if r.d.Lookahead {
		r.fill(limit)
	}
}

// call runs the step's tokens through the model, timing the call for the
// cost model, and checks it returned a row per token.
func (r *generation) call(ctx context.Context, t Target) (model.Result, error) {
	if r.probing {
		r.d.Costs.forget(len(r.tokens))
	}
	t0 := r.d.clock()
	res, err := t.Forward(ctx, r.tokens, r.want)
	r.d.Costs.Observe(len(r.tokens), r.d.clock().Sub(t0))
	r.st.TargetCalls++
	r.st.Calls[len(r.tokens)]++
	if err != nil {
		return res, fmt.Errorf("spec: model call of width %d: %w", len(r.tokens), err)
	}
	rows := len(res.Argmax)
	if !r.greedy || res.Argmax == nil || r.con != nil {
		rows = len(res.Logits)
	}
	if rows != len(r.tokens) {
		return res, fmt.Errorf("spec: model call of width %d returned %d rows", len(r.tokens), rows)
	}
	r.logits = res.Logits
	return res, nil
}

// verify fills produced with the model's picks: row i predicts the token
// after tokens[i]. Drafts are kept while the model's pick equals them; the
// first pick that differs (or the pick after the last draft) is the model's
// own token. It returns how many drafts were accepted, and scores every
// source's proposal against what the model produced.
func (r *generation) verify(res model.Result) (accepted int, err error) {
	r.produced = r.produced[:0]
	for i := range r.tokens {
		var y int32
		if r.con != nil {
			if y, err = r.pickUnder(res.Logits[i], r.states[i]); err != nil {
				return 0, err
			}
		} else if r.greedy && res.Argmax != nil {
			y = res.Argmax[i]
		} else {
			y = r.pick(res.Logits[i])
		}
		if y < 0 {
			return 0, fmt.Errorf("spec: model row %d of a call of width %d: %w", i, len(r.tokens), model.ErrDamaged)
		}
		r.produced = append(r.produced, y)
		if i+1 < len(r.tokens) && r.tokens[i+1] == y {
			accepted++
			continue
		}
		break
	}
	if r.draft {
		for i, p := range r.props {
			r.gate.score(i, p, r.produced)
		}
		if r.d.Lookahead {
			r.scoreLookahead()
			r.rows(res)
			r.look.observe(r.tokens, r.full)
		}
	}
	return accepted, nil
}

// emit emits the produced tokens up to a stop token or the length limit and
// counts the call's drafts. It returns the KV rows to commit: the rows of
// tokens[0..rows-1], where the rows-th produced token is the new pending one,
// so the KV then holds the sequence but its last token. stopped is true at a
// stop token; err is emit's error (the rows are committed all the same).
func (r *generation) emit(accepted int) (rows int, stopped bool, err error) {
	kept := 0 // accepted drafts emitted: a run through a stop token keeps only those before it
	for i, y := range r.produced {
		rows = i + 1
		r.pending, r.st.Pending = y, y
		if slices.Contains(r.req.Stop, y) {
			stopped = true
			break
		}
		if i < accepted {
			kept++
		}
		var row []float32
		if r.req.Logprobs {
			row = r.logits[i]
		}
		if err = r.out(y, i < accepted, row); err != nil || r.remaining <= 0 {
			break
		}
	}
	r.count(kept)
	return rows, stopped, err
}

// count adds the call's drafts to the stats, kept of them emitted.
func (r *generation) count(kept int) {
	if r.nd == 0 && r.nfill == 0 {
		return
	}
	r.st.Wide++
	r.st.Drafted += r.nd + r.nfill
	r.st.Accepted += kept
	add := func(name string, drafted, accepted int) {
		ss := r.st.Sources[name]
		ss.Drafted += drafted
		ss.Accepted += accepted
		r.st.Sources[name] = ss
	}
	if r.nd > 0 {
		add(r.d.Sources[r.chosen].Name(), r.nd, min(kept, r.nd))
	}
	if r.nfill > 0 {
		add(LookaheadName, r.nfill, max(0, kept-r.nd))
	}
}

// largestAllowed is the largest k <= m such that a call of width 1+k is
// allowed (0 if none).
func largestAllowed(m int, allowed func(int) bool) int {
	for k := m; k > 0; k-- {
		if allowed(1 + k) {
			return k
		}
	}
	return 0
}
