package sample

import (
	"math"
	"testing"
)

func TestGreedy(t *testing.T) {
	nan := float32(math.NaN())
	inf := float32(math.Inf(1))
	cases := []struct {
		name   string
		logits []float32
		want   int32
	}{
		{"empty", nil, -1},
		{"single", []float32{-3}, 0},
		{"max", []float32{1, 5, 2}, 1},
		{"tie goes to lowest id", []float32{1, 7, 3, 7, 7}, 1},
		{"nan never wins", []float32{nan, 1, nan, 2}, 3},
		{"all nan", []float32{nan, nan}, -1},
		{"inf", []float32{1, inf, inf}, 1},
		{"negative", []float32{-5, -2, -9}, 1},
	}
	for _, c := range cases {
		if got := Greedy(c.logits); got != c.want {
			t.Errorf("%s: Greedy(%v) = %d, want %d", c.name, c.logits, got, c.want)
		}
	}
}

func TestGreedySampler(t *testing.T) {
	s := New(0, 1, 0, 0)
	if !s.IsGreedy() {
		t.Fatal("temperature 0 is not greedy")
	}
	logits := []float32{0.5, 2, 2, -1}
	for range 10 {
		if got := s.Sample(logits); got != 1 {
			t.Fatalf("greedy Sample = %d, want 1", got)
		}
	}
	p := s.Probs(logits)
	want := []float64{0, 1, 0, 0}
	for i := range want {
		if p[i] != want[i] {
			t.Fatalf("greedy Probs = %v, want %v", p, want)
		}
	}
}

// near compares with a tolerance: the logits are float32.
func near(a, b float64) bool { return math.Abs(a-b) < 1e-7 }

func TestProbsSoftmaxTopKTopP(t *testing.T) {
	logits := []float32{float32(math.Log(1)), float32(math.Log(2)), float32(math.Log(3)), float32(math.Log(4))}
	// Temperature 1: proportional to 1:2:3:4.
	p := New(1, 0, 0, 1).Probs(logits)
	for i, w := range []float64{0.1, 0.2, 0.3, 0.4} {
		if !near(p[i], w) {
			t.Fatalf("softmax p = %v", p)
		}
	}
	// Temperature 0.5 squares the weights: 1:4:9:16.
	p = New(0.5, 0, 0, 1).Probs(logits)
	for i, w := range []float64{1.0 / 30, 4.0 / 30, 9.0 / 30, 16.0 / 30} {
		if !near(p[i], w) {
			t.Fatalf("T=0.5 p = %v", p)
		}
	}
	// Top-k 2 keeps 3 and 4.
	p = New(1, 0, 2, 1).Probs(logits)
	for i, w := range []float64{0, 0, 3.0 / 7, 4.0 / 7} {
		if !near(p[i], w) {
			t.Fatalf("top-k p = %v", p)
		}
	}
	// Top-p 0.7: 0.4 < 0.7, 0.4+0.3 >= 0.7 -> keep {3, 2}.
	p = New(1, 0, 0, 0.7).Probs(logits)
	for i, w := range []float64{0, 0, 3.0 / 7, 4.0 / 7} {
		if !near(p[i], w) {
			t.Fatalf("top-p 0.7 p = %v", p)
		}
	}
	// Top-p 0.71 needs the third token too.
	p = New(1, 0, 0, 0.71).Probs(logits)
	for i, w := range []float64{0, 2.0 / 9, 3.0 / 9, 4.0 / 9} {
		if !near(p[i], w) {
			t.Fatalf("top-p 0.71 p = %v", p)
		}
	}
	// Top-k 3 then top-p 0.5 of the remaining mass 0.9: 0.4 < 0.45, 0.7 >= 0.45.
	p = New(1, 0, 3, 0.5).Probs(logits)
	for i, w := range []float64{0, 0, 3.0 / 7, 4.0 / 7} {
		if !near(p[i], w) {
			t.Fatalf("top-k+top-p p = %v", p)
		}
	}
	// Ties in top-k go to the lower id.
	p = New(1, 0, 1, 1).Probs([]float32{2, 5, 5, 1})
	if p[1] != 1 || p[2] != 0 {
		t.Fatalf("top-k tie p = %v", p)
	}
}

func TestProbsBadInput(t *testing.T) {
	nan := float32(math.NaN())
	s := New(0.8, 3, 0, 0.9)
	if p := s.Probs(nil); p != nil {
		t.Fatalf("Probs(nil) = %v", p)
	}
	if got := s.Sample(nil); got != -1 {
		t.Fatalf("Sample(nil) = %d", got)
	}
	p := s.Probs([]float32{nan, 1, nan})
	if p[0] != 0 || p[2] != 0 || p[1] != 1 {
		t.Fatalf("NaN logits p = %v", p)
	}
	inf := float32(math.Inf(1))
	p = New(1, 0, 0, 1).Probs([]float32{inf, 0, inf})
	if p[0] != 0.5 || p[2] != 0.5 || p[1] != 0 {
		t.Fatalf("+Inf logits p = %v", p)
	}
	ninf := float32(math.Inf(-1))
	p = New(1, 0, 0, 1).Probs([]float32{ninf, ninf})
	if p[0] != 0.5 || p[1] != 0.5 {
		t.Fatalf("all -Inf p = %v", p)
	}
	p = New(1, 0, 0, 1).Probs([]float32{ninf, nan, ninf, ninf})
	if p[0] != 1.0/3 || p[1] != 0 || p[2] != 1.0/3 || p[3] != 1.0/3 {
		t.Fatalf("-Inf and NaN p = %v; NaN must get nothing", p)
	}
	// A row of NaN only has no distribution: sampling gives -1 (as Greedy),
	// which the decode loops report as a damaged model, where it used to
	// draw a uniform token.
	for _, s := range []*Sampler{New(0.8, 3, 0, 1), New(1, 3, 5, 0.5), New(0, 3, 0, 1)} {
		if got := s.Sample([]float32{nan, nan, nan}); got != -1 {
			t.Errorf("Sample(all NaN) = %d, want -1", got)
		}
		for i, v := range s.Probs([]float32{nan, nan}) {
			if v != 0 {
				t.Errorf("Probs(all NaN)[%d] = %v, want 0", i, v)
			}
		}
	}
	// Bad settings do not panic and fall back to sane behaviour.
	if got := New(math.NaN(), 0, -3, math.NaN()).Sample([]float32{1, 3, 2}); got != 1 {
		t.Fatalf("NaN temperature should be greedy, got %d", got)
	}
	if got := s.Pick([]float64{0, 0}); got != -1 {
		t.Fatalf("Pick(no mass) = %d", got)
	}
}

func TestSeededDeterminism(t *testing.T) {
	logits := make([]float32, 50)
	for i := range logits {
		logits[i] = float32(math.Sin(float64(i)))
	}
	run := func(seed uint64) []int32 {
		s := New(0.9, seed, 20, 0.95)
		out := make([]int32, 200)
		for i := range out {
			out[i] = s.Sample(logits)
		}
		return out
	}
	a, b, c := run(42), run(42), run(43)
	same := true
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("same seed differs at %d", i)
		}
		same = same && a[i] == c[i]
	}
	if same {
		t.Fatal("seeds 42 and 43 gave the same 200 tokens")
	}
}

// chiSquare returns the chi-square statistic of counts against p over n draws.
func chiSquare(counts []int, p []float64, n int) float64 {
	var x float64
	for i, c := range counts {
		if p[i] == 0 {
			if c != 0 {
				return math.Inf(1)
			}
			continue
		}
		e := p[i] * float64(n)
		x += (float64(c) - e) * (float64(c) - e) / e
	}
	return x
}

func TestSampleFollowsProbs(t *testing.T) {
	logits := []float32{0.1, 1.2, -0.5, 0.7, 2.0, -3}
	s := New(0.8, 7, 5, 0.97)
	p := s.Probs(logits)
	const n = 60000
	counts := make([]int, len(logits))
	for range n {
		counts[s.Sample(logits)]++
	}
	// p has at most 5 nonzero entries (4 degrees of freedom); the 0.999
	// quantile of chi-square(4) is 18.47.
	if x := chiSquare(counts, p, n); x > 18.47 {
		t.Fatalf("chi-square %.2f > 18.47: counts %v, p %v", x, counts, p)
	}
}

// TestPickIsSpeculativeRule checks the claim in Pick's doc: accepting draft x
// iff Pick(p) == x accepts with probability p(x), and the rejected picks are
// distributed as p without x, renormalised.
func TestPickIsSpeculativeRule(t *testing.T) {
	p := []float64{0.1, 0.35, 0.05, 0.3, 0.2}
	const x = 3
	const n = 80000
	s := New(1, 11, 0, 1)
	accepted := 0
	rejected := make([]int, len(p))
	nrej := 0
	for range n {
		y := s.Pick(p)
		if y == x {
			accepted++
			continue
		}
		rejected[y]++
		nrej++
	}
	// Acceptance: binomial(n, 0.3); 4.5 standard deviations.
	sd := math.Sqrt(n * p[x] * (1 - p[x]))
	if math.Abs(float64(accepted)-n*p[x]) > 4.5*sd {
		t.Fatalf("accepted %d of %d, want about %.0f", accepted, n, n*p[x])
	}
	resid := make([]float64, len(p))
	for i := range p {
		if i != x {
			resid[i] = p[i] / (1 - p[x])
		}
	}
	// 3 degrees of freedom; 0.999 quantile 16.27.
	if c := chiSquare(rejected, resid, nrej); c > 16.27 {
		t.Fatalf("residual chi-square %.2f: %v vs %v", c, rejected, resid)
	}
}

func BenchmarkSampleTopP(b *testing.B) {
	logits := make([]float32, 32000)
	for i := range logits {
		logits[i] = float32(math.Sin(float64(i) * 0.37))
	}
	s := New(0.8, 1, 0, 0.95)
	for b.Loop() {
		s.Sample(logits)
	}
}

// TestTruncateThresholdIndependent checks that narrowing the candidates by a
// threshold before sorting keeps exactly the distribution a full sort gives.
func TestTruncateThresholdIndependent(t *testing.T) {
	settings := []struct {
		k    int
		topP float64
	}{{0, 0.9}, {0, 0.5}, {0, 0.999}, {40, 1}, {40, 0.9}, {1, 1}, {3, 0.2}, {200, 0.95}}
	for trial := range 40 {
		n := 50 + trial*97
		logits := make([]float32, n)
		for i := range logits {
			x := float64((i*7919+trial*104729)%1000) / 1000
			logits[i] = float32(6 * x * x * x)
			if i%13 == 0 {
				logits[i] = logits[i/2] // ties
			}
		}
		for _, st := range settings {
			s := New(0.7, 0, st.k, st.topP)
			fast := s.Probs(logits)
			// Reference: softmax without truncation, then the full sort.
			ref := New(0.7, 0, 0, 1).Probs(logits)
			k := n
			if st.k > 0 && st.k < n {
				k = st.k
			}
			tp := 1.0
			if st.topP > 0 && st.topP < 1 {
				tp = st.topP
			}
			if k < n || tp < 1 {
				if !s.truncateAbove(ref, math.SmallestNonzeroFloat64, k, tp) {
					t.Fatal("full sort reported failure")
				}
			}
			for i := range fast {
				if fast[i] != ref[i] {
					t.Fatalf("trial %d k=%d p=%.3f: id %d fast %v, full sort %v", trial, st.k, st.topP, i, fast[i], ref[i])
				}
			}
		}
	}
}

// FuzzSample: any logits (NaN, ±Inf, huge) and settings give a distribution
// that sums to 1 and a token it gives mass to; nothing panics.
func FuzzSample(f *testing.F) {
	f.Add([]byte{0, 0, 128, 63, 0, 0, 0, 64, 0, 0, 192, 127}, 0.8, 2, 0.9, uint64(1))
	f.Add([]byte{0, 0, 128, 255, 0, 0, 128, 127}, 0.0, 0, 0.0, uint64(2))
	f.Fuzz(func(t *testing.T, raw []byte, temp float64, topK int, topP float64, seed uint64) {
		logits := make([]float32, len(raw)/4)
		for i := range logits {
			b := raw[4*i : 4*i+4]
			logits[i] = math.Float32frombits(uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24)
		}
		s := New(temp, seed, topK, topP)
		p := s.Probs(logits)
		if len(logits) == 0 {
			if p != nil || s.Sample(logits) != -1 {
				t.Fatal("empty logits")
			}
			return
		}
		var sum float64
		for _, v := range p {
			if v < 0 || v != v {
				t.Fatalf("bad probability %v in %v", v, p)
			}
			sum += v
		}
		if Greedy(logits) < 0 {
			// All NaN: no distribution, no token, greedy or not.
			if sum != 0 || s.Sample(logits) != -1 {
				t.Fatalf("all-NaN row has mass %v, samples %d", sum, s.Sample(logits))
			}
			return
		}
		if math.Abs(sum-1) > 1e-9 {
			t.Fatalf("probabilities sum to %v", sum)
		}
		id := s.Sample(logits)
		if id < 0 || int(id) >= len(logits) || p[id] == 0 {
			t.Fatalf("sampled %d with probability %v", id, p)
		}
	})
}
