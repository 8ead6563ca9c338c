package coreml

import (
	"math"
	"math/rand/v2"
	"testing"

	"anechat/engine/coreml/mlcore"
	"anechat/engine/kv"
)

func f32Tensor(t *testing.T, n int) *tensor {
	t.Helper()
	x, err := newTensor(mlcore.Float32, []int{n})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.close() })
	return x
}

// TestMasksMatchVisible: for full layers and sliding windows (8, and E2B's
// 512 in a ring of 512+64 slots), at positions from 0 to far past the
// window, the slots a mask row opens hold exactly the positions
// kv.Cache.Visible gives a query there — what the CPU backend's attention
// reads (DESIGN.md invariant 2) — padded rows see what the last real row
// sees, and each real row's new row is placed in its position's slot, no
// padded one anywhere.
func TestMasksMatchVisible(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, g := range []struct{ window, slots, T, context int }{
		{0, 128, 8, 128}, {8, 24, 8, 128}, {8, 24, 16, 128}, {512, 576, 8, 2048}, {512, 576, 64, 2048},
	} {
		cache, err := kv.New(kv.Geometry{Context: g.context, Layers: []kv.LayerSpec{{KVHeads: 1, HeadDim: 2, Window: g.window}}}, 64)
		if err != nil {
			t.Fatal(err)
		}
		mask, place := f32Tensor(t, g.T*g.slots), f32Tensor(t, g.T*g.slots)
		for range 300 {
			n := 1 + rng.IntN(g.T)
			start := rng.IntN(g.context - n + 1)
			ids := make([]int32, n)
			c := newCall(KindGenerate, g.T, ids, start)
			if err := buildMask(mask, c, g.slots, g.window); err != nil {
				t.Fatal(err)
			}
			buildPlace(place, c, g.slots)
			for row := range g.T {
				p := start + min(row, n-1)
				lo, hi := cache.Visible(0, p)
				seen := 0
				for s := range g.slots {
					v := mask.get(row*g.slots + s)
					q := p - ((p-s)%g.slots+g.slots)%g.slots // the position slot s holds for this row
					visible := q >= lo && q <= hi
					switch {
					case v == 0 && !visible:
						t.Fatalf("window %d: row %d at %d opens slot %d (position %d), Visible is %d..%d", g.window, row, p, s, q, lo, hi)
					case visible && v != 0:
						t.Fatalf("window %d: row %d at %d masks slot %d (position %d), Visible is %d..%d", g.window, row, p, s, q, lo, hi)
					case !visible && !math.IsInf(float64(v), -1):
						t.Fatalf("window %d: slot %d of row %d is %g, not -inf", g.window, s, row, v)
					}
					if v == 0 {
						seen++
					}
				}
				if seen != hi-lo+1 {
					t.Fatalf("row %d at %d sees %d slots, want %d", row, p, seen, hi-lo+1)
				}
				for s := range g.slots {
					want := float32(0)
					if row < n && s == (start+row)%g.slots {
						want = 1
					}
					if got := place.get(s*g.T + row); got != want {
						t.Fatalf("place[%d][%d] = %g, want %g (n %d, start %d)", s, row, got, want, n, start)
					}
				}
			}
		}
	}
}
