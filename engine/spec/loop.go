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
	// Width is the speculation width: 1 = off, 2..8 = at most Width-1
	// drafts per call, 0 = auto (up to MaxWidth, as far as the cost model
	// says it pays).
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
}

// Stats describes one generation.
type Stats struct {
	// Tokens is the number of tokens emitted.
	Tokens int
	// TargetCalls is the number of model calls (Forward) made.
	TargetCalls int
	// Drafted is the number of draft tokens sent to the model; Accepted,
	// how many of them it kept.
	Drafted, Accepted int
	// Wide is the number of calls that carried at least one draft.
	Wide int
	// Calls counts the model calls by width (Calls[w] for width w).
	Calls [MaxWidth + 1]int
	// Sources has Drafted/Accepted per source name.
	Sources map[string]SourceStats
	// Decode is the wall time of the loop, model calls included.
	Decode time.Duration
	// Stopped says why generation ended: "stop" (a stop token), "length"
	// (MaxTokens), "context" (Room used up).
	Stopped string
	// Pending is the sequence's last token (the last emitted one, or the
	// stop token), which is NOT in the KV: the next call must feed it
	// first. The KV holds History plus every emitted token but the last
	// (or every one when stopped by a stop token), and nothing else.
	Pending int32
	// Committed is the number of KV rows this generation committed.
	Committed int
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
	// Sources propose drafts; nil means prompt lookup only.
	Sources []Source
	// Costs is the backend's cost model (Measure); nil means an assumed
	// one that learns from the calls made.
	Costs *Costs

	// carry holds the acceptance rates a request ended with; the next
	// request on this Decoder (the next turn of a conversation) starts
	// halfway between them and the priors, so a conversation that copies
	// drafts sooner and one that does not wastes fewer.
	carry [][buckets]float64
}

// ErrRequest marks a request that cannot run (bad width, empty history).
var ErrRequest = errors.New("spec: bad request")

// Run generates tokens for req against t, calling emit for each one in
// order. emit returning an error stops generation with that error. Run checks
// ctx between model calls.
func (d *Decoder) Run(ctx context.Context, t Target, req Request, emit func(Token) error) (st Stats, err error) {
	st = Stats{Sources: map[string]SourceStats{}, Pending: -1}
	width := req.Width
	switch {
	case width == 0:
		width = MaxWidth
	case width < 1 || width > MaxWidth:
		return st, fmt.Errorf("%w: width %d, want 1..%d or 0 for auto", ErrRequest, req.Width, MaxWidth)
	}
	if len(req.History) == 0 {
		return st, fmt.Errorf("%w: empty history (a generation continues at least one token)", ErrRequest)
	}
	if d.Sources == nil {
		d.Sources = []Source{NewLookup()}
	}
	if d.Costs == nil {
		d.Costs = &Costs{}
	}
	greedy := req.Sampler == nil || req.Sampler.IsGreedy()
	pick := func(logits []float32) int32 {
		if greedy {
			return sample.Greedy(logits)
		}
		return req.Sampler.Sample(logits)
	}
	want := model.Logits
	if greedy {
		want = model.Argmax
	}
	allowed := func(w int) bool { return req.Widths == nil || slices.Contains(req.Widths, w) }
	isStop := func(id int32) bool { return slices.Contains(req.Stop, id) }

	start := time.Now()
	defer func() { st.Decode = time.Since(start) }()

	for _, s := range d.Sources {
		s.Reset(req.History)
	}
	g := newGate(len(d.Sources))
	if len(d.carry) == len(d.Sources) {
		for i := range g.q {
			for b := range g.q[i] {
				g.q[i][b] = (priorRate[b] + d.carry[i][b]) / 2
			}
		}
	}
	defer func() { d.carry = slices.Clone(g.q) }()
	room := req.Room
	remaining := req.MaxTokens
	if remaining <= 0 {
		remaining = int(^uint(0) >> 1)
	}

	// appendAll feeds a new sequence token to every source.
	appendAll := func(id int32) {
		for _, s := range d.Sources {
			s.Append(id)
		}
	}
	// emitTok emits a generated token (not a stop token) and counts it.
	emitTok := func(id int32, drafted bool) error {
		st.Tokens++
		remaining--
		return emit(Token{ID: id, Drafted: drafted})
	}

	pending := req.History[len(req.History)-1]
	if req.Logits != nil {
		// History is fully committed; its last logits give the first token.
		id := pick(req.Logits)
		if id < 0 {
			return st, fmt.Errorf("spec: the logits of the last history token: %w", model.ErrDamaged)
		}
		st.Pending = id
		if isStop(id) {
			st.Stopped = "stop"
			return st, nil
		}
		appendAll(id)
		if err := emitTok(id, false); err != nil {
			return st, err
		}
		pending = id
	}
	st.Pending = pending

	props := make([]Proposal, len(d.Sources))
	tokens := make([]int32, 0, MaxWidth)
	produced := make([]int32, 0, MaxWidth)
	for {
		switch {
		case remaining <= 0:
			st.Stopped = "length"
			return st, nil
		case room <= 0:
			st.Stopped = "context"
			return st, nil
		}
		if err := ctx.Err(); err != nil {
			return st, err
		}
		// A call of width 1+k emits up to k+1 tokens and needs k+1 free
		// positions: never draft past either limit.
		limit := min(width-1, remaining-1, room-1)
		chosen, nd := -1, 0
		if limit > 0 {
			bestV := 1.0
			for i, s := range d.Sources {
				props[i] = s.Propose(MaxWidth - 1)
				p := props[i]
				if len(p.Tokens) == 0 {
					continue
				}
				m := min(len(p.Tokens), limit)
				if req.Ungated {
					if k := largestAllowed(m, allowed); k > nd || (k == nd && k > 0 && p.Match > props[chosen].Match) {
						chosen, nd = i, k
					}
					continue
				}
				k, v := bestDrafts(d.Costs, g.rate(i, p.Match), m, allowed)
				if k > 0 && v > bestV {
					chosen, nd, bestV = i, k, v
				}
			}
		} else {
			clear(props)
		}
		tokens = append(tokens[:0], pending)
		if chosen >= 0 {
			tokens = append(tokens, props[chosen].Tokens[:nd]...)
		}

		t0 := time.Now()
		res, err := t.Forward(ctx, tokens, want)
		d.Costs.Observe(len(tokens), time.Since(t0))
		st.TargetCalls++
		st.Calls[len(tokens)]++
		if err != nil {
			return st, fmt.Errorf("spec: model call of width %d: %w", len(tokens), err)
		}
		rows := len(res.Argmax)
		if !greedy || res.Argmax == nil {
			rows = len(res.Logits)
		}
		if rows != len(tokens) {
			return st, fmt.Errorf("spec: model call of width %d returned %d rows", len(tokens), rows)
		}

		// Verify: row i predicts the token after tokens[i]. Keep drafts
		// while the model's pick equals them; the first pick that differs
		// (or the pick after the last draft) is the model's own token.
		produced = produced[:0]
		accepted := 0
		for i := range tokens {
			var y int32
			if greedy && res.Argmax != nil {
				y = res.Argmax[i]
			} else {
				y = pick(res.Logits[i])
			}
			if y < 0 {
				return st, fmt.Errorf("spec: model row %d of a call of width %d: %w", i, len(tokens), model.ErrDamaged)
			}
			produced = append(produced, y)
			if i+1 < len(tokens) && tokens[i+1] == y {
				accepted++
				continue
			}
			break
		}
		// count adds this call's drafts to the stats; kept is how many
		// accepted drafts were emitted (a run that goes through a stop
		// token keeps only the drafts before it).
		count := func(kept int) {
			if nd == 0 {
				return
			}
			st.Wide++
			st.Drafted += nd
			st.Accepted += kept
			name := d.Sources[chosen].Name()
			ss := st.Sources[name]
			ss.Drafted += nd
			ss.Accepted += kept
			st.Sources[name] = ss
		}
		for i, p := range props {
			g.score(i, p, produced)
		}

		// Emit produced tokens up to a stop or the length limit. Rows of
		// tokens[0..r-1] are committed, where the r-th produced token is
		// the new pending one: the KV then holds the sequence but its
		// last token.
		r, kept := 0, 0
		stopped := ""
		for i, y := range produced {
			r = i + 1
			pending = y
			if isStop(y) {
				stopped = "stop"
				break
			}
			appendAll(y)
			if i < accepted {
				kept++
			}
			if err = emitTok(y, i < accepted); err != nil {
				count(kept)
				if cerr := t.Commit(r); cerr != nil {
					return st, errors.Join(err, cerr)
				}
				st.Committed += r
				st.Pending = pending
				return st, err
			}
			if remaining <= 0 {
				break
			}
		}
		count(kept)
		if err := t.Commit(r); err != nil {
			return st, fmt.Errorf("spec: commit %d rows: %w", r, err)
		}
		st.Committed += r
		room -= r
		st.Pending = pending
		if stopped != "" {
			st.Stopped = stopped
			return st, nil
		}
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
