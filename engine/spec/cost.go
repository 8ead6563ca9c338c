package spec

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"anechat/engine/kv"
	"anechat/engine/model"
)

// Costs is the cost model of a backend: the wall time of a width-1 call and,
// for each width 2..MaxWidth, the cost of a call of that width relative to a
// width-1 call. It starts from a measurement at load (Measure) and follows the
// calls actually made. Keeping ratios rather than absolute times matters: a
// width-1 call gets slower as the context grows, and a ratio measured against
// the current width-1 time stays right where a stale absolute time for a wide
// call would make it look cheap. It is safe for concurrent use.
//
// What it follows must not outlive the moment it described (issue 23: one
// burst of load on a shared machine made wide calls look 3-4x a width-1 call
// for the rest of a model load, and the gate never drafted again, so no wide
// call ever corrected it). Hence three rules:
//   - a wide call is compared with a fresh width-1 call, made within
//     freshCalls calls of it in the same request (before or after it),
//     never with an average from before a burst (a burst slows both
//     alike, so their ratio stays true); with none, it is not counted;
//   - the observed ratios are forgotten as calls go by (costForget per call):
//     a width no longer called drifts back to its measured ratio, so the gate
//     drafts again once a spike is old;
//   - each observed ratio is capped at twice its width: a call of w tokens
//     costs at most about w width-1 calls on any backend, so a sample past
//     twice that is a spike of load, and one spike must not outweigh the
//     measurement.
//
// The verify loop adds the fourth: after probeEvery calls declined on cost
// it sends the drafts the measured costs would have sent (a probe), and what
// that call costs replaces what the calls of its width showed before.
type Costs struct {
	mu sync.Mutex
	// one is the recent width-1 time (a moving average), lastOne the latest
	// width-1 call's time, and lastAt the call count when it was made.
	one, lastOne float64
	lastAt       int
	// measured[w] = cost(w)/cost(1) as measured or given; 0 = unknown.
	measured [MaxWidth + 1]float64
	// sum[w] and weight[w] are the observed ratios of width-w calls and
	// their count, both decayed by costForget per call observed.
	sum, weight [MaxWidth + 1]float64
	calls       int
	// pending holds wide calls made while no fresh width-1 time was known:
	// the next width-1 call, if it comes within freshCalls, is their
	// reference.
	pending []observed
	frozen  bool // ignore Observe
}

// observed is a wide call waiting for a fresh width-1 time.
type observed struct {
	w   int
	sec float64
	at  int
}

const (
	// oneStep is the weight of one width-1 call in the recent width-1 time.
	oneStep = 0.25
	// freshCalls is how many calls apart a wide call and the width-1 call
	// it is compared with may be.
	freshCalls = 8
	// costForget is the share of the observed ratios forgotten per call:
	// an observation weighs half after about 44 calls, so the quiet calls
	// before a burst stop outweighing it within a few dozen calls, and a
	// burst's are forgotten as fast once it is over. (The probes retry
	// sooner where the burst's calls weighed a lot; forgetting also brings
	// back a width the gate stopped using for another reason.)
	costForget = 1.0 / 64
	// measuredWeight is what the measured ratio weighs against the
	// observed ones (as many fresh observations): the observations win
	// while a width is called, the measurement once they are forgotten.
	measuredWeight = 4.0
)

// defaultSlope is the assumed extra cost of each extra token in a call, as a
// fraction of a width-1 call, for widths never measured. Measure at load
// replaces it with the truth.
const defaultSlope = 0.25

// NewCosts returns a cost model from known per-width seconds (sec[w] for
// width w; zero or missing entries are unknown; without sec[1] nothing is
// known).
func NewCosts(sec map[int]float64) *Costs {
	c := &Costs{lastAt: -freshCalls - 1}
	one := sec[1]
	if one <= 0 {
		return c
	}
	c.one = one
	for w, s := range sec {
		if w >= 2 && w <= MaxWidth && s > 0 {
			c.measured[w] = s / one
		}
	}
	return c
}

// FixedCosts returns a cost model that never changes: Observe is ignored.
// Tests use it to make gating decisions independent of timing.
func FixedCosts(sec map[int]float64) *Costs {
	c := NewCosts(sec)
	c.frozen = true
	return c
}

// Clone returns an independent copy (a benchmark gives each run the same
// starting point).
func (c *Costs) Clone() *Costs {
	c.mu.Lock()
	defer c.mu.Unlock()
	return &Costs{one: c.one, lastOne: c.lastOne, lastAt: c.lastAt, measured: c.measured, sum: c.sum, weight: c.weight,
		calls: c.calls, pending: slices.Clone(c.pending), frozen: c.frozen}
}

// Table returns the measured costs as per-width seconds, the form NewCosts
// takes: sec[1] is the width-1 time and sec[w] the estimate for each width
// 2..MaxWidth with a measured ratio (interpolated widths are left out, so
// NewCosts(c.Table()) interpolates them alike; what the calls showed since
// is left out too, since it is forgotten). It is empty while the width-1
// time is unknown. Callers persist it (the engine keeps measured tables per
// model between runs) and restore it with NewCosts.
func (c *Costs) Table() map[int]float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	sec := map[int]float64{}
	if c.one <= 0 {
		return sec
	}
	sec[1] = c.one
	for w := 2; w <= MaxWidth; w++ {
		if c.measured[w] > 0 {
			sec[w] = c.one * c.measured[w]
		}
	}
	return sec
}

// Frozen returns a copy that ignores Observe: gating decisions then depend
// only on the measurement, not on the timing of the calls (reproducible
// benchmarks).
func (c *Costs) Frozen() *Costs {
	f := c.Clone()
	f.frozen = true
	return f
}

// Observe records a call of width w that took d.
func (c *Costs) Observe(w int, d time.Duration) {
	if w < 1 || w > MaxWidth || d <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.frozen {
		return
	}
	c.calls++
	for v := 2; v <= MaxWidth; v++ {
		c.sum[v] *= 1 - costForget
		c.weight[v] *= 1 - costForget
	}
	s := d.Seconds()
	if w == 1 {
		if c.one == 0 {
			c.one = s
		} else {
			c.one += oneStep * (s - c.one)
		}
		c.lastOne, c.lastAt = s, c.calls
		for _, p := range c.pending {
			if c.calls-p.at <= freshCalls {
				c.add(p.w, p.sec/s, c.calls-p.at)
			}
		}
		c.pending = c.pending[:0]
		return
	}
	if c.lastOne > 0 && c.calls-c.lastAt <= freshCalls {
		c.add(w, s/c.lastOne, 0)
		return
	}
	// No fresh width-1 time: wait for the next one (only the latest
	// freshCalls calls can still get one).
	c.pending = slices.DeleteFunc(c.pending, func(p observed) bool { return c.calls-p.at >= freshCalls })
	c.pending = append(c.pending, observed{w: w, sec: s, at: c.calls})
}

// newRequest marks the start of a request: a width-1 time from before it
// is not fresh (the machine's load may have changed while the app waited
// for the user), so the request's first wide calls wait for a width-1 call
// of their own.
func (c *Costs) newRequest() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lastAt = c.calls - freshCalls - 1
	c.pending = c.pending[:0]
}

// forget drops what the calls of width w showed so far: the verify loop's
// probe is about to measure it afresh, and a probe is to say what a wide call
// costs now, not be averaged with the burst that made the gate stop.
func (c *Costs) forget(w int) {
	if w < 2 || w > MaxWidth {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.frozen {
		return
	}
	c.sum[w], c.weight[w] = 0, 0
}

// add records an observed ratio x for width w, age calls old. Caller holds
// c.mu.
func (c *Costs) add(w int, x float64, age int) {
	x = min(max(x, 1), 2*float64(w))
	f := 1.0
	for range age {
		f *= 1 - costForget
	}
	c.sum[w] += f * x
	c.weight[w] += f
}

// Seconds returns the current estimate for a call of width w (0 if unknown).
func (c *Costs) Seconds(w int) float64 {
	if w < 1 || w > MaxWidth {
		return 0
	}
	c.mu.Lock()
	one, known := c.one, w == 1 || c.measured[w] > 0 || c.weight[w] > 0
	c.mu.Unlock()
	if !known {
		return 0
	}
	return one * c.Ratio(w)
}

// Ratio is the cost of a call of width w relative to a width-1 call: the
// measured ratio (Measured) weighed with the calls observed lately.
func (c *Costs) Ratio(w int) float64 {
	if w <= 1 {
		return 1
	}
	w = min(w, MaxWidth)
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.measuredRatio(w)
	if c.weight[w] <= 0 {
		return m
	}
	return (measuredWeight*m + c.sum[w]) / (measuredWeight + c.weight[w])
}

// Measured is Ratio as measured at load (or given), without what the calls
// showed since: what the cost model returns to once a spike is forgotten,
// and what the verify loop's probes test.
func (c *Costs) Measured(w int) float64 {
	if w <= 1 {
		return 1
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.measuredRatio(min(w, MaxWidth))
}

// measuredRatio is the measured ratio of width w; widths never measured
// are interpolated between measured neighbours, or extrapolated with
// defaultSlope. Caller holds c.mu.
func (c *Costs) measuredRatio(w int) float64 {
	if c.measured[w] > 0 {
		return c.measured[w]
	}
	lo, hi := 1, 0
	for v := w - 1; v >= 2; v-- {
		if c.measured[v] > 0 {
			lo = v
			break
		}
	}
	for v := w + 1; v <= MaxWidth; v++ {
		if c.measured[v] > 0 {
			hi = v
			break
		}
	}
	rlo := 1.0
	if lo > 1 {
		rlo = c.measured[lo]
	}
	if hi == 0 {
		return rlo + defaultSlope*float64(w-lo)
	}
	f := float64(w-lo) / float64(hi-lo)
	return rlo + f*(c.measured[hi]-rlo)
}

// MeasureOptions tunes Measure.
type MeasureOptions struct {
	// Widths to time (default 1..MaxWidth, or the backend's own widths).
	Widths []int
	// Prefix is how many committed positions precede the timed calls
	// (default 32), so attention is not trivially empty.
	Prefix int
	// Reps is the number of timed calls per width; the fastest counts
	// (default 5: the machine may be shared and noisy).
	Reps int
	// Budget stops further repetitions once this much time has gone by
	// (default 3 s; at least one repetition always runs), so a large model
	// does not hold up the first generation for long.
	Budget time.Duration
}

// Measure times calls of each width on a scratch cache, so the verify loop
// knows what a wider call costs before it makes one. Run it once when the
// model loads. Ctx cancels it.
func Measure(ctx context.Context, b model.Backend, opts MeasureOptions) (*Costs, error) {
	cfg := b.Config()
	widths := opts.Widths
	if widths == nil {
		widths = b.Widths()
	}
	if widths == nil {
		for w := 1; w <= MaxWidth; w++ {
			widths = append(widths, w)
		}
	}
	prefix := opts.Prefix
	if prefix <= 0 {
		prefix = 32
	}
	reps := max(opts.Reps, 1)
	if opts.Reps == 0 {
		reps = 5
	}
	maxW := 1
	for _, w := range widths {
		maxW = max(maxW, w)
	}
	prefix = min(prefix, cfg.ContextLen-maxW-1)
	if prefix < 0 {
		return nil, fmt.Errorf("spec: measure: context length %d is shorter than a width-%d call", cfg.ContextLen, maxW)
	}
	cache, err := kv.New(cfg.KV, max(maxW, prefix, 1))
	if err != nil {
		return nil, fmt.Errorf("spec: measure: %w", err)
	}
	tok := int32(1) % int32(max(cfg.VocabSize, 1))
	toks := func(n int) []int32 {
		t := make([]int32, n)
		for i := range t {
			t[i] = tok
		}
		return t
	}
	// Fill the prefix in calls the backend runs: any width on the CPU, its
	// widest listed width on a fixed-shape backend.
	chunk := prefix
	if ws := b.Widths(); ws != nil {
		chunk = 1
		for _, w := range ws {
			chunk = max(chunk, min(w, prefix))
		}
	}
	for pos := 0; pos < prefix; {
		n := min(chunk, prefix-pos)
		if _, err := b.Forward(ctx, toks(n), pos, cache, model.Argmax|model.Last); err != nil {
			return nil, fmt.Errorf("spec: measure: prefill at %d: %w", pos, err)
		}
		if err := cache.Commit(n); err != nil {
			return nil, fmt.Errorf("spec: measure: %w", err)
		}
		pos += n
	}
	// Repetitions run width after width, so a burst of load on a shared
	// machine hits every width alike; the fastest repetition counts.
	// A call's cost is measured with logits (what sampling asks for), or
	// argmax ids on a backend that returns nothing else.
	want := model.Logits
	if model.ArgmaxOnly(b) {
		want = model.Argmax
	}
	budget := opts.Budget
	if budget <= 0 {
		budget = 3 * time.Second
	}
	began := time.Now()
	best := map[int]time.Duration{}
	for rep := range reps {
		if rep > 0 && time.Since(began) >= budget {
			break
		}
		for _, w := range widths {
			if w < 1 || w > MaxWidth {
				continue
			}
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			t0 := time.Now()
			_, err := b.Forward(ctx, toks(w), prefix, cache, want)
			d := time.Since(t0)
			cache.Rollback()
			if err != nil {
				return nil, fmt.Errorf("spec: measure: call of width %d: %w", w, err)
			}
			if b, ok := best[w]; !ok || d < b {
				best[w] = d
			}
		}
	}
	sec := monotone(best)
	if sec[1] == 0 {
		return nil, fmt.Errorf("spec: measure: width 1 must be among the widths measured")
	}
	return NewCosts(sec), nil
}

// monotone turns the fastest time measured per width into per-width seconds
// that never decrease with the width: a wider call does more work than a
// narrower one, so where noise (or a quirk of the backend) says otherwise,
// the narrower call's time is taken (width never looks cheaper than it is).
func monotone(best map[int]time.Duration) map[int]float64 {
	sec := map[int]float64{}
	prev := 0.0
	for w := 1; w <= MaxWidth; w++ {
		if d, ok := best[w]; ok {
			prev = max(prev, d.Seconds(), 1e-9)
			sec[w] = prev
		}
	}
	return sec
}

// ratios gives a call's cost relative to a width-1 call: *Costs (Ratio, what
// the calls show) or measuredRatios (what was measured at load).
type ratios interface{ Ratio(w int) float64 }

// measuredRatios is a cost model's measured ratios alone.
type measuredRatios struct{ c *Costs }

func (m measuredRatios) Ratio(w int) float64 { return m.c.Measured(w) }

// bestDrafts returns how many of m proposed tokens to send so that the
// expected tokens per second is highest, given per-token acceptance rate q:
// a call of width 1+d yields 1 + q + q² + … + q^d tokens on average and
// costs Ratio(1+d) width-1 calls. d = 0 (a plain width-1 call) is always a
// candidate, so a draft is sent only when it is expected to pay. allowed
// reports which call widths the backend runs.
func bestDrafts(c ratios, q float64, m int, allowed func(w int) bool) (int, float64) {
	bestD, bestV := 0, 1.0
	gain, pow := 1.0, 1.0
	for d := 1; d <= m; d++ {
		pow *= q
		gain += pow
		if !allowed(1 + d) {
			continue
		}
		if v := gain / c.Ratio(1+d); v > bestV {
			bestD, bestV = d, v
		}
	}
	return bestD, bestV
}
