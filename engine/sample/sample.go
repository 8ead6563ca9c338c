// Package sample turns a row of logits into a token: greedy (argmax) or seeded
// random sampling with temperature, top-k and top-p.
//
// Everything here is deterministic: the same logits, settings and seed give the
// same tokens on every run. A Sampler draws exactly one uniform number per token
// it picks, from a PCG generator seeded by the caller; the speculative verify
// loop relies on that (see Pick) to make sampled output independent of the
// speculation width.
package sample

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
)

// Greedy returns the id of the largest logit; ties go to the lowest id. NaN
// logits never win. It returns -1 for an empty row (or one that is all NaN).
func Greedy(logits []float32) int32 {
	best := int32(-1)
	var bv float32
	for i, v := range logits {
		if v != v { // NaN
			continue
		}
		if best < 0 || v > bv {
			best, bv = int32(i), v
		}
	}
	return best
}

// A Sampler picks tokens from logits with temperature, top-k and top-p, using
// a seeded PCG generator. It is not safe for concurrent use.
//
// With temperature <= 0 it is greedy: Sample equals Greedy, Probs is one-hot
// and no random numbers are drawn.
type Sampler struct {
	temperature float64
	topK        int
	topP        float64
	rng         *rand.Rand

	probs []float64 // scratch reused by Sample
	order []int32   // scratch for top-k / top-p
}

// seedStream is the PCG stream selector; any fixed constant works, it only
// has to be the same on every run.
const seedStream = 0x9e3779b97f4a7c15

// New returns a Sampler. temperature <= 0 means greedy. topK <= 0 keeps every
// token; topP outside (0, 1) keeps every token. seed fixes the random stream.
func New(temperature float64, seed uint64, topK int, topP float64) *Sampler {
	if math.IsNaN(temperature) || math.IsInf(temperature, 0) {
		temperature = 0
	}
	if math.IsNaN(topP) {
		topP = 1
	}
	return &Sampler{
		temperature: temperature,
		topK:        topK,
		topP:        topP,
		rng:         rand.New(rand.NewPCG(seed, seedStream)),
	}
}

// IsGreedy reports whether the sampler always picks the argmax (temperature
// <= 0). The verify loop then asks the backend for argmax only.
func (s *Sampler) IsGreedy() bool { return s.temperature <= 0 }

// Sample picks one token from logits. It returns -1 for an empty row and
// for a row of NaN only (as Greedy): no token can be picked from it.
func (s *Sampler) Sample(logits []float32) int32 {
	if s.IsGreedy() {
		return Greedy(logits)
	}
	s.probs = s.probsInto(s.probs[:0], logits)
	return s.Pick(s.probs)
}

// Probs returns the exact distribution Sample draws from for logits: a slice
// of len(logits) probabilities summing to 1 (zero for tokens cut by top-k or
// top-p). With temperature <= 0 it is one-hot on Greedy(logits). It returns
// nil for an empty row, and all zeros for a row of NaN only.
func (s *Sampler) Probs(logits []float32) []float64 {
	if len(logits) == 0 {
		return nil
	}
	return s.probsInto(make([]float64, 0, len(logits)), logits)
}

// Pick draws one token from the distribution p (as returned by Probs) by
// inverse transform: it draws a single uniform u in [0, 1) and returns the
// first id whose cumulative probability exceeds u·sum(p).
//
// Because a token is always picked with exactly one uniform, the verify loop
// can check a deterministic draft x by picking y with the same draw that width
// 1 would use and accepting x iff y == x. That accepts x with probability
// p(x) and, on rejection, yields y distributed as p with x removed and
// renormalised — the exact speculative-sampling rule — while consuming the
// random stream exactly as decoding without speculation does.
//
// Pick returns -1 when p is empty or has no positive mass.
func (s *Sampler) Pick(p []float64) int32 {
	var total float64
	last := int32(-1)
	for i, v := range p {
		if v > 0 {
			total += v
			last = int32(i)
		}
	}
	if last < 0 {
		return -1
	}
	u := s.rng.Float64() * total
	var acc float64
	for i, v := range p {
		if v <= 0 {
			continue
		}
		acc += v
		if u < acc {
			return int32(i)
		}
	}
	// Rounding can leave u just above the running sum: the last token with
	// positive mass is the one the draw landed on.
	return last
}

// probsInto appends the distribution for logits to dst and returns it.
func (s *Sampler) probsInto(dst []float64, logits []float32) []float64 {
	n := len(logits)
	if n == 0 {
		return dst
	}
	dst = slices.Grow(dst, n)[:n]
	if s.IsGreedy() {
		clear(dst)
		if g := Greedy(logits); g >= 0 {
			dst[g] = 1
		}
		return dst
	}
	// Softmax of logits/T in float64, stable: subtract the maximum. NaN
	// logits get probability 0. A row of NaN only has no distribution at
	// all (zero mass: Pick returns -1, as Greedy does for it); a row of
	// -Inf (and NaN) prefers nothing, so its numbers share the mass.
	maxv := math.Inf(-1)
	numbers := 0
	for _, v := range logits {
		f := float64(v)
		if f == f {
			numbers++
		}
		if f > maxv {
			maxv = f
		}
	}
	if numbers == 0 {
		clear(dst)
		return dst
	}
	if math.IsInf(maxv, -1) {
		for i, v := range logits {
			dst[i] = 0
			if v == v {
				dst[i] = 1 / float64(numbers)
			}
		}
		return dst
	}
	var sum float64
	for i, v := range logits {
		f := float64(v)
		if f != f {
			dst[i] = 0
			continue
		}
		if math.IsInf(maxv, 1) {
			// +Inf logits share all the mass.
			if math.IsInf(f, 1) {
				dst[i] = 1
			} else {
				dst[i] = 0
			}
		} else {
			dst[i] = math.Exp((f - maxv) / s.temperature)
		}
		sum += dst[i]
	}
	for i := range dst {
		dst[i] /= sum
	}
	if (s.topK > 0 && s.topK < n) || (s.topP > 0 && s.topP < 1) {
		s.truncate(dst)
	}
	return dst
}

// truncate zeroes every token outside the top-k and top-p sets and
// renormalises. Order is by probability, ties by lower id, so the kept set is
// well defined.
//
// Sorting the whole vocabulary per token is slow (262k entries for Gemma), so
// truncate first narrows the candidates to S = {p >= t} for a threshold t
// that keeps the answer inside S: S is a prefix of the sorted order, so it
// suffices that S holds the whole top-k set (when top-k is on) or mass >= topP
// (top-p alone). Only S is sorted, and the prefix sums run over the same
// elements in the same order as with a full sort, so the kept set does not
// depend on t (TestTruncateThresholdIndependent); if rounding ever leaves S
// short, it falls back to sorting everything.
func (s *Sampler) truncate(p []float64) {
	k := len(p)
	if s.topK > 0 && s.topK < k {
		k = s.topK
	}
	topP := 1.0
	if s.topP > 0 && s.topP < 1 {
		topP = s.topP
	}
	t := s.threshold(p, k, topP)
	if !s.truncateAbove(p, t, k, topP) {
		s.truncateAbove(p, math.SmallestNonzeroFloat64, k, topP)
	}
}

// threshold returns a probability t such that S = {p >= t} is the smallest
// set found by bisection that holds at least k tokens (k < len(p)) or, when
// k covers everything, at least topP of the mass.
func (s *Sampler) threshold(p []float64, k int, topP float64) float64 {
	useK := k < len(p)
	if !useK && topP >= 1 {
		return math.SmallestNonzeroFloat64
	}
	var total float64
	for _, v := range p {
		total += v
	}
	ok := func(t float64) (bool, int) {
		var mass float64
		n := 0
		for _, v := range p {
			if v >= t && v > 0 {
				mass += v
				n++
			}
		}
		if useK {
			return n >= k, n
		}
		return mass >= topP*total, n
	}
	lo, hi := 0.0, 0.0
	for _, v := range p {
		hi = max(hi, v)
	}
	// Invariant: ok(lo). Bisect until S at lo is small enough to sort
	// cheaply or the interval stops shrinking.
	for range 60 {
		mid := (lo + hi) / 2
		if mid <= lo || mid >= hi {
			break
		}
		if good, n := ok(mid); good {
			lo = mid
			if n <= 64 {
				break
			}
		} else {
			hi = mid
		}
	}
	return max(lo, math.SmallestNonzeroFloat64)
}

// truncateAbove applies top-k and top-p to the candidates {p >= t}. It
// reports false, changing nothing, when those candidates cannot be shown to
// contain the kept set.
func (s *Sampler) truncateAbove(p []float64, t float64, k int, topP float64) bool {
	s.order = s.order[:0]
	for i, v := range p {
		if v >= t && v > 0 {
			s.order = append(s.order, int32(i))
		}
	}
	full := len(s.order)
	for _, v := range p {
		if v > 0 && v < t {
			full = -1
			break
		}
	}
	slices.SortFunc(s.order, func(a, b int32) int {
		if c := cmp.Compare(p[b], p[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	keep := len(s.order)
	if k < len(p) {
		if keep < k && full < 0 {
			return false // S misses part of the top-k set
		}
		keep = min(keep, k)
	}
	if topP < 1 {
		// The smallest prefix whose mass reaches topP of the mass left
		// after top-k (so the two compose in the usual order), or of the
		// whole mass, summed in id order, when top-k is off.
		var kmass float64
		if k < len(p) {
			for _, id := range s.order[:keep] {
				kmass += p[id]
			}
		} else {
			for _, v := range p {
				kmass += v
			}
		}
		var acc float64
		found := false
		for i, id := range s.order[:keep] {
			acc += p[id]
			if acc >= topP*kmass {
				keep = i + 1
				found = true
				break
			}
		}
		if !found && full < 0 {
			return false // rounding: the prefix would run past S
		}
	}
	var mass float64
	for _, id := range s.order[:keep] {
		mass += p[id]
	}
	for i, v := range p {
		if v > 0 && v < t {
			p[i] = 0
		}
	}
	for _, id := range s.order[keep:] {
		p[id] = 0
	}
	for _, id := range s.order[:keep] {
		p[id] /= mass
	}
	return true
}
