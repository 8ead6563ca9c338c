package coreml

import (
	"fmt"

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
	for t := range c.T {
		p := c.pos[t]
		lo := 0
		if window > 0 {
			lo = max(0, p-window+1)
		}
		if p-lo+1 > slots {
			return fmt.Errorf("coreml: position %d sees %d positions, more than the %d slots of the bundle", p, p-lo+1, slots)
		}
		row := t * slots
		m.fill(row, slots, negInf)
		for q := lo; q <= p; q++ {
			m.set(row+q%slots, 0)
		}
	}
	return nil
}

// buildPlace writes the placement matrix [1,1,slots,T]: 1 at (slot of
// pos_t, t) for each real row t, 0 elsewhere (padding columns are zero).
func buildPlace(pl *tensor, c call, slots int) {
	pl.fill(0, slots*c.T, 0)
	for t := range c.n {
		pl.set((c.pos[t]%slots)*c.T+t, 1)
	}
}

// buildRope writes the cos and sin tables [1,1,T,headDim] of one RoPE
// spec: element j of row t holds the cos/sin of its pair's angle at pos_t
// (pair j mod headDim/2 for the halves layout, j/2 for interleaved), 1 and
// 0 for pairs the spec does not turn. Values are the spec's own (float32
// or float64), rounded once to the buffer's type.
func buildRope(cos, sin *tensor, c call, s rope.Spec, headDim int, tab *rope.Table) {
	tab.Fill(s, c.start, c.n)
	half, dh := headDim/2, s.Dim/2
	for t := range c.T {
		k := min(t, c.n-1)
		row := t * headDim
		for j := range headDim {
			i := j / 2
			if s.Layout == rope.Halves {
				i = j % half
			}
			cv, sv := 1.0, 0.0
			if i < dh {
				cv, sv = tab.Cos[k*dh+i], tab.Sin[k*dh+i]
			}
			cos.set64(row+j, cv)
			sin.set64(row+j, sv)
		}
	}
}

// buildRows writes the sidecar rows of the call's tokens [1,T,cols].
func buildRows(dst *tensor, c call, sc *Sidecar, scratch []float32) {
	for t := range c.T {
		dst.setRow(t*sc.Cols, sc.Row(scratch, int(c.ids[t])))
	}
}

// buildLast writes the prefill's one-hot [1,1,T] at the last real row.
func buildLast(l *tensor, c call) {
	l.fill(0, c.T, 0)
	l.set(c.n-1, 1)
}

// kvPair is the k_cache/v_cache inputs [1,kvHeads,slots,headDim] of one
// owning layer, with what they may still hold: on a full layer every slot
// from dirty on is zero; on a sliding one, nz marks the slots that may hold
// a row.
type kvPair struct {
	k, v  *tensor
	dirty int
	nz    []bool
}

// buildKV writes the committed (and earlier pending) K and V rows of owning
// layer into its cache tensors: element [0,h,slot,d] = row[h*headDim+d] of
// the position in slot, for every position a row of the call can see. Every
// other slot is zero, in particular the call's own slots, which the graph
// fills with the new rows by placement (x*1 + 0 + ... + 0 is exact).
func buildKV(p *kvPair, c call, cache *kv.Cache, layer, slots, window, kvHeads, headDim int) {
	stride := kvHeads * headDim
	zero := func(s int) {
		for h := range kvHeads {
			p.k.fill((h*slots+s)*headDim, headDim, 0)
			p.v.fill((h*slots+s)*headDim, headDim, 0)
		}
	}
	lo := 0
	if window > 0 {
		lo = max(0, c.start-window+1)
		// Positions lo..start-1 (at most window-1 < slots) are visible;
		// zero every other slot that may hold a row.
		if p.nz == nil {
			p.nz = make([]bool, slots)
		}
		vis := c.start - lo
		for s := range slots {
			if p.nz[s] && (s-lo%slots+slots)%slots >= vis {
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
	for q := lo; q < c.start; q++ {
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
