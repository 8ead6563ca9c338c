package coreml

import (
	"math"
	"math/rand/v2"
	"testing"

	"anechat/engine/sample"
)

// firstLevel is the function contract's first level of the argmax (what
// refrun computes): per block of B ids, the first maximum and its value
// (NaN never wins; a block of NaN gives index 0 and NaN).
func firstLevel(row []float32, B int) ([]int32, []float32) {
	var local []int32
	var top []float32
	for b := 0; b < len(row); b += B {
		i := sample.Greedy(row[b : b+B])
		v := float32(math.NaN())
		if i >= 0 {
			v = row[b+int(i)]
		} else {
			i = 0
		}
		local, top = append(local, i), append(top, v)
	}
	return local, top
}

// TestBlockArgmaxIsTheFlatArgmax: the host's second level over the
// blocks' first maxima gives sample.Greedy's id on the whole row — the
// lowest id holding the maximum — and the maximum, on rows with ties
// inside a block and across blocks (the later block's copy first in the
// row's order of planting), all-equal rows, ±Inf, NaN (never wins) and
// rows of NaN (-1); a winning index outside its block gives -1.
func TestBlockArgmaxIsTheFlatArgmax(t *testing.T) {
	const nb, B = 8, 16
	rng := rand.New(rand.NewPCG(3, 4))
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	var rows [][]float32
	for r := range 400 {
		row := make([]float32, nb*B)
		for i := range row {
			// Few distinct values, so ties are everywhere.
			row[i] = float32(rng.IntN(6 + r%20))
		}
		switch r % 8 {
		case 1:
			row[rng.IntN(len(row))] = nan
		case 2:
			for i := range row {
				row[i] = 5
			}
		case 3:
			for i := range row {
				row[i] = float32(math.Inf(-1))
			}
		case 4:
			row[3*B+5], row[B+9] = inf, inf
		case 5:
			for i := range row {
				if i%B < B/2 {
					row[i] = nan
				}
			}
		case 6:
			for i := range row {
				row[i] = nan
			}
		}
		rows = append(rows, row)
	}
	ties := 0
	for r, row := range rows {
		local, top := firstLevel(row, B)
		id, v := blockArgmax(local, top, B)
		want := sample.Greedy(row)
		if id != want {
			t.Fatalf("row %d: id %d, the flat argmax %d (%v)", r, id, want, row)
		}
		if want >= 0 && v != row[want] {
			t.Errorf("row %d: top %g, the row's maximum %g", r, v, row[want])
		}
		n := 0
		for _, x := range row {
			if want >= 0 && x == row[want] {
				n++
			}
		}
		if n > 1 {
			ties++
		}
	}
	if ties < 300 {
		t.Fatalf("only %d rows had a tied maximum", ties)
	}
	if id, _ := blockArgmax([]int32{0, B}, []float32{1, 2}, B); id != -1 {
		t.Errorf("a winning index outside its block gave id %d", id)
	}
}
