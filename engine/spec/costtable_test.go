package spec

import (
	"maps"
	"testing"
)

// TestCostsTableRoundTrip: NewCosts(c.Table()) gives the same estimate at
// every width, interpolated ones included, and an unknown model has an empty
// table.
func TestCostsTableRoundTrip(t *testing.T) {
	c := NewCosts(map[int]float64{1: 0.01, 2: 0.012, 4: 0.02})
	tab := c.Table()
	if want := map[int]float64{1: 0.01, 2: 0.012, 4: 0.02}; len(tab) != len(want) {
		t.Fatalf("table %v, want the widths of %v", tab, want)
	}
	r := NewCosts(tab)
	for w := 1; w <= MaxWidth; w++ {
		if a, b := c.Ratio(w), r.Ratio(w); a != b {
			t.Errorf("width %d: ratio %v after the round trip, %v before", w, b, a)
		}
		if a, b := c.Seconds(w), r.Seconds(w); a-b > 1e-15 || b-a > 1e-15 {
			t.Errorf("width %d: %v s after the round trip, %v before", w, b, a)
		}
	}
	if !maps.Equal(r.Table(), tab) {
		t.Errorf("second table %v, first %v", r.Table(), tab)
	}
	if got := (&Costs{}).Table(); len(got) != 0 {
		t.Errorf("unknown costs: table %v, want empty", got)
	}
}
