package spec

import (
	"context"
	"fmt"
	"sync"
	"time"

	"anechat/engine/kv"
	"anechat/engine/model"
)

// Costs is the cost model of a backend: the wall time of a width-1 call and,
// for each width 2..MaxWidth, the cost of a call of that width relative to a
// width-1 call. It starts from a measurement at load (Measure) and follows the
// calls actually made (moving averages). Keeping ratios rather than absolute
// times matters: a width-1 call gets slower as the context grows, and a
// ratio measured against the current width-1 time stays right where a stale
// absolute time for a wide call would make it look cheap. It is safe for
// concurrent use.
type Costs struct {
	mu     sync.Mutex
	one    float64               // seconds per width-1 call; 0 = unknown
	ratio  [MaxWidth + 1]float64 // ratio[w] = cost(w)/cost(1); 0 = unknown
	frozen bool                  // ignore Observe
}

// costStep is the weight of one observed call in the moving averages.
const costStep = 0.05

// defaultSlope is the assumed extra cost of each extra token in a call, as a
// fraction of a width-1 call, for widths never measured. Measure at load
// replaces it with the truth.
const defaultSlope = 0.25

// NewCosts returns a cost model from known per-width seconds (sec[w] for
// width w; zero or missing entries are unknown; without sec[1] nothing is
// known).
func NewCosts(sec map[int]float64) *Costs {
	c := &Costs{}
	one := sec[1]
	if one <= 0 {
		return c
	}
	c.one = one
	for w, s := range sec {
		if w >= 2 && w <= MaxWidth && s > 0 {
			c.ratio[w] = s / one
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
	return &Costs{one: c.one, ratio: c.ratio, frozen: c.frozen}
}

// Table returns the cost model's state as per-width seconds, the form
// NewCosts takes: sec[1] is the width-1 time and sec[w] the estimate for each
// width 2..MaxWidth with a known ratio (interpolated widths are left out, so
// NewCosts(c.Table()) interpolates them alike). It is empty while the
// width-1 time is unknown. Callers persist it (the engine keeps measured
// tables per model between runs) and restore it with NewCosts.
func (c *Costs) Table() map[int]float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	sec := map[int]float64{}
	if c.one <= 0 {
		return sec
	}
	sec[1] = c.one
	for w := 2; w <= MaxWidth; w++ {
		if c.ratio[w] > 0 {
			sec[w] = c.one * c.ratio[w]
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
	s := d.Seconds()
	switch {
	case w == 1 && c.one == 0:
		c.one = s
	case w == 1:
		c.one += costStep * (s - c.one)
	case c.one == 0:
		// No width-1 reference yet: nothing to compare with.
	case c.ratio[w] == 0:
		c.ratio[w] = s / c.one
	default:
		c.ratio[w] += costStep * (s/c.one - c.ratio[w])
	}
}

// Seconds returns the current estimate for a call of width w (0 if unknown).
func (c *Costs) Seconds(w int) float64 {
	if w < 1 || w > MaxWidth {
		return 0
	}
	c.mu.Lock()
	one, known := c.one, w == 1 || c.ratio[w] > 0
	c.mu.Unlock()
	if !known {
		return 0
	}
	return one * c.Ratio(w)
}

// Ratio is the cost of a call of width w relative to a width-1 call. Widths
// never observed are interpolated between known neighbours, or extrapolated
// with defaultSlope.
func (c *Costs) Ratio(w int) float64 {
	if w <= 1 {
		return 1
	}
	w = min(w, MaxWidth)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ratio[w] > 0 {
		return c.ratio[w]
	}
	lo, hi := 1, 0
	for v := w - 1; v >= 2; v-- {
		if c.ratio[v] > 0 {
			lo = v
			break
		}
	}
	for v := w + 1; v <= MaxWidth; v++ {
		if c.ratio[v] > 0 {
			hi = v
			break
		}
	}
	rlo := 1.0
	if lo > 1 {
		rlo = c.ratio[lo]
	}
	if hi == 0 {
		return rlo + defaultSlope*float64(w-lo)
	}
	f := float64(w-lo) / float64(hi-lo)
	return rlo + f*(c.ratio[hi]-rlo)
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

// bestDrafts returns how many of m proposed tokens to send so that the
// expected tokens per second is highest, given per-token acceptance rate q:
// a call of width 1+d yields 1 + q + q² + … + q^d tokens on average and
// costs Ratio(1+d) width-1 calls. d = 0 (a plain width-1 call) is always a
// candidate, so a draft is sent only when it is expected to pay. allowed
// reports which call widths the backend runs.
func bestDrafts(c *Costs, q float64, m int, allowed func(w int) bool) (int, float64) {
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
