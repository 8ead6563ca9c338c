package sample

import "math"

// MaxTopLogprobs is the most alternatives Logprobs reports per position
// (OpenAI's limit for top_logprobs).
const MaxTopLogprobs = 20

// TokenLogprob is a token id and its log-probability at one position.
type TokenLogprob struct {
	ID      int32
	Logprob float64
}

// Logprobs returns the log-probability of id under logits (their
// log-softmax, computed in float64: the model's own distribution, before
// any temperature or top-p) and the n most likely ids with theirs, most
// likely first, ties to the lower id, appended to top[:0]. NaN logits have
// probability 0 (log-probability -Inf) and are never among the top; a row
// of -Inf (and NaN) shares the mass among its numbers, as Sampler.Probs
// does. It reads each logit twice and keeps n entries, so a row of the
// 262k Gemma vocabulary costs one pass of exp, not a sort.
func Logprobs(logits []float32, id int32, n int, top []TokenLogprob) (float64, []TokenLogprob) {
	top = top[:0]
	maxv := float32(math.Inf(-1))
	numbers := 0
	for _, v := range logits {
		if v == v {
			numbers++
			if v > maxv {
				maxv = v
			}
		}
	}
	if numbers == 0 {
		return math.Inf(-1), top
	}
	// shift is v - max in float64; the logits equal to the maximum shift
	// by exactly 0 (so that a row of -Inf or with +Inf has a sum, not NaN).
	m := float64(maxv)
	shift := func(v float32) float64 {
		if v == maxv {
			return 0
		}
		return float64(v) - m
	}
	var sum float64
	for _, v := range logits {
		if v == v {
			sum += math.Exp(shift(v))
		}
	}
	logSum := math.Log(sum)
	lp := func(v float32) float64 {
		if v != v {
			return math.Inf(-1)
		}
		return shift(v) - logSum
	}
	var own float64 = math.Inf(-1)
	if id >= 0 && int(id) < len(logits) {
		own = lp(logits[id])
	}
	if n <= 0 {
		return own, top
	}
	n = min(n, MaxTopLogprobs, numbers)
	// top holds the best so far, ordered; the logits are visited by
	// increasing id, so an equal logit never displaces an entry.
	for i, v := range logits {
		if v != v {
			continue
		}
		if len(top) == n && v <= logits[top[n-1].ID] {
			continue
		}
		j := len(top)
		if j < n {
			top = append(top, TokenLogprob{})
		} else {
			j--
		}
		for j > 0 && v > logits[top[j-1].ID] {
			top[j] = top[j-1]
			j--
		}
		top[j] = TokenLogprob{ID: int32(i)}
	}
	for k := range top {
		top[k].Logprob = lp(logits[top[k].ID])
	}
	return own, top
}
