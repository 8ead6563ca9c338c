package coreml

import (
	"fmt"
	"weak"

	"anechat/engine/arch/rope"
	"anechat/engine/kv"
)

// call is one function call: n real rows of a function of width T at
// positions start..start+n-1. Rows t >= n are padding: they repeat the last
// real row's token and position, see what it sees, and are placed nowhere,
// so they cannot touch a real row (README "Driving a bundle").
type call struct {
	kind     string
	T, n     int
	start    int
	ids      []int32
	pos      []int
	prefill  bool
	lastRows int // rows the function returns: T (generate) or 1 (prefill)
}

func newCall(kind string, T int, tokens []int32, start int) call {
	n := len(tokens)
	c := call{kind: kind, T: T, n: n, start: start, ids: make([]int32, T), pos: make([]int, T), prefill: kind == KindPrefill, lastRows: T}
	if c.prefill {
		c.lastRows = 1
	}
	for t := range T {
		k := min(t, n-1)
		c.ids[t], c.pos[t] = tokens[k], start+k
	}
	return c
}

// buildMask writes the attention mask [1,1,T,slots] of one layer kind: row
// t is 0 at the slots of positions lo..pos_t and -inf elsewhere, lo = 0 on
// full layers (window 0) and max(0, pos_t-window+1) on sliding ones
// (DESIGN.md invariant 2). Position q lives in slot q % slots.
func buildMask(m *tensor, c call, slots, window int) error {
	lo := make([]int, c.T)
	for t, p := range c.pos {
		if window > 0 {
			lo[t] = max(0, p-window+1)
		}
		if p-lo[t]+1 > slots {
			return fmt.Errorf("coreml: position %d sees %d positions, more than the %d slots of the bundle", p, p-lo[t]+1, slots)
		}
	}
	Mask(c.T, slots, func(t int) (int, int) { return lo[t] % slots, c.pos[t] - lo[t] + 1 }, m.fill)
	return nil
}

// Mask writes an attention mask of rows rows of slots values through
// fill(off, n, v): row t is 0 at the n slots from first that see(t)
// returns (wrapping past the last slot to slot 0) and -inf elsewhere.
// Every host builds its masks with it: a converter bundle's (buildMask:
// positions in a ring of slots) and the published layout's
// (engine/coreml/published).
func Mask(rows, slots int, see func(t int) (first, n int), fill func(off, n int, v float32)) {
	for t := range rows {
		row := t * slots
		fill(row, slots, negInf)
		first, n := see(t)
		k := min(n, slots-first)
		fill(row+first, k, 0)
		if n > k {
			fill(row, n-k, 0)
		}
	}
}

// buildPlace writes the placement matrix [1,1,slots,T]: 1 at (slot of
// pos_t, t) for each real row t, 0 elsewhere (padding columns are zero).
func buildPlace(pl *tensor, c call, slots int) {
	pl.fill(0, slots*c.T, 0)
	for t := range c.n {
		pl.set((c.pos[t]%slots)*c.T+t, 1)
	}
}

// ropeRows caches the cos/sin rows of one RoPE spec per position, in the
// executor's element type: a position's row is computed once (the rotation
// of a position never changes), then copied into each call's tables.
type ropeRows struct {
	spec     rope.Spec
	headDim  int
	tab      rope.Table
	c16, s16 []uint16
	c32, s32 []float32
	have     []bool
}

func newRopeRows(s rope.Spec, headDim, positions int) *ropeRows {
	return &ropeRows{spec: s, headDim: headDim, have: make([]bool, positions)}
}

// ensure computes the row of position p: element j holds the cos/sin of
// its pair's angle (pair j mod headDim/2 for the halves layout, j/2 for
// interleaved), 1 and 0 for pairs the spec does not turn; the spec's own
// values (float32 or float64), rounded once to the element type.
func (r *ropeRows) ensure(p int, f16 bool) {
	if r.have[p] {
		return
	}
	hd := r.headDim
	if f16 && r.c16 == nil {
		r.c16, r.s16 = make([]uint16, len(r.have)*hd), make([]uint16, len(r.have)*hd)
	}
	if !f16 && r.c32 == nil {
		r.c32, r.s32 = make([]float32, len(r.have)*hd), make([]float32, len(r.have)*hd)
	}
	r.tab.Fill(r.spec, p, 1)
	half, dh := hd/2, r.spec.Dim/2
	for j := range hd {
		i := j / 2
		if r.spec.Layout == rope.Halves {
			i = j % half
		}
		cv, sv := 1.0, 0.0
		if i < dh {
			cv, sv = r.tab.Cos[i], r.tab.Sin[i]
		}
		if f16 {
			r.c16[p*hd+j], r.s16[p*hd+j] = toHalf64(cv), toHalf64(sv)
		} else {
			r.c32[p*hd+j], r.s32[p*hd+j] = float32(cv), float32(sv)
		}
	}
	r.have[p] = true
}

// buildRope writes the cos and sin tables [1,1,T,headDim] of one RoPE
// spec for the call's positions (padding rows: the last real row's).
func buildRope(cos, sin *tensor, c call, r *ropeRows) {
	hd := r.headDim
	f16 := cos.f16 != nil
	for t := range c.T {
		p := c.pos[t]
		r.ensure(p, f16)
		if f16 {
			cos.setHalves(t*hd, r.c16[p*hd:(p+1)*hd])
			sin.setHalves(t*hd, r.s16[p*hd:(p+1)*hd])
		} else {
			cos.setFloats(t*hd, r.c32[p*hd:(p+1)*hd])
			sin.setFloats(t*hd, r.s32[p*hd:(p+1)*hd])
		}
	}
}

// buildRows writes the sidecar rows of the call's tokens [1,T,cols].
func buildRows(dst *tensor, c call, sc *Sidecar, scratch []float32) {
	for t := range c.T {
		if d := dst.row16(t*sc.Cols, sc.Cols); d != nil {
			sc.RowHalf(d, int(c.ids[t]))
			continue
		}
		dst.setRow(t*sc.Cols, sc.Row(scratch, int(c.ids[t])))
	}
}

// buildLast writes the prefill's one-hot [1,1,T] at the last real row.
func buildLast(l *tensor, c call) {
	l.fill(0, c.T, 0)
	l.set(c.n-1, 1)
}

// kvPair is the k_cache/v_cache inputs [1,kvHeads,slots,headDim] of one
// owning layer, kept between calls: they hold the rows of positions
// 0..synced-1 of the cache they were built from (as of its epoch), so a
// call copies only the rows committed since the last one. On a full layer
// every slot from dirty on is zero; on a sliding one, nz marks the slots
// that may hold a row.
type kvPair struct {
	k, v   *tensor
	dirty  int
	nz     []bool
	cache  weak.Pointer[kv.Cache]
	epoch  uint64
	from   int // the tensors hold the rows of positions from..synced-1
	synced int
}

// buildKV makes the cache tensors of owning layer hold, for every position
// a row of the call can see, the committed (or earlier pending) K and V
// rows of cache: element [0,h,slot,d] = row[h*headDim+d] of the position in
// slot. The call's own slots are zero (the graph fills them with the new
// rows by placement: x*1 + 0 + ... + 0 is exact), and so is every slot of a
// full layer from the call's start on; a sliding layer's other slots hold
// older rows (finite, masked). Rows already copied from the same cache at
// the same epoch are not copied again.
func buildKV(p *kvPair, c call, cache *kv.Cache, layer, slots, window, kvHeads, headDim int) {
	stride := kvHeads * headDim
	zero := func(s int) {
		for h := range kvHeads {
			p.k.fill((h*slots+s)*headDim, headDim, 0)
			p.v.fill((h*slots+s)*headDim, headDim, 0)
		}
	}
	if p.cache != weak.Make(cache) || p.epoch != cache.Epoch() {
		// Another cache, or this one restored or truncated: copy all.
		p.from, p.synced = 0, 0
		p.cache, p.epoch = weak.Make(cache), cache.Epoch()
		if window > 0 {
			if p.nz == nil {
				p.nz = make([]bool, slots)
			}
			for s := range slots {
				if p.nz[s] {
					zero(s)
					p.nz[s] = false
				}
			}
		}
	}
	// Rows from the call's start on are not committed (or not yet): those
	// copied before may have been dropped.
	p.synced = min(p.synced, c.start)
	p.from = min(p.from, p.synced)
	lo := 0
	if window > 0 {
		lo = max(0, c.start-window+1)
		// The call's own slots held positions a window and more ago.
		for q := c.start; q < c.start+c.n; q++ {
			if s := q % slots; p.nz[s] {
				zero(s)
				p.nz[s] = false
			}
		}
	} else {
		for s := c.start; s < p.dirty; s++ {
			zero(s)
		}
		p.dirty = c.start
	}
	copyRow := func(q int) {
		s := q % slots
		kr, vr := cache.K(layer, q)[:stride], cache.V(layer, q)[:stride]
		for h := range kvHeads {
			p.k.setRow((h*slots+s)*headDim, kr[h*headDim:(h+1)*headDim])
			p.v.setRow((h*slots+s)*headDim, vr[h*headDim:(h+1)*headDim])
		}
		if p.nz != nil {
			p.nz[s] = true
		}
	}
	// Needed: lo..start-1; held: from..synced-1.
	for q := lo; q < min(p.from, c.start); q++ {
		copyRow(q)
	}
	for q := max(lo, p.synced); q < c.start; q++ {
		copyRow(q)
	}
	p.from, p.synced = lo, c.start
}

// placeRows writes the real rows of a k_new/v_new output
// [1,kvHeads,T,headDim] into the cache's pending rows at their positions,
// in the kv.Cache layout (row[h*headDim+d]).
func placeRows(kn, vn *tensor, c call, cache *kv.Cache, layer, kvHeads, headDim int) {
	for t := range c.n {
		kr, vr := cache.K(layer, c.start+t), cache.V(layer, c.start+t)
		for h := range kvHeads {
			kn.getRow(kr[h*headDim:(h+1)*headDim], (h*c.T+t)*headDim)
			vn.getRow(vr[h*headDim:(h+1)*headDim], (h*c.T+t)*headDim)
		}
	}
}
