package rope

import (
	"math"
	"testing"
)

// TestAngles: at position 1 with Dim 4 and base 100, pair 0 turns by 1
// rad and pair 1 by 0.1 rad, in both layouts and precisions.
func TestAngles(t *testing.T) {
	for _, tc := range []struct {
		s    Spec
		want []float64 // the rotation of (1, 0, 0, 1)
	}{
		{Spec{Layout: Interleaved, Precision: Float64, Dim: 4, Pairs: 2, FreqDim: 4, Theta: 100},
			[]float64{math.Cos(1), math.Sin(1), -math.Sin(0.1), math.Cos(0.1)}},
		{Spec{Layout: Halves, Precision: Float64, Dim: 4, Pairs: 2, FreqDim: 4, Theta: 100},
			[]float64{math.Cos(1), -math.Sin(0.1), math.Sin(1), math.Cos(0.1)}},
		{Spec{Layout: Halves, Precision: Float32, Dim: 4, Pairs: 2, FreqDim: 4, Theta: 100},
			[]float64{math.Cos(1), -math.Sin(0.1), math.Sin(1), math.Cos(0.1)}},
		{Spec{Layout: Interleaved, Precision: Float32, Dim: 4, Pairs: 2, FreqDim: 4, Theta: 100},
			[]float64{math.Cos(1), math.Sin(1), -math.Sin(0.1), math.Cos(0.1)}},
	} {
		if err := tc.s.Validate(); err != nil {
			t.Fatal(err)
		}
		var tab Table
		tab.Fill(tc.s, 1, 1)
		v := []float32{1, 0, 0, 1}
		tab.Apply(v, 0)
		for i := range v {
			if math.Abs(float64(v[i])-tc.want[i]) > 1e-6 {
				t.Errorf("%+v: %v, want %v", tc.s, v, tc.want)
				break
			}
		}
	}
}

// TestPrecisions: each precision computes its angles as documented, bit
// for bit: Float64 in float64 throughout, Float32 as transformers in
// float32 (the two differ, so a table built the other way fails).
func TestPrecisions(t *testing.T) {
	const pos, dim, theta = 1234, 64, 1e6
	var t64, t32 Table
	t64.Fill(Spec{Layout: Halves, Precision: Float64, Dim: dim, Pairs: dim / 2, FreqDim: dim, Theta: theta}, pos, 1)
	t32.Fill(Spec{Layout: Halves, Precision: Float32, Dim: dim, Pairs: dim / 2, FreqDim: dim, Theta: theta}, pos, 1)
	differ := 0
	for i := range dim / 2 {
		s, c := math.Sincos(float64(pos) * math.Pow(theta, -float64(2*i)/float64(dim)))
		if t64.Cos[i] != c || t64.Sin[i] != s {
			t.Fatalf("Float64 pair %d: %v, %v; want %v, %v", i, t64.Cos[i], t64.Sin[i], c, s)
		}
		inv := 1 / float32(math.Pow(float64(float32(theta)), float64(float32(2*i)/float32(dim))))
		a := float32(pos) * inv
		if t32.Cos[i] != float64(float32(math.Cos(float64(a)))) || t32.Sin[i] != float64(float32(math.Sin(float64(a)))) {
			t.Fatalf("Float32 pair %d differs from transformers' float32 angle", i)
		}
		if t32.Cos[i] != t64.Cos[i] {
			differ++
		}
	}
	if differ == 0 {
		t.Error("the two precisions gave the same table: the test cannot tell them apart")
	}
}

// TestPartial: pairs past Pairs turn by angle 0 (the values come back
// unchanged), and with Interleaved elements past Dim are not touched.
func TestPartial(t *testing.T) {
	var tab Table
	tab.Fill(Spec{Layout: Halves, Precision: Float32, Dim: 8, Pairs: 1, FreqDim: 8, Theta: 1e4}, 7, 1)
	v := []float32{1, 2, 3, 4, 5, 6, 7, 8}
	tab.Apply(v, 0)
	for _, i := range []int{1, 2, 3, 5, 6, 7} {
		if v[i] != float32(i+1) {
			t.Errorf("halves: element %d of an unrotated pair became %v", i, v[i])
		}
	}
	if v[0] == 1 || v[4] == 5 {
		t.Errorf("halves: pair 0 did not turn: %v", v)
	}
	tab.Fill(Spec{Layout: Interleaved, Precision: Float64, Dim: 4, Pairs: 2, FreqDim: 4, Theta: 1e4}, 7, 1)
	v = []float32{1, 2, 3, 4, 5, 6}
	tab.Apply(v, 0)
	if v[4] != 5 || v[5] != 6 || v[0] == 1 {
		t.Errorf("interleaved over 4 of 6: %v", v)
	}
}

// TestTableRows: row k of a table of n positions is position start+k's
// (the table of that position alone), Row32 gives it as float32, and a
// refill within the table's capacity allocates nothing.
func TestTableRows(t *testing.T) {
	s := Spec{Layout: Interleaved, Precision: Float64, Dim: 16, Pairs: 8, FreqDim: 16, Theta: 1e4}
	var all, one Table
	all.Fill(s, 10, 5)
	cos, sin := make([]float32, 8), make([]float32, 8)
	for k := range 5 {
		one.Fill(s, 10+k, 1)
		all.Row32(k, cos, sin)
		for i := range 8 {
			if all.Cos[k*8+i] != one.Cos[i] || all.Sin[k*8+i] != one.Sin[i] {
				t.Fatalf("row %d pair %d differs from position %d's own table", k, i, 10+k)
			}
			if cos[i] != float32(one.Cos[i]) || sin[i] != float32(one.Sin[i]) {
				t.Fatalf("Row32 %d pair %d", k, i)
			}
		}
	}
	if a := testing.AllocsPerRun(10, func() { all.Fill(s, 3, 4) }); a != 0 {
		t.Errorf("refill allocated %v times", a)
	}
}

func TestValidate(t *testing.T) {
	ok := Spec{Layout: Halves, Precision: Float32, Dim: 8, Pairs: 4, FreqDim: 8, Theta: 1e4}
	for name, edit := range map[string]func(*Spec){
		"odd dim":    func(s *Spec) { s.Dim = 7 },
		"pairs":      func(s *Spec) { s.Pairs = 5 },
		"freq dim":   func(s *Spec) { s.FreqDim = 0 },
		"theta":      func(s *Spec) { s.Theta = 0 },
		"theta nan":  func(s *Spec) { s.Theta = math.NaN() },
		"layout":     func(s *Spec) { s.Layout = 9 },
		"precision":  func(s *Spec) { s.Precision = 9 },
		"negative p": func(s *Spec) { s.Pairs = -1 },
	} {
		s := ok
		edit(&s)
		if s.Validate() == nil {
			t.Errorf("%s: %+v accepted", name, s)
		}
	}
	if err := ok.Validate(); err != nil {
		t.Error(err)
	}
}
