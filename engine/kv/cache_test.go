package kv

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// testGeometry has a full layer, two sliding layers of different windows, and
// two KV-shared layers (one of each kind).
func testGeometry(context int) Geometry {
	return Geometry{
		Context: context,
		Layers: []LayerSpec{
			{KVHeads: 2, HeadDim: 3, Window: 0, Source: 0},
			{KVHeads: 1, HeadDim: 4, Window: 5, Source: 1},
			{KVHeads: 1, HeadDim: 4, Window: 3, Source: 2},
			{KVHeads: 2, HeadDim: 3, Window: 0, Source: 0},
			{KVHeads: 1, HeadDim: 4, Window: 5, Source: 1},
		},
	}
}

// rowValue is the value every element of the row written for (layer, pos,
// gen) holds; gen distinguishes rewrites of the same position after a
// rollback or truncate.
func rowValue(layer, pos, gen int) float32 {
	return float32(layer*1_000_000 + pos*100 + gen%100)
}

func fill(row []float32, v float32) {
	for i := range row {
		row[i] = v + float32(i)/16
	}
}

func rowIs(row []float32, v float32) bool {
	for i := range row {
		if row[i] != v+float32(i)/16 {
			return false
		}
	}
	return true
}

func TestValidate(t *testing.T) {
	good := testGeometry(64)
	if err := good.Validate(); err != nil {
		t.Fatalf("valid geometry rejected: %v", err)
	}
	cases := map[string]func(g *Geometry){
		"context":        func(g *Geometry) { g.Context = 0 },
		"kv heads":       func(g *Geometry) { g.Layers[1].KVHeads = 0 },
		"head dim":       func(g *Geometry) { g.Layers[0].HeadDim = -1 },
		"window":         func(g *Geometry) { g.Layers[2].Window = -2 },
		"future source":  func(g *Geometry) { g.Layers[1].Source = 3 },
		"negative src":   func(g *Geometry) { g.Layers[1].Source = -1 },
		"kind mismatch":  func(g *Geometry) { g.Layers[3].Source = 1 },
		"window differs": func(g *Geometry) { g.Layers[4].Source = 2 },
		"shared shared": func(g *Geometry) {
			g.Layers[4].Source = 4
			g.Layers = append(g.Layers, LayerSpec{KVHeads: 1, HeadDim: 4, Window: 5, Source: 3})
		},
	}
	for name, mutate := range cases {
		g := testGeometry(64)
		g.Layers = append([]LayerSpec(nil), g.Layers...)
		mutate(&g)
		if err := g.Validate(); err == nil {
			t.Errorf("%s: invalid geometry accepted: %+v", name, g)
		}
		if _, err := New(g, 4); err == nil {
			t.Errorf("%s: New accepted an invalid geometry", name)
		}
	}
	if _, err := New(good, 0); err == nil {
		t.Error("New accepted max batch 0")
	}
}

func TestReserveErrors(t *testing.T) {
	c, err := New(testGeometry(10), 4)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Reserve(1, 1); !errors.Is(err, ErrPosition) {
		t.Errorf("Reserve at 1 of an empty cache: %v, want ErrPosition", err)
	}
	for _, n := range []int{0, -1, 5} {
		if err := c.Reserve(0, n); err == nil {
			t.Errorf("Reserve of %d tokens with max batch 4 accepted", n)
		}
	}
	for c.Len() < 8 {
		if err := c.Reserve(c.Len(), 4); err != nil {
			t.Fatal(err)
		}
		if err := c.Commit(4); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Reserve(8, 3); err == nil || !strings.Contains(err.Error(), "context") {
		t.Errorf("Reserve past the context length: %v", err)
	}
	if err := c.Reserve(8, 2); err != nil {
		t.Errorf("Reserve up to the context length: %v", err)
	}
	if err := c.Commit(3); err == nil {
		t.Error("Commit of more rows than pending accepted")
	}
	if err := c.Commit(-1); err == nil {
		t.Error("Commit of -1 rows accepted")
	}
}

func TestVisible(t *testing.T) {
	c, err := New(testGeometry(64), 4)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct{ layer, pos, lo, hi int }{
		{0, 0, 0, 0}, {0, 40, 0, 40},
		{1, 0, 0, 0}, {1, 4, 0, 4}, {1, 5, 1, 5}, {1, 40, 36, 40},
		{2, 2, 0, 2}, {2, 3, 1, 3},
		{4, 40, 36, 40}, // shared layers see like their source
	}
	for _, tc := range cases {
		if lo, hi := c.Visible(tc.layer, tc.pos); lo != tc.lo || hi != tc.hi {
			t.Errorf("Visible(%d, %d) = %d..%d, want %d..%d", tc.layer, tc.pos, lo, hi, tc.lo, tc.hi)
		}
	}
}

func TestSharedLayers(t *testing.T) {
	c, err := New(testGeometry(32), 2)
	if err != nil {
		t.Fatal(err)
	}
	want := []bool{true, true, true, false, false}
	for l, w := range want {
		if c.Owns(l) != w {
			t.Errorf("Owns(%d) = %v, want %v", l, c.Owns(l), w)
		}
	}
	if err := c.Reserve(0, 2); err != nil {
		t.Fatal(err)
	}
	fill(c.K(0, 1), 7)
	fill(c.V(1, 1), 9)
	if !rowIs(c.K(3, 1), 7) || !rowIs(c.V(4, 1), 9) {
		t.Error("a KV-shared layer does not read its source layer's rows")
	}
	if err := c.Commit(2); err != nil {
		t.Fatal(err)
	}
	if lo, hi := c.Live(3); lo != hi {
		t.Errorf("Live of a KV-shared layer = %d..%d, want empty", lo, hi)
	}
	if _, _, err := c.Rows(3, 0, 2); err == nil {
		t.Error("Rows of a KV-shared layer accepted")
	}
}

// TestRandomOps drives caches through random Reserve / write / Commit /
// Rollback / Truncate / Reset sequences and checks after every step that each
// query a backend could run next sees exactly the rows written for the
// positions it may see: the committed window and the pending rows before it.
func TestRandomOps(t *testing.T) {
	for _, tc := range []struct {
		name     string
		context  int
		maxBatch int
	}{
		{"rings", 200, 3},
		{"wide batch", 200, 8},
		{"rings longer than context", 9, 4}, // Window+maxBatch >= Context: sliding layers stored in full
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(tc.maxBatch)))
			geo := testGeometry(tc.context)
			c, err := New(geo, tc.maxBatch)
			if err != nil {
				t.Fatal(err)
			}
			committed := map[[2]int]float32{} // (layer, pos) -> value
			gen := 0
			for step := 0; step < 3000; step++ {
				gen++
				switch op := rng.IntN(10); {
				case op < 7: // a Forward call then commit some
					n := 1 + rng.IntN(tc.maxBatch)
					if c.Len()+n > tc.context {
						c.Reset()
						clear(committed)
						continue
					}
					start := c.Len()
					if err := c.Reserve(start, n); err != nil {
						t.Fatalf("step %d: Reserve(%d, %d): %v", step, start, n, err)
					}
					if c.Pending() != n {
						t.Fatalf("Pending = %d after Reserve of %d", c.Pending(), n)
					}
					pend := map[[2]int]float32{}
					for q := 0; q < n; q++ {
						pos := start + q
						for l := range geo.Layers {
							if !c.Owns(l) {
								continue
							}
							v := rowValue(l, pos, gen)
							fill(c.K(l, pos), v)
							fill(c.V(l, pos), -v)
							pend[[2]int{l, pos}] = v
						}
						// Query pos sees its window: committed rows and
						// the pending rows written so far.
						for l := range geo.Layers {
							lo, hi := c.Visible(l, pos)
							src := geo.Layers[l].Source
							for p := lo; p <= hi; p++ {
								want, ok := pend[[2]int{src, p}]
								if !ok {
									want = committed[[2]int{src, p}]
								}
								if !rowIs(c.K(l, p), want) || !rowIs(c.V(l, p), -want) {
									t.Fatalf("step %d: query at %d, layer %d: row %d is not the one written", step, pos, l, p)
								}
							}
						}
					}
					keep := rng.IntN(n + 1)
					if rng.IntN(4) == 0 {
						c.Rollback()
						keep = 0
					} else if err := c.Commit(keep); err != nil {
						t.Fatal(err)
					}
					for k, v := range pend {
						if k[1] < start+keep {
							committed[k] = v
						}
					}
					if c.Len() != start+keep || c.Pending() != 0 {
						t.Fatalf("after commit of %d: Len %d Pending %d, want %d 0", keep, c.Len(), c.Pending(), start+keep)
					}
				case op < 9: // truncate back a little
					n := max(0, c.Len()-rng.IntN(tc.maxBatch+3))
					err := c.Truncate(n)
					if err != nil {
						// Allowed only when a sliding layer lost rows a
						// query at n needs; then start over.
						if !strings.Contains(err.Error(), "overwritten") {
							t.Fatalf("Truncate(%d): %v", n, err)
						}
						c.Reset()
						clear(committed)
						continue
					}
					if c.Len() != n {
						t.Fatalf("Len %d after Truncate(%d)", c.Len(), n)
					}
				default:
					c.Reset()
					clear(committed)
				}
				checkCommitted(t, c, committed)
			}
		})
	}
}

// checkCommitted checks that a query at Len() would see the committed rows.
func checkCommitted(t *testing.T, c *Cache, committed map[[2]int]float32) {
	t.Helper()
	n := c.Len()
	for l, spec := range c.Geometry().Layers {
		lo, _ := c.Visible(l, n)
		for p := lo; p < n; p++ {
			want := committed[[2]int{spec.Source, p}]
			if !rowIs(c.K(l, p), want) || !rowIs(c.V(l, p), -want) {
				t.Fatalf("layer %d: committed row %d of %d is not the one written: got %v want %v", l, p, n, c.K(l, p), want)
			}
		}
	}
}

func TestTruncate(t *testing.T) {
	geo := Geometry{Context: 100, Layers: []LayerSpec{{KVHeads: 1, HeadDim: 2, Source: 0}, {KVHeads: 1, HeadDim: 2, Window: 4, Source: 1}}}
	c, err := New(geo, 2) // ring of 6 slots
	if err != nil {
		t.Fatal(err)
	}
	write := func(n int) {
		for i := 0; i < n; i++ {
			pos := c.Len()
			if err := c.Reserve(pos, 1); err != nil {
				t.Fatal(err)
			}
			fill(c.K(0, pos), rowValue(0, pos, 0))
			fill(c.K(1, pos), rowValue(1, pos, 0))
			if err := c.Commit(1); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(20) // ring holds 14..19
	if err := c.Truncate(21); err == nil {
		t.Error("Truncate past Len accepted")
	}
	if err := c.Truncate(-1); err == nil {
		t.Error("Truncate to -1 accepted")
	}
	// A query at 17 needs 14..16: held.
	if err := c.Truncate(17); err != nil {
		t.Fatalf("Truncate(17) with the ring holding 14..19: %v", err)
	}
	for p := 14; p < 17; p++ {
		if !rowIs(c.K(1, p), rowValue(1, p, 0)) {
			t.Errorf("row %d lost by Truncate(17)", p)
		}
	}
	// A query at 16 needs 13..15: 13 was overwritten by 19.
	if err := c.Truncate(16); err == nil || !strings.Contains(err.Error(), "overwritten") {
		t.Errorf("Truncate(16) with row 13 overwritten: %v", err)
	}
	if c.Len() != 17 {
		t.Errorf("a failed Truncate changed Len to %d", c.Len())
	}
	// A query at 2 needs rows 0..1, long overwritten in the ring, even
	// though its window reaches below 0.
	if err := c.Truncate(2); err == nil {
		t.Error("Truncate(2) with rows 0..1 overwritten accepted")
	}
	if err := c.Truncate(0); err != nil {
		t.Errorf("Truncate(0) needs no rows: %v", err)
	}
	// Early positions need no rows below 0.
	c.Reset()
	write(3)
	if err := c.Truncate(1); err != nil {
		t.Errorf("Truncate(1): %v", err)
	}
	write(2)
	if !rowIs(c.K(1, 2), rowValue(1, 2, 0)) || !rowIs(c.K(0, 0), rowValue(0, 0, 0)) {
		t.Error("rows wrong after Truncate and rewrite")
	}
	// Pending rows are dropped by Truncate.
	if err := c.Reserve(3, 2); err != nil {
		t.Fatal(err)
	}
	if err := c.Truncate(3); err != nil || c.Pending() != 0 {
		t.Errorf("Truncate to Len with pending rows: err %v, pending %d", err, c.Pending())
	}
}

// TestRowsLiveRestore copies a cache's live rows into a restored cache (what
// a snapshot does) and checks that the copy answers every query the original
// could, including across a wrap of the ring.
func TestRowsLiveRestore(t *testing.T) {
	geo := testGeometry(300)
	for _, n := range []int{0, 1, 4, 5, 6, 17, 61, 299} {
		src, err := New(geo, 4)
		if err != nil {
			t.Fatal(err)
		}
		for src.Len() < n {
			b := min(4, n-src.Len())
			start := src.Len()
			if err := src.Reserve(start, b); err != nil {
				t.Fatal(err)
			}
			for p := start; p < start+b; p++ {
				for l := range geo.Layers {
					if src.Owns(l) {
						fill(src.K(l, p), rowValue(l, p, 1))
						fill(src.V(l, p), -rowValue(l, p, 1))
					}
				}
			}
			if err := src.Commit(b); err != nil {
				t.Fatal(err)
			}
		}
		dst, err := New(geo, 3) // another batch width: another ring size
		if err != nil {
			t.Fatal(err)
		}
		if err := dst.Restore(n); err != nil {
			t.Fatal(err)
		}
		for l, spec := range geo.Layers {
			lo, hi := src.Live(l)
			dlo, dhi := dst.Live(l)
			if lo != dlo || hi != dhi {
				t.Fatalf("n=%d layer %d: Live %d..%d, restored %d..%d", n, l, lo, hi, dlo, dhi)
			}
			if !src.Owns(l) {
				continue
			}
			wantLo := 0
			if spec.Window > 0 {
				wantLo = max(0, n-spec.Window)
			}
			if lo != wantLo || hi != n {
				t.Fatalf("n=%d layer %d: Live %d..%d, want %d..%d", n, l, lo, hi, wantLo, n)
			}
			sk, sv, err := src.Rows(l, lo, hi)
			if err != nil {
				t.Fatal(err)
			}
			dk, dv, err := dst.Rows(l, lo, hi)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := flatten(dk), flatten(sk); len(got) != len(want) || len(got) != (hi-lo)*spec.Stride() {
				t.Fatalf("n=%d layer %d: %d and %d floats for %d rows", n, l, len(got), len(want), hi-lo)
			}
			copyPieces(dk, flatten(sk))
			copyPieces(dv, flatten(sv))
		}
		if dst.Len() != n || dst.Pending() != 0 {
			t.Fatalf("restored Len %d Pending %d, want %d 0", dst.Len(), dst.Pending(), n)
		}
		checkSame(t, src, dst, n)
		// Both continue identically.
		if n < 290 {
			for _, c := range []*Cache{src, dst} {
				if err := c.Reserve(n, 3); err != nil {
					t.Fatal(err)
				}
				for p := n; p < n+3; p++ {
					for l := range geo.Layers {
						if c.Owns(l) {
							fill(c.K(l, p), rowValue(l, p, 2))
							fill(c.V(l, p), -rowValue(l, p, 2))
						}
					}
				}
				if err := c.Commit(3); err != nil {
					t.Fatal(err)
				}
			}
			checkSame(t, src, dst, n+3)
		}
	}
}

func TestRestoreTruncate(t *testing.T) {
	geo := Geometry{Context: 64, Layers: []LayerSpec{{KVHeads: 1, HeadDim: 2, Source: 0}, {KVHeads: 1, HeadDim: 2, Window: 4, Source: 1}}}
	c, err := New(geo, 8)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Restore(65); err == nil {
		t.Error("Restore past the context accepted")
	}
	if err := c.Restore(30); err != nil {
		t.Fatal(err)
	}
	// The sliding layer holds 26..29: a query at 29 needs 26..28 (ok), one
	// at 28 needs 25 (not held), even though the ring has room for it.
	if _, _, err := c.Rows(1, 25, 30); err == nil {
		t.Error("Rows below the restored rows accepted")
	}
	if err := c.Truncate(28); err == nil {
		t.Error("Truncate below the restored sliding rows accepted")
	}
	if err := c.Truncate(29); err != nil {
		t.Errorf("Truncate(29) after restoring 30: %v", err)
	}
	c.Reset()
	if lo, _ := c.Live(1); lo != 0 {
		t.Errorf("Reset kept the restore floor %d", lo)
	}
	// A full layer restores every position.
	if err := c.Restore(30); err != nil {
		t.Fatal(err)
	}
	if err := c.Truncate(0); err != nil {
		t.Errorf("Truncate(0) after Restore (a query at 0 needs no rows): %v", err)
	}
}

func TestRowsErrors(t *testing.T) {
	c, err := New(testGeometry(50), 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Reserve(0, 2); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Rows(0, 0, 1); err == nil {
		t.Error("Rows of pending positions accepted")
	}
	if err := c.Commit(2); err != nil {
		t.Fatal(err)
	}
	for _, r := range [][3]int{{0, -1, 1}, {0, 1, 0}, {0, 0, 3}, {9, 0, 1}, {-1, 0, 1}} {
		if _, _, err := c.Rows(r[0], r[1], r[2]); err == nil {
			t.Errorf("Rows(%d, %d, %d) accepted", r[0], r[1], r[2])
		}
	}
	k, v, err := c.Rows(0, 1, 1)
	if err != nil || k != nil || v != nil {
		t.Errorf("empty Rows: %v %v %v", k, v, err)
	}
}

func flatten(pieces [][]float32) []float32 {
	var out []float32
	for _, p := range pieces {
		out = append(out, p...)
	}
	return out
}

func copyPieces(dst [][]float32, src []float32) {
	for _, p := range dst {
		src = src[copy(p, src):]
	}
}

// checkSame checks that a and b answer every query at positions < n + 1 the
// same way (the rows each layer can still see).
func checkSame(t *testing.T, a, b *Cache, n int) {
	t.Helper()
	for l, spec := range a.Geometry().Layers {
		lo, _ := a.Visible(l, n)
		if spec.Window > 0 {
			lo = max(0, n-spec.Window)
		}
		for p := lo; p < n; p++ {
			if !slices.Equal(a.K(l, p), b.K(l, p)) || !slices.Equal(a.V(l, p), b.V(l, p)) {
				t.Fatalf("layer %d row %d of %d differs", l, p, n)
			}
		}
	}
}

// TestRun: Run gives the rows K and V give, run by run, across a sliding
// layer's ring wrap and on a full and a KV-shared layer.
func TestRun(t *testing.T) {
	geo := Geometry{Context: 64, Layers: []LayerSpec{{KVHeads: 2, HeadDim: 4, Window: 3, Source: 0}, {KVHeads: 1, HeadDim: 8, Source: 1}, {KVHeads: 1, HeadDim: 8, Source: 1}}}
	c, err := New(geo, 4)
	if err != nil {
		t.Fatal(err)
	}
	for pos := 0; pos < 20; pos += 4 {
		if err := c.Reserve(pos, 4); err != nil {
			t.Fatal(err)
		}
		for p := pos; p < pos+4; p++ {
			for l := range 2 {
				for i := range c.K(l, p) {
					c.K(l, p)[i], c.V(l, p)[i] = float32(1000*l+10*p+i), -float32(1000*l+10*p+i)
				}
			}
		}
		c.Commit(4)
		for l := range 3 {
			lo, hi := c.Visible(l, pos+3)
			for p := lo; p <= hi; {
				k, v, m, stride := c.Run(l, p, hi-p+1)
				if m < 1 || len(k) != m*stride || len(v) != m*stride {
					t.Fatalf("layer %d pos %d: run of %d rows, %d and %d floats, stride %d", l, p, m, len(k), len(v), stride)
				}
				for j := range m {
					for i := range stride {
						if k[j*stride+i] != c.K(l, p+j)[i] || v[j*stride+i] != c.V(l, p+j)[i] {
							t.Fatalf("layer %d: row %d of the run from %d differs from K/V at %d", l, j, p, p+j)
						}
					}
				}
				p += m
			}
		}
	}
}

// TestEpoch: the epoch changes when committed rows may be replaced (Reset,
// Truncate, Restore) and only then: calls and commits append.
func TestEpoch(t *testing.T) {
	c, err := New(Geometry{Context: 32, Layers: []LayerSpec{{KVHeads: 1, HeadDim: 2}}}, 8)
	if err != nil {
		t.Fatal(err)
	}
	e := c.Epoch()
	step := func(what string, f func() error, changes bool) {
		t.Helper()
		if err := f(); err != nil {
			t.Fatal(err)
		}
		if got := c.Epoch(); (got != e) != changes {
			t.Fatalf("%s: epoch %d -> %d", what, e, got)
		}
		e = c.Epoch()
	}
	step("reserve", func() error { return c.Reserve(0, 4) }, false)
	step("commit", func() error { return c.Commit(3) }, false)
	step("reserve", func() error { return c.Reserve(3, 2) }, false)
	step("rollback", func() error { c.Rollback(); return nil }, false)
	step("truncate", func() error { return c.Truncate(1) }, true)
	step("restore", func() error { return c.Restore(5) }, true)
	step("reset", func() error { c.Reset(); return nil }, true)
}

// TestCanTruncateAndBytes: CanTruncate answers as Truncate would, changing
// nothing; Bytes counts the K and V buffers as allocated: the ring whole
// from New, a full layer as it grows, kept by Reset.
func TestCanTruncateAndBytes(t *testing.T) {
	geo := Geometry{Context: 1000, Layers: []LayerSpec{{KVHeads: 1, HeadDim: 2, Source: 0}, {KVHeads: 1, HeadDim: 2, Window: 4, Source: 1}}}
	c, err := New(geo, 2) // ring of 6 slots
	if err != nil {
		t.Fatal(err)
	}
	ring := int64(2 * 6 * 2 * 4) // K and V, 6 slots of 2 floats
	if c.Bytes() != ring {
		t.Fatalf("new cache: %d bytes, want the ring's %d", c.Bytes(), ring)
	}
	for pos := range 100 {
		if err := c.Reserve(pos, 1); err != nil {
			t.Fatal(err)
		}
		if err := c.Commit(1); err != nil {
			t.Fatal(err)
		}
	}
	// The full layer grew by doubling from 64 positions: 128 of 2 floats.
	full := int64(2 * 128 * 2 * 4)
	if c.Bytes() != ring+full {
		t.Fatalf("after 100 positions: %d bytes, want %d", c.Bytes(), ring+full)
	}
	epoch := c.Epoch()
	for _, n := range []int{-1, 0, 50, 97, 98, 100, 101} {
		can := c.CanTruncate(n)
		if c.Len() != 100 || c.Epoch() != epoch {
			t.Fatalf("CanTruncate(%d) changed the cache: len %d", n, c.Len())
		}
		probe, _ := New(geo, 2)
		for pos := range 100 {
			probe.Reserve(pos, 1)
			probe.Commit(1)
		}
		if did := probe.Truncate(n); (can == nil) != (did == nil) {
			t.Errorf("CanTruncate(%d) = %v, Truncate = %v", n, can, did)
		}
	}
	c.Reset()
	if c.Bytes() != ring+full {
		t.Errorf("Reset changed the memory held: %d bytes", c.Bytes())
	}
}
