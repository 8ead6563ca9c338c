package model

import (
	"math"
	"testing"
)

func TestSameBits(t *testing.T) {
	nan := float32(math.NaN())
	negZero := float32(math.Copysign(0, -1))
	for _, c := range []struct {
		a, b []float32
		want bool
	}{
		{[]float32{1, 2}, []float32{1, 2}, true},
		{[]float32{nan}, []float32{nan}, true},
		{[]float32{0}, []float32{negZero}, false},
		{[]float32{1, 2}, []float32{1}, false},
		{[]float32{1, 2}, []float32{1, math.Nextafter32(2, 3)}, false},
		{nil, []float32{}, true},
	} {
		if got := SameBits(c.a, c.b); got != c.want {
			t.Errorf("SameBits(%v, %v) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}
