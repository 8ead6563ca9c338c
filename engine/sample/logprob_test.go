package sample

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// refLogprobs is Logprobs written the plain way: every log-probability,
// then a stable sort of all ids.
func refLogprobs(logits []float32, n int) []TokenLogprob {
	var ids []int32
	m := math.Inf(-1)
	for i, v := range logits {
		if v == v {
			ids = append(ids, int32(i))
			m = max(m, float64(v))
		}
	}
	var sum float64
	for _, i := range ids {
		sum += math.Exp(float64(logits[i]) - m)
	}
	all := make([]TokenLogprob, len(ids))
	for k, i := range ids {
		all[k] = TokenLogprob{ID: i, Logprob: float64(logits[i]) - m - math.Log(sum)}
	}
	slices.SortStableFunc(all, func(a, b TokenLogprob) int {
		if logits[a.ID] > logits[b.ID] {
			return -1
		}
		if logits[a.ID] < logits[b.ID] {
			return 1
		}
		return 0
	})
	return all[:min(n, len(all))]
}

func TestLogprobsMatchesPlainSoftmax(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int{1, 2, 7, 100, 5000} {
		logits := make([]float32, size)
		for i := range logits {
			// Few distinct values: many ties, which go to the lower id.
			logits[i] = float32(rng.IntN(9)) - 4
		}
		for _, n := range []int{0, 1, 5, 20, 25} {
			id := int32(rng.IntN(size))
			own, top := Logprobs(logits, id, n, nil)
			want := refLogprobs(logits, min(n, MaxTopLogprobs))
			if len(top) != len(want) {
				t.Fatalf("size %d n %d: %d entries, want %d", size, n, len(top), len(want))
			}
			for k := range top {
				if top[k].ID != want[k].ID || math.Abs(top[k].Logprob-want[k].Logprob) > 1e-12 {
					t.Fatalf("size %d n %d: entry %d = %+v, want %+v", size, n, k, top[k], want[k])
				}
			}
			ref := refLogprobs(logits, size)
			var mass float64
			for _, e := range ref {
				mass += math.Exp(e.Logprob)
				if e.ID == id && math.Abs(e.Logprob-own) > 1e-12 {
					t.Fatalf("size %d: logprob of %d = %v, want %v", size, id, own, e.Logprob)
				}
			}
			if math.Abs(mass-1) > 1e-9 {
				t.Fatalf("size %d: probabilities sum to %v", size, mass)
			}
		}
	}
}

func TestLogprobsBadRows(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	own, top := Logprobs([]float32{nan, 1, nan, 1}, 0, 20, nil)
	if !math.IsInf(own, -1) || len(top) != 2 || top[0].ID != 1 || top[1].ID != 3 || top[0].Logprob != -math.Ln2 {
		t.Fatalf("NaN row: own %v top %+v; want -Inf and ids 1, 3 at -ln 2", own, top)
	}
	own, top = Logprobs([]float32{nan, nan}, 1, 3, nil)
	if !math.IsInf(own, -1) || len(top) != 0 {
		t.Fatalf("all-NaN row: own %v top %+v; want -Inf and nothing", own, top)
	}
	own, _ = Logprobs([]float32{-inf, -inf, nan}, 1, 0, nil)
	if own != -math.Ln2 {
		t.Fatalf("-Inf row: own %v, want -ln 2 (the numbers share the mass)", own)
	}
	own, top = Logprobs([]float32{inf, 0}, 0, 2, nil)
	if own != 0 || len(top) != 2 || !math.IsInf(top[1].Logprob, -1) {
		t.Fatalf("+Inf row: own %v top %+v; want 0 then -Inf", own, top)
	}
	if own, _ := Logprobs([]float32{1, 2}, 7, 0, nil); !math.IsInf(own, -1) {
		t.Fatalf("id outside the row: %v, want -Inf", own)
	}
}

// BenchmarkLogprobs is one position's logprobs with 20 alternatives over
// SmolLM2's vocabulary (49,152) and Gemma's (262,144): the per-token cost
// of logprobs on top of the model call.
func BenchmarkLogprobs(b *testing.B) {
	for _, n := range []int{49152, 262144} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(3, 4))
			logits := make([]float32, n)
			for i := range logits {
				logits[i] = float32(rng.NormFloat64() * 4)
			}
			top := make([]TokenLogprob, 0, MaxTopLogprobs)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				_, top = Logprobs(logits, int32(i%len(logits)), MaxTopLogprobs, top)
			}
		})
	}
}
